//! The sweep: runs a [`Plan`] through an [`Executor`], writing each run to the [`Store`] as it
//! ends, skipping what the store already holds (resume), and racing when asked.
//!
//! The executor does the real work (build the lab, run the workloads, collect samples); the
//! lead's executor lives with the CLI, [`crate::mock::MockExecutor`] serves the tests. What
//! the loop does per planned run:
//! 1. skip it if the store has it, or its configuration failed or was dropped;
//! 2. call the executor, timing it;
//! 3. store the outcome in one transaction (a kernel rejection fails the configuration, the
//!    study goes on; [`RunError::Fatal`] stops the study without recording the run);
//! 4. at the end of each repetition round, with racing on, hold a racing round
//!    ([`tcplab_stats::race_round`]) and store every verdict with its reason.

use std::collections::{BTreeMap, BTreeSet};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tcplab_stats::{RaceAction, RaceConfig, Samples, race_round};

use crate::error::StudyError;
use crate::plan::{Plan, PlannedRun};
use crate::store::{Store, StoredRace};

/// Whether a run's numbers can be believed, and if not why.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Fidelity {
    /// False when the emulator fell behind, a ring overflowed, the CPU was saturated, ...
    pub trustworthy: bool,
    /// Each reason as a sentence.
    pub reasons: Vec<String>,
}

impl Fidelity {
    /// A trustworthy verdict.
    pub fn ok() -> Fidelity {
        Fidelity {
            trustworthy: true,
            reasons: Vec::new(),
        }
    }
}

/// What an executor returns for a successful run.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOutcome {
    /// Summary figures with dotted names (`throughput_bps`, `per_message_us.mean`).
    pub metrics: BTreeMap<String, f64>,
    /// Raw samples, opaque to the study (the store compresses them).
    pub samples: Vec<u8>,
    /// The facts that explain the run (kernel, sysctls, emulator seed, ...).
    pub facts: serde_json::Value,
    /// The fidelity verdict.
    pub fidelity: Fidelity,
    /// Wall time of the run as the executor measured it.
    pub wall: Duration,
    /// Where that time went.
    pub timing: RunTiming,
}

/// Where one run's time went, as the executor measured it (stored with the run). The rest of
/// the executor's wall time is the harness: server start, control and data connections, the
/// server's report, the workload's summaries, facts, result decoding.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct RunTiming {
    /// The workloads' own measured time, s: msgs from the first write to the last message
    /// received (or written, if later); stream, rr and crr the client's elapsed time.
    pub workload_s: f64,
    /// Building, resetting or tearing down labs for this run, s.
    pub lab_s: f64,
    /// Packing the raw samples, s.
    pub encode_s: f64,
    /// Harness: control connection, test sent, data connection open (msgs; 0 for others), s.
    pub setup_s: f64,
    /// Harness: from the workload's end to the server's report decoded (msgs), s.
    pub report_s: f64,
    /// Harness: the workload's own summaries (msgs), s.
    pub summary_s: f64,
}

/// Why a run failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunError {
    /// The configuration cannot run here (the kernel rejected a value, an algorithm is not
    /// available): it fails with this reason and is not tried again; the study goes on.
    #[error("configuration rejected: {0}")]
    Rejected(String),
    /// This run failed (a timeout, a lost peer); the configuration's other runs still run.
    #[error("run failed: {0}")]
    Failed(String),
    /// Nothing can run (no privileges, a missing feature everywhere): the study stops, this
    /// run is not recorded, so a resume tries it again.
    #[error("{0}")]
    Fatal(String),
}

/// Runs one planned run. Implementations build (or reuse, see [`PlannedRun::fresh_lab`]) the
/// lab, apply the configuration and run its workloads.
pub trait Executor {
    /// Runs `run` and reports its outcome.
    fn run(&mut self, run: &PlannedRun) -> Result<RunOutcome, RunError>;

    /// Releases what the executor keeps between runs (the last lab) at the end of a sweep, and
    /// says how long that took, so the sweep counts it as lab time rather than losing it.
    fn finish(&mut self) -> Duration {
        Duration::ZERO
    }
}

/// Options of [`sweep`].
#[derive(Debug, Default, Clone, Copy)]
pub struct SweepOptions<'a> {
    /// Drop configurations that are significantly worse (see `[race]`).
    pub race: bool,
    /// Show a progress bar on stderr (still hidden when stderr is not a terminal).
    pub progress: bool,
    /// Checked between runs: when set, the sweep stops cleanly (Ctrl-C).
    pub stop: Option<&'a AtomicBool>,
    /// Run at most this many runs in this call (tests, `tcplab run`).
    pub max_runs: Option<usize>,
}

