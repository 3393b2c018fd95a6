use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use super::*;

const MIN: u64 = 60_000;

fn every(minutes: u64, jitter: f64) -> Cadence {
    Cadence {
        every_ms: minutes * MIN,
        jitter,
    }
}

/// Runs the schedule in virtual time: every `step_ms`, start what it says, each test lasting
/// `test_ms`; returns each start as (time, slot).
fn simulate(s: &mut Schedule, until_ms: u64, step_ms: u64, test_ms: u64) -> Vec<(u64, Slot)> {
    let mut running: Vec<(u64, Slot)> = Vec::new();
    let mut starts = Vec::new();
    let mut now = 0;
    while now <= until_ms {
        running.retain(|(end, _)| *end > now);
        let busy: BTreeSet<usize> = running.iter().flat_map(|(_, s)| [s.src, s.dst]).collect();
        for slot in s.to_start(now, &busy) {
            s.started(slot, now);
            running.push((now + test_ms, slot));
            starts.push((now, slot));
        }
        now += step_ms;
    }
    starts
}

#[test]
fn every_ordered_pair_of_every_workload_is_a_slot() {
    let s = Schedule::new(
        4,
        vec![every(10, 0.1), every(60, 0.0)],
        1,
        0,
        &BTreeMap::new(),
    )
    .unwrap();
    assert_eq!(s.due.len(), 2 * 4 * 3);
    assert!(s.due.keys().all(|k| k.src != k.dst));
}

#[test]
fn no_host_is_ever_in_two_tests_at_once() {
    let mut s = Schedule::new(
        6,
        vec![every(1, 0.2), every(2, 0.2)],
        9,
        0,
        &BTreeMap::new(),
    )
    .unwrap();
    let test_ms = 5_000;
    let starts = simulate(&mut s, 30 * MIN, 1_000, test_ms);
    assert!(starts.len() > 100, "{}", starts.len());
    for (i, (t, a)) in starts.iter().enumerate() {
        for (u, b) in &starts[i + 1..] {
            if *u < t + test_ms {
                let shared = [a.src, a.dst].iter().any(|h| *h == b.src || *h == b.dst);
                assert!(!shared, "{a:?} at {t} and {b:?} at {u} share a host");
            }
        }
    }
}

#[test]
fn each_slot_runs_once_per_interval_within_its_jitter() {
    let mut s = Schedule::new(3, vec![every(10, 0.1)], 3, 0, &BTreeMap::new()).unwrap();
    let starts = simulate(&mut s, 300 * MIN, 1_000, 2_000);
    let mut by_slot: BTreeMap<Slot, Vec<u64>> = BTreeMap::new();
    for (t, slot) in starts {
        by_slot.entry(slot).or_default().push(t);
    }
    assert_eq!(by_slot.len(), 6);
    for (slot, times) in by_slot {
        // 300 minutes at one start per 10 ± 1 minutes, the first within the first interval.
        assert!(
            (28..=33).contains(&times.len()),
            "{slot:?}: {}",
            times.len()
        );
        for w in times.windows(2) {
            let gap = w[1] - w[0];
            // A start waits for busy hosts by at most a few tests' length beyond its jitter.
            assert!(
                (9 * MIN..=11 * MIN + 10_000).contains(&gap),
                "{slot:?}: gap {gap}"
            );
        }
    }
}

#[test]
fn the_first_round_spreads_over_the_first_interval() {
    let s = Schedule::new(8, vec![every(10, 0.1)], 5, 1_000, &BTreeMap::new()).unwrap();
    let firsts: Vec<u64> = s.due.values().map(|(at, _)| *at).collect();
    assert!(firsts.iter().all(|t| (1_000..1_000 + 10 * MIN).contains(t)));
    let early = firsts.iter().filter(|t| **t < 1_000 + 5 * MIN).count();
    assert!(
        (14..=42).contains(&early),
        "{early} of 56 in the first half"
    );
}

#[test]
fn a_restart_computes_the_times_the_stopped_monitor_would_have() {
    let cad = vec![every(10, 0.2)];
    let mut a = Schedule::new(4, cad.clone(), 77, 0, &BTreeMap::new()).unwrap();
    let starts = simulate(&mut a, 95 * MIN, 1_000, 3_000);
    // What the database knows: each slot's last start and how many runs it had.
    let mut known: BTreeMap<Slot, SlotHistory> = BTreeMap::new();
    for (t, slot) in starts {
        let h = known.entry(slot).or_insert(SlotHistory {
            last_start_ms: 0,
            runs: 0,
        });
        h.last_start_ms = t;
        h.runs += 1;
    }
    assert_eq!(known.len(), 12, "every slot ran before the stop");
    let b = Schedule::new(4, cad, 77, 95 * MIN + 500, &known).unwrap();
    for slot in known.keys() {
        assert_eq!(a.slot(*slot), b.slot(*slot), "{slot:?}");
    }
}

#[test]
fn lag_shows_a_schedule_that_cannot_keep_up() {
    // 12 hosts, 132 slots each due every minute, tests of 30 s: at most 6 at once, 132 tests
    // need 11 minutes per round: the schedule falls further behind.
    let mut s = Schedule::new(12, vec![every(1, 0.0)], 1, 0, &BTreeMap::new()).unwrap();
    simulate(&mut s, 20 * MIN, 1_000, 30_000);
    assert!(s.lag_ms(20 * MIN) > 5 * MIN, "{}", s.lag_ms(20 * MIN));
    let mut t = Schedule::new(3, vec![every(10, 0.0)], 1, 0, &BTreeMap::new()).unwrap();
    simulate(&mut t, 20 * MIN, 1_000, 1_000);
    assert!(t.lag_ms(20 * MIN) < 2_000, "{}", t.lag_ms(20 * MIN));
}

#[test]
fn bad_schedules_are_refused_with_the_fix() {
    let none = BTreeMap::new();
    assert_eq!(
        Schedule::new(1, vec![every(1, 0.0)], 0, 0, &none).unwrap_err(),
        ScheduleError::TooFewHosts(1)
    );
    let e = Schedule::new(2, vec![every(0, 0.0)], 0, 0, &none).unwrap_err();
    assert!(e.to_string().contains("--every"), "{e}");
    let e = Schedule::new(2, vec![every(1, 0.7)], 0, 0, &none).unwrap_err();
    assert!(e.to_string().contains("0..=0.5"), "{e}");
}

proptest! {
    /// Whatever hosts are busy, the slots to start share no host with them or each other.
    #[test]
    fn started_slots_never_share_a_host(
        hosts in 2usize..10,
        busy in proptest::collection::btree_set(0usize..10, 0..5),
        now in 0u64..(30 * MIN),
        seed in any::<u64>(),
    ) {
        let s = Schedule::new(hosts, vec![every(1, 0.3), every(5, 0.5)], seed, 0, &BTreeMap::new()).unwrap();
        let start = s.to_start(now, &busy);
        let mut seen = busy.clone();
        for slot in start {
            prop_assert!(seen.insert(slot.src) && seen.insert(slot.dst), "{slot:?}");
        }
    }
}
