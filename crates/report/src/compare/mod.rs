//! Studies side by side: the same scenario before and after a change of kernel, host or code.
//!
//! [`compare`] takes each study's [`ReportInput`] under a name (the CLI uses the database's
//! file stem) and matches configurations across studies by their full factor map, never by
//! label: each study's own short labels only keep *its* configurations apart, so `cc=bbr` in
//! one study may be `rmem=7.6M cc=bbr` in another. One set of short labels is then computed over
//! the union, so the same settings carry the same label in every column, with one [`Key`].
//!
//! Per configuration and study the figures come from that study's [`Table::from_input`] (mean,
//! sd, n, the CI of the mean, at the first study's confidence level); per study after
//! the first, the ratio to the first study's mean is `tcplab_stats`' speed-up (oriented like
//! every table's speed-up: > 1 is better, so "1.12x faster" reads the same for a time and a
//! rate) with its bootstrap CI, and whether the difference is significant is Welch's t-test,
//! Holm-adjusted over that study's configurations (many configurations make some "significant"
//! by chance otherwise).
//!
//! The facts that differ between the studies (kernel, HZ, sysctls, the titles) are what tells
//! a reader why the numbers moved; [`FactDifference`] lists them.
//!
//! Output: [`Comparison::to_text_with`] and [`Comparison::to_markdown`] (`text`),
//! [`Comparison::to_html`] (`page`, with the dot-and-whisker plot of `figure`),
//! [`Comparison::to_json`] (`json`).

mod facts;
mod figure;
mod json;
mod page;
mod text;

pub use facts::FactDifference;

use crate::error::ReportError;
use crate::label::{Key, short_labels};
use crate::model::{ConfigurationResult, ObjectiveSpec, ReportInput};
use crate::table::{Table, TableRow};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use tcplab_stats::units::{Display, Unit};
use tcplab_stats::{Alternative, Bootstrap, Objective, holm_adjust, speed_up, welch_t_test};

/// At most this many studies side by side: beyond it no terminal shows the columns.
pub const MAX_STUDIES: usize = 8;

/// Why studies cannot be compared.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    /// Fewer than two or more than [`MAX_STUDIES`] studies.
    #[error(
        "comparing needs 2 to {MAX_STUDIES} studies, got {got}; pass between 2 and {MAX_STUDIES} databases"
    )]
    Count {
        /// How many were given.
        got: usize,
    },
    /// Two studies carry the same name, so columns and legend entries would be ambiguous.
    #[error("two studies are named {name:?}; give every study its own name (e.g. its directory)")]
    DuplicateName {
        /// The repeated name.
        name: String,
    },
    /// The studies optimise different metrics or in different directions: a ratio of their
    /// means would compare apples with pears.
    #[error(
        "{other}: objective {other_objective} differs from {first}'s {first_objective}; compare studies of the same metric and goal (re-run one with the other's objective)"
    )]
    Objectives {
        /// The first study.
        first: String,
        /// Its objective ("maximise throughput_bps").
        first_objective: String,
        /// The study that differs.
        other: String,
        /// Its objective.
        other_objective: String,
    },
    /// A study's figures could not be computed (NaN samples, duplicate labels).
    #[error("{study}: {source}")]
    Report {
        /// The study.
        study: String,
        /// What was wrong.
        #[source]
        source: ReportError,
    },
}

/// A study's name and title, as the columns and the facts name it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StudyHeader {
    /// Short name (the database's file stem): column groups, legend entries, "B vs A".
    pub name: String,
    /// The study's report title ("balticgrid: throughput_bps").
    pub title: String,
}

/// Whether a study's figure differs significantly from the first study's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// Significantly better than the first study (speed-up > 1).
    Faster,
    /// Significantly worse.
    Slower,
    /// No significant difference, or too few runs (n < 2) to test.
    NotSignificant,
}

/// A study's figure over the first study's, for one configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ratio {
    /// Speed-up over the first study (> 1: better), oriented as [`tcplab_stats::speed_up`].
    pub estimate: f64,
    /// Lower bound of its percentile-bootstrap CI.
    pub lower: f64,
    /// Upper bound.
    pub upper: f64,
    /// Welch's two-sided p-value of the difference of means; `None` when a side has n < 2.
    pub p_value: Option<f64>,
    /// The p-value after Holm's correction over this study's configurations.
    pub p_adjusted: Option<f64>,
    /// The verdict at the comparison's level.
    pub change: Change,
}

