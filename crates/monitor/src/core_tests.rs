use tcplab_results::session::RunMeta;
use tcplab_results::stream::{StreamResult, StreamSummary};

use super::*;
use crate::evidence::Cause;

const S: u64 = 1_000;

fn stream(bps: f64) -> Finished {
    Finished::Result {
        report: Box::new(Report::Stream(StreamResult {
            meta: RunMeta {
                complete: true,
                ..RunMeta::default()
            },
            summary: StreamSummary {
                throughput_bps: Some(bps),
                ..StreamSummary::default()
            },
            ..StreamResult::default()
        })),
        emulator_trustworthy: Some(true),
    }
}

fn hosts(n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("h{i}")).collect()
}

fn stream_every(secs: u64) -> Vec<Workload> {
    vec![Workload {
        label: "stream".into(),
        cadence: Cadence {
            every_ms: secs * S,
            jitter: 0.1,
        },
    }]
}

/// A pair's throughput: 940 Mbit/s with a deterministic ±2 % wobble.
fn healthy(slot: Slot, t: u64) -> f64 {
    let h = (slot.src * 31 + slot.dst * 7) as u64 + t / 997;
    940e6 * (1.0 + 0.02 * ((h % 11) as f64 / 5.0 - 1.0))
}

/// How long the simulated doctor takes, and what it finds.
const DOCTOR_MS: u64 = 60 * S;

fn doctor_finds() -> Cause {
    Cause::Found {
        id: "rwnd_limited".into(),
    }
}

/// Drives the monitor in virtual time: tests take `test_ms`, the doctor [`DOCTOR_MS`]; `path`
/// gives each test's throughput. Returns every run and every event; checks that no host is
/// ever in two tasks at once.
fn simulate(
    m: &mut Monitor,
    from_ms: u64,
    until_ms: u64,
    test_ms: u64,
    path: impl Fn(Slot, u64) -> f64,
) -> (Vec<Run>, Vec<Event>) {
    let mut running: Vec<(u64, Task)> = Vec::new();
    let (mut runs, mut events) = (Vec::new(), Vec::new());
    let mut now = from_ms;
    let pair_of = |t: &Task| match t {
        Task::Test(slot) => slot.pair(),
        Task::Diagnose(pair) => *pair,
    };
    while now <= until_ms {
        running.sort_by_key(|(end, _)| *end);
        while let Some(&(end, task)) = running.first().filter(|(end, _)| *end <= now) {
            running.remove(0);
            match task {
                Task::Test(slot) => {
                    let (run, ev) = m
                        .finish(slot, stream(path(slot, end)))
                        .expect("it was running");
                    runs.push(run);
                    events.extend(ev);
                }
                Task::Diagnose(pair) => assert!(m.diagnosed(pair, doctor_finds())),
            }
        }
        for task in m.start(now) {
            let p = pair_of(&task);
            for (_, other) in &running {
                let o = pair_of(other);
                assert!(
                    [o.src, o.dst].iter().all(|h| *h != p.src && *h != p.dst),
                    "{task:?} shares a host with {other:?}"
                );
            }
            let ends = match task {
                Task::Test(_) => now + test_ms,
                Task::Diagnose(_) => now + DOCTOR_MS,
            };
            running.push((ends, task));
        }
        now += 250;
    }
    (runs, events)
}

fn tests_of(tasks: Vec<Task>) -> Vec<Slot> {
    tasks
        .into_iter()
        .filter_map(|t| match t {
            Task::Test(slot) => Some(slot),
            Task::Diagnose(_) => None,
        })
        .collect()
}

/// The figure, in compressed time: 16 hosts (240 pairs) measured every 60 s for an
/// hour (tests of 1 s, at most 8 at once), one pair's path halved at 30 minutes. The
/// regression is flagged on that pair within two of its intervals, with no alarm on any other
/// pair, and the monitor's state stays bounded.
#[test]
fn a_sixteen_host_hour_flags_the_one_regressed_pair_and_no_other() {
    let hosts = hosts(16);
    let mut m = Monitor::new(
        hosts,
        stream_every(60),
        42,
        0,
        RegressionConfig::default(),
        &[],
    )
    .unwrap();
    let bad = Slot {
        src: 3,
        dst: 9,
        workload: 0,
    };
    let change_at = 1800 * S;
    let (runs, events) = simulate(&mut m, 0, 3600 * S, S, |slot, t| {
        if slot == bad && t >= change_at {
            healthy(slot, t) / 2.0
        } else {
            healthy(slot, t)
        }
    });
    assert!(runs.len() > 240 * 55, "{} runs", runs.len());
    assert!(m.schedule.lag_ms(3600 * S) < 30 * S, "the schedule kept up");
    let opened: Vec<&Event> = events
        .iter()
        .filter(|e| matches!(e, Event::Opened { .. }))
        .collect();
    assert_eq!(opened.len(), 1, "{opened:?}");
    match opened[0] {
        Event::Opened { watched, at_ms, .. } => {
            assert_eq!(watched.slot, bad);
            let after = *at_ms - change_at;
            assert!(
                after <= 2 * 66 * S + 30 * S,
                "flagged {} s after",
                after / S
            );
        }
        Event::Closed { .. } => unreachable!(),
    }
    assert_eq!(m.open_alerts(), vec![(bad, Figure::ThroughputBps)]);
    assert_eq!(
        m.cause(bad.pair()),
        Some(&doctor_finds()),
        "the doctor ran on it"
    );
    let snap = m.snapshot(3600 * S, 16);
    assert_eq!(snap.pairs.len(), 240);
    let labelled: Vec<&PairState> = snap.pairs.iter().filter(|p| p.cause.is_some()).collect();
    assert_eq!(labelled.len(), 1);
    assert_eq!(labelled[0].cause.as_deref(), Some("rwnd_limited"));
    assert!(m.alerts.watched() <= 240);
}

