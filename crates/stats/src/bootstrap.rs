//! Seeded nonparametric bootstrap: confidence intervals of any statistic of one sample
//! (percentile or BCa) and of a statistic of two independent samples (percentile).
//!
//! Method: draw B resamples of size n with replacement, compute the statistic on each, and take
//! quantiles of those B values (Efron & Tibshirani 1993, *An Introduction to the Bootstrap*,
//! ch. 13 percentile, ch. 14 BCa; Efron 1987, JASA 82:171). Quantiles of the bootstrap
//! distribution are type 7 (as numpy/scipy), and BCa's bias correction counts ties as half, as
//! scipy's `bootstrap` does, so all-equal or heavily tied data (medians) stay well defined.
//!
//! Randomness comes only from the seed: resample indices are drawn from ChaCha8 seeded with
//! `seed`, so the same data, B and seed give the same interval on every machine.

use crate::ci::{CiMethod, ConfidenceInterval};
use crate::dist::{normal_cdf, normal_quantile};
use crate::error::{StatsError, check_samples, check_unit_open};
use crate::summary::{mean, quantile_sorted, sorted_copy};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

/// Fewest resamples accepted; below this the tail quantiles of a 95% interval are noise.
pub const MIN_RESAMPLES: usize = 100;

/// Bootstrap settings: number of resamples, seed, confidence level.
///
/// Cost is O(B·n) (plus O(n²) for BCa's jackknife): cheap for per-run figures (n in the tens),
/// but for a per-message series of 10⁵ values prefer B ≈ 1 000.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Bootstrap {
    /// Number of resamples B (≥ [`MIN_RESAMPLES`]); 10 000 by default.
    pub resamples: usize,
    /// Seed of the ChaCha8 stream that picks the resample indices.
    pub seed: u64,
    /// Two-sided confidence level, e.g. 0.95.
    pub level: f64,
}

impl Default for Bootstrap {
    fn default() -> Self {
        Bootstrap {
            resamples: 10_000,
            seed: 0x7c91_ab5e,
            level: 0.95,
        }
    }
}

impl Bootstrap {
    /// Settings with B = `resamples`, the given `seed` and a 95% level.
    pub fn new(resamples: usize, seed: u64) -> Bootstrap {
        Bootstrap {
            resamples,
            seed,
            level: 0.95,
        }
    }

    /// Bootstrap CI of the mean.
    pub fn mean_ci(
        &self,
        samples: &[f64],
        method: CiMethod,
    ) -> Result<ConfidenceInterval, StatsError> {
        self.ci(samples, |xs| mean(xs), method)
    }

    /// Bootstrap CI of the median (type-7 median of each resample).
    pub fn median_ci(
        &self,
        samples: &[f64],
        method: CiMethod,
    ) -> Result<ConfidenceInterval, StatsError> {
        self.ci(samples, median_in_place, method)
    }

    /// Bootstrap CI of `statistic` over one sample, by the percentile or BCa method.
    ///
    /// `statistic` receives a scratch resample it may reorder. [`CiMethod::StudentT`] is not a
    /// bootstrap method and is rejected.
    pub fn ci<F>(
        &self,
        samples: &[f64],
        mut statistic: F,
        method: CiMethod,
    ) -> Result<ConfidenceInterval, StatsError>
    where
        F: FnMut(&mut [f64]) -> f64,
    {
        self.validate()?;
        check_samples("samples", samples)?;
        let estimate = statistic(&mut samples.to_vec());
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        let mut scratch = vec![0.0; samples.len()];
        let mut thetas = Vec::with_capacity(self.resamples);
        for _ in 0..self.resamples {
            resample_into(&mut rng, samples, &mut scratch);
            thetas.push(statistic(&mut scratch));
        }
        let thetas = sorted_copy(&thetas);
        let alpha = 1.0 - self.level;
        let (p_lo, p_hi) = match method {
            CiMethod::Percentile => (alpha / 2.0, 1.0 - alpha / 2.0),
            CiMethod::Bca => bca_levels(samples, &mut statistic, &thetas, estimate, alpha)?,
            CiMethod::StudentT | CiMethod::LogScale => {
                return Err(StatsError::InvalidParameter {
                    name: "method",
                    value: format!("{method:?}"),
                    expected: "a bootstrap method (percentile or bca); use mean_ci (log scale) or mean_ci_t (Student t)",
                });
            }
        };
        Ok(ConfidenceInterval {
            estimate,
            lower: quantile_sorted(&thetas, p_lo),
            upper: quantile_sorted(&thetas, p_hi),
            level: self.level,
            method,
        })
    }

