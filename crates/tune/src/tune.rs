//! `tcplab tune`: race candidate settings for a workload with the study machinery (a generated
//! scenario, stored like any study), verify the winner against the baseline on fresh
//! repetitions, and say exactly what to apply and where.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use serde::Serialize;
use tcplab_doctor::{Finding, FixKind, Scope};
use tcplab_lab::StateDir;
use tcplab_report::{ReportInput, Table};
use tcplab_stats::{Bootstrap, ConfidenceInterval, Objective};
use tcplab_study::executor::LabExecutor;
use tcplab_study::plan::{Plan, PlanOptions};
use tcplab_study::remote::RemoteExecutor;
use tcplab_study::runner::Executor;
use tcplab_study::runner::{SweepOptions, sweep};
use tcplab_study::scenario::ScenarioFile;
use tcplab_study::store::Store;
use tcplab_study::workload::Workload;

use crate::candidates::{Candidate, Where, WorkloadKind, candidates, objective, workload_spec};
use crate::error::{Result, TuneError};

/// What to tune and where.
#[derive(Debug, Clone)]
pub struct TuneOptions {
    /// The workload whose objective is optimised.
    pub workload: WorkloadKind,
    /// The scenario's `[lab]` section (topology, `[lab.link]` impairments, sysctls), as TOML.
    /// Unused with `remote`.
    pub lab_toml: String,
    /// Race against this `tcplab serve` instead of labs: socket options only.
    pub remote: Option<SocketAddr>,
    /// Wall-time budget for the race and the verification.
    pub budget: Duration,
    /// Findings whose fixes become candidates.
    pub findings: Vec<Finding>,
    /// The client host's current sysctls (baselines).
    pub sysctls: BTreeMap<String, String>,
    /// Where the study databases go.
    pub dir: PathBuf,
    /// Seed of the run orders.
    pub seed: u64,
    /// Lab state directory.
    pub state: StateDir,
}

/// One line to apply.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Apply {
    /// `namespace` (a per-namespace sysctl: set it in the host or container that runs the
    /// application), `host` (machine-wide sysctl) or `application` (a socket option).
    pub scope: String,
    /// The exact line.
    pub line: String,
    /// Whether tune measured it (host-global fixes cannot be raced inside a lab).
    pub tested: bool,
}

/// The winner checked against the baseline on fresh repetitions.
#[derive(Debug, Clone, Serialize)]
pub struct Verification {
    /// The objective's metric (its name carries the unit: `_bps`, `_us`, `_per_s`).
    pub metric: String,
    /// Repetitions of each.
    pub n: usize,
    /// Baseline mean of the objective.
    pub baseline_mean: f64,
    /// Winner mean.
    pub winner_mean: f64,
    /// Speed-up (above 1 is better) with its bootstrap CI.
    pub speed_up: ConfidenceInterval,
}

/// What tune found.
#[derive(Debug, Clone, Serialize)]
pub struct TuneOutcome {
    /// The race's table, sfperf-style.
    pub table: String,
    /// The winner's settings (factor → value), empty when the baseline won.
    pub winner: Vec<(String, String)>,
    /// The winner's label.
    pub winner_label: Option<String>,
    /// Fresh-repetition check of the winner, when there was one to check.
    pub verification: Option<Verification>,
    /// Lines to apply.
    pub apply: Vec<Apply>,
    /// The race's database.
    pub db: PathBuf,
    /// The verification's database.
    pub verify_db: Option<PathBuf>,
    /// The generated scenario.
    pub scenario: String,
    /// For the HTML report.
    #[serde(skip)]
    pub report_input: Option<ReportInput>,
}

/// Seconds one run of the workload takes (excluding the lab build) when the budget allows.
fn run_seconds(w: WorkloadKind) -> f64 {
    match w {
        WorkloadKind::Msgs => 0.4,
        WorkloadKind::Rr | WorkloadKind::Crr | WorkloadKind::Http => 2.0,
        WorkloadKind::Stream => 3.0,
        // The load phase; the probes' idle seconds and the drain come on top (tune's spec).
        WorkloadKind::Rrul => 3.0,
    }
}

/// The shortest run a figure still means something at: a stream past slow start on a WAN
/// path, a few hundred request/response transactions.
fn shortest_run(w: WorkloadKind) -> f64 {
    match w {
        WorkloadKind::Msgs => 0.4,
        WorkloadKind::Rr | WorkloadKind::Crr | WorkloadKind::Stream | WorkloadKind::Http => 1.0,
        WorkloadKind::Rrul => 1.0,
    }
}

