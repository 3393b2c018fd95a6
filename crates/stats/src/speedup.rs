//! Speed-up of a candidate configuration over a baseline, with a bootstrap CI.

use crate::bootstrap::Bootstrap;
use crate::ci::ConfidenceInterval;
use crate::error::{StatsError, check_samples};
use crate::objective::Objective;
use crate::summary::mean;
use serde::{Deserialize, Serialize};

/// How many times better the candidate is than the baseline (> 1: better).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SpeedUp {
    /// Objective the ratio is oriented for.
    pub objective: Objective,
    /// Mean of the baseline samples.
    pub baseline_mean: f64,
    /// Mean of the candidate samples.
    pub candidate_mean: f64,
    /// The ratio (as `estimate`) and its percentile bootstrap interval.
    pub ratio: ConfidenceInterval,
}

impl SpeedUp {
    /// True when the whole interval lies above 1: the candidate is better at the CI's level.
    pub fn significant_gain(&self) -> bool {
        self.ratio.lower > 1.0
    }

    /// True when the whole interval lies below 1: the candidate is worse.
    pub fn significant_loss(&self) -> bool {
        self.ratio.upper < 1.0
    }
}

/// Speed-up as a ratio of means, oriented so that > 1 means the candidate is better:
/// x̄_baseline / x̄_candidate when minimising (time, cost), x̄_candidate / x̄_baseline when
/// maximising (throughput). The interval is the two-sample percentile bootstrap of that ratio
/// (each sample resampled on its own; Efron & Tibshirani 1993, §8.3 and ch. 13).
///
/// Errors when a mean in the denominator is zero.
pub fn speed_up(
    baseline: &[f64],
    candidate: &[f64],
    objective: Objective,
    bootstrap: &Bootstrap,
) -> Result<SpeedUp, StatsError> {
    check_samples("baseline samples", baseline)?;
    check_samples("candidate samples", candidate)?;
    let (mb, mc) = (mean(baseline), mean(candidate));
    let (denominator, what) = match objective {
        Objective::Minimise => (mc, "candidate samples"),
        Objective::Maximise => (mb, "baseline samples"),
    };
    if denominator == 0.0 {
        return Err(StatsError::ZeroDenominator { what });
    }
    let ratio = bootstrap.two_sample_ci(baseline, candidate, |b, c| {
        oriented_ratio(mean(b), mean(c), objective)
    })?;
    Ok(SpeedUp {
        objective,
        baseline_mean: mb,
        candidate_mean: mc,
        ratio,
    })
}

/// baseline/candidate when minimising, candidate/baseline when maximising.
fn oriented_ratio(baseline: f64, candidate: f64, objective: Objective) -> f64 {
    match objective {
        Objective::Minimise => baseline / candidate,
        Objective::Maximise => candidate / baseline,
    }
}