/// What a sweep did and where its time went.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct SweepReport {
    /// Runs executed in this call.
    pub executed: usize,
    /// Runs skipped because the store already had them.
    pub already_done: usize,
    /// Runs skipped because their configuration failed or was dropped.
    pub skipped: usize,
    /// Runs that failed in this call.
    pub failed: usize,
    /// Configurations dropped by racing in this call: (id, reason).
    pub dropped: Vec<(usize, String)>,
    /// Configurations that failed in this call: (id, reason).
    pub failed_configs: Vec<(usize, String)>,
    /// Racing rounds that could not be held, with the statistics error.
    pub race_errors: Vec<String>,
    /// True when `stop` ended the sweep early.
    pub stopped: bool,
    /// Time inside the executor (workloads, labs, harness, encoding).
    pub executor_time: Duration,
    /// The workloads' own measured time (sum of [`RunTiming::workload_s`]).
    pub workload_time: Duration,
    /// Building, resetting and tearing down labs (sum of [`RunTiming::lab_s`] and the final
    /// teardown).
    pub lab_time: Duration,
    /// Packing raw samples (sum of [`RunTiming::encode_s`]).
    pub encode_time: Duration,
    /// Harness: control and data connections (sum of [`RunTiming::setup_s`]).
    pub setup_time: Duration,
    /// Harness: waiting for and decoding the server's reports (sum of [`RunTiming::report_s`]).
    pub report_time: Duration,
    /// Harness: the workloads' summaries (sum of [`RunTiming::summary_s`]).
    pub summary_time: Duration,
    /// Time writing to the store (compression included).
    pub store_time: Duration,
    /// Time in racing statistics.
    pub stats_time: Duration,
    /// Wall time of the whole call.
    pub wall: Duration,
}

/// A sweep's time beyond the workloads' own, broken down (seconds). Stored per sweep call in
/// the `sweep_session` table, listed in the HTML report's notes, and [`Overhead::line`] is the
/// terminal's summary.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Overhead {
    /// Wall time of the sweep call.
    pub wall_s: f64,
    /// The workloads' own measured time.
    pub workload_s: f64,
    /// Lab build, reset and teardown.
    pub lab_s: f64,
    /// The rest of the executor: control and data connections, the server's report and the
    /// workload's own summaries (inside `tcplab-load`, split out below for msgs), the client's
    /// thread, facts, result decoding.
    pub harness_s: f64,
    /// Of `harness_s`: control and data connections (msgs).
    #[serde(default)]
    pub setup_s: f64,
    /// Of `harness_s`: the server's reports, from the workload's end to decoded (msgs).
    #[serde(default)]
    pub report_s: f64,
    /// Of `harness_s`: the workloads' summaries (msgs).
    #[serde(default)]
    pub summary_s: f64,
    /// Packing samples.
    pub encode_s: f64,
    /// Compressing and writing runs to the store.
    pub store_s: f64,
    /// Racing statistics.
    pub stats_s: f64,
    /// Everything else: reading the store at the start, scheduling, the progress bar.
    pub other_s: f64,
    /// `(wall - workload) / wall`.
    pub fraction: f64,
}

impl Overhead {
    /// One line for the terminal.
    pub fn line(&self) -> String {
        format!(
            "wall {:.1} s, workloads {:.1} s; overhead {:.1}%: labs {:.2} s, harness {:.2} s (connections {:.2}, \
             server reports {:.2}, summaries {:.2}, rest: threads, facts, results {:.2}), \
             sample packing {:.2} s, storing {:.2} s, statistics {:.2} s, scheduling {:.2} s",
            self.wall_s,
            self.workload_s,
            self.fraction * 100.0,
            self.lab_s,
            self.harness_s,
            self.setup_s,
            self.report_s,
            self.summary_s,
            (self.harness_s - self.setup_s - self.report_s - self.summary_s).max(0.0),
            self.encode_s,
            self.store_s,
            self.stats_s,
            self.other_s
        )
    }
}

impl SweepReport {
    /// Everything but the workloads' own measured time, as a fraction of the wall time.
    pub fn overhead_fraction(&self) -> f64 {
        self.overhead().fraction
    }