/// Seconds of harness per run besides the workload, as the repetitions were always sized (the
/// lab's build overlaps the previous run's teardown).
const RUN_OVERHEAD_S: f64 = 0.3;
/// The race needs at least this many repetitions of each configuration.
const MIN_REPS: u32 = 3;

/// The length of each run and the repetitions per configuration that fit `race_s` seconds
/// for `configs` configurations: the workload's usual length while three repetitions fit,
/// more repetitions (up to 10) when there is room, and shorter runs (down to
/// [`shortest_run`]) when there is not, so that `--budget` is kept where it can be.
fn race_plan(w: WorkloadKind, race_s: f64, configs: usize) -> (f64, u32) {
    let configs = configs.max(1) as f64;
    let usual = run_seconds(w);
    let reps = (race_s / (configs * (usual + RUN_OVERHEAD_S))).floor() as u32;
    if reps >= MIN_REPS {
        return (usual, reps.min(10));
    }
    let fits = race_s / (configs * f64::from(MIN_REPS)) - RUN_OVERHEAD_S;
    let len = (fits * 10.0).floor() / 10.0;
    (len.clamp(shortest_run(w), usual), MIN_REPS)
}

/// Builds the scenario text: top-level keys, the lab, the workload, the factors, the race.
fn scenario_text(
    name: &str,
    opts: &TuneOptions,
    factors: &[Candidate],
    (repetitions, run_s): (u32, f64),
    combine: &str,
) -> String {
    let (metric, goal) = objective(opts.workload);
    let mut baseline = toml::Table::new();
    for f in factors {
        let v = match &f.labels {
            Some(l) => toml::Value::String(l[0].clone()),
            None => f.values[0].clone(),
        };
        baseline.insert(f.name.clone(), v);
    }
    let mut text = format!(
        "name = \"{name}\"\ndescription = \"generated by tcplab tune\"\nrepetitions = {repetitions}\nseed = {}\ncombine = \"{combine}\"\nobjective = {{ metric = \"{metric}\", goal = \"{goal}\" }}\nbaseline = {}\n\n",
        opts.seed,
        toml::Value::Table(baseline)
    );
    match opts.remote {
        Some(addr) => text.push_str(&format!(
            "# Every run goes to `tcplab serve` at {addr} (tcplab tune --to): no lab is built.\n"
        )),
        None => text.push_str(&opts.lab_toml),
    }
    let workload = Workload {
        spec: workload_spec(opts.workload, run_s),
    };
    let table = workload.to_table().unwrap_or_default();
    text.push_str("\n[[workload]]\n");
    text.push_str(&toml::to_string(&table).unwrap_or_default());
    for f in factors {
        text.push_str("\n[[factor]]\n");
        text.push_str(&f.to_toml());
    }
    text.push_str("\n[race]\nmin_reps = 3\nalpha = 0.05\ntest = \"welch\"\n");
    text
}

fn run_study(
    text: &str,
    db: &Path,
    race: bool,
    opts: &TuneOptions,
    stop: &AtomicBool,
) -> Result<Store> {
    let file =
        ScenarioFile::parse("tune.toml", text).map_err(|e| TuneError::Scenario(e.to_string()))?;
    let plan =
        Plan::new(&file, PlanOptions::default()).map_err(|e| TuneError::Scenario(e.to_string()))?;
    if db.exists() {
        std::fs::remove_file(db).map_err(|e| TuneError::Invalid {
            field: "--dir".into(),
            problem: format!("cannot replace {}: {e}", db.display()),
        })?;
    }
    let store = Store::create(db, &plan).map_err(tcplab_study::error::StudyError::from)?;
    let mut exec: Box<dyn Executor> = match opts.remote {
        Some(addr) => Box::new(RemoteExecutor::new(addr)),
        None => Box::new(LabExecutor::new(
            opts.state.clone(),
            &format!("tn{}", std::process::id() % 100_000),
        )),
    };
    sweep(
        &plan,
        &store,
        exec.as_mut(),
        SweepOptions {
            race,
            progress: true,
            stop: Some(stop),
            max_runs: None,
        },
    )?;
    Ok(store)
}

