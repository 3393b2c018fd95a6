//! Exports of a study: every run and a per-configuration summary, as CSV or one JSON document.
//!
//! Summaries use [`tcplab_stats::describe()`] on the objective metric of the configuration's
//! `ok` runs: n, mean ± sd, best/worst, median, p90/p99, the CI of the mean (log scale for positive figures), and the
//! speed-up over the baseline with its bootstrap CI (seed 1, B = 2000, 95%).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;

use tcplab_stats::{Bootstrap, Description, Objective, describe};

use crate::error::StudyError;
use crate::store::{Store, StoredConfig, StoredRace, StoredRun, StudyInfo};

/// One configuration's figures.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ConfigSummary {
    /// The configuration.
    pub config: StoredConfig,
    /// Runs stored (ok and failed).
    pub runs: usize,
    /// Failed runs.
    pub failed: usize,
    /// Runs judged untrustworthy.
    pub untrustworthy: usize,
    /// Objective statistics, when at least one run succeeded.
    pub objective: Option<Description>,
    /// Mean of every metric over ok runs.
    pub means: BTreeMap<String, f64>,
}

/// Everything in a study file, for JSON export and reports.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct StudyDump {
    /// The study row.
    pub study: StudyInfo,
    /// Per-configuration summaries.
    pub summaries: Vec<ConfigSummary>,
    /// Every run.
    pub runs: Vec<StoredRun>,
    /// Every racing verdict.
    pub race: Vec<StoredRace>,
    /// Every `sweep` call's time: the workloads' own and the overhead beyond it, broken down.
    pub sessions: Vec<crate::runner::Overhead>,
}

fn goal(info: &StudyInfo) -> Objective {
    match info.objective_goal.as_str() {
        "maximise" => Objective::Maximise,
        _ => Objective::Minimise,
    }
}

/// Reads the whole study and computes the summaries.
pub fn dump(store: &Store) -> Result<StudyDump, StudyError> {
    let study = store.study()?;
    let runs = store.runs()?;
    let configs = store.configurations()?;
    let objective = goal(&study);
    let metric = study.objective_metric.clone();
    let values = |id: usize| -> Vec<f64> {
        runs.iter()
            .filter(|r| r.config_id == id && r.status == "ok")
            .filter_map(|r| r.metrics.get(&metric).copied())
            .collect()
    };
    let baseline: Option<Vec<f64>> = configs
        .iter()
        .find(|c| c.is_baseline)
        .map(|c| values(c.id))
        .filter(|v| v.len() >= 2);
    let bootstrap = Bootstrap::new(2_000, 1);
    let mut summaries = Vec::new();
    for c in configs {
        let mine: Vec<&StoredRun> = runs.iter().filter(|r| r.config_id == c.id).collect();
        let v = values(c.id);
        let base = baseline.as_deref().filter(|_| v.len() >= 2);
        let description = if v.is_empty() {
            None
        } else {
            Some(describe(&v, base, objective, &bootstrap)?)
        };
        let mut sums: BTreeMap<String, (f64, usize)> = BTreeMap::new();
        for r in mine.iter().filter(|r| r.status == "ok") {
            for (k, x) in &r.metrics {
                let e = sums.entry(k.clone()).or_insert((0.0, 0));
                e.0 += x;
                e.1 += 1;
            }
        }
        summaries.push(ConfigSummary {
            runs: mine.len(),
            failed: mine.iter().filter(|r| r.status != "ok").count(),
            untrustworthy: mine
                .iter()
                .filter(|r| r.status == "ok" && !r.trustworthy)
                .count(),
            objective: description,
            means: sums
                .into_iter()
                .map(|(k, (s, n))| (k, s / n as f64))
                .collect(),
            config: c,
        });
    }
    Ok(StudyDump {
        race: store.race()?,
        sessions: store.sessions()?,
        study,
        summaries,
        runs,
    })
}

