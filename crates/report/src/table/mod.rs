//! The results table: one row per configuration, in ranking order, with every figure taken
//! from `tcplab_stats` ([`describe()`] for summary/CI/speed-up, [`rank()`] for rank and group).
//!
//! [`Table::from_input`] computes; [`Table::to_text`], [`Table::to_markdown`] (in `text`) and
//! [`Table::to_json`], [`Table::to_csv`] (in the `export` module) only format.

mod text;

pub(crate) use text::{Column, GAP, align_pm, cut, fit, md_escape, pad, physical_rows};

use crate::error::ReportError;
use crate::label::Key;
use crate::model::{ConfigurationResult, ObjectiveSpec, ReportInput};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use tcplab_stats::units::{Display, Unit};
use tcplab_stats::{
    CiMethod, Description, Objective, RankConfig, Ranking, Samples, describe, rank,
};

/// One configuration's figures, flattened for tables and CSV. `None` means "not defined"
/// (an sd or CI with one sample, a speed-up without a baseline, anything of a failed run).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TableRow {
    /// 1-based rank in the consistently-fast ranking.
    pub rank: Option<usize>,
    /// 1-based significance group; group 1 is the consistently fast group.
    pub group: Option<usize>,
    /// The configuration's label.
    pub label: String,
    /// Factor name → value.
    pub factors: BTreeMap<String, String>,
    /// True for the baseline configuration.
    pub baseline: bool,
    /// Number of samples.
    pub n: usize,
    /// Mean of the samples.
    pub mean: Option<f64>,
    /// Sample standard deviation.
    pub sd: Option<f64>,
    /// Best run under the objective.
    pub best: Option<f64>,
    /// Worst run under the objective.
    pub worst: Option<f64>,
    /// Median.
    pub median: Option<f64>,
    /// 90th percentile.
    pub p90: Option<f64>,
    /// Lower bound of the CI of the mean.
    pub ci_lower: Option<f64>,
    /// How that CI was computed: on the log scale when every run's figure is above zero.
    #[serde(default)]
    pub ci_method: Option<CiMethod>,
    /// Upper bound of the CI of the mean.
    pub ci_upper: Option<f64>,
    /// Speed-up over the baseline (> 1: better).
    pub speed_up: Option<f64>,
    /// Lower bound of the speed-up's bootstrap CI.
    pub speed_up_lower: Option<f64>,
    /// Upper bound of the speed-up's bootstrap CI.
    pub speed_up_upper: Option<f64>,
    /// "ok", "dropped" (racing stopped it) or "failed" (it could not run).
    pub status: String,
    /// Why it was dropped or failed.
    pub reason: Option<String>,
}

/// The whole table and what is needed to read it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Table {
    /// Report title.
    pub title: String,
    /// The objective.
    pub objective: ObjectiveSpec,
    /// Confidence level of every interval, e.g. 0.95.
    pub level: f64,
    /// Union of factor names, sorted; one column each.
    pub factor_names: Vec<String>,
    /// Label of the baseline, if any.
    pub baseline: Option<String>,
    /// The ranking's method sentence, when there was anything to rank.
    pub method: Option<String>,
    /// Rows: ranked ones by rank, then unranked, then failed.
    pub rows: Vec<TableRow>,
    /// From the short labels back to the full settings (trivial when the labels are not the
    /// short ones of [`crate::label::short_labels`]).
    #[serde(default)]
    pub key: Key,
}

impl Table {
    /// Computes every row of `input` (see the module documentation).
    pub fn from_input(input: &ReportInput) -> Result<Table, ReportError> {
        check_unique_labels(&input.configurations)?;
        let baseline = baseline_samples(input)?;
        let goal = input.objective.goal;
        let mut described = Vec::new();
        let mut failed = Vec::new();
        for c in &input.configurations {
            if c.samples.is_empty() {
                failed.push(failed_row(c));
                continue;
            }
            let d = match &c.description {
                Some(d) => d.clone(),
                None => describe(&c.samples, baseline, goal, &input.bootstrap).map_err(|e| {
                    ReportError::Stats {
                        label: c.label.clone(),
                        source: e,
                    }
                })?,
            };
            described.push((c, d));
        }
        let ranking = ranking_of(input, &described)?;
        let mut rows: Vec<TableRow> = described
            .iter()
            .map(|(c, d)| described_row(c, d, goal, input.baseline.as_deref(), ranking.as_ref()))
            .collect();
        rows.sort_by_key(|r| (r.rank.is_none(), r.rank));
        rows.extend(failed);
        Ok(Table {
            key: key_of(input),
            title: input.title.clone(),
            objective: input.objective.clone(),
            level: input.bootstrap.level,
            factor_names: factor_names(&input.configurations, &input.factor_order),
            baseline: input.baseline.clone(),
            method: ranking.map(|r| r.method),
            rows,
        })
    }

    /// The first row of group 1 that ran, the "consistently fast" choice.
    pub fn best(&self) -> Option<&TableRow> {
        self.rows.iter().find(|r| r.rank == Some(1))
    }

    /// How the objective's figures are shown: the unit its largest mean reads best in.
    pub fn display(&self) -> Display {
        Unit::parse(&self.objective.unit).display_for(self.rows.iter().filter_map(|r| r.mean))
    }

    /// The objective's name for people ("throughput" for `throughput_bps`).
    pub fn title_name(&self) -> String {
        tcplab_stats::units::metric_title(&self.objective.name)
    }

    /// Decimals for the objective's figures: three significant digits of the smallest mean
    /// in the display unit.
    pub(crate) fn decimals(&self) -> usize {
        let d = self.display();
        crate::num::auto_decimals(self.rows.iter().filter_map(|r| r.mean).map(|m| d.scale(m)))
    }
}

