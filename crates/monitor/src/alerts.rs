//! Regressions per pair and figure, pure: each new result is checked against the pair's own
//! history ([`tcplab_stats::check_regression`]); an alert opens on a regression and closes when
//! the pair is back.
//!
//! While an alert is open the history is frozen at what the pair was before it: results of the
//! regressed path never become its baseline, so a path that stays slow stays flagged instead of
//! being learnt as normal. An alert closes once the newest window is no longer worse than the
//! baseline by the size a regression needs (the pair recovered), and the results since the
//! alert opened are dropped from the window so the history goes on from before it. Memory per
//! (slot, figure) is bounded by the history's length and the window.

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};
use tcplab_stats::{
    Objective, Regression, RegressionCheck, RegressionConfig, StatsError, check_regression,
};

use crate::schedule::Slot;

/// What is watched: one figure of one slot's results.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Watched {
    /// The pair and workload.
    pub slot: Slot,
    /// The figure's name (`throughput_bps`, `rr_p99_us`, ...).
    pub figure: String,
}

/// An alert's life.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Event {
    /// The figure regressed: the check that found it, at the result's time.
    Opened {
        /// What regressed.
        watched: Watched,
        /// When (ms), the time of the result that completed the window.
        at_ms: u64,
        /// The figures of the check.
        check: RegressionCheck,
    },
    /// The figure is back within what the pair was.
    Closed {
        /// What recovered.
        watched: Watched,
        /// When (ms).
        at_ms: u64,
        /// When the alert had opened (ms).
        opened_ms: u64,
    },
}

#[derive(Debug, Clone)]
struct Series {
    objective: Objective,
    /// Results before the window (oldest first), at most `max_history`.
    history: VecDeque<f64>,
    /// The newest results (oldest first), at most `window`.
    window: VecDeque<f64>,
    /// When the open alert opened.
    open_since: Option<u64>,
}

/// Every watched figure's history and alert.
#[derive(Debug, Clone)]
pub struct Alerts {
    cfg: RegressionConfig,
    series: BTreeMap<Watched, Series>,
}

impl Alerts {
    /// No history yet; `cfg` judges every check.
    pub fn new(cfg: RegressionConfig) -> Alerts {
        Alerts {
            cfg,
            series: BTreeMap::new(),
        }
    }

    /// Takes one result's figure (time `at_ms`, better as `objective` says) and returns the
    /// alert's change, if any.
    pub fn observe(
        &mut self,
        watched: &Watched,
        value: f64,
        objective: Objective,
        at_ms: u64,
    ) -> Result<Option<Event>, StatsError> {
        let cfg = self.cfg;
        let series = self
            .series
            .entry(watched.clone())
            .or_insert_with(|| Series {
                objective,
                history: VecDeque::new(),
                window: VecDeque::new(),
                open_since: None,
            });
        if !value.is_finite() {
            return Err(StatsError::NonFinite {
                what: "a monitored figure",
                index: 0,
                value,
            });
        }
        series.window.push_back(value);
        if series.window.len() > cfg.window {
            let oldest = series.window.pop_front().unwrap_or(value);
            if series.open_since.is_none() {
                series.history.push_back(oldest);
                if series.history.len() > cfg.max_history {
                    series.history.pop_front();
                }
            }
        }
        if series.window.len() < cfg.window {
            return Ok(None);
        }
        let history: Vec<f64> = series.history.iter().copied().collect();
        let window: Vec<f64> = series.window.iter().copied().collect();
        let check = match check_regression(&history, &window, series.objective, &cfg)? {
            Regression::TooLittleHistory { .. } => return Ok(None),
            Regression::Checked(c) => c,
        };
        Ok(match series.open_since {
            None if check.regressed => {
                series.open_since = Some(at_ms);
                Some(Event::Opened {
                    watched: watched.clone(),
                    at_ms,
                    check,
                })
            }
            Some(opened_ms) if check.worse_by < check.worse_needed => {
                series.open_since = None;
                // The window held regressed results: the history goes on from before them.
                series.window.clear();
                Some(Event::Closed {
                    watched: watched.clone(),
                    at_ms,
                    opened_ms,
                })
            }
            _ => None,
        })
    }

    /// The watched figures with an open alert, and since when (ms).
    pub fn open(&self) -> impl Iterator<Item = (&Watched, u64)> {
        self.series
            .iter()
            .filter_map(|(w, s)| s.open_since.map(|t| (w, t)))
    }

    /// How many figures are watched.
    pub fn watched(&self) -> usize {
        self.series.len()
    }
}

#[cfg(test)]
#[path = "alerts_tests.rs"]
mod tests;
