//! Has a path got worse? A pair's newest results against its own history, for a monitor that
//! measures the same pair again and again and must say so when a figure changes for the worse,
//! without crying wolf on a fleet of hundreds of pairs.
//!
//! The test is an exact one-sided permutation test (Pitman 1937; Good, *Permutation Tests*,
//! 2nd ed. 2005, ch. 3) of the newest `window` results against the `n` before them: if nothing
//! changed, the results are exchangeable and every `window`-subset of the `n + window` is
//! equally likely to be the newest, so the share of subsets whose sum is at least as bad as the
//! newest's is an exact p-value. Ties count against an alarm. No distribution is assumed, which
//! matters here: throughput is bounded and skewed, latencies are heavy-tailed.
//!
//! **False alarms.** With no change, one check raises an alarm with probability at most
//! `alpha` (the test is exact; the size condition below only removes alarms). The default
//! `alpha` = 0.005 and a window of 2 need 19 earlier results before any alarm is possible
//! (`C(21, 2)` = 210 subsets, 1/210 < 0.005), and then an alarm needs both newest results
//! worse than all but a handful of the history. A regression is flagged at the second result
//! after it, and one bad result alone never raises one. Measured on 40,000 checks of unchanged
//! pairs with 30 earlier results each (the tests' draws): a normal figure (5 % spread) alarmed
//! in 0.40 % of checks by the test alone and in none with the size condition; a heavy-tailed one
//! (log-normal, sigma 0.8, as a latency) 0.36 % and 0.12 %; a coarse one full of ties (a
//! rounded normal around 10, sd 2) 0.15 % and 0.02 %.
//!
//! **Size.** A statistically clear change may still be too small to act on (a quiet pair's 3 %
//! drop), so an alarm also needs *every* one of the newest results, the best of them included,
//! to be worse than the history's median by at least `min_relative_shift` of it and by
//! `mad_multiple` times the history's own spread (the median absolute deviation scaled to a
//! standard deviation, Hampel 1974). Judging the best of the window, not its mean, is what keeps
//! one very bad result beside a normal one from ever raising an alarm.

use serde::{Deserialize, Serialize};

use crate::error::StatsError;
use crate::objective::Objective;
use crate::summary::quantile;

/// Largest window the exact enumeration handles: at most C(104, 4) ≈ 4.6 million subsets.
pub const MAX_WINDOW: usize = 4;

/// MAD × this estimates a normal distribution's standard deviation.
const MAD_TO_SD: f64 = 1.4826;

/// How a regression is judged.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RegressionConfig {
    /// How many newest results are tested together (1..=[`MAX_WINDOW`]): 2 flags a change at
    /// its second result and never on one bad result.
    pub window: usize,
    /// How many results before the window are used at most (the newest of them): a pair's
    /// baseline follows slow drift instead of remembering a path it no longer is.
    pub max_history: usize,
    /// The chance one check of an unchanged pair raises an alarm, at most (exact).
    pub alpha: f64,
    /// The newest results' median must be at least this much worse than the history's, as a
    /// share of it (0.2 = 20 %).
    pub min_relative_shift: f64,
    /// ... and worse by at least this many of the history's robust standard deviations.
    pub mad_multiple: f64,
}

impl Default for RegressionConfig {
    fn default() -> Self {
        RegressionConfig {
            window: 2,
            max_history: 60,
            alpha: 0.005,
            min_relative_shift: 0.2,
            mad_multiple: 3.0,
        }
    }
}

impl RegressionConfig {
    /// How many results before the window the test needs before an alarm is possible at all:
    /// the least `n` with `C(n + window, window) * alpha >= 1`.
    pub fn history_needed(&self) -> usize {
        (1..)
            .find(|&n| choose(n + self.window, self.window) * self.alpha >= 1.0)
            .unwrap_or(usize::MAX)
    }

    fn validate(&self) -> Result<(), StatsError> {
        let bad = |name, value: String, expected| {
            Err(StatsError::InvalidParameter {
                name,
                value,
                expected,
            })
        };
        if !(1..=MAX_WINDOW).contains(&self.window) {
            return bad("window", self.window.to_string(), "in 1..=4");
        }
        if !(self.alpha > 0.0 && self.alpha < 1.0) {
            return bad("alpha", self.alpha.to_string(), "in (0, 1)");
        }
        if self.max_history < self.history_needed() || self.max_history > 100 {
            return bad(
                "max_history",
                self.max_history.to_string(),
                "at least the history alpha and window need, and at most 100",
            );
        }
        if !(self.min_relative_shift >= 0.0 && self.min_relative_shift.is_finite()) {
            return bad(
                "min_relative_shift",
                self.min_relative_shift.to_string(),
                "a finite share >= 0, e.g. 0.2",
            );
        }
        if !(self.mad_multiple >= 0.0 && self.mad_multiple.is_finite()) {
            return bad(
                "mad_multiple",
                self.mad_multiple.to_string(),
                "a finite number >= 0, e.g. 3",
            );
        }
        Ok(())
    }
}

/// What one check found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Regression {
    /// Too few earlier results for the test to ever reach `alpha`.
    TooLittleHistory {
        /// Earlier results given.
        have: usize,
        /// Earlier results needed.
        need: usize,
    },
    /// The test ran.
    Checked(RegressionCheck),
}