#[test]
fn a_restart_resumes_the_counts_and_the_alerts_from_the_kept_runs() {
    let bad = Slot {
        src: 0,
        dst: 1,
        workload: 0,
    };
    let path = |slot: Slot, t: u64| {
        if slot == bad && t >= 3600 * S {
            healthy(slot, t) / 2.0
        } else {
            healthy(slot, t)
        }
    };
    let mut a = Monitor::new(
        hosts(3),
        stream_every(60),
        9,
        0,
        RegressionConfig::default(),
        &[],
    )
    .unwrap();
    let (runs, _) = simulate(&mut a, 0, 2 * 3600 * S, S, path);
    // Killed here; a new monitor starts from the database's runs.
    let now = 2 * 3600 * S + 500;
    let mut b = Monitor::new(
        hosts(3),
        stream_every(60),
        9,
        now,
        RegressionConfig::default(),
        &runs,
    )
    .unwrap();
    for slot in a.pairs.keys() {
        assert_eq!(a.schedule.slot(*slot), b.schedule.slot(*slot), "{slot:?}");
        assert_eq!(a.pairs[slot].runs, b.pairs[slot].runs, "{slot:?}");
    }
    assert_eq!(b.open_alerts(), vec![(bad, Figure::ThroughputBps)]);
    // The database kept the alert without evidence (killed before the doctor ended): the
    // doctor is queued again, and goes first.
    b.resume_alerts([("h1", "h2", None)]);
    assert_eq!(b.cause(bad.pair()), Some(&Cause::Pending));
    assert_eq!(b.start(now + 3600 * S)[0], Task::Diagnose(bad.pair()));
    let mut c = Monitor::new(
        hosts(3),
        stream_every(60),
        9,
        now,
        RegressionConfig::default(),
        &runs,
    )
    .unwrap();
    c.resume_alerts([("h1", "h2", Some(doctor_finds())), ("gone", "h2", None)]);
    assert_eq!(c.cause(bad.pair()), Some(&doctor_finds()));
    assert_eq!(c.diagnoses(), 0, "evidence kept: no doctor again");
}

/// A queued doctor holds its hosts: the tests in flight there end, none starts, and the doctor
/// starts as soon as both hosts are free, before any test that is due.
#[test]
fn a_queued_doctor_holds_its_hosts_until_they_are_free() {
    let mut m = Monitor::new(
        hosts(4),
        stream_every(1),
        3,
        0,
        RegressionConfig::default(),
        &[],
    )
    .unwrap();
    // Every slot is due within its first interval: by 1 s two disjoint pairs run.
    let mut first = Vec::new();
    for t in (0..=S).step_by(50) {
        first.extend(tests_of(m.start(t)));
    }
    assert_eq!(
        first.len(),
        2,
        "two disjoint pairs of four hosts: {first:?}"
    );
    let (a, b) = (first[0], first[1]);
    let pair = Pair {
        src: a.src,
        dst: b.dst,
    };
    m.queue_doctor(pair);
    assert_eq!(m.diagnoses(), 1);
    // Both hosts are busy: the doctor waits, and no test starts on its hosts.
    assert!(m.start(5 * S).is_empty());
    m.finish(a, stream(9e8)).unwrap();
    let started = m.start(6 * S);
    assert!(
        tests_of(started.clone())
            .iter()
            .all(|s| ![s.src, s.dst].contains(&pair.src) && ![s.src, s.dst].contains(&pair.dst)),
        "{started:?}"
    );
    for slot in tests_of(started) {
        m.finish(slot, stream(9e8)).unwrap();
    }
    m.finish(b, stream(9e8)).unwrap();
    assert_eq!(m.start(7 * S)[0], Task::Diagnose(pair));
    assert!(
        !m.diagnosed(Pair { src: 9, dst: 9 }, Cause::Unexplained),
        "not running"
    );
    assert!(m.diagnosed(pair, Cause::Unexplained));
    assert_eq!(
        m.cause(pair),
        None,
        "no alert open on the pair: no cause kept"
    );
    assert_eq!(m.diagnoses(), 0);
}

#[test]
fn failed_and_untrustworthy_runs_count_but_do_not_judge_the_path() {
    let mut m = Monitor::new(
        hosts(2),
        stream_every(10),
        1,
        0,
        RegressionConfig::default(),
        &[],
    )
    .unwrap();
    let mut n = 0;
    let mut now = 0;
    while n < 80 {
        for slot in tests_of(m.start(now)) {
            let finished = match n % 4 {
                0 => Finished::Failed,
                1 => Finished::Result {
                    report: match stream(100e6) {
                        Finished::Result { report, .. } => report,
                        Finished::Failed => unreachable!(),
                    },
                    emulator_trustworthy: Some(false),
                },
                _ => stream(healthy(slot, now)),
            };
            let (_, events) = m.finish(slot, finished).unwrap();
            assert!(events.is_empty(), "{events:?}");
            n += 1;
        }
        now += 100;
    }
    let snap = m.snapshot(now, 2);
    let runs: u64 = snap.pairs.iter().map(|p| p.runs[2]).sum();
    assert_eq!(runs, 20, "failed runs counted");
    assert!(
        m.finish(
            Slot {
                src: 0,
                dst: 1,
                workload: 0
            },
            Finished::Failed
        )
        .is_none()
    );
}
