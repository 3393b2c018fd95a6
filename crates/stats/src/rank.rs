//! "Consistently fast" ranking: settings ordered by a pessimistic figure of the objective, with
//! settings that are not significantly different from their group's leader grouped together.
//!
//! Method (stated in [`Ranking::method`] for reports):
//! 1. Each setting gets a *key*: its pessimistic tail quantile (the q-quantile when minimising,
//!    the (1 − q)-quantile when maximising; type 7) or the pessimistic confidence bound
//!    of its mean. Ranking by the tail rather than the mean is what "consistently" means: a
//!    setting that is fast on average but has slow runs is ranked by its slow runs.
//! 2. Groups are formed greedily: the best remaining setting by key leads a group; every other
//!    remaining setting is compared with it by a two-sided test (Welch or Mann-Whitney) and the
//!    p-values of that round are Holm-adjusted; those with adjusted p ≥ α join the group. Repeat
//!    on the rest. Group 1 is therefore "the leader and everything not shown to differ from it".
//! 3. Ranks run over groups first, then keys within a group, so group ids never interleave.
//!
//! A setting with too few samples for the test (Welch needs 2) cannot be shown to differ, so it
//! joins the group of the leader it was compared with; its entry says it was not tested.

use crate::ci::{ConfidenceInterval, mean_ci};
use crate::compare::{Alternative, TestKind, compare, holm_adjust};
use crate::error::StatsError;
use crate::objective::Objective;
use crate::summary::{Summary, quantile_sorted, sorted_copy};
use serde::{Deserialize, Serialize};

/// One setting's samples, borrowed from the caller.
#[derive(Debug, Clone, Copy)]
pub struct Samples<'a> {
    /// The setting's name (e.g. "nodelay=1 autocork=0").
    pub name: &'a str,
    /// Its per-repetition objective values.
    pub values: &'a [f64],
}

/// The figure settings are ordered by.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RankKey {
    /// Pessimistic tail quantile at `q` (e.g. 0.9: p90 when minimising, p10 when maximising).
    Tail {
        /// Tail level in [0.5, 1].
        q: f64,
    },
    /// Pessimistic bound of the CI of the mean ([`crate::mean_ci`]) at the ranking's `level`
    /// (upper bound when minimising, lower when maximising).
    ConfidenceBound,
}

/// Ranking parameters.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RankConfig {
    /// Which direction is better.
    pub objective: Objective,
    /// The figure settings are ordered by.
    pub key: RankKey,
    /// The test used to decide whether a setting differs from its group's leader.
    pub test: TestKind,
    /// Family-wise significance level of each grouping round (Holm), e.g. 0.05.
    pub alpha: f64,
    /// Level of the reported CIs of the mean and of [`RankKey::ConfidenceBound`], e.g. 0.95.
    pub level: f64,
}

impl RankConfig {
    /// Defaults: p90 tail (pessimistic), Welch t-test, α = 0.05, 95% intervals.
    pub fn new(objective: Objective) -> RankConfig {
        RankConfig {
            objective,
            key: RankKey::Tail { q: 0.9 },
            test: TestKind::Welch,
            alpha: 0.05,
            level: 0.95,
        }
    }
}

/// A setting's comparison with the leader of the group it was tested against.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeaderComparison {
    /// Name of the leader.
    pub leader: String,
    /// Raw two-sided p-value, `None` when the test could not be run (too few samples).
    pub p_value: Option<f64>,
    /// Holm-adjusted p-value within that grouping round.
    pub p_adjusted: Option<f64>,
}

/// One row of the ranking.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankedSetting {
    /// 1-based rank (group first, then key).
    pub rank: usize,
    /// 1-based group id; group 1 is the consistently fast group.
    pub group: usize,
    /// The setting's name.
    pub name: String,
    /// The key value the setting was ordered by.
    pub key: f64,
    /// Descriptive summary of the samples.
    pub summary: Summary,
    /// CI of the mean ([`crate::mean_ci`]); `None` for n = 1.
    pub mean_ci: Option<ConfidenceInterval>,
    /// The last comparison made: with its own group's leader for members; for the leader of
    /// group k > 1, with the leader of group k − 1 (the comparison that excluded it); `None`
    /// for the leader of group 1.
    pub vs_leader: Option<LeaderComparison>,
}

/// A complete ranking and the sentence that states how it was made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ranking {
    /// Rows ordered by rank.
    pub entries: Vec<RankedSetting>,
    /// Human-readable statement of key, test, correction and level.
    pub method: String,
}

/// Ranks `settings` (see the module documentation for the method).
pub fn rank(settings: &[Samples<'_>], config: &RankConfig) -> Result<Ranking, StatsError> {
    validate(config)?;
    let mut rows = settings
        .iter()
        .map(|s| row_for(s, config).map_err(|e| in_setting(s.name, e)))
        .collect::<Result<Vec<Row<'_>>, StatsError>>()?;
    let objective = config.objective;
    rows.sort_by(|a, b| {
        objective
            .cmp_best_first(a.key, b.key)
            .then(objective.cmp_best_first(a.summary.mean, b.summary.mean))
            .then(a.samples.name.cmp(b.samples.name))
    });
    assign_groups(&mut rows, config)?;
    rows.sort_by_key(|r| r.group); // stable: key order is kept within a group
    let entries = rows
        .into_iter()
        .enumerate()
        .map(|(i, r)| RankedSetting {
            rank: i + 1,
            group: r.group,
            name: r.samples.name.to_string(),
            key: r.key,
            summary: r.summary,
            mean_ci: r.mean_ci,
            vs_leader: r.vs_leader,
        })
        .collect();
    Ok(Ranking {
        entries,
        method: describe(config),
    })
}

/// Working state of one setting while grouping.
struct Row<'a> {
    samples: Samples<'a>,
    summary: Summary,
    key: f64,
    mean_ci: Option<ConfidenceInterval>,
    group: usize,
    vs_leader: Option<LeaderComparison>,
}