/// Runs the race and the verification.
pub fn tune(opts: &TuneOptions, stop: &AtomicBool, progress: &dyn Fn(&str)) -> Result<TuneOutcome> {
    let place = if opts.remote.is_some() {
        Where::Remote
    } else {
        Where::Lab
    };
    let factors = candidates(opts.workload, &opts.findings, &opts.sysctls, place);
    if factors.is_empty() {
        let problem = match place {
            Where::Remote => {
                "no candidate settings can be tried against a remote host for this workload (its fixes are host sysctls: see `tcplab doctor --to`, or tune a lab that models the path)"
            }
            Where::Lab => "no candidate settings to try",
        };
        return Err(TuneError::Invalid {
            field: "--workload".into(),
            problem: problem.into(),
        });
    }
    let configs: usize = factors.iter().map(|f| f.values.len()).product::<usize>() + 1;
    let race_share = opts.budget.as_secs_f64() * 0.65;
    let (run_s, repetitions) = race_plan(opts.workload, race_share, configs);
    let text = scenario_text("tune", opts, &factors, (repetitions, run_s), "cross");
    let shortened = if run_s < run_seconds(opts.workload) {
        format!(
            " of {run_s:.1} s runs (shortened from {:.1} s to fit --budget)",
            run_seconds(opts.workload)
        )
    } else {
        String::new()
    };
    progress(&format!(
        "racing {configs} configurations x {repetitions} repetitions{shortened} ({} factors: {})",
        factors.len(),
        factors
            .iter()
            .map(|f| f.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    ));
    let db = opts.dir.join("tune.db");
    let store = run_study(&text, &db, true, opts, stop)?;
    let input = tcplab_study::to_report::report_input(&store)?;
    let table = Table::from_input(&input).map_err(|e| TuneError::Scenario(e.to_string()))?;
    let best = table.best().cloned();
    let mut outcome = TuneOutcome {
        table: table.to_text(),
        winner: Vec::new(),
        winner_label: best.as_ref().map(|b| b.label.clone()),
        verification: None,
        apply: Vec::new(),
        db,
        verify_db: None,
        scenario: text,
        report_input: Some(input),
    };
    let Some(best) = best.filter(|b| !b.baseline) else {
        outcome.apply = host_fixes(&opts.findings);
        return Ok(outcome);
    };
    // The factors where the winner differs from the baseline, each reduced to those two values.
    let mut changed = Vec::new();
    for f in &factors {
        let Some(won) = best.factors.get(&f.name) else {
            continue;
        };
        let Some(i) = (0..f.values.len()).find(|i| &f.text_of(*i) == won) else {
            continue;
        };
        if i == 0 {
            continue;
        }
        outcome.winner.push((f.name.clone(), won.clone()));
        changed.push(Candidate {
            values: vec![f.values[0].clone(), f.values[i].clone()],
            labels: f.labels.as_ref().map(|l| vec![l[0].clone(), l[i].clone()]),
            ..f.clone()
        });
    }
    if !changed.is_empty() {
        progress("verifying the winner against the baseline on fresh repetitions");
        let reps = repetitions.max(5);
        let text = scenario_text("tune-verify", opts, &changed, (reps, run_s), "zip");
        let vdb = opts.dir.join("tune-verify.db");
        let vstore = run_study(&text, &vdb, false, opts, stop)?;
        outcome.verification = verify(&vstore, opts.workload)?;
        outcome.verify_db = Some(vdb);
    }
    outcome.apply = apply_lines(&changed);
    outcome.apply.extend(host_fixes(&opts.findings));
    Ok(outcome)
}

/// Speed-up of the second configuration (the winner) over the first (the baseline).
fn verify(store: &Store, workload: WorkloadKind) -> Result<Option<Verification>> {
    let (metric, goal) = objective(workload);
    let goal = if goal == "maximise" {
        Objective::Maximise
    } else {
        Objective::Minimise
    };
    let configs = store
        .configurations()
        .map_err(tcplab_study::error::StudyError::from)?;
    let runs = store
        .runs()
        .map_err(tcplab_study::error::StudyError::from)?;
    let samples = |id: usize| -> Vec<f64> {
        runs.iter()
            .filter(|r| r.status == "ok" && r.config_id == id)
            .filter_map(|r| r.metrics.get(metric).copied())
            .collect()
    };
    let Some(base) = configs.iter().find(|c| c.is_baseline) else {
        return Ok(None);
    };
    let Some(win) = configs.iter().find(|c| !c.is_baseline) else {
        return Ok(None);
    };
    let (b, w) = (samples(base.id), samples(win.id));
    if b.len() < 2 || w.len() < 2 {
        return Ok(None);
    }
    let s = tcplab_stats::speed_up(&b, &w, goal, &Bootstrap::default())
        .map_err(|e| TuneError::Scenario(e.to_string()))?;
    Ok(Some(Verification {
        metric: metric.to_string(),
        n: b.len().min(w.len()),
        baseline_mean: s.baseline_mean,
        winner_mean: s.candidate_mean,
        speed_up: s.ratio,
    }))
}

/// sysctl.d and setsockopt lines for the winner's changed settings.
fn apply_lines(changed: &[Candidate]) -> Vec<Apply> {
    let mut out = Vec::new();
    for c in changed {
        let targets: Vec<String> = c.targets.clone().unwrap_or_else(|| vec![c.name.clone()]);
        let values: Vec<toml::Value> = match &c.values[1] {
            toml::Value::Array(items) if targets.len() > 1 => items.clone(),
            v => vec![v.clone()],
        };
        for (target, value) in targets.iter().zip(values) {
            let text = match &value {
                toml::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            if let Some(key) = target.strip_prefix("sysctl.all.") {
                out.push(Apply {
                    scope: "namespace".into(),
                    line: format!("{} = {text}", key.trim_matches('"')),
                    tested: true,
                });
            } else if let Some(opt) = target.strip_prefix("socket.") {
                out.push(Apply {
                    scope: "application".into(),
                    line: setsockopt_line(opt, &text),
                    tested: true,
                });
            }
        }
    }
    out
}

fn setsockopt_line(opt: &str, value: &str) -> String {
    match opt {
        "nodelay" => format!("setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){{{}}}, sizeof(int));", u8::from(value == "true")),
        "quickack" => "setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &(int){1}, sizeof(int)); /* after every read */".into(),
        "congestion" => format!("setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, \"{value}\", {});", value.len()),
        "delack_max_us" => format!("setsockopt(fd, IPPROTO_TCP, TCP_DELACK_MAX_US, &(int){{{value}}}, sizeof(int));"),
        other => format!("socket option {other} = {value}"),
    }
}

/// Host-global fixes from the findings: they need the machine, so tune cannot race them in a lab.
fn host_fixes(findings: &[Finding]) -> Vec<Apply> {
    let mut out: Vec<Apply> = Vec::new();
    for f in findings {
        for fix in &f.fixes {
            if let FixKind::Sysctl {
                scope: Scope::HostGlobal,
                ..
            } = fix.kind
            {
                for line in &fix.lines {
                    if !out.iter().any(|a| &a.line == line) {
                        out.push(Apply {
                            scope: "host".into(),
                            line: line.clone(),
                            tested: false,
                        });
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_roomy_budget_keeps_the_usual_run_and_adds_repetitions() {
        // The demo's default: 3 minutes, 65 % to the race, 9 configurations of a 3 s stream.
        assert_eq!(race_plan(WorkloadKind::Stream, 117.0, 9), (3.0, 3));
        assert_eq!(race_plan(WorkloadKind::Stream, 195.0, 9), (3.0, 6));
        assert_eq!(
            race_plan(WorkloadKind::Rr, 1_000.0, 2),
            (2.0, 10),
            "at most 10"
        );
    }

    #[test]
    fn a_tight_budget_shortens_the_runs_before_it_drops_below_three_repetitions() {
        // 60 s budget: 39 s of race for 9 configurations fit 3 runs of 1.1 s each.
        assert_eq!(race_plan(WorkloadKind::Stream, 39.0, 9), (1.1, 3));
        // Tighter still: never under the shortest meaningful run, nor under 3 repetitions.
        assert_eq!(race_plan(WorkloadKind::Stream, 10.0, 9), (1.0, 3));
        assert_eq!(race_plan(WorkloadKind::Msgs, 1.0, 9), (0.4, 3));
        // Each plan that shortened still fits its budget whenever the shortest run allows.
        for race in [20.0, 30.0, 45.0, 60.0, 80.0] {
            let (len, reps) = race_plan(WorkloadKind::Stream, race, 9);
            if len > shortest_run(WorkloadKind::Stream) {
                let used = 9.0 * f64::from(reps) * (len + RUN_OVERHEAD_S);
                assert!(used <= race + 1e-9, "{race}: {len} s x {reps} uses {used}");
            }
        }
    }
}