/// The key of the input's labels when they are the short labels of its factors.
fn key_of(input: &ReportInput) -> Key {
    let factors: Vec<&BTreeMap<String, String>> =
        input.configurations.iter().map(|c| &c.factors).collect();
    let (labels, key) = crate::label::short_labels(&factors, &input.factor_order);
    let same = input
        .configurations
        .iter()
        .zip(&labels)
        .all(|(c, l)| &c.label == l);
    if same { key } else { Key::default() }
}

fn check_unique_labels(configs: &[ConfigurationResult]) -> Result<(), ReportError> {
    let mut seen = BTreeSet::new();
    for c in configs {
        if !seen.insert(c.label.as_str()) {
            return Err(ReportError::DuplicateLabel {
                label: c.label.clone(),
            });
        }
    }
    Ok(())
}

/// The baseline's samples; `None` without a baseline or when the baseline produced none.
fn baseline_samples(input: &ReportInput) -> Result<Option<&[f64]>, ReportError> {
    let Some(label) = &input.baseline else {
        return Ok(None);
    };
    match input.configurations.iter().find(|c| &c.label == label) {
        Some(c) if c.samples.is_empty() => Ok(None),
        Some(c) => Ok(Some(&c.samples)),
        None => Err(ReportError::UnknownBaseline {
            label: label.clone(),
            known: input
                .configurations
                .iter()
                .map(|c| c.label.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        }),
    }
}

/// The store's ranking, or one computed with the stats crate's defaults at the input's level.
fn ranking_of(
    input: &ReportInput,
    described: &[(&ConfigurationResult, Description)],
) -> Result<Option<Ranking>, ReportError> {
    if let Some(r) = &input.ranking {
        return Ok(Some(r.clone()));
    }
    if described.is_empty() {
        return Ok(None);
    }
    let samples: Vec<Samples<'_>> = described
        .iter()
        .map(|(c, _)| Samples {
            name: &c.label,
            values: &c.samples,
        })
        .collect();
    let mut config = RankConfig::new(input.objective.goal);
    config.level = input.bootstrap.level;
    rank(&samples, &config)
        .map(Some)
        .map_err(|e| ReportError::Stats {
            label: "(ranking)".to_string(),
            source: e,
        })
}

fn described_row(
    c: &ConfigurationResult,
    d: &Description,
    goal: Objective,
    baseline: Option<&str>,
    ranking: Option<&Ranking>,
) -> TableRow {
    let entry = ranking.and_then(|r| r.entries.iter().find(|e| e.name == c.label));
    let s = &d.summary;
    let is_baseline = baseline == Some(c.label.as_str());
    let speed_up = if is_baseline { None } else { d.speed_up };
    TableRow {
        rank: entry.map(|e| e.rank),
        group: entry.map(|e| e.group),
        label: c.label.clone(),
        factors: c.factors.clone(),
        baseline: is_baseline,
        n: s.n,
        mean: Some(s.mean),
        sd: s.sd,
        best: Some(s.best(goal)),
        worst: Some(s.worst(goal)),
        median: Some(s.median),
        p90: Some(s.p90),
        ci_lower: d.mean_ci.map(|ci| ci.lower),
        ci_method: d.mean_ci.map(|ci| ci.method),
        ci_upper: d.mean_ci.map(|ci| ci.upper),
        speed_up: speed_up.map(|u| u.ratio.estimate),
        speed_up_lower: speed_up.map(|u| u.ratio.lower),
        speed_up_upper: speed_up.map(|u| u.ratio.upper),
        status: if c.dropped.is_some() { "dropped" } else { "ok" }.to_string(),
        reason: c.dropped.clone(),
    }
}

fn failed_row(c: &ConfigurationResult) -> TableRow {
    TableRow {
        rank: None,
        group: None,
        label: c.label.clone(),
        factors: c.factors.clone(),
        baseline: false,
        n: 0,
        mean: None,
        sd: None,
        best: None,
        worst: None,
        median: None,
        p90: None,
        ci_lower: None,
        ci_method: None,
        ci_upper: None,
        speed_up: None,
        speed_up_lower: None,
        speed_up_upper: None,
        status: "failed".to_string(),
        reason: Some(
            c.failed
                .clone()
                .unwrap_or_else(|| "no samples were recorded".to_string()),
        ),
    }
}

/// Every factor that occurs: those in `order` first (in that order), then the rest sorted.
fn factor_names(configs: &[ConfigurationResult], order: &[String]) -> Vec<String> {
    let present: BTreeSet<&String> = configs.iter().flat_map(|c| c.factors.keys()).collect();
    let mut names: Vec<String> = order
        .iter()
        .filter(|f| present.contains(f))
        .cloned()
        .collect();
    let mut seen: BTreeSet<String> = names.iter().cloned().collect();
    for f in present {
        if seen.insert(f.clone()) {
            names.push(f.clone());
        }
    }
    names
}

/// How the CIs of the mean of a table were computed, in the words of its heading: on the log
/// scale where every figure is above zero (an interval that cannot reach below zero), Student's
/// t where one is not.
pub(crate) fn ci_method_words(methods: impl IntoIterator<Item = Option<CiMethod>>) -> &'static str {
    let used: BTreeSet<bool> = methods
        .into_iter()
        .flatten()
        .map(|m| m == CiMethod::StudentT)
        .collect();
    match (used.contains(&false), used.contains(&true)) {
        (true, true) => "log scale; Student t where a figure is not above zero",
        (false, true) => "Student t",
        _ => "log scale",
    }
}
