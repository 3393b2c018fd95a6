//! The sweep loop, the store, racing, failing configurations and exports, with the mock.
#![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]

use std::time::Duration;

use tcplab_study::mock::{MockExecutor, factor};
use tcplab_study::{
    Plan, PlanOptions, RunError, ScenarioFile, Store, StoreError, StudyError, SweepOptions, export,
    sweep,
};

const SCENARIO: &str = r#"
name = "mock"
repetitions = 6
seed = 42
objective = { metric = "per_message_us.mean", goal = "minimise" }
baseline = { "workload.size" = 1 }

[[workload]]
kind = "msgs"
count = 1000

[[factor]]
name = "workload.size"
values = [1, 2, 3, 4]
"#;

fn plan_of(text: &str) -> Plan {
    Plan::new(
        &ScenarioFile::parse("mock.toml", text).unwrap(),
        PlanOptions::default(),
    )
    .unwrap()
}

/// size 1 and 2 → 10 µs (a tie), 3 → 20 (clearly worse), 4 → fails (kernel rejects it).
fn mock(noise: f64) -> MockExecutor {
    MockExecutor::new(
        "per_message_us.mean",
        Box::new(|c| match factor(c, "workload.size") {
            Some("1") => Ok(10.0),
            Some("2") => Ok(10.0),
            Some("3") => Ok(20.0),
            _ => Err(RunError::Rejected(
                "setsockopt(SO_SNDBUF): Invalid argument (EINVAL)".into(),
            )),
        }),
        noise,
        7,
    )
}

#[test]
fn store_round_trip_and_failing_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let plan = plan_of(SCENARIO);
    let store = Store::create(&db, &plan).unwrap();
    let mut exec = mock(0.05);
    let report = sweep(&plan, &store, &mut exec, SweepOptions::default()).unwrap();
    // 3 working configurations x 6 reps, plus one failed run of size 4; its 5 others skipped.
    assert_eq!(report.executed, 19);
    assert_eq!(report.failed, 1);
    assert_eq!(report.skipped, 5);
    assert_eq!(report.failed_configs.len(), 1);
    assert!(report.failed_configs[0].1.contains("EINVAL"));
    drop(store);

    let store = Store::open(&db).unwrap();
    let runs = store.runs().unwrap();
    assert_eq!(runs.len(), 19);
    assert!(runs.windows(2).all(|w| w[0].order < w[1].order));
    let configs = store.configurations().unwrap();
    assert_eq!(configs[3].status, "failed");
    assert!(configs[3].reason.as_deref().unwrap().contains("EINVAL"));
    assert!(configs[0].is_baseline);
    let first = runs.iter().find(|r| r.config_id == 2).unwrap();
    // 20 µs ± 5% noise.
    assert!(first.metrics["per_message_us.mean"] >= 19.0 - 1e-9);
    assert!(first.metrics["per_message_us.mean"] <= 21.0 + 1e-9);
    // Samples come back byte for byte after compression.
    let samples = store.samples(first.id).unwrap();
    assert_eq!(samples.len(), 256 * 8);
    let v0 = f64::from_le_bytes(samples[..8].try_into().unwrap());
    assert_eq!(v0, first.metrics["per_message_us.mean"]);
    assert_eq!(first.facts["executor"], "mock");
    // Exports.
    let mut csv = Vec::new();
    export::write_runs_csv(&store, &mut csv).unwrap();
    let csv = String::from_utf8(csv).unwrap();
    assert_eq!(csv.lines().count(), 20);
    assert!(
        csv.lines()
            .next()
            .unwrap()
            .ends_with("mock.rep,per_message_us.mean")
    );
    let mut summary = Vec::new();
    export::write_summary_csv(&store, &mut summary).unwrap();
    let summary = String::from_utf8(summary).unwrap();
    let row3: Vec<&str> = summary.lines().nth(3).unwrap().split(',').collect();
    assert_eq!(row3[1], "workload.size=3");
    assert_eq!(row3[8], "6");
    let speed_up: f64 = row3[18].parse().unwrap();
    assert!(
        (speed_up - 0.5).abs() < 0.05,
        "size 3 is about half as fast: {speed_up}"
    );
    let mut json = Vec::new();
    export::write_json(&store, &mut json).unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&json).unwrap();
    assert_eq!(doc["runs"].as_array().unwrap().len(), 19);
    assert_eq!(doc["summaries"][3]["config"]["status"], "failed");
    assert_eq!(doc["study"]["objective_metric"], "per_message_us.mean");
}

