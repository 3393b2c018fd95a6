use super::*;

fn run(src: &str, dst: &str, index: u64, started_ms: u64, bps: f64) -> Run {
    Run {
        src: src.into(),
        dst: dst.into(),
        workload: "stream".into(),
        index,
        started_ms,
        outcome: Outcome::Complete,
        figures: vec![(Figure::ThroughputBps, bps)],
        emulator_trustworthy: Some(true),
    }
}

fn store() -> (tempfile::TempDir, MonitorStore) {
    let dir = tempfile::tempdir().unwrap();
    let s = MonitorStore::open(&dir.path().join("monitor.db")).unwrap();
    (dir, s)
}

#[test]
fn a_run_noted_twice_is_kept_once_and_the_schedule_resumes_from_the_count() {
    let (_dir, s) = store();
    assert!(
        s.record(&run("a", "b", 0, 1_000, 9e8), Some("{\"r\":0}"))
            .unwrap()
    );
    assert!(
        s.record(&run("a", "b", 1, 61_000, 9e8), Some("{\"r\":1}"))
            .unwrap()
    );
    // A restart that notes run 1 again (killed after the test, before the schedule moved on).
    assert!(
        !s.record(&run("a", "b", 1, 61_000, 9e8), Some("{\"r\":9}"))
            .unwrap()
    );
    assert_eq!(s.run_count().unwrap(), 2);
    let slot = ("a".to_string(), "b".to_string(), "stream".to_string());
    assert_eq!(s.last_result(&slot).unwrap().as_deref(), Some("{\"r\":1}"));
    let h = s.slot_histories().unwrap();
    assert_eq!(
        h[&slot],
        SlotHistory {
            last_start_ms: 61_000,
            runs: 2
        }
    );
}

#[test]
fn runs_read_back_whole_and_in_time_order() {
    let (_dir, s) = store();
    let mut failed = run("b", "a", 0, 5_000, 0.0);
    failed.outcome = Outcome::Failed;
    failed.figures.clear();
    failed.emulator_trustworthy = None;
    s.record(&failed, None).unwrap();
    s.record(&run("a", "b", 0, 1_000, 9.4e8), None).unwrap();
    let runs = s.runs().unwrap();
    assert_eq!(runs, vec![run("a", "b", 0, 1_000, 9.4e8), failed]);
}

#[test]
fn pruning_bounds_the_history_but_keeps_each_slots_newest_run() {
    let (dir, s) = store();
    for i in 0..500u64 {
        s.record(&run("a", "b", i, i * 1_000, 9e8), None).unwrap();
        s.record(&run("b", "a", i, i * 1_000, 9e8), None).unwrap();
    }
    // Keep 100 s: runs 400..499 of each slot.
    s.prune(499_000, 99_000, 10_000).unwrap();
    assert_eq!(s.run_count().unwrap(), 200);
    // At most 50 per slot.
    s.prune(499_000, 1_000_000, 50).unwrap();
    assert_eq!(s.run_count().unwrap(), 100);
    let h = s.slot_histories().unwrap();
    assert!(h.values().all(|h| h.runs == 500), "{h:?}");
    // A slot long silent keeps its newest run, so its count survives.
    s.prune(10_000_000, 1_000, 50).unwrap();
    assert_eq!(s.run_count().unwrap(), 2);
    assert!(s.slot_histories().unwrap().values().all(|h| h.runs == 500));
    drop(s);
    assert!(dir.path().join("monitor.db").exists());
}

fn check() -> RegressionCheck {
    RegressionCheck {
        regressed: true,
        p_value: 0.004,
        baseline: 940e6,
        recent: 400e6,
        worse_by: 0.57,
        worse_needed: 0.2,
        history_used: 19,
    }
}

#[test]
fn alerts_open_carry_evidence_to_every_open_alert_of_the_pair_and_close() {
    let (_dir, s) = store();
    let slot = ("a".to_string(), "b".to_string(), "stream".to_string());
    let rr = ("a".to_string(), "b".to_string(), "rr".to_string());
    let other = ("b".to_string(), "a".to_string(), "stream".to_string());
    let id = s
        .open_alert(&slot, "throughput_bps", 10_000, &check())
        .unwrap();
    let id_rr = s.open_alert(&rr, "rr_p99_s", 10_500, &check()).unwrap();
    let id_other = s
        .open_alert(&other, "throughput_bps", 10_700, &check())
        .unwrap();
    let evidence = Evidence::of(
        vec![tcplab_doctor::Finding::new(
            "rwnd_limited",
            tcplab_doctor::Severity::Warning,
            "receive window",
        )],
        11_000,
    );
    let given = s.set_evidence("a", "b", &evidence).unwrap();
    let mut ids: Vec<i64> = given.iter().map(|a| a.id).collect();
    ids.sort_unstable();
    assert_eq!(
        ids,
        [id, id_rr],
        "the pair's alerts, not the reverse pair's"
    );
    // Evidence already given is not overwritten by a later doctor run.
    assert!(
        s.set_evidence("a", "b", &Evidence::failed("x".into(), 12_000))
            .unwrap()
            .is_empty()
    );
    let open = s.alerts(true).unwrap();
    assert_eq!(open.len(), 3);
    let first = open.iter().find(|a| a.id == id).unwrap();
    assert_eq!(first.evidence.as_ref(), Some(&evidence));
    assert_eq!(first.check, check());
    assert!(
        open.iter()
            .find(|a| a.id == id_other)
            .unwrap()
            .evidence
            .is_none()
    );
    assert_eq!(
        s.close_alert(&slot, "throughput_bps", 20_000).unwrap(),
        Some(id)
    );
    assert_eq!(
        s.close_alert(&slot, "throughput_bps", 21_000).unwrap(),
        None
    );
    assert_eq!(s.alerts(true).unwrap().len(), 2);
    let all = s.alerts(false).unwrap();
    assert_eq!(
        all.iter().find(|a| a.id == id).unwrap().closed_ms,
        Some(20_000)
    );
}

#[test]
fn a_file_that_is_not_a_database_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("not.db");
    std::fs::write(&path, vec![b'x'; 4096]).unwrap();
    let e = MonitorStore::open(&path).unwrap_err().to_string();
    assert!(e.contains("not.db") && e.contains("--db"), "{e}");
}

#[test]
fn the_seed_is_kept_across_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.db");
    assert_eq!(MonitorStore::open(&path).unwrap().seed(7).unwrap(), 7);
    assert_eq!(MonitorStore::open(&path).unwrap().seed(99).unwrap(), 7);
}