/// One study's figures for one configuration, in the objective's base unit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    /// Number of runs.
    pub n: usize,
    /// Mean; `None` when the configuration failed.
    pub mean: Option<f64>,
    /// Sample standard deviation; `None` for n < 2.
    pub sd: Option<f64>,
    /// Lower bound of the CI of the mean.
    pub ci_lower: Option<f64>,
    /// How that CI was computed (see [`crate::table::TableRow::ci_method`]).
    #[serde(default)]
    pub ci_method: Option<tcplab_stats::CiMethod>,
    /// Upper bound.
    pub ci_upper: Option<f64>,
    /// "ok", "dropped" (racing stopped it) or "failed".
    pub status: String,
    /// Why it was dropped or failed.
    pub reason: Option<String>,
    /// Against the first study (studies after the first, when both have samples).
    pub vs_first: Option<Ratio>,
}

/// One configuration (one factor map) across the studies.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComparisonRow {
    /// Its short label over the union of the studies' configurations.
    pub label: String,
    /// Factor name → value.
    pub factors: BTreeMap<String, String>,
    /// One per study, in study order; `None` where the study has no such configuration.
    pub cells: Vec<Option<Cell>>,
}

/// Studies side by side; see the module documentation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// The studies, the first being the reference of every ratio.
    pub studies: Vec<StudyHeader>,
    /// The objective they share.
    pub objective: ObjectiveSpec,
    /// Confidence level of every interval (the first study's).
    pub level: f64,
    /// The first study's configurations in its rank order, then those only later studies have.
    pub rows: Vec<ComparisonRow>,
    /// Facts (and titles) whose values differ between the studies.
    pub facts: Vec<FactDifference>,
    /// From the short labels back to the full settings.
    pub key: Key,
}

/// Checks that every study optimises the same metric in the same direction as the first;
/// `named` pairs a name (a study's, or a file's) with its objective.
pub fn check_objectives(named: &[(&str, &ObjectiveSpec)]) -> Result<(), CompareError> {
    let Some((first, a)) = named.first() else {
        return Ok(());
    };
    for (other, b) in &named[1..] {
        if a.name != b.name || a.goal != b.goal || a.unit != b.unit {
            return Err(CompareError::Objectives {
                first: (*first).to_string(),
                first_objective: objective_text(a),
                other: (*other).to_string(),
                other_objective: objective_text(b),
            });
        }
    }
    Ok(())
}

/// "maximise throughput_bps".
fn objective_text(o: &ObjectiveSpec) -> String {
    let goal = match o.goal {
        Objective::Minimise => "minimise",
        Objective::Maximise => "maximise",
    };
    format!("{goal} {}", o.name)
}

/// Compares `studies` (name, input), the first being the reference; see the module docs.
pub fn compare(studies: &[(String, ReportInput)]) -> Result<Comparison, CompareError> {
    check_studies(studies)?;
    let first = &studies[0].1;
    let bootstrap = first.bootstrap;
    let tables = studies
        .iter()
        .map(|(name, input)| {
            Table::from_input(&light_input(input, bootstrap)).map_err(|source| {
                CompareError::Report {
                    study: name.clone(),
                    source,
                }
            })
        })
        .collect::<Result<Vec<Table>, CompareError>>()?;
    let matched = match_rows(&tables);
    let factors: Vec<&BTreeMap<String, String>> = matched.iter().map(|m| m.factors).collect();
    let (labels, key) = short_labels(&factors, &factor_order(studies));
    let mut rows = Vec::with_capacity(matched.len());
    for (m, label) in matched.iter().zip(labels) {
        rows.push(row_of(m, label, studies, &bootstrap)?);
    }
    adjust(&mut rows, studies.len(), bootstrap.level);
    Ok(Comparison {
        studies: studies
            .iter()
            .map(|(name, input)| StudyHeader {
                name: name.clone(),
                title: input.title.clone(),
            })
            .collect(),
        objective: first.objective.clone(),
        level: bootstrap.level,
        rows,
        facts: facts::differences(studies),
        key,
    })
}

fn check_studies(studies: &[(String, ReportInput)]) -> Result<(), CompareError> {
    if !(2..=MAX_STUDIES).contains(&studies.len()) {
        return Err(CompareError::Count { got: studies.len() });
    }
    for (i, (name, _)) in studies.iter().enumerate() {
        if studies[..i].iter().any(|(n, _)| n == name) {
            return Err(CompareError::DuplicateName { name: name.clone() });
        }
    }
    let named: Vec<(&str, &ObjectiveSpec)> = studies
        .iter()
        .map(|(n, i)| (n.as_str(), &i.objective))
        .collect();
    check_objectives(&named)
}

