//! Confidence intervals: the result type and the interval of the mean (on the log scale for a
//! quantity that cannot be negative, Student's t otherwise).
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
    /// The mean of positive data on the log scale: exp(ȳ + s²/2 ± t · √(s²/n + s⁴/2(n−1)))
    /// over y = ln x (the modified Cox method, Olsson 2005).
    LogScale,
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

/// Confidence interval of the mean, respecting the scale of the data: when every sample is above
/// zero (a time, a rate, a size: what tcplab measures) the interval is computed on the log scale
/// ([`mean_ci_log`]), so it never reaches below zero and is as skewed as such data are; two runs
/// of 1.8 and 3.5 µs give [0.03, 299] instead of Student's [−8.2, 13.5]. Data with a zero or a
/// negative value (a difference, a count that can be nil) get Student's t ([`mean_ci_t`]).
pub fn mean_ci(samples: &[f64], level: f64) -> Result<ConfidenceInterval, StatsError> {
    if samples.iter().all(|&x| x > 0.0) {
        let ci = mean_ci_log(samples, level)?;
        if ci.lower.is_finite() && ci.upper.is_finite() {
            return Ok(ci);
        }
    }
    mean_ci_t(samples, level)
}

/// The interval of the mean of positive data computed on their logarithms, by the modified Cox
/// method (Olsson 2005, *J. Statistics Education* 13(1); Zhou & Gao 1997): with y = ln x, ȳ its
/// mean and s² its sample variance, exp(ȳ + s²/2 ± t₍₁₋α/₂, n−1₎ · √(s²/n + s⁴/(2(n−1)))).
/// Exact for log-normal data, which delays and rates roughly are; its bounds are positive by
/// construction. The estimate stays the arithmetic mean, the figure the reports print.
///
/// Needs n ≥ 2 and every sample above zero; all-equal samples give [x̄, x̄]. Very spread data
/// can overflow the upper bound to infinity ([`mean_ci`] then falls back to Student's t).
pub fn mean_ci_log(samples: &[f64], level: f64) -> Result<ConfidenceInterval, StatsError> {
    check_samples("samples", samples)?;
    check_min_len("samples", samples, 2)?;
    check_unit_open("level", level)?;
    if let Some(index) = samples.iter().position(|&x| x <= 0.0) {
        return Err(StatsError::InvalidParameter {
            name: "samples",
            value: format!("#{index} = {}", samples[index]),
            expected: "above zero for an interval on the log scale; use mean_ci_t",
        });
    }
    let m = mean(samples);
    let logs: Vec<f64> = samples.iter().map(|x| x.ln()).collect();
    let n = logs.len() as f64;
    let log_mean = mean(&logs);
    let var = sample_variance(&logs, log_mean).unwrap_or(0.0);
    let (lower, upper) = if var == 0.0 {
        (m, m)
    } else {
        let t = student_t_quantile(1.0 - (1.0 - level) / 2.0, n - 1.0)?;
        let centre = log_mean + var / 2.0;
        let half = t * (var / n + var * var / (2.0 * (n - 1.0))).sqrt();
        ((centre - half).exp(), (centre + half).exp())
    };
    Ok(ConfidenceInterval {
        estimate: m,
        lower,
        upper,
        level,
        method: CiMethod::LogScale,
    })
}