#[test]
fn racing_drops_the_clearly_worse_and_keeps_the_best() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("race.db");
    let plan = plan_of(SCENARIO);
    let store = Store::create(&db, &plan).unwrap();
    let mut exec = mock(0.02);
    let opts = SweepOptions {
        race: true,
        ..SweepOptions::default()
    };
    let report = sweep(&plan, &store, &mut exec, opts).unwrap();
    // size 3 (20 µs vs 10 µs) is dropped after the first round with min_reps = 3 samples.
    assert_eq!(report.dropped.len(), 1, "{:?}", report.dropped);
    assert_eq!(report.dropped[0].0, 2);
    assert!(
        report.dropped[0].1.starts_with("mean 20.") && report.dropped[0].1.contains("Holm"),
        "{}",
        report.dropped[0].1
    );
    let runs_of = |id| exec.calls.iter().filter(|(c, _)| *c == id).count();
    assert_eq!(runs_of(2), 3, "dropped after its third repetition");
    assert_eq!(runs_of(0), 6, "the best runs every repetition");
    assert_eq!(runs_of(1), 6, "the tie is kept");
    let configs = store.configurations().unwrap();
    assert_eq!(configs[2].status, "dropped");
    assert_eq!(configs[0].status, "active");
    let race = store.race().unwrap();
    let drop = race.iter().find(|r| r.action == "drop").unwrap();
    assert_eq!(drop.config_id, 2);
    assert_eq!(drop.round, 1);
    assert!(drop.p_adjusted.unwrap() < 0.05);
    assert_eq!(drop.best.as_deref(), Some("workload.size=1"));
}