/// What [`Table::from_input`] needs of a study, at the common bootstrap settings: its
/// configurations, objective, factor order and stored ranking (no baseline: the ratios here
/// are between studies, not to a baseline).
fn light_input(input: &ReportInput, bootstrap: Bootstrap) -> ReportInput {
    let mut light = ReportInput::new(
        input.title.clone(),
        input.objective.clone(),
        input.configurations.clone(),
    );
    light.bootstrap = bootstrap;
    light.ranking = input.ranking.clone();
    light.factor_order = input.factor_order.clone();
    light
}

/// One configuration's table rows across the studies (`None`: not in that study).
struct Matched<'a> {
    factors: &'a BTreeMap<String, String>,
    rows: Vec<Option<&'a TableRow>>,
}

/// Groups the tables' rows by factor map: the first table's in its rank order, then each
/// later table's unmatched rows in its own rank order. Identical maps within one study (a
/// scenario that repeats a configuration) pair up in order.
fn match_rows(tables: &[Table]) -> Vec<Matched<'_>> {
    let mut matched: Vec<Matched<'_>> = Vec::new();
    for (s, table) in tables.iter().enumerate() {
        for row in &table.rows {
            let slot = matched
                .iter_mut()
                .find(|m| m.rows[s].is_none() && *m.factors == row.factors);
            match slot {
                Some(m) => m.rows[s] = Some(row),
                None => {
                    let mut rows = vec![None; tables.len()];
                    rows[s] = Some(row);
                    matched.push(Matched {
                        factors: &row.factors,
                        rows,
                    });
                }
            }
        }
    }
    matched
}

/// Factor names in the first study's order, then those only later studies name.
fn factor_order(studies: &[(String, ReportInput)]) -> Vec<String> {
    let mut order: Vec<String> = Vec::new();
    for (_, input) in studies {
        for f in &input.factor_order {
            if !order.contains(f) {
                order.push(f.clone());
            }
        }
    }
    order
}

/// The row of one matched configuration: each study's figures, and its ratio to the first.
fn row_of(
    m: &Matched<'_>,
    label: String,
    studies: &[(String, ReportInput)],
    bootstrap: &Bootstrap,
) -> Result<ComparisonRow, CompareError> {
    let samples: Vec<Option<&[f64]>> = m
        .rows
        .iter()
        .zip(studies)
        .map(|(row, (_, input))| row.and_then(|r| samples_of(&input.configurations, &r.label)))
        .collect();
    let goal = studies[0].1.objective.goal;
    let mut cells = Vec::with_capacity(m.rows.len());
    for (s, row) in m.rows.iter().enumerate() {
        let Some(row) = row else {
            cells.push(None);
            continue;
        };
        let vs_first = match (s, samples[0], samples[s]) {
            (1.., Some(a), Some(b)) => {
                ratio(a, b, goal, bootstrap).map_err(|source| CompareError::Report {
                    study: studies[s].0.clone(),
                    source: ReportError::Stats {
                        label: row.label.clone(),
                        source,
                    },
                })?
            }
            _ => None,
        };
        cells.push(Some(cell_of(row, vs_first)));
    }
    Ok(ComparisonRow {
        label,
        factors: m.factors.clone(),
        cells,
    })
}

/// The samples of the configuration labelled `label`; `None` when it has none.
fn samples_of<'a>(configs: &'a [ConfigurationResult], label: &str) -> Option<&'a [f64]> {
    configs
        .iter()
        .find(|c| c.label == label)
        .map(|c| c.samples.as_slice())
        .filter(|s| !s.is_empty())
}

fn cell_of(row: &TableRow, vs_first: Option<Ratio>) -> Cell {
    Cell {
        n: row.n,
        mean: row.mean,
        sd: row.sd,
        ci_lower: row.ci_lower,
        ci_method: row.ci_method,
        ci_upper: row.ci_upper,
        status: row.status.clone(),
        reason: row.reason.clone(),
        vs_first,
    }
}

