//! From a study's store to the report's input: per-configuration objective samples, the
//! baseline, racing and failures, the facts of the first run, sweep plots for numeric factors,
//! and the raw series the per-run plots need, read back from the stored samples of a few
//! representative runs ([`choose`]): a stream's intervals, msgs' and rr's per-message delays
//! with a stall threshold ([`series`]), rrul's latency under load ([`rrul`]). The series
//! functions are public and pure, so the doctor's battery (`tcplab_tune`) feeds the same plots.

use std::collections::{BTreeMap, BTreeSet};

use tcplab_report::model::{ConfigurationResult, ObjectiveSpec, ReportInput, SweepPlotSpec};
use tcplab_stats::Objective;

use crate::error::StudyError;
use crate::store::{Store, StoredConfig, StoredRun};

pub mod choose;
pub mod long_runs;
pub mod rrul;
pub mod series;

/// The unit of a metric, from its name (the workloads' naming convention).
pub fn unit_of(metric: &str) -> &'static str {
    match metric {
        m if m.ends_with("_bps") => "bit/s",
        m if m.ends_with("_per_s") => "1/s",
        m if m.contains("_us") => "µs",
        m if m.ends_with("_s") => "s",
        _ => "",
    }
}

/// Builds the report input for everything the store holds.
pub fn report_input(store: &Store) -> Result<ReportInput, StudyError> {
    let info = store.study()?;
    let configs = store.configurations()?;
    let runs = store.runs()?;
    let goal = if info.objective_goal.starts_with("max") {
        Objective::Maximise
    } else {
        Objective::Minimise
    };
    let metric = info.objective_metric.clone();
    let ok = |r: &&StoredRun| r.status == "ok";
    let mut results = Vec::new();
    let mut factor_values: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for c in &configs {
        let samples: Vec<f64> = runs
            .iter()
            .filter(ok)
            .filter(|r| r.config_id == c.id)
            .filter_map(|r| r.metrics.get(&metric).copied())
            .collect();
        for (k, v) in &c.factors {
            factor_values
                .entry(k.clone())
                .or_default()
                .insert(v.clone());
        }
        results.push(ConfigurationResult {
            label: c.label.clone(),
            factors: c.factors.iter().cloned().collect(),
            samples,
            description: None,
            dropped: (c.status == "dropped").then(|| c.reason.clone().unwrap_or_default()),
            failed: (c.status == "failed").then(|| c.reason.clone().unwrap_or_default()),
        });
    }
    let mut input = ReportInput::new(
        format!("{}: {}", info.name, metric),
        ObjectiveSpec {
            name: metric.clone(),
            unit: unit_of(&metric).to_string(),
            goal,
        },
        results,
    );
    input.scenario_text = info.scenario.clone();
    input.baseline = configs
        .iter()
        .find(|c| c.is_baseline)
        .map(|c| c.label.clone());
    input.facts = runs
        .iter()
        .find(ok)
        .map(|r| r.facts.clone())
        .unwrap_or_default();
    input.factor_order = configs
        .first()
        .map(|c| c.factors.iter().map(|(k, _)| k.clone()).collect())
        .unwrap_or_default();
    input.sweep_plots = factor_values
        .iter()
        .filter(|(_, values)| values.len() >= 3 && values.iter().all(|v| starts_numeric(v)))
        .map(|(factor, _)| SweepPlotSpec {
            factor: factor.clone(),
            log_x: None,
        })
        .collect();
    let untrustworthy = runs.iter().filter(ok).filter(|r| !r.trustworthy).count();
    if untrustworthy > 0 {
        input.notes.push(format!(
            "{untrustworthy} run(s) crossed an emulator that did not keep its schedule; their figures are marked untrustworthy in the store"
        ));
    }
    if info.quick {
        input.notes.push(
            "quick mode: reduced sizes and repetitions (a smoke test, not a measurement)".into(),
        );
    }
    for (i, o) in store.sessions()?.iter().enumerate() {
        input
            .notes
            .push(format!("sweep call {}: {}", i + 1, o.line()));
    }
    add_series(store, &configs, &runs, &metric, goal, &mut input)?;
    // Last, so every label above (configurations, baseline, the series that begin with a
    // configuration's label) is renamed together; the key is the report's business.
    input.shorten_labels();
    Ok(input)
}