fn row_for<'a>(s: &Samples<'a>, config: &RankConfig) -> Result<Row<'a>, StatsError> {
    let summary = Summary::of(s.values)?;
    let mean_ci = if s.values.len() >= 2 {
        Some(mean_ci(s.values, config.level)?)
    } else {
        None
    };
    let key = match config.key {
        RankKey::Tail { q } => {
            let level = config.objective.pessimistic_quantile(q);
            quantile_sorted(&sorted_copy(s.values), level)
        }
        RankKey::ConfidenceBound => match (mean_ci, config.objective) {
            (Some(ci), Objective::Minimise) => ci.upper,
            (Some(ci), Objective::Maximise) => ci.lower,
            (None, _) => {
                return Err(StatsError::TooFew {
                    what: "samples (a confidence bound needs a standard deviation)",
                    need: 2,
                    got: s.values.len(),
                });
            }
        },
    };
    Ok(Row {
        samples: *s,
        summary,
        key,
        mean_ci,
        group: 0,
        vs_leader: None,
    })
}

/// Greedy leader grouping over rows sorted best-first by key; sets `group` and `vs_leader`.
fn assign_groups(rows: &mut [Row<'_>], config: &RankConfig) -> Result<(), StatsError> {
    let mut group = 0;
    while let Some(leader) = rows.iter().position(|r| r.group == 0) {
        group += 1;
        rows[leader].group = group;
        let others: Vec<usize> = (leader + 1..rows.len())
            .filter(|&i| rows[i].group == 0)
            .collect();
        let raw = others
            .iter()
            .map(|&i| two_sided_p(&rows[i], &rows[leader], config.test))
            .collect::<Result<Vec<Option<f64>>, StatsError>>()?;
        let tested: Vec<f64> = raw.iter().flatten().copied().collect();
        let mut adjusted = holm_adjust(&tested).into_iter();
        let leader_name = rows[leader].samples.name.to_string();
        for (&i, p) in others.iter().zip(raw) {
            let p_adjusted = p.and_then(|_| adjusted.next());
            if p_adjusted.is_none_or(|q| q >= config.alpha) {
                rows[i].group = group;
            }
            rows[i].vs_leader = Some(LeaderComparison {
                leader: leader_name.clone(),
                p_value: p,
                p_adjusted,
            });
        }
    }
    Ok(())
}

/// Two-sided p-value of `a` vs `b`, or `None` when either has too few samples for the test.
fn two_sided_p(a: &Row<'_>, b: &Row<'_>, test: TestKind) -> Result<Option<f64>, StatsError> {
    let need = match test {
        TestKind::Welch => 2,
        TestKind::MannWhitney => 1,
    };
    if a.samples.values.len() < need || b.samples.values.len() < need {
        return Ok(None);
    }
    let r = compare(
        test,
        a.samples.values,
        b.samples.values,
        Alternative::TwoSided,
    )
    .map_err(|e| in_setting(a.samples.name, e))?;
    Ok(Some(r.p_value))
}

fn validate(config: &RankConfig) -> Result<(), StatsError> {
    crate::error::check_unit_open("alpha", config.alpha)?;
    crate::error::check_unit_open("level", config.level)?;
    if let RankKey::Tail { q } = config.key
        && !(0.5..=1.0).contains(&q)
    {
        return Err(StatsError::InvalidParameter {
            name: "tail quantile q",
            value: q.to_string(),
            expected: "between 0.5 and 1 (the pessimistic side is chosen from the objective)",
        });
    }
    Ok(())
}

fn describe(config: &RankConfig) -> String {
    let dir = match config.objective {
        Objective::Minimise => "minimise",
        Objective::Maximise => "maximise",
    };
    let key = match config.key {
        RankKey::Tail { q } => format!(
            "the pessimistic {}th percentile",
            fmt_pct(config.objective.pessimistic_quantile(q))
        ),
        RankKey::ConfidenceBound => format!(
            "the pessimistic bound of the {}% CI of the mean",
            fmt_pct(config.level)
        ),
    };
    format!(
        "{dir}; ordered by {key}; settings not significantly different from their group's \
         leader (two-sided {}, Holm-adjusted, alpha = {}) share its group",
        config.test.name(),
        config.alpha
    )
}

fn fmt_pct(p: f64) -> String {
    let v = p * 100.0;
    if (v - v.round()).abs() < 1e-9 {
        format!("{}", v.round())
    } else {
        format!("{v:.1}")
    }
}

/// Wraps an error with the name of the setting it is about.
pub(crate) fn in_setting(name: &str, e: StatsError) -> StatsError {
    match e {
        StatsError::Setting { .. } => e,
        other => StatsError::Setting {
            name: name.to_string(),
            source: Box::new(other),
        },
    }
}