/// `candidate` against `first`: the speed-up with its bootstrap CI and Welch's p-value (the
/// verdict is set once every p-value of the study is known, by [`adjust`]). `None` when a
/// mean in the ratio's denominator is zero, where no ratio exists.
fn ratio(
    first: &[f64],
    candidate: &[f64],
    goal: Objective,
    bootstrap: &Bootstrap,
) -> Result<Option<Ratio>, tcplab_stats::StatsError> {
    let s = match speed_up(first, candidate, goal, bootstrap) {
        Ok(s) => s,
        Err(tcplab_stats::StatsError::ZeroDenominator { .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    let p_value = if first.len() >= 2 && candidate.len() >= 2 {
        Some(welch_t_test(candidate, first, Alternative::TwoSided)?.p_value)
    } else {
        None
    };
    Ok(Some(Ratio {
        estimate: s.ratio.estimate,
        lower: s.ratio.lower,
        upper: s.ratio.upper,
        p_value,
        p_adjusted: None,
        change: Change::NotSignificant,
    }))
}

/// Holm-adjusts each later study's p-values over its configurations and sets the verdicts:
/// significant when the adjusted p is below 1 − level, its direction the ratio's.
fn adjust(rows: &mut [ComparisonRow], studies: usize, level: f64) {
    let alpha = 1.0 - level;
    for s in 1..studies {
        let tested: Vec<(usize, f64)> = rows
            .iter()
            .enumerate()
            .filter_map(|(i, r)| Some((i, r.cells[s].as_ref()?.vs_first.as_ref()?.p_value?)))
            .collect();
        let p: Vec<f64> = tested.iter().map(|t| t.1).collect();
        for ((i, _), adjusted) in tested.iter().zip(holm_adjust(&p)) {
            let Some(r) = rows[*i].cells[s].as_mut().and_then(|c| c.vs_first.as_mut()) else {
                continue;
            };
            r.p_adjusted = Some(adjusted);
            r.change = match (adjusted < alpha, r.estimate > 1.0) {
                (false, _) => Change::NotSignificant,
                (true, true) => Change::Faster,
                (true, false) => Change::Slower,
            };
        }
    }
}

impl Comparison {
    /// How the objective's figures are shown: the unit its largest mean reads best in, over
    /// every study (one unit for the whole table, so columns compare at a glance).
    pub fn display(&self) -> Display {
        Unit::parse(&self.objective.unit).display_for(self.means())
    }

    /// The objective's name for people ("throughput" for `throughput_bps`).
    pub fn title_name(&self) -> String {
        tcplab_stats::units::metric_title(&self.objective.name)
    }

    /// Every mean of every study.
    fn means(&self) -> impl Iterator<Item = f64> + '_ {
        self.rows
            .iter()
            .flat_map(|r| r.cells.iter().flatten())
            .filter_map(|c| c.mean)
    }

    /// Decimals for the figures: three significant digits of the smallest mean shown.
    pub(crate) fn decimals(&self) -> usize {
        let d = self.display();
        crate::num::auto_decimals(self.means().map(|m| d.scale(m)))
    }

    /// The confidence level as a percentage ("95").
    pub(crate) fn percent(&self) -> String {
        crate::num::compact(self.level * 100.0)
    }

    /// One sentence per study after the first: "B vs A: 7 of 9 configurations faster, 1
    /// slower, 1 without a significant difference; median ratio 1.12x".
    pub fn verdicts(&self) -> Vec<String> {
        (1..self.studies.len()).map(|s| self.verdict(s)).collect()
    }

    fn verdict(&self, s: usize) -> String {
        let (a, b) = (&self.studies[0].name, &self.studies[s].name);
        let ratios: Vec<&Ratio> = self
            .rows
            .iter()
            .filter_map(|r| r.cells[s].as_ref()?.vs_first.as_ref())
            .collect();
        let count = |c: Change| ratios.iter().filter(|r| r.change == c).count();
        let only = self
            .rows
            .iter()
            .filter(|r| r.cells[0].is_some() != r.cells[s].is_some())
            .count();
        let mut out = if ratios.is_empty() {
            format!("{b} vs {a}: no configuration has runs in both")
        } else {
            let estimates: Vec<f64> = ratios.iter().map(|r| r.estimate).collect();
            let median = tcplab_stats::quantile(&estimates, 0.5).unwrap_or(f64::NAN);
            format!(
                "{b} vs {a}: {} of {} configurations faster, {} slower, {} without a significant difference; median ratio {}x",
                count(Change::Faster),
                ratios.len(),
                count(Change::Slower),
                count(Change::NotSignificant),
                crate::num::fixed(Some(median), 2)
            )
        };
        if only > 0 {
            out.push_str(&format!(" ({only} only in one of the two)"));
        }
        out.push('.');
        out
    }
}
