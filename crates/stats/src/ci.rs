//! Confidence intervals: the result type and the Student-t interval of the mean.
//!
//! Bootstrap intervals (of the median, the mean, a ratio of means) live in [`crate::bootstrap`].

use crate::dist::student_t_quantile;
use crate::error::{StatsError, check_min_len, check_samples, check_unit_open};
use crate::summary::{mean, sample_variance};
use serde::{Deserialize, Serialize};

/// How an interval was computed, so a report can state it next to the figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CiMethod {
    /// x̄ ± t₍₁₋α/₂, n−1₎ · s/√n (Student 1908).
    StudentT,
    /// Bootstrap percentile interval (Efron & Tibshirani 1993, ch. 13).
    Percentile,
    /// Bias-corrected and accelerated bootstrap (Efron 1987; Efron & Tibshirani 1993, ch. 14).
    Bca,
}

/// A two-sided confidence interval around a point estimate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ConfidenceInterval {
    /// The statistic computed on the original data.
    pub estimate: f64,
    /// Lower bound.
    pub lower: f64,
    /// Upper bound.
    pub upper: f64,
    /// Confidence level, e.g. 0.95.
    pub level: f64,
    /// How the bounds were obtained.
    pub method: CiMethod,
}

impl ConfidenceInterval {
    /// Half the width, the "±" figure of a symmetric interval.
    pub fn half_width(&self) -> f64 {
        (self.upper - self.lower) / 2.0
    }

    /// True when the two intervals share no point.
    pub fn disjoint(&self, other: &ConfidenceInterval) -> bool {
        self.upper < other.lower || other.upper < self.lower
    }

    /// True when `x` lies inside the closed interval.
    pub fn contains(&self, x: f64) -> bool {
        self.lower <= x && x <= self.upper
    }
}

/// Student-t confidence interval of the mean: x̄ ± t₍₁₋α/₂, n−1₎ · s/√n with α = 1 − `level`
/// (Student 1908; e.g. Wasserman, *All of Statistics*, §10.4). Assumes the mean is roughly
/// normal, which holds for per-run totals by the central limit theorem.
///
/// Needs n ≥ 2; all-equal samples give the zero-width interval [x̄, x̄].
pub fn mean_ci_t(samples: &[f64], level: f64) -> Result<ConfidenceInterval, StatsError> {
    check_samples("samples", samples)?;
    check_min_len("samples", samples, 2)?;
    check_unit_open("level", level)?;
    let n = samples.len() as f64;
    let m = mean(samples);
    let var = sample_variance(samples, m).unwrap_or(0.0);
    let t = student_t_quantile(1.0 - (1.0 - level) / 2.0, n - 1.0)?;
    let half = t * (var / n).sqrt();
    Ok(ConfidenceInterval {
        estimate: m,
        lower: m - half,
        upper: m + half,
        level,
        method: CiMethod::StudentT,
    })
}
