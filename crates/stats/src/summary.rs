//! Descriptive summary of one configuration's samples, and the quantile definition used
//! throughout the crate.

use crate::error::{StatsError, check_samples};
use crate::objective::Objective;
use serde::{Deserialize, Serialize};

/// n, mean ± sd, extremes, median and upper quantiles of a sample set.
///
/// Quantiles use Hyndman & Fan (1996) definition 7, numpy's and R's default (see [`quantile`]).
/// The standard deviation is the sample one (divisor n − 1, Bessel's correction); it is `None`
/// for a single sample, where it is undefined, rather than a misleading 0.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Number of samples.
    pub n: usize,
    /// Arithmetic mean.
    pub mean: f64,
    /// Sample standard deviation (n − 1); `None` when n = 1.
    pub sd: Option<f64>,
    /// Smallest sample (the best run when minimising).
    pub min: f64,
    /// Largest sample (the worst run when minimising).
    pub max: f64,
    /// Median (type-7 0.5 quantile).
    pub median: f64,
    /// Type-7 0.90 quantile.
    pub p90: f64,
    /// Type-7 0.99 quantile.
    pub p99: f64,
    /// Type-7 0.999 quantile.
    pub p999: f64,
}

impl Summary {
    /// Summarises `samples`; errors on an empty set or any NaN/infinite value.
    pub fn of(samples: &[f64]) -> Result<Summary, StatsError> {
        check_samples("samples", samples)?;
        let sorted = sorted_copy(samples);
        let n = sorted.len();
        let mean = mean(&sorted);
        let sd = sample_variance(&sorted, mean).map(f64::sqrt);
        Ok(Summary {
            n,
            mean,
            sd,
            min: sorted[0],
            max: sorted[n - 1],
            median: quantile_sorted(&sorted, 0.5),
            p90: quantile_sorted(&sorted, 0.9),
            p99: quantile_sorted(&sorted, 0.99),
            p999: quantile_sorted(&sorted, 0.999),
        })
    }

    /// The best run under `objective` (min when minimising, max when maximising).
    pub fn best(&self, objective: Objective) -> f64 {
        match objective {
            Objective::Minimise => self.min,
            Objective::Maximise => self.max,
        }
    }

    /// The worst run under `objective`.
    pub fn worst(&self, objective: Objective) -> f64 {
        match objective {
            Objective::Minimise => self.max,
            Objective::Maximise => self.min,
        }
    }

    /// Standard error of the mean, sd/√n; `None` when n = 1.
    pub fn standard_error(&self) -> Option<f64> {
        self.sd.map(|sd| sd / (self.n as f64).sqrt())
    }
}

/// The p-quantile of `samples` by Hyndman & Fan (1996) type 7 (numpy `quantile` default,
/// R `quantile(type = 7)`): with the sorted values x₀ ≤ … ≤ x₍ₙ₋₁₎ and h = (n − 1)·p,
/// Q(p) = x⌊h⌋ + (h − ⌊h⌋)·(x⌊h⌋₊₁ − x⌊h⌋).
///
/// `p` must lie in [0, 1]; samples must be non-empty and finite.
pub fn quantile(samples: &[f64], p: f64) -> Result<f64, StatsError> {
    check_samples("samples", samples)?;
    check_probability(p)?;
    Ok(quantile_sorted(&sorted_copy(samples), p))
}

/// Type-7 quantile of already sorted, non-empty, finite data; `p` in [0, 1] (clamped).
pub(crate) fn quantile_sorted(sorted: &[f64], p: f64) -> f64 {
    let n = sorted.len();
    if n == 1 {
        return sorted[0];
    }
    let h = (n - 1) as f64 * p.clamp(0.0, 1.0);
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(n - 1);
    let frac = h - lo as f64;
    sorted[lo] + frac * (sorted[hi] - sorted[lo])
}

/// Arithmetic mean of non-empty data.
pub(crate) fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len() as f64
}

/// Sample variance (divisor n − 1) around `mean`; `None` for fewer than two values.
/// Two-pass form (Chan, Golub & LeVeque 1983) to avoid the cancellation of Σx² − n·x̄².
pub(crate) fn sample_variance(xs: &[f64], mean: f64) -> Option<f64> {
    if xs.len() < 2 {
        return None;
    }
    let ss: f64 = xs.iter().map(|x| (x - mean) * (x - mean)).sum();
    Some(ss / (xs.len() - 1) as f64)
}

/// Median of non-empty finite data (type 7, i.e. the usual midpoint for even n).
pub(crate) fn median(xs: &[f64]) -> f64 {
    quantile_sorted(&sorted_copy(xs), 0.5)
}

/// A sorted copy; callers have rejected NaN, so `total_cmp` equals numeric order.
pub(crate) fn sorted_copy(xs: &[f64]) -> Vec<f64> {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    v
}

fn check_probability(p: f64) -> Result<(), StatsError> {
    if (0.0..=1.0).contains(&p) {
        Ok(())
    } else {
        Err(StatsError::InvalidParameter {
            name: "quantile level",
            value: p.to_string(),
            expected: "between 0 and 1 inclusive",
        })
    }
}
