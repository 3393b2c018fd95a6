//! `tcplab tune`: race candidate settings for a workload with the study machinery (a generated
//! scenario, stored like any study), verify the winner against the baseline on fresh
//! repetitions, and say exactly what to apply and where.
//!
//! The scenario is built as a value ([`ScenarioFile::from_scenario`], checked as a file is when
//! read) and run from it; its TOML is written only as the record of what ran, beside each
//! study's database: `tune.toml` beside `tune.db`, `tune-verify.toml` beside `tune-verify.db`
//! (a `tcplab sweep` of it runs the same study again).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use serde::Serialize;
use tcplab_doctor::{Finding, FixKind, Scope};
use tcplab_lab::StateDir;
use tcplab_report::{ReportInput, Table};
use tcplab_stats::{Bootstrap, ConfidenceInterval, Objective, TestKind};
use tcplab_study::executor::LabExecutor;
use tcplab_study::plan::{Plan, PlanOptions};
use tcplab_study::remote::RemoteExecutor;
use tcplab_study::runner::Executor;
use tcplab_study::runner::{SweepOptions, sweep};
use tcplab_study::scenario::{
    Combine, LabSection, ObjectiveSpec, QuickSection, RaceSection, Reset, Scenario, ScenarioFile,
};
use tcplab_study::store::Store;
use tcplab_study::workload::Workload;

use crate::candidates::{Candidate, Where, WorkloadKind, candidates, objective, workload_spec};
use crate::error::{Result, TuneError};

