//! From a study's store to the report's input: per-configuration objective samples, the
//! baseline, racing and failures, the facts of the first run, sweep plots for numeric factors,
//! and the raw series the plots need (per-message delays of msgs runs, intervals of stream runs)
//! read back from the stored samples.

use std::collections::{BTreeMap, BTreeSet};

use tcplab_report::model::{
    ConfigurationResult, IntervalSample, IntervalSeries, MessageDelays, ObjectiveSpec, ReportInput,
    SweepPlotSpec,
};
use tcplab_stats::Objective;

use crate::error::StudyError;
use crate::store::{Store, StoredRun};

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
    Ok(input)
}

fn starts_numeric(v: &str) -> bool {
    v.trim_start_matches('-')
        .starts_with(|c: char| c.is_ascii_digit())
}

/// Adds the raw series of the baseline and the best configuration (by mean objective).
fn add_series(
    store: &Store,
    configs: &[crate::store::StoredConfig],
    runs: &[StoredRun],
    metric: &str,
    goal: Objective,
    input: &mut ReportInput,
) -> Result<(), StudyError> {
    let mean_of = |id: usize| {
        let v: Vec<f64> = runs
            .iter()
            .filter(|r| r.status == "ok" && r.config_id == id)
            .filter_map(|r| r.metrics.get(metric).copied())
            .collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    };
    let best = configs
        .iter()
        .filter_map(|c| mean_of(c.id).map(|m| (c, m)))
        .min_by(|a, b| {
            let (x, y) = if goal == Objective::Minimise {
                (a.1, b.1)
            } else {
                (b.1, a.1)
            };
            x.total_cmp(&y)
        })
        .map(|(c, _)| c);
    let mut chosen: Vec<&crate::store::StoredConfig> =
        configs.iter().filter(|c| c.is_baseline).collect();
    if let Some(b) = best {
        if !b.is_baseline {
            chosen.push(b);
        }
    }
    for c in chosen {
        let Some(run) = runs
            .iter()
            .find(|r| r.status == "ok" && r.config_id == c.id && r.samples_len > 0)
        else {
            continue;
        };
        let raw = store.samples(run.id)?;
        let Ok((_, sections)) = tcplab_load::samples::parse(&String::from_utf8_lossy(&raw)) else {
            continue;
        };
        let label = format!("{} (rep {})", c.label, run.rep);
        if let Some(delays) = message_delays(&sections) {
            input.message_delays.push(MessageDelays {
                label: label.clone(),
                points: delays,
                ..MessageDelays::default()
            });
        }
        if let Some(intervals) = stream_intervals(&sections) {
            input.intervals.push(IntervalSeries { label, intervals });
        }
    }
    Ok(())
}

/// (seq, one-way delay µs) of the first `message` section.
fn message_delays(sections: &[tcplab_load::samples::Section]) -> Option<Vec<(u64, f64)>> {
    let s = sections.iter().find(|s| s.kind == "message")?;
    let col = |name: &str| s.columns.iter().position(|c| c == name);
    let (seq, send, recv) = (col("seq")?, col("send_ns")?, col("recv_ns")?);
    let points: Vec<(u64, f64)> = s
        .rows
        .iter()
        .filter_map(|r| {
            let (q, a, b) = (
                r.get(seq)?.as_ref()?,
                r.get(send)?.as_ref()?,
                r.get(recv)?.as_ref()?,
            );
            Some((*q as u64, (b - a) / 1e3))
        })
        .collect();
    (!points.is_empty()).then_some(points)
}

/// Per-interval totals over the client side's flows of a stream run.
fn stream_intervals(sections: &[tcplab_load::samples::Section]) -> Option<Vec<IntervalSample>> {
    let s = sections
        .iter()
        .find(|s| s.kind == "interval" && s.attrs.get("side").is_some_and(|v| v == "client"))?;
    let col = |name: &str| s.columns.iter().position(|c| c == name);
    let (index, start, end, bytes) = (col("index")?, col("start_s")?, col("end_s")?, col("bytes")?);
    let (cwnd, rtt) = (col("cwnd")?, col("rtt_us")?);
    let mut by_index: BTreeMap<u64, IntervalSample> = BTreeMap::new();
    for r in &s.rows {
        let get = |i: usize| r.get(i).copied().flatten();
        let (Some(i), Some(t0), Some(t1), Some(b)) = (get(index), get(start), get(end), get(bytes))
        else {
            continue;
        };
        let e = by_index.entry(i as u64).or_insert(IntervalSample {
            t_s: t1,
            throughput_bps: Some(0.0),
            ..IntervalSample::default()
        });
        if t1 > t0 {
            e.throughput_bps = Some(e.throughput_bps.unwrap_or(0.0) + b * 8.0 / (t1 - t0));
        }
        e.cwnd_segments = e.cwnd_segments.or(get(cwnd));
        e.rtt_us = e.rtt_us.or(get(rtt));
    }
    (!by_index.is_empty()).then(|| by_index.into_values().collect())
}