fn starts_numeric(v: &str) -> bool {
    v.trim_start_matches('-')
        .starts_with(|c: char| c.is_ascii_digit())
}

/// Adds the per-run series: of the runs [`choose::representatives`] picks, every series their
/// stored samples give, labelled `"{configuration} · rep {n}"` (`n` as stored, from 0; with
/// `· {kind}` after it when a run has several workloads, `· workload {i}` when two share a
/// kind), and the sentence that says how they were
/// picked.
fn add_series(
    store: &Store,
    configs: &[StoredConfig],
    runs: &[StoredRun],
    metric: &str,
    goal: Objective,
    input: &mut ReportInput,
) -> Result<(), StudyError> {
    let ok = |r: &&StoredRun| r.status == "ok";
    let reps: Vec<choose::ConfigReps> = configs
        .iter()
        .map(|c| choose::ConfigReps {
            id: c.id,
            is_baseline: c.is_baseline,
            reps: runs
                .iter()
                .filter(ok)
                .filter(|r| r.config_id == c.id)
                .filter_map(|r| r.metrics.get(metric).map(|v| (r.rep, *v)))
                .collect(),
        })
        .collect();
    let chosen = choose::representatives(&reps, goal, choose::MAX_SHOWN);
    let mut shown = Vec::new();
    for ch in &chosen {
        let (Some(c), Some(run)) = (
            configs.iter().find(|c| c.id == ch.config_id),
            runs.iter()
                .filter(ok)
                .find(|r| r.config_id == ch.config_id && r.rep == ch.rep),
        ) else {
            continue;
        };
        if run.samples_len == 0 {
            continue;
        }
        let raw = store.samples_stored(run.id)?;
        let series =
            run_series(&format!("{} · rep {}", c.label, run.rep), &raw).map_err(|message| {
                crate::error::StoreError::Samples {
                    path: store.path().to_path_buf(),
                    run: run.id,
                    message,
                }
            })?;
        if !series.is_empty() {
            series.append_to(input);
            shown.push(*ch);
        }
    }
    input.runs_shown = choose::runs_shown(&shown, metric);
    Ok(())
}

/// Every series of one stored run's samples (a study run's workloads, one after the other),
/// from the blob as stored: packed (long tables streamed, [`long_runs`]) or text.
fn run_series(label: &str, raw: &[u8]) -> Result<series::RunSeries, String> {
    // The executor runs rr with its default stall limit; the samples do not carry it.
    let rr_stall_ms = Some(tcplab_results::rr::RrConfig::default().stall_ms);
    let split = match crate::codec::is_packed(raw) {
        true => long_runs::split(raw, rr_stall_ms.map(|ms| ms * 1e3))?,
        false => long_runs::Split {
            text: String::from_utf8_lossy(raw).into_owned(),
            ..Default::default()
        },
    };
    Ok(series_of(label, split, rr_stall_ms))
}

/// The series of a split run: each workload's from its text, but a long table's delays from
/// the split.
fn series_of(label: &str, split: long_runs::Split, rr_stall_ms: Option<f64>) -> series::RunSeries {
    let long_runs::Split { text, mut delays } = split;
    let parts = series::parse_workloads_at(&text);
    let mut out = series::RunSeries::default();
    let kinds: Vec<&str> = parts.iter().map(|p| p.1.as_str()).collect();
    for (i, (at, workload, sections)) in parts.iter().enumerate() {
        let label = match kinds.iter().filter(|k| *k == workload).count() {
            _ if parts.len() == 1 => label.to_string(),
            1 => format!("{label} · {workload}"),
            _ => format!("{label} · workload {i}"),
        };
        let mut series = series::run_series(&label, workload, sections, rr_stall_ms);
        if let Some(long) = delays.remove(at) {
            series.message_delays = vec![tcplab_report::model::MessageDelays { label, ..long }];
        }
        out.extend(series);
    }
    out
}