/// Writes the whole study as one pretty JSON document.
pub fn write_json(store: &Store, out: &mut dyn Write) -> Result<(), StudyError> {
    let d = dump(store)?;
    serde_json::to_writer_pretty(&mut *out, &d).map_err(std::io::Error::other)?;
    writeln!(out)?;
    Ok(())
}

/// Quotes a CSV field when needed (RFC 4180).
pub fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn num(x: Option<f64>) -> String {
    x.map(|v| format!("{v}")).unwrap_or_default()
}

/// Every run, one line each; one column per metric name found in any run.
pub fn write_runs_csv(store: &Store, out: &mut dyn Write) -> Result<(), StudyError> {
    let runs = store.runs()?;
    let labels: BTreeMap<usize, String> = store
        .configurations()?
        .into_iter()
        .map(|c| (c.id, c.label))
        .collect();
    let metrics: BTreeSet<&String> = runs.iter().flat_map(|r| r.metrics.keys()).collect();
    let mut header = vec![
        "run_id",
        "order",
        "config_id",
        "config",
        "rep",
        "status",
        "error",
        "trustworthy",
        "fidelity_reasons",
        "wall_s",
        "executor_wall_s",
    ]
    .into_iter()
    .map(str::to_string)
    .collect::<Vec<_>>();
    header.extend(metrics.iter().map(|m| csv_field(m)));
    writeln!(out, "{}", header.join(","))?;
    for r in &runs {
        let mut row = vec![
            r.id.to_string(),
            r.order.to_string(),
            r.config_id.to_string(),
            csv_field(labels.get(&r.config_id).map_or("", String::as_str)),
            r.rep.to_string(),
            r.status.clone(),
            csv_field(r.error.as_deref().unwrap_or("")),
            r.trustworthy.to_string(),
            csv_field(&r.fidelity_reasons.join("; ")),
            format!("{}", r.wall_s),
            format!("{}", r.executor_wall_s),
        ];
        row.extend(metrics.iter().map(|m| num(r.metrics.get(*m).copied())));
        writeln!(out, "{}", row.join(","))?;
    }
    Ok(())
}

/// One line per configuration with the objective's figures.
pub fn write_summary_csv(store: &Store, out: &mut dyn Write) -> Result<(), StudyError> {
    let d = dump(store)?;
    writeln!(
        out,
        "config_id,config,baseline,status,reason,runs,failed,untrustworthy,n,mean,sd,best,worst,median,p90,p99,mean_ci_low,mean_ci_high,speed_up,speed_up_ci_low,speed_up_ci_high"
    )?;
    let objective = goal(&d.study);
    for s in &d.summaries {
        let o = s.objective.as_ref();
        let sm = o.map(|o| &o.summary);
        let ci = o.and_then(|o| o.mean_ci.as_ref());
        let su = o.and_then(|o| o.speed_up.as_ref());
        let row = [
            s.config.id.to_string(),
            csv_field(&s.config.label),
            s.config.is_baseline.to_string(),
            s.config.status.clone(),
            csv_field(s.config.reason.as_deref().unwrap_or("")),
            s.runs.to_string(),
            s.failed.to_string(),
            s.untrustworthy.to_string(),
            sm.map_or(String::new(), |m| m.n.to_string()),
            num(sm.map(|m| m.mean)),
            num(sm.and_then(|m| m.sd)),
            num(sm.map(|m| m.best(objective))),
            num(sm.map(|m| m.worst(objective))),
            num(sm.map(|m| m.median)),
            num(sm.map(|m| m.p90)),
            num(sm.map(|m| m.p99)),
            num(ci.map(|c| c.lower)),
            num(ci.map(|c| c.upper)),
            num(su.map(|s| s.ratio.estimate)),
            num(su.map(|s| s.ratio.lower)),
            num(su.map(|s| s.ratio.upper)),
        ];
        writeln!(out, "{}", row.join(","))?;
    }
    Ok(())
}