    /// Percentile CI of `statistic(a, b)` for two independent samples, each resampled on its
    /// own (Efron & Tibshirani 1993, §8.3 two-sample bootstrap). Used for speed-ups (a ratio of
    /// means) and differences of medians.
    pub fn two_sample_ci<F>(
        &self,
        a: &[f64],
        b: &[f64],
        mut statistic: F,
    ) -> Result<ConfidenceInterval, StatsError>
    where
        F: FnMut(&mut [f64], &mut [f64]) -> f64,
    {
        self.validate()?;
        check_samples("first sample", a)?;
        check_samples("second sample", b)?;
        let estimate = statistic(&mut a.to_vec(), &mut b.to_vec());
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        let (mut sa, mut sb) = (vec![0.0; a.len()], vec![0.0; b.len()]);
        let mut thetas = Vec::with_capacity(self.resamples);
        for _ in 0..self.resamples {
            resample_into(&mut rng, a, &mut sa);
            resample_into(&mut rng, b, &mut sb);
            let t = statistic(&mut sa, &mut sb);
            if t.is_finite() {
                thetas.push(t);
            }
        }
        if thetas.is_empty() {
            return Err(StatsError::ZeroDenominator {
                what: "every bootstrap resample",
            });
        }
        let thetas = sorted_copy(&thetas);
        let alpha = 1.0 - self.level;
        Ok(ConfidenceInterval {
            estimate,
            lower: quantile_sorted(&thetas, alpha / 2.0),
            upper: quantile_sorted(&thetas, 1.0 - alpha / 2.0),
            level: self.level,
            method: CiMethod::Percentile,
        })
    }

    fn validate(&self) -> Result<(), StatsError> {
        check_unit_open("level", self.level)?;
        if self.resamples < MIN_RESAMPLES {
            return Err(StatsError::InvalidParameter {
                name: "resamples",
                value: self.resamples.to_string(),
                expected: "at least 100 (10 000 recommended for 95% intervals)",
            });
        }
        Ok(())
    }
}

/// Median of a scratch buffer by selection (O(n)), type 7 for even n.
pub(crate) fn median_in_place(xs: &mut [f64]) -> f64 {
    let n = xs.len();
    let mid = n / 2;
    let (_, upper, _) = xs.select_nth_unstable_by(mid, f64::total_cmp);
    let upper = *upper;
    if n % 2 == 1 {
        return upper;
    }
    let lower = xs[..mid].iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (lower + upper) / 2.0
}

/// Fills `out` with `src.len()` values drawn uniformly with replacement from `src`.
fn resample_into(rng: &mut ChaCha8Rng, src: &[f64], out: &mut [f64]) {
    for slot in out.iter_mut() {
        *slot = src[rng.random_range(0..src.len())];
    }
}

/// BCa's adjusted quantile levels (α₁, α₂) (Efron & Tibshirani 1993, eq. 14.10):
/// αᵢ = Φ(ẑ₀ + (ẑ₀ + z⁽ᵅ⁾)/(1 − â(ẑ₀ + z⁽ᵅ⁾))), with the bias correction
/// ẑ₀ = Φ⁻¹(#{θ* < θ̂} + ½#{θ* = θ̂})/B and the acceleration from the jackknife,
/// â = Σ(θ̄₍.₎ − θ₍ᵢ₎)³ / (6 [Σ(θ̄₍.₎ − θ₍ᵢ₎)²]^{3/2}) (eq. 14.15).
fn bca_levels<F>(
    samples: &[f64],
    statistic: &mut F,
    sorted_thetas: &[f64],
    estimate: f64,
    alpha: f64,
) -> Result<(f64, f64), StatsError>
where
    F: FnMut(&mut [f64]) -> f64,
{
    let b = sorted_thetas.len() as f64;
    let below = sorted_thetas.partition_point(|&t| t < estimate) as f64;
    let at_or_below = sorted_thetas.partition_point(|&t| t <= estimate) as f64;
    // Keep the proportion inside (0, 1) so ẑ₀ stays finite when every θ* lies on one side.
    let prop = ((below + at_or_below) / (2.0 * b)).clamp(0.5 / b, 1.0 - 0.5 / b);
    let z0 = normal_quantile(prop)?;
    let a = jackknife_acceleration(samples, statistic);
    let level_for = |z_alpha: f64| {
        let num = z0 + z_alpha;
        let denom = 1.0 - a * num;
        if denom <= 0.0 {
            // Acceleration so large the adjustment breaks down: fall back to the extreme.
            if z_alpha < 0.0 { 0.0 } else { 1.0 }
        } else {
            normal_cdf(z0 + num / denom)
        }
    };
    let z_lo = normal_quantile(alpha / 2.0)?;
    let z_hi = normal_quantile(1.0 - alpha / 2.0)?;
    Ok((level_for(z_lo), level_for(z_hi)))
}

/// Jackknife estimate of BCa's acceleration â; 0 when the statistic does not vary.
fn jackknife_acceleration<F>(samples: &[f64], statistic: &mut F) -> f64
where
    F: FnMut(&mut [f64]) -> f64,
{
    let n = samples.len();
    if n < 3 {
        return 0.0;
    }
    let mut scratch = Vec::with_capacity(n - 1);
    let jack: Vec<f64> = (0..n)
        .map(|i| {
            scratch.clear();
            scratch.extend_from_slice(&samples[..i]);
            scratch.extend_from_slice(&samples[i + 1..]);
            statistic(&mut scratch)
        })
        .collect();
    let jbar = mean(&jack);
    let (mut num, mut den) = (0.0, 0.0);
    for &j in &jack {
        let d = jbar - j;
        num += d * d * d;
        den += d * d;
    }
    if den <= 0.0 {
        0.0
    } else {
        num / (6.0 * den.powf(1.5))
    }
}