/// What to tune and where.
#[derive(Debug, Clone)]
pub struct TuneOptions {
    /// The workload whose objective is optimised.
    pub workload: WorkloadKind,
    /// The scenario's `[lab]` section (topology, `[lab.link]` impairments, sysctls). Unused
    /// with `remote`: no lab is built.
    pub lab: LabSection,
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

impl Verification {
    /// True when the fresh repetitions show the winner better than the baseline: its
    /// speed-up's confidence interval lies above 1. A race's winner in a group with the
    /// baseline, or one that does not hold on fresh runs, is not.
    pub fn confirmed(&self) -> bool {
        self.speed_up.lower > 1.0
    }
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
    /// The race's scenario as TOML (also written beside [`Self::db`] as `tune.toml`).
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

/// The share of `--budget` the race takes; the verification has the rest.
const RACE_SHARE: f64 = 0.65;
/// Seconds of harness per run besides the workload, as the repetitions were always sized (the
/// lab's build overlaps the previous run's teardown).
const RUN_OVERHEAD_S: f64 = 0.3;
/// The race needs at least this many repetitions of each configuration.
const MIN_REPS: u32 = 3;

/// Wall seconds one run of length `len` costs: the workload as tune runs it (rrul's idle
/// phases and drain come on top of its load, read off the spec itself) and the harness.
fn run_cost(w: WorkloadKind, len: f64) -> f64 {
    workload_spec(w, len).estimated_secs().max(len) + RUN_OVERHEAD_S
}

/// The length of each run and the repetitions per configuration that fit `race_s` seconds
/// for `configs` configurations: the workload's usual length while three repetitions fit,
/// more repetitions (up to 10) when there is room, and shorter runs (down to
/// [`shortest_run`]) when there is not, so that `--budget` is kept where it can be.
fn race_plan(w: WorkloadKind, race_s: f64, configs: usize) -> (f64, u32) {
    let configs = configs.max(1) as f64;
    let usual = run_seconds(w);
    let reps = (race_s / (configs * run_cost(w, usual))).floor() as u32;
    if reps >= MIN_REPS {
        return (usual, reps.min(10));
    }
    // What a run costs beyond its length does not shrink with it.
    let fixed = run_cost(w, usual) - usual;
    let fits = race_s / (configs * f64::from(MIN_REPS)) - fixed;
    let len = (fits * 10.0).floor() / 10.0;
    (len.clamp(shortest_run(w), usual), MIN_REPS)
}

/// Repetitions of each of the verification's two configurations that fit `verify_s` seconds
/// of runs of length `len`: at least [`MIN_REPS`] (fewer say nothing), at most 5.
fn verify_reps(w: WorkloadKind, len: f64, verify_s: f64) -> u32 {
    let fit = (verify_s / (2.0 * run_cost(w, len))).floor() as u32;
    fit.clamp(MIN_REPS, 5)
}

/// The goal a candidate's objective names (`maximise` or `minimise`).
fn goal_of(goal: &str) -> Objective {
    if goal == "maximise" {
        Objective::Maximise
    } else {
        Objective::Minimise
    }
}

/// The scenario racing `factors`: the lab (none with `remote`: the description says where the
/// runs go), the workload, the factors with their first values as the baseline, the race.
fn scenario(
    name: &str,
    opts: &TuneOptions,
    factors: &[Candidate],
    (repetitions, run_s): (u32, f64),
    combine: Combine,
) -> Scenario {
    let (metric, goal) = objective(opts.workload);
    let baseline = factors
        .iter()
        .filter_map(|f| {
            let v = match &f.labels {
                Some(l) => toml::Value::String(l.first()?.clone()),
                None => f.values.first()?.clone(),
            };
            Some((f.name.clone(), v))
        })
        .collect();
    let (description, lab) = match opts.remote {
        Some(addr) => (
            format!(
                "generated by tcplab tune; every run goes to `tcplab serve` at {addr} \
                 (tcplab tune --to): no lab is built"
            ),
            LabSection::default(),
        ),
        None => ("generated by tcplab tune".to_string(), opts.lab.clone()),
    };
    Scenario {
        name: name.to_string(),
        description,
        lab,
        workloads: vec![Workload {
            spec: workload_spec(opts.workload, run_s),
        }],
        repetitions,
        factors: factors.iter().map(Candidate::to_factor).collect(),
        combine,
        baseline,
        objective: ObjectiveSpec {
            metric: metric.to_string(),
            goal: goal_of(goal),
        },
        reset: Reset::Fresh,
        seed: opts.seed,
        race: RaceSection {
            min_reps: 3,
            alpha: 0.05,
            test: TestKind::Welch,
        },
        quick: QuickSection::default(),
    }
}

/// The scenario checked as a file is when read; `db` names it (`tune.db`: `tune.toml`).
fn scenario_file(scenario: Scenario, db: &Path) -> Result<ScenarioFile> {
    let record = db.with_extension("toml");
    ScenarioFile::from_scenario(&record.display().to_string(), scenario)
        .map_err(|e| TuneError::Scenario(e.to_string()))
}

/// Runs the study of `file` into `db`, first writing the scenario's TOML beside it (the file
/// [`scenario_file`] named) as the record of what ran.
fn run_study(
    file: &ScenarioFile,
    db: &Path,
    race: bool,
    opts: &TuneOptions,
    stop: &AtomicBool,
) -> Result<Store> {
    let plan =
        Plan::new(file, PlanOptions::default()).map_err(|e| TuneError::Scenario(e.to_string()))?;
    if db.exists() {
        std::fs::remove_file(db).map_err(|e| TuneError::Invalid {
            field: "--dir".into(),
            problem: format!("cannot replace {}: {e}", db.display()),
        })?;
    }
    let record = db.with_extension("toml");
    std::fs::write(&record, &file.text).map_err(|e| TuneError::Invalid {
        field: "--dir".into(),
        problem: format!(
            "cannot write the scenario {}: {e}; give a writable --dir",
            record.display()
        ),
    })?;
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
        Where::Lab {
            link: &opts.lab.link,
        }
    };
    let factors = candidates(opts.workload, &opts.findings, &opts.sysctls, place);
    if factors.is_empty() {
        let problem = match place {
            Where::Remote => {
                "no candidate settings can be tried against a remote host for this workload (its fixes are host sysctls: see `tcplab doctor --to`, or tune a lab that models the path)"
            }
            Where::Lab { .. } => "no candidate settings to try",
        };
        return Err(TuneError::Invalid {
            field: "--workload".into(),
            problem: problem.into(),
        });
    }
    let configs: usize = factors.iter().map(|f| f.values.len()).product::<usize>() + 1;
    let race_share = opts.budget.as_secs_f64() * RACE_SHARE;
    let (run_s, repetitions) = race_plan(opts.workload, race_share, configs);
    let db = opts.dir.join("tune.db");
    let file = scenario_file(
        scenario("tune", opts, &factors, (repetitions, run_s), Combine::Cross),
        &db,
    )?;
    let shortened = if run_s < run_seconds(opts.workload) {
        format!(
            " of {run_s:.1} s runs (shortened from {:.1} s to fit --budget)",
            run_seconds(opts.workload)
        )
    } else {
        String::new()
    };
    let needed = configs as f64 * f64::from(repetitions) * run_cost(opts.workload, run_s);
    if needed > race_share * 1.1 {
        progress(&format!(
            "the race needs about {needed:.0} s even at its shortest runs, over the {race_share:.0} \
             s --budget leaves it: it will run over; a --budget {:.1}x this one keeps it",
            needed / race_share
        ));
    }
    progress(&format!(
        "racing {configs} configurations x {repetitions} repetitions{shortened} ({} factors: {})",
        factors.len(),
        factors
            .iter()
            .map(|f| f.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    ));
    let store = run_study(&file, &db, true, opts, stop)?;
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
        scenario: file.text,
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
        let reps = verify_reps(
            opts.workload,
            run_s,
            opts.budget.as_secs_f64() * (1.0 - RACE_SHARE),
        );
        let vdb = opts.dir.join("tune-verify.db");
        let vfile = scenario_file(
            scenario("tune-verify", opts, &changed, (reps, run_s), Combine::Zip),
            &vdb,
        )?;
        let vstore = run_study(&vfile, &vdb, false, opts, stop)?;
        outcome.verification = verify(&vstore, opts.workload)?;
        outcome.verify_db = Some(vdb);
    }
    // Only a winner the fresh repetitions confirm is worth changing a host for.
    if outcome.verification.as_ref().is_some_and(|v| v.confirmed()) {
        outcome.apply = apply_lines(&changed);
    }
    outcome.apply.extend(host_fixes(&opts.findings));
    Ok(outcome)
}

/// Speed-up of the second configuration (the winner) over the first (the baseline).
fn verify(store: &Store, workload: WorkloadKind) -> Result<Option<Verification>> {
    let (metric, goal) = objective(workload);
    let goal = goal_of(goal);
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
            } else if target == "link.queue_discipline" {
                out.push(Apply {
                    scope: "bottleneck".into(),
                    line: qdisc_line(&text),
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

/// The Linux qdisc that does what the emulator's discipline `spec` did, on the bottleneck's
/// egress (the router or host before the slow link).
fn qdisc_line(spec: &str) -> String {
    let name = spec.split(':').next().unwrap_or(spec);
    match name {
        "droptail" | "fifo" => "tc qdisc replace dev <DEV> root pfifo limit <PACKETS>".into(),
        other => format!(
            "tc qdisc replace dev <DEV> root {other}   # on the bottleneck's egress; tcplab raced `{spec}`"
        ),
    }
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
    use tcplab_study::scenario::ImpairmentFlags;

    fn options(remote: Option<SocketAddr>) -> TuneOptions {
        TuneOptions {
            workload: WorkloadKind::Stream,
            lab: LabSection {
                topology: Some(tcplab_lab::Topology::Path),
                hosts: Some(2),
                sysctl: BTreeMap::from([(
                    "all".to_string(),
                    BTreeMap::from([(
                        "net.ipv4.tcp_rmem".to_string(),
                        toml::Value::String("4096 87380 174760".into()),
                    )]),
                )]),
                link: ImpairmentFlags {
                    delay: Some("15ms".into()),
                    rate: Some("1gbit".into()),
                    loss: Some("0.01%".into()),
                    ..ImpairmentFlags::default()
                },
                ..LabSection::default()
            },
            remote,
            budget: Duration::from_secs(60),
            findings: Vec::new(),
            sysctls: BTreeMap::new(),
            dir: PathBuf::from("unused"),
            seed: 7,
            state: StateDir::at("unused"),
        }
    }

    /// The scenario tune builds as a value is checked as a file is, and its TOML (the record
    /// written beside the database) parses back to the same value, whatever its name holds.
    #[test]
    fn the_generated_scenario_writes_as_toml_and_reads_back_equal() {
        let opts = options(None);
        let factors = candidates(
            opts.workload,
            &[],
            &opts.sysctls,
            Where::Lab {
                link: &opts.lab.link,
            },
        );
        assert!(factors.iter().any(|f| f.targets.is_some()), "{factors:?}");
        let name = "tune \"quoted\" \\ back\\slash";
        for combine in [Combine::Cross, Combine::Zip] {
            let value = scenario(name, &opts, &factors, (3, 1.5), combine);
            let file = scenario_file(value.clone(), Path::new("d/tune.db")).unwrap();
            assert_eq!(file.path, "d/tune.toml");
            assert_eq!(file.scenario, value);
            let back = ScenarioFile::parse("tune.toml", &file.text)
                .unwrap_or_else(|e| panic!("{e}\n{}", file.text));
            assert_eq!(back.scenario, value, "{}", file.text);
            assert_eq!(back.scenario.name, name);
            assert_eq!(back.hash(), file.hash());
        }
        let value = scenario(name, &opts, &factors, (3, 1.5), Combine::Cross);
        let plan = Plan::new(
            &scenario_file(value, Path::new("tune.db")).unwrap(),
            PlanOptions::default(),
        )
        .unwrap();
        let grid: usize = factors.iter().map(|f| f.values.len()).product();
        assert_eq!(
            plan.configurations.len(),
            grid,
            "the baseline is the grid's first point"
        );
        assert!(plan.baseline().is_some());
    }

    /// Against a remote host no lab is built: the scenario's lab is the default (no link), and
    /// its description says where the runs go.
    #[test]
    fn a_remote_scenario_has_no_lab() {
        let addr: SocketAddr = "127.0.0.1:5201".parse().unwrap();
        let opts = options(Some(addr));
        let factors = candidates(opts.workload, &[], &opts.sysctls, Where::Remote);
        let value = scenario("tune", &opts, &factors, (3, 1.0), Combine::Cross);
        assert_eq!(value.lab, LabSection::default());
        assert!(
            value.description.contains("127.0.0.1:5201"),
            "{}",
            value.description
        );
        let file = scenario_file(value, Path::new("tune.db")).unwrap();
        assert!(!file.text.contains("[lab"), "no lab written: {}", file.text);
        let back = ScenarioFile::parse("tune.toml", &file.text).unwrap();
        assert!(back.scenario.lab.link.is_empty(), "{}", file.text);
        assert_eq!(back.topology(), tcplab_lab::Topology::Pair);
    }

    /// A value the workload refuses is refused as a file's would be, naming the key.
    #[test]
    fn a_generated_scenario_is_checked_like_a_file() {
        let opts = options(None);
        let factors = candidates(
            opts.workload,
            &[],
            &opts.sysctls,
            Where::Lab {
                link: &opts.lab.link,
            },
        );
        let mut value = scenario("tune", &opts, &factors, (0, 1.0), Combine::Cross);
        value.lab.link.delay = Some("10 lightyears".into());
        let e = scenario_file(value, Path::new("tune.db"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("repetitions: must be at least 1"), "{e}");
        assert!(e.contains("lab.link.delay: --delay 10 lightyears"), "{e}");
    }

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
    fn rrul_s_idle_phases_and_drain_count_against_the_budget() {
        // tune's rrul: 1 s before, the load, 1 s after, the 2 s drain.
        assert_eq!(run_cost(WorkloadKind::Rrul, 3.0), 7.0 + RUN_OVERHEAD_S);
        // 3 minutes: 144 s for the race and the verification, 5 configurations.
        let (len, reps) = race_plan(WorkloadKind::Rrul, 144.0 * RACE_SHARE, 5);
        assert_eq!((len, reps), (1.9, 3));
        let race = 5.0 * f64::from(reps) * run_cost(WorkloadKind::Rrul, len);
        let v = verify_reps(WorkloadKind::Rrul, len, 144.0 * (1.0 - RACE_SHARE));
        let verify = 2.0 * f64::from(v) * run_cost(WorkloadKind::Rrul, len);
        assert!(race + verify <= 144.0 + 1e-9, "{race} + {verify}");
        // The verification never drops below three repetitions, nor goes above five.
        assert_eq!(verify_reps(WorkloadKind::Stream, 3.0, 1.0), MIN_REPS);
        assert_eq!(verify_reps(WorkloadKind::Stream, 3.0, 1_000.0), 5);
    }

    #[test]
    fn a_winner_is_confirmed_only_when_its_speed_up_s_interval_is_above_one() {
        let v = |lower: f64, upper: f64| Verification {
            metric: "inflation.during_p99_us".into(),
            n: 5,
            baseline_mean: 1.0,
            winner_mean: 1.0,
            speed_up: ConfidenceInterval {
                estimate: (lower + upper) / 2.0,
                lower,
                upper,
                level: 0.95,
                method: tcplab_stats::CiMethod::Percentile,
            },
        };
        assert!(v(1.05, 1.3).confirmed());
        assert!(!v(0.93, 1.03).confirmed(), "the interval reaches 1");
        assert!(!v(0.7, 0.9).confirmed(), "worse on fresh runs");
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
