//! Everything a results table shows for one configuration, computed in one call: the summary,
//! the CI of the mean ([`mean_ci`]: on the log scale for positive figures), the bootstrap CI of the median and the speed-up over a baseline.
//!
//! This is what the sfperf-style line is built from (`s: 3 f: 1 time: 0.28 +/- 0.10 best: 0.19
//! worst: 0.75`, then the CI and the group); the formatting itself belongs to the report crate.

use crate::bootstrap::Bootstrap;
use crate::ci::{CiMethod, ConfidenceInterval, mean_ci};
use crate::error::StatsError;
use crate::objective::Objective;
use crate::speedup::{SpeedUp, speed_up};
use crate::summary::Summary;
use serde::{Deserialize, Serialize};

/// The figures of one configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Description {
    /// n, mean, sd, best/worst, median, upper quantiles.
    pub summary: Summary,
    /// CI of the mean ([`mean_ci`]) at the bootstrap's level; `None` for n = 1.
    pub mean_ci: Option<ConfidenceInterval>,
    /// Percentile-bootstrap CI of the median; `None` for n = 1.
    pub median_ci: Option<ConfidenceInterval>,
    /// Speed-up over the baseline (> 1: better), when a baseline was given.
    pub speed_up: Option<SpeedUp>,
}

/// Describes `samples`, and its speed-up over `baseline` when given.
///
/// The bootstrap settings (B, seed, level) serve the median CI and the speed-up CI; the
/// t interval uses the same level.
pub fn describe(
    samples: &[f64],
    baseline: Option<&[f64]>,
    objective: Objective,
    bootstrap: &Bootstrap,
) -> Result<Description, StatsError> {
    let summary = Summary::of(samples)?;
    let (mean_ci, median_ci) = if samples.len() >= 2 {
        (
            Some(mean_ci(samples, bootstrap.level)?),
            Some(bootstrap.median_ci(samples, CiMethod::Percentile)?),
        )
    } else {
        (None, None)
    };
    let speed_up = baseline
        .map(|b| speed_up(b, samples, objective, bootstrap))
        .transpose()?;
    Ok(Description {
        summary,
        mean_ci,
        median_ci,
        speed_up,
    })
}