impl Regression {
    /// Whether the newest results regressed.
    pub fn regressed(&self) -> bool {
        matches!(self, Regression::Checked(c) if c.regressed)
    }
}

/// The figures of a check that ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegressionCheck {
    /// Both conditions held: the change is clear and large enough.
    pub regressed: bool,
    /// The exact one-sided permutation p-value (worse direction).
    pub p_value: f64,
    /// The history's median (the earlier results used).
    pub baseline: f64,
    /// The best of the newest results (the one least worse than the baseline).
    pub recent: f64,
    /// How much worse that best newest result is, as a share of the baseline (negative:
    /// better).
    pub worse_by: f64,
    /// How much worse it had to be (the larger of the relative floor and the spread's share).
    pub worse_needed: f64,
    /// Earlier results used.
    pub history_used: usize,
}

/// Checks whether the newest `recent` results (oldest first, `cfg.window` of them) are worse
/// than `history` (the results before them, oldest first; the newest `cfg.max_history` are
/// used) under `objective`.
pub fn check_regression(
    history: &[f64],
    recent: &[f64],
    objective: Objective,
    cfg: &RegressionConfig,
) -> Result<Regression, StatsError> {
    cfg.validate()?;
    finite("history", history)?;
    finite("recent results", recent)?;
    if recent.len() != cfg.window {
        return Err(StatsError::TooFew {
            what: "recent results (one per result in the window)",
            need: cfg.window,
            got: recent.len(),
        });
    }
    let need = cfg.history_needed();
    if history.len() < need {
        return Ok(Regression::TooLittleHistory {
            have: history.len(),
            need,
        });
    }
    let history = &history[history.len().saturating_sub(cfg.max_history)..];
    // "Worse" is larger after this sign: times as they are, rates negated.
    let sign = match objective {
        Objective::Minimise => 1.0,
        Objective::Maximise => -1.0,
    };
    let worse: Vec<f64> = history.iter().chain(recent).map(|v| v * sign).collect();
    let observed: f64 = recent.iter().map(|v| v * sign).sum();
    let p_value = subsets_at_least(&worse, cfg.window, observed) / choose(worse.len(), cfg.window);
    let baseline = quantile(history, 0.5)?;
    // The least bad of the window, in the worse-is-larger sign: min after signing.
    let best_recent = recent
        .iter()
        .copied()
        .min_by(|a, b| (a * sign).total_cmp(&(b * sign)))
        .unwrap_or(baseline);
    let spread = MAD_TO_SD * mad(history, baseline)?;
    let scale = baseline.abs().max(f64::MIN_POSITIVE);
    let worse_by = (best_recent - baseline) * sign / scale;
    let worse_needed = cfg
        .min_relative_shift
        .max(cfg.mad_multiple * spread / scale);
    Ok(Regression::Checked(RegressionCheck {
        regressed: p_value <= cfg.alpha && worse_by > 0.0 && worse_by >= worse_needed,
        p_value,
        baseline,
        recent: best_recent,
        worse_by,
        worse_needed,
        history_used: history.len(),
    }))
}

fn finite(what: &'static str, xs: &[f64]) -> Result<(), StatsError> {
    match xs.iter().position(|v| !v.is_finite()) {
        Some(index) => Err(StatsError::NonFinite {
            what,
            index,
            value: xs[index],
        }),
        None => Ok(()),
    }
}

/// The median absolute deviation from `median`.
fn mad(xs: &[f64], median: f64) -> Result<f64, StatsError> {
    let dev: Vec<f64> = xs.iter().map(|v| (v - median).abs()).collect();
    quantile(&dev, 0.5)
}

/// The number of `k`-subsets of `values` whose sum is at least `observed` (ties within a
/// rounding error count), by depth-first enumeration over the values sorted largest first,
/// cutting every branch that can no longer reach `observed`.
fn subsets_at_least(values: &[f64], k: usize, observed: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(|a, b| b.total_cmp(a));
    let tolerance = 1e-9 * sorted.iter().map(|v| v.abs()).fold(0.0, f64::max) * k as f64;
    let target = observed - tolerance;
    count_from(&sorted, 0, k, 0.0, target)
}

fn count_from(sorted: &[f64], start: usize, k: usize, sum: f64, target: f64) -> f64 {
    if k == 0 {
        return if sum >= target { 1.0 } else { 0.0 };
    }
    let mut count = 0.0;
    for i in start..=sorted.len().saturating_sub(k) {
        // The best a subset can still do is this value and the k-1 following ones (the next
        // largest); when that falls short, so does every later start.
        let best: f64 = sum + sorted[i..i + k].iter().sum::<f64>();
        if best < target {
            break;
        }
        count += count_from(sorted, i + 1, k - 1, sum + sorted[i], target);
    }
    count
}

/// C(n, k) as a float (exact for the sizes used here).
fn choose(n: usize, k: usize) -> f64 {
    (0..k).fold(1.0, |c, i| c * (n - i) as f64 / (i + 1) as f64)
}

#[cfg(test)]
#[path = "regression_tests.rs"]
mod tests;