#[test]
fn resume_skips_done_runs_and_refuses_a_changed_study() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let plan = plan_of(SCENARIO);
    let store = Store::create(&db, &plan).unwrap();
    let mut exec = mock(0.05);
    let opts = SweepOptions {
        max_runs: Some(7),
        ..SweepOptions::default()
    };
    let first = sweep(&plan, &store, &mut exec, opts).unwrap();
    assert!(first.stopped);
    drop(store);
    assert!(matches!(
        Store::create(&db, &plan),
        Err(StoreError::Exists { .. })
    ));

    let store = Store::resume(&db, &plan).unwrap();
    let mut exec2 = mock(0.05);
    let second = sweep(&plan, &store, &mut exec2, SweepOptions::default()).unwrap();
    assert_eq!(second.already_done, 7);
    let mut all: Vec<(usize, u32)> = exec.calls.iter().chain(&exec2.calls).copied().collect();
    let n = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), n, "no run executed twice");
    assert_eq!(store.runs().unwrap().len(), 19);
    drop(store);

    let changed = plan_of(&SCENARIO.replace("count = 1000", "count = 2000"));
    let e = Store::resume(&db, &changed).unwrap_err();
    assert!(
        matches!(
            e,
            StoreError::ScenarioChanged {
                what: "the scenario",
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("refusing to resume"), "{e}");
    // A comment does not change the study.
    let commented = plan_of(&format!("# a note\n{SCENARIO}"));
    assert!(Store::resume(&db, &commented).is_ok());
    let reseeded = Plan::new(
        &ScenarioFile::parse("mock.toml", SCENARIO).unwrap(),
        PlanOptions {
            seed: Some(5),
            quick: false,
        },
    )
    .unwrap();
    let e = Store::resume(&db, &reseeded).unwrap_err();
    assert!(
        matches!(
            e,
            StoreError::ScenarioChanged {
                what: "the seed",
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn foreign_and_corrupted_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let plan = plan_of(SCENARIO);
    let text = dir.path().join("notes.txt");
    std::fs::write(
        &text,
        "this is not a database, just some notes\n".repeat(200),
    )
    .unwrap();
    let e = Store::resume(&text, &plan).unwrap_err();
    assert!(matches!(e, StoreError::Foreign { .. }), "{e}");
    assert!(e.to_string().contains("not a tcplab study database"), "{e}");
    // Untouched: nothing was written into the foreign file.
    assert!(
        std::fs::read_to_string(&text)
            .unwrap()
            .starts_with("this is not a database")
    );

    let other = dir.path().join("other.db");
    foreign_sqlite(&other);
    let e = Store::open(&other).unwrap_err();
    assert!(e.to_string().contains("application_id"), "{e}");

    // A study file whose pages were overwritten in the middle.
    let db = dir.path().join("s.db");
    let store = Store::create(&db, &plan).unwrap();
    sweep(&plan, &store, &mut mock(0.0), SweepOptions::default()).unwrap();
    drop(store);
    let mut bytes = std::fs::read(&db).unwrap();
    let len = bytes.len();
    for b in &mut bytes[len / 3..len - 100] {
        *b = 0x5a;
    }
    std::fs::write(&db, &bytes).unwrap();
    let e = Store::open(&db).unwrap_err();
    assert!(
        matches!(e, StoreError::Foreign { .. } | StoreError::Sqlite { .. }),
        "{e}"
    );
    assert!(matches!(
        Store::resume(&dir.path().join("none.db"), &plan),
        Err(StoreError::Missing { .. })
    ));
}

/// A SQLite file of "another program": a study file whose application id (offset 68 of the
/// header, big-endian) is cleared.
fn foreign_sqlite(path: &std::path::Path) {
    let store = Store::create(path, &plan_of(SCENARIO)).unwrap();
    drop(store);
    let mut bytes = std::fs::read(path).unwrap();
    bytes[68..72].copy_from_slice(&[0, 0, 0, 0]);
    std::fs::write(path, &bytes).unwrap();
}

#[test]
fn fatal_errors_stop_without_recording() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("f.db");
    let plan = plan_of(SCENARIO);
    let store = Store::create(&db, &plan).unwrap();
    let mut exec = MockExecutor::new(
        "per_message_us.mean",
        Box::new(|_| Err(RunError::Fatal("no CAP_NET_ADMIN: run as root".into()))),
        0.0,
        1,
    );
    let e = sweep(&plan, &store, &mut exec, SweepOptions::default()).unwrap_err();
    assert!(
        matches!(e, StudyError::Fatal(ref m) if m.contains("CAP_NET_ADMIN")),
        "{e}"
    );
    assert_eq!(store.runs().unwrap().len(), 0);
}

/// The sweep's own cost (planning, storing, racing statistics) per run, next to a 50 ms mock
/// run. The budget is 5% of the shortest real run (a `--quick` workload lasts at least 200
/// ms): 10 ms per run, measured in release by the study example in docs/BENCHMARKS.md (0.7 ms).
/// Here, in a debug build beside other test binaries (2-3 ms alone, over 10 ms beside a
/// headless browser), the test only catches an order-of-magnitude regression: 50 ms.
#[test]
fn overhead_is_small_next_to_the_executor() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("o.db");
    let t = std::time::Instant::now();
    let plan = plan_of(
        &SCENARIO
            .replace("values = [1, 2, 3, 4]", "values = [1, 2, 3]")
            .replace("repetitions = 6", "repetitions = 4"),
    );
    let planning = t.elapsed();
    let store = Store::create(&db, &plan).unwrap();
    let mut exec = mock(0.05).with_delay(Duration::from_millis(50));
    let opts = SweepOptions {
        race: true,
        ..SweepOptions::default()
    };
    let report = sweep(&plan, &store, &mut exec, opts).unwrap();
    let overhead = report.overhead_fraction();
    let per_run = (report.wall - report.executor_time + planning) / report.executed as u32;
    eprintln!(
        "overhead: runs {}, wall {:?}, executor {:?}, store {:?}, stats {:?}, planning {:?}: {:.2}% of the sweep, {per_run:?} per run",
        report.executed,
        report.wall,
        report.executor_time,
        report.store_time,
        report.stats_time,
        planning,
        overhead * 100.0
    );
    assert!(report.executed >= 10);
    assert!(
        per_run < Duration::from_millis(50),
        "sweep overhead {per_run:?} per run ({:.1}% of this sweep): ten times the 10 ms budget",
        overhead * 100.0
    );
}

#[test]
fn reuse_builds_one_lab_per_configuration_fresh_one_per_run_reset_one_in_all() {
    let dir = tempfile::tempdir().unwrap();
    // `reset`: one lab for the study (the first run's), reset before every other run.
    for (reset, fresh_runs) in [("reuse", 3), ("fresh", 18), ("reset", 1)] {
        let text = format!(
            "reset = \"{reset}\"\n{}",
            SCENARIO.replace("values = [1, 2, 3, 4]", "values = [1, 2, 3]")
        );
        let plan = plan_of(&text);
        let store = Store::create(&dir.path().join(format!("{reset}.db")), &plan).unwrap();
        sweep(&plan, &store, &mut mock(0.0), SweepOptions::default()).unwrap();
        let runs = store.runs().unwrap();
        let fresh: Vec<_> = runs
            .iter()
            .filter(|r| r.facts["fresh_lab"] == true)
            .collect();
        assert_eq!(fresh.len(), fresh_runs, "{reset}");
        if reset == "reuse" {
            assert!(fresh.iter().all(|r| r.rep == 0));
        }
        if reset == "reset" {
            assert_eq!(fresh[0].order, 0);
        }
    }
}

#[test]
fn racing_resumes_without_repeating_decided_rounds() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("rr.db");
    let plan = plan_of(SCENARIO);
    let store = Store::create(&db, &plan).unwrap();
    let race = SweepOptions {
        race: true,
        ..SweepOptions::default()
    };
    // Stop after the third round (4 configurations, one failing after its first run).
    let first = sweep(
        &plan,
        &store,
        &mut mock(0.02),
        SweepOptions {
            max_runs: Some(10),
            ..race
        },
    )
    .unwrap();
    assert_eq!(first.dropped.len(), 1);
    let rounds_before = store.race().unwrap().iter().map(|r| r.round).max().unwrap();
    drop(store);
    let store = Store::resume(&db, &plan).unwrap();
    let mut exec = mock(0.02);
    let second = sweep(&plan, &store, &mut exec, race).unwrap();
    assert!(
        second.dropped.is_empty(),
        "the dropped one stays dropped: {:?}",
        second.dropped
    );
    assert!(
        exec.calls.iter().all(|(c, _)| *c != 2),
        "no run of the dropped configuration"
    );
    let rounds = store.race().unwrap();
    let first_new = rounds
        .iter()
        .filter(|r| r.round > rounds_before)
        .map(|r| r.completed_runs)
        .min()
        .unwrap();
    assert!(
        first_new > 10,
        "new rounds only after new runs: {first_new}"
    );
}