    /// Where the time beyond the workloads went.
    pub fn overhead(&self) -> Overhead {
        let s = |d: Duration| d.as_secs_f64();
        let wall = s(self.wall);
        let workload = s(self.workload_time);
        let harness =
            (s(self.executor_time) - workload - s(self.lab_time) - s(self.encode_time)).max(0.0);
        let counted = s(self.executor_time).max(workload + s(self.lab_time))
            + s(self.store_time)
            + s(self.stats_time);
        Overhead {
            wall_s: wall,
            workload_s: workload,
            lab_s: s(self.lab_time),
            harness_s: harness,
            setup_s: s(self.setup_time),
            report_s: s(self.report_time),
            summary_s: s(self.summary_time),
            encode_s: s(self.encode_time),
            store_s: s(self.store_time),
            stats_s: s(self.stats_time),
            other_s: (wall - counted).max(0.0),
            fraction: if wall > 0.0 {
                ((wall - workload) / wall).clamp(0.0, 1.0)
            } else {
                0.0
            },
        }
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// A duration from an executor's seconds; negative, NaN or absurd figures count as zero.
fn secs(s: f64) -> Duration {
    Duration::try_from_secs_f64(s).unwrap_or_default()
}

/// Runs the plan (see the module documentation).
pub fn sweep(
    plan: &Plan,
    store: &Store,
    executor: &mut dyn Executor,
    opts: SweepOptions<'_>,
) -> Result<SweepReport, StudyError> {
    let start = Instant::now();
    let mut report = SweepReport::default();
    let done = store.done()?;
    let mut inactive: BTreeSet<usize> = store
        .configurations()?
        .into_iter()
        .filter(|c| c.status != "active")
        .map(|c| c.id)
        .collect();
    let mut race = RaceState::new(plan, store)?;
    let todo = plan
        .runs
        .iter()
        .filter(|r| !done.contains(&(r.config.id, r.rep)))
        .count();
    let bar = progress_bar(opts.progress, todo as u64);
    let labels = plan.short_labels();
    let mut labs_built: BTreeSet<usize> = BTreeSet::new();
    let mut executed_at_last_round = 0;
    for (i, run) in plan.runs.iter().enumerate() {
        if opts.stop.is_some_and(|s| s.load(Ordering::Relaxed))
            || opts.max_runs.is_some_and(|m| report.executed >= m)
        {
            report.stopped = true;
            break;
        }
        if done.contains(&(run.config.id, run.rep)) {
            report.already_done += 1;
        } else if inactive.contains(&run.config.id) {
            report.skipped += 1;
            bar.inc(1);
        } else {
            let label = labels.get(run.config.id).unwrap_or(&run.config.label);
            bar.set_message(label.clone());
            let mut run = run.clone();
            if run.reset == crate::scenario::Reset::Reuse {
                run.fresh_lab |= labs_built.insert(run.config.id);
            }
            if let Some(failed) = execute(plan, store, executor, &run, &mut report, &mut race)? {
                inactive.insert(run.config.id);
                report.failed_configs.push((run.config.id, failed));
            }
            bar.inc(1);
        }
        // A round is raced only if this call ran something in it, so a resume does not
        // re-hold (and re-spend alpha on) rounds the store already decided.
        let round_ends = plan.runs.get(i + 1).is_none_or(|next| next.rep != run.rep);
        if opts.race && round_ends && report.executed > executed_at_last_round {
            executed_at_last_round = report.executed;
            let t = Instant::now();
            race.round(plan, store, &mut inactive, &mut report)?;
            report.stats_time += t.elapsed();
        }
    }
    bar.finish_and_clear();
    let teardown = executor.finish();
    report.executor_time += teardown;
    report.lab_time += teardown;
    if report.executed > 0 {
        let t = Instant::now();
        store.checkpoint()?;
        report.store_time += t.elapsed();
    }
    report.wall = start.elapsed();
    if report.executed > 0 {
        store.record_session(now_ms(), report.executed, &report.overhead())?;
    }
    Ok(report)
}

/// Runs and stores one run; returns the reason when its configuration must stop.
fn execute(
    plan: &Plan,
    store: &Store,
    executor: &mut dyn Executor,
    run: &PlannedRun,
    report: &mut SweepReport,
    race: &mut RaceState,
) -> Result<Option<String>, StudyError> {
    let started_ms = now_ms();
    let t = Instant::now();
    let mut result = executor.run(run);
    let wall = t.elapsed();
    report.executor_time += wall;
    if let Ok(o) = &result {
        report.workload_time += secs(o.timing.workload_s);
        report.lab_time += secs(o.timing.lab_s);
        report.encode_time += secs(o.timing.encode_s);
        report.setup_time += secs(o.timing.setup_s);
        report.report_time += secs(o.timing.report_s);
        report.summary_time += secs(o.timing.summary_s);
    }
    if let Err(RunError::Fatal(reason)) = &result {
        return Err(StudyError::Fatal(reason.clone()));
    }
    let metric = &plan.objective.metric;
    if let Ok(o) = &result {
        if !o.metrics.get(metric).is_some_and(|v| v.is_finite()) {
            let have: Vec<&str> = o.metrics.keys().map(String::as_str).collect();
            result = Err(RunError::Rejected(format!(
                "the objective metric `{metric}` is missing or not finite; the run reported: {}",
                if have.is_empty() {
                    "nothing".to_string()
                } else {
                    have.join(", ")
                }
            )));
        }
    }
    let t = Instant::now();
    store.record_run(run, &result, started_ms, wall)?;
    report.executed += 1;
    race.stored(
        run.config.id,
        result.as_ref().ok().and_then(|o| o.metrics.get(metric)),
    );
    let stop = match &result {
        Ok(_) => None,
        Err(e) => {
            report.failed += 1;
            match e {
                RunError::Rejected(reason) => {
                    store.set_config_status(run.config.id, "failed", reason)?;
                    Some(reason.clone())
                }
                _ => None,
            }
        }
    };
    report.store_time += t.elapsed();
    Ok(stop)
}

/// Objective samples per configuration, kept in memory: read from the store once (a resumed
/// study's runs), then added to as each run is stored, in the store's order, so a racing round
/// sees exactly what re-reading the store would give without parsing every run again.
struct RaceState {
    samples: BTreeMap<usize, Vec<f64>>,
    round: u32,
    seen_runs: usize,
}

impl RaceState {
    fn new(plan: &Plan, store: &Store) -> Result<RaceState, StudyError> {
        let round = store.race()?.iter().map(|r| r.round).max().unwrap_or(0);
        let mut state = RaceState {
            samples: BTreeMap::new(),
            round,
            seen_runs: 0,
        };
        state.reload(plan, store)?;
        Ok(state)
    }

    /// A run was just stored: its objective value if it succeeded.
    fn stored(&mut self, config_id: usize, objective: Option<&f64>) {
        self.seen_runs += 1;
        if let Some(v) = objective {
            self.samples.entry(config_id).or_default().push(*v);
        }
    }

    fn reload(&mut self, plan: &Plan, store: &Store) -> Result<(), StudyError> {
        self.samples.clear();
        let runs = store.runs()?;
        self.seen_runs = runs.len();
        for r in runs.into_iter().filter(|r| r.status == "ok") {
            if let Some(v) = r.metrics.get(&plan.objective.metric) {
                self.samples.entry(r.config_id).or_default().push(*v);
            }
        }
        Ok(())
    }

    /// One racing round over the active configurations; the baseline is never dropped (the
    /// report needs its samples for the speed-up), though its verdict is recorded.
    fn round(
        &mut self,
        plan: &Plan,
        store: &Store,
        inactive: &mut BTreeSet<usize>,
        report: &mut SweepReport,
    ) -> Result<(), StudyError> {
        let active: Vec<&crate::plan::Configuration> = plan
            .configurations
            .iter()
            .filter(|c| !inactive.contains(&c.id) && self.samples.contains_key(&c.id))
            .map(|c| c.as_ref())
            .collect();
        if active.len() < 2 {
            return Ok(());
        }
        let samples: Vec<Samples<'_>> = active
            .iter()
            .map(|c| Samples {
                name: &c.label,
                values: &self.samples[&c.id],
            })
            .collect();
        let config = RaceConfig {
            objective: plan.objective.goal,
            min_n: plan.race.min_reps,
            alpha: plan.race.alpha,
            test: plan.race.test,
            unit: crate::to_report::unit_of(&plan.objective.metric).to_string(),
        };
        let verdict = match race_round(&samples, &config) {
            Ok(v) => v,
            Err(e) => {
                report.race_errors.push(e.to_string());
                return Ok(());
            }
        };
        if verdict.best.is_none() {
            return Ok(());
        }
        self.round += 1;
        let mut stored = Vec::new();
        for (c, v) in active.iter().zip(&verdict.verdicts) {
            let drop = v.action == RaceAction::Drop && !c.is_baseline;
            let reason = if v.action == RaceAction::Drop && c.is_baseline {
                format!("{} (kept: the baseline is never dropped)", v.reason)
            } else {
                v.reason.clone()
            };
            if drop {
                inactive.insert(c.id);
                report.dropped.push((c.id, reason.clone()));
            }
            stored.push(StoredRace {
                round: self.round,
                completed_runs: self.seen_runs,
                config_id: c.id,
                action: if drop { "drop" } else { "keep" }.to_string(),
                best: verdict.best.clone(),
                p_value: v.p_value,
                p_adjusted: v.p_adjusted,
                reason,
            });
        }
        store.record_race(&stored)?;
        Ok(())
    }
}

fn progress_bar(wanted: bool, len: u64) -> ProgressBar {
    if !wanted || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template(
        "{elapsed_precise} [{bar:30}] {pos}/{len} runs, ETA {eta}  {wide_msg}",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}
