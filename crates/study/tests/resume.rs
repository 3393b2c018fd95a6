//! Resume after a real SIGKILL: a child process (this test binary, re-executed with an
//! environment variable) runs a sweep with a slow mock executor; the parent kills it with
//! SIGKILL mid-way, then resumes the study and checks that only the run in flight was lost
//! and that no run was executed twice, other than that one.
#![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tcplab_study::mock::MockExecutor;
use tcplab_study::{Plan, PlanOptions, ScenarioFile, Store, SweepOptions, sweep};

const DB_VAR: &str = "TCPLAB_STUDY_CHILD_DB";
const LOG_VAR: &str = "TCPLAB_STUDY_CHILD_LOG";

const SCENARIO: &str = r#"
name = "killme"
repetitions = 4
seed = 3
objective = { metric = "throughput_bps", goal = "maximise" }

[[workload]]
kind = "stream"
duration = "1s"

[[factor]]
name = "socket.congestion"
values = ["cubic", "reno", "bbr"]
"#;

fn plan() -> Plan {
    Plan::new(
        &ScenarioFile::parse("killme.toml", SCENARIO).unwrap(),
        PlanOptions::default(),
    )
    .unwrap()
}

/// A mock whose runs take `delay` and which logs each run's start to `log` (one `write` per
/// line with O_APPEND, so a line is either wholly there or not after a SIGKILL).
fn logging_mock(log: &Path, delay: Duration) -> MockExecutor {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .unwrap();
    let mut exec = MockExecutor::new(
        "throughput_bps",
        Box::new(|c| Ok(1e9 + c.id as f64 * 1e8)),
        0.01,
        9,
    )
    .with_delay(delay);
    exec.before = Some(Box::new(move |run| {
        let line = format!("{} {}\n", run.config.id, run.rep);
        file.write_all(line.as_bytes()).unwrap();
    }));
    exec
}

/// The child's side: only does something when re-executed by the parent.
#[test]
fn sigkill_child() {
    let (Ok(db), Ok(log)) = (std::env::var(DB_VAR), std::env::var(LOG_VAR)) else {
        return;
    };
    let plan = plan();
    let store = Store::create(Path::new(&db), &plan).unwrap();
    let mut exec = logging_mock(Path::new(&log), Duration::from_millis(150));
    sweep(&plan, &store, &mut exec, SweepOptions::default()).unwrap();
}

fn started(log: &Path) -> Vec<(usize, u32)> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let (c, r) = l.split_once(' ').unwrap();
            (c.parse().unwrap(), r.parse().unwrap())
        })
        .collect()
}

#[test]
fn resume_after_sigkill_loses_only_the_run_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("study.db");
    let log = dir.path().join("started.log");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "sigkill_child",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(DB_VAR, &db)
        .env(LOG_VAR, &log)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the fifth run has started and is half-way, then SIGKILL.
    let deadline = Instant::now() + Duration::from_secs(30);
    while started(&log).len() < 5 {
        assert!(
            Instant::now() < deadline,
            "the child did not start 5 runs in 30 s"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(70));
    child.kill().unwrap(); // SIGKILL
    let status = child.wait().unwrap();
    assert_eq!(
        status.signal(),
        Some(libc_sigkill()),
        "the child was killed, not finished: {status:?}"
    );

    let before = started(&log);
    let plan = plan();
    let store = Store::resume(&db, &plan).unwrap();
    let stored: Vec<(usize, u32)> = store
        .runs()
        .unwrap()
        .iter()
        .map(|r| (r.config_id, r.rep))
        .collect();
    // Everything whose start was logged, except the last one (in flight), is in the store.
    let (in_flight, finished) = before.split_last().unwrap();
    for r in finished {
        assert!(
            stored.contains(r),
            "run {r:?} finished before the kill but is not in the store"
        );
    }
    assert!(
        stored.len() == finished.len() || stored.len() == before.len(),
        "stored {stored:?}, started {before:?}"
    );
    let lost = !stored.contains(in_flight);
    eprintln!(
        "killed after {} started runs; {} stored; run in flight {in_flight:?} lost: {lost}",
        before.len(),
        stored.len()
    );

    let mut exec = logging_mock(&log, Duration::ZERO);
    let report = sweep(&plan, &store, &mut exec, SweepOptions::default()).unwrap();
    assert_eq!(report.already_done, stored.len());
    let runs = store.runs().unwrap();
    assert_eq!(runs.len(), 12, "every run stored after the resume");
    let mut per_run: BTreeMap<(usize, u32), usize> = BTreeMap::new();
    for r in started(&log) {
        *per_run.entry(r).or_default() += 1;
    }
    assert_eq!(per_run.len(), 12);
    for (run, n) in &per_run {
        let expected = if lost && run == in_flight { 2 } else { 1 };
        assert_eq!(*n, expected, "run {run:?} executed {n} times");
    }
    // Resumed runs keep the planned order.
    assert!(runs.windows(2).all(|w| w[0].order < w[1].order));
}

/// SIGKILL's number (9 on every Linux architecture).
fn libc_sigkill() -> i32 {
    9
}
