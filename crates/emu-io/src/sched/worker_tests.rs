//! Exact tests of the worker's decisions, in virtual time.

use super::*;

fn tuning(yield_after_ns: Nanos, lone_pause_ns: Nanos) -> Tuning {
    Tuning {
        spin_ns: 100_000,
        spin_budget_ns: SPIN_WINDOW / 4,
        yield_after_ns,
        yield_for_ns: 20_000,
        lone_pause_ns,
        lone_pause_late_ns: 0,
        light_other_after_ns: 0,
        ..Tuning::default()
    }
}

fn sched(yield_after_ns: Nanos, lone_pause_ns: Nanos) -> WorkerSched {
    WorkerSched::new(
        tuning(yield_after_ns, lone_pause_ns),
        false,
        false,
        1_000_000,
    )
}

fn held(next: Option<Nanos>) -> TurnEnd {
    TurnEnd {
        next,
        ..TurnEnd::default()
    }
}

fn action(s: &mut WorkerSched, end: TurnEnd, now: Nanos) -> Action {
    s.after_turn(&end, || 0, now).action
}

#[test]
fn a_worker_pauses_only_after_running_long_enough_while_it_holds_frames() {
    let frames = held(Some(5_000_000));
    // Awake since 1 ms: 199.999 µs is not yet long enough, 200 µs is.
    assert_ne!(
        action(&mut sched(200_000, 0), frames, 1_199_999),
        Action::Pause(20_000)
    );
    assert_eq!(
        action(&mut sched(200_000, 0), frames, 1_200_000),
        Action::Pause(20_000)
    );
    // Overdue frames count as held.
    assert_eq!(
        action(&mut sched(200_000, 0), held(Some(0)), 1_300_000),
        Action::Pause(20_000)
    );
    // Nothing held (frames due on arrival left in the same turn): never...
    assert_ne!(
        action(&mut sched(200_000, 0), held(None), 9_000_000),
        Action::Pause(20_000)
    );
    // ...unless it keeps sending the other direction's overdue frames.
    let helping = TurnEnd {
        helping: true,
        ..held(None)
    };
    assert_eq!(
        action(&mut sched(200_000, 0), helping, 1_200_000),
        Action::Pause(20_000)
    );
    // Pauses off.
    assert_eq!(action(&mut sched(0, 0), helping, 9_000_000), Action::Again);
    // A sleep restarts the count.
    let mut s = sched(200_000, 0);
    s.slept(1_150_000);
    assert_ne!(action(&mut s, frames, 1_200_000), Action::Pause(20_000));
    assert_eq!(action(&mut s, frames, 1_350_000), Action::Pause(20_000));
}

#[test]
fn the_ladder_puts_received_frames_before_a_blocked_ring_and_help_before_the_wait() {
    let mut s = sched(0, 0);
    let blocked = TurnEnd {
        received: 3,
        tx_blocked: true,
        next: Some(2_000_000),
        ..TurnEnd::default()
    };
    assert_eq!(action(&mut s, blocked, 1_000_000), Action::Again);
    let blocked = TurnEnd {
        received: 0,
        helping: true,
        ..blocked
    };
    assert_eq!(
        action(&mut s, blocked, 1_000_000),
        Action::TxBlocked(TX_BLOCKED_PAUSE)
    );
    let helping = TurnEnd {
        tx_blocked: false,
        ..blocked
    };
    assert_eq!(action(&mut s, helping, 1_000_000), Action::Again);
    let idle = TurnEnd {
        helping: false,
        ..helping
    };
    assert_eq!(
        action(&mut s, idle, 1_000_000),
        Action::Wait {
            plan: WaitPlan::Sleep {
                timeout: 1_000_000,
                then_spin: None
            },
            until: Some(2_000_000)
        },
        "a frame that is not lone is slept to, not spun to"
    );
}

#[test]
fn only_a_lone_frame_is_spun_to_and_only_within_the_budget() {
    let mut s = sched(0, 0);
    let lone = TurnEnd {
        next: Some(1_050_000),
        next_lone: true,
        ..TurnEnd::default()
    };
    assert_eq!(
        action(&mut s, lone, 1_000_000),
        Action::Wait {
            plan: WaitPlan::Spin(1_050_000),
            until: Some(1_050_000)
        }
    );
    s.spun(SPIN_WINDOW / 4);
    assert_eq!(
        action(&mut s, lone, 1_000_000),
        Action::Wait {
            plan: WaitPlan::Sleep {
                timeout: 50_000,
                then_spin: None
            },
            until: Some(1_050_000)
        },
        "the budget is spent for this window"
    );
}

#[test]
fn a_busy_worker_pauses_once_for_a_lone_send_elsewhere() {
    let mut s = sched(0, 80_000);
    let unread = TurnEnd {
        received: 1,
        ..TurnEnd::default()
    };
    let off = sched(0, 0).after_turn(&unread, || panic!("read with pauses off"), 2_000_000);
    assert_eq!(off.action, Action::Again);
    // Busy: frames received, none held.
    let busy = TurnEnd {
        received: 1,
        ..TurnEnd::default()
    };
    assert_eq!(
        s.after_turn(&busy, || 1, 2_000_000).action,
        Action::Pause(80_000)
    );
    // The same send is not paused for twice.
    assert_eq!(s.after_turn(&busy, || 1, 3_000_000).action, Action::Again);
    // A new one within the spacing is not paused for either; after it, it is.
    assert_eq!(s.after_turn(&busy, || 2, 2_100_000).action, Action::Again);
    assert_eq!(
        s.after_turn(&busy, || 3, 2_000_000 + lone::LONE_PAUSE_SPACING)
            .action,
        Action::Pause(80_000)
    );
    // A lone frame held for soon cuts the pause to end a spin margin before it.
    let mut s = sched(0, 80_000);
    let holds_lone = TurnEnd {
        received: 1,
        next: Some(2_150_000),
        holds_lone: true,
        ..TurnEnd::default()
    };
    assert_eq!(
        s.after_turn(&holds_lone, || 1, 2_000_000).action,
        Action::Pause(50_000)
    );
}

#[test]
fn a_light_realtime_worker_drops_its_class_and_takes_it_back_when_it_holds_frames() {
    let t = Tuning {
        light_other_after_ns: 10_000_000,
        ..tuning(0, 0)
    };
    let mut s = WorkerSched::new(t, false, true, 0);
    let mut changes = Vec::new();
    for now in (0..=20_000_000).step_by(1_000_000) {
        if let Some(c) = s.after_turn(&held(None), || 0, now).class {
            changes.push((now, c));
        }
    }
    assert_eq!(changes, [(10_000_000, Class::Other)]);
    let step = s.after_turn(&held(Some(30_000_000)), || 0, 21_000_000);
    assert_eq!(step.class, Some(Class::Fifo));
    // Never without SCHED_FIFO to begin with.
    let mut s = WorkerSched::new(t, false, false, 0);
    assert!(
        (0..=20_000_000)
            .step_by(1_000_000)
            .all(|now| s.after_turn(&held(None), || 0, now).class.is_none())
    );
}

#[test]
fn wait_plans_follow_the_absolute_schedule() {
    let spin = 50_000;
    assert_eq!(
        plan_wait(Some(1_000), 1_000, spin, false, true),
        WaitPlan::Now
    );
    assert_eq!(
        plan_wait(Some(900), 1_000, spin, false, true),
        WaitPlan::Now
    );
    // Within the spin margin: spin to the departure.
    assert_eq!(
        plan_wait(Some(41_000), 1_000, spin, false, true),
        WaitPlan::Spin(41_000)
    );
    // Further out: sleep until margin before it, then spin.
    assert_eq!(
        plan_wait(Some(10_001_000), 1_000, spin, false, true),
        WaitPlan::Sleep {
            timeout: 9_950_000,
            then_spin: Some(10_001_000)
        }
    );
    // Nothing queued: sleep on the rings (woken by frames or the waker).
    assert_eq!(
        plan_wait(None, 1_000, spin, false, true),
        WaitPlan::Sleep {
            timeout: IDLE_SLEEP,
            then_spin: None
        }
    );
    // Busy-poll never sleeps.
    assert_eq!(
        plan_wait(Some(10_001_000), 1_000, spin, true, true),
        WaitPlan::Spin(10_001_000)
    );
    assert_eq!(
        plan_wait(None, 1_000, spin, true, true),
        WaitPlan::Spin(1_000 + IDLE_SLEEP)
    );
}

#[test]
fn a_spent_spin_budget_sleeps_to_the_exact_departure() {
    assert_eq!(
        plan_wait(Some(41_000), 1_000, 50_000, false, false),
        WaitPlan::Sleep {
            timeout: 40_000,
            then_spin: None
        }
    );
    assert_eq!(
        plan_wait(Some(41_000), 1_000, 50_000, true, false),
        WaitPlan::Spin(41_000),
        "busy-poll has no budget"
    );
    let mut b = SpinBudget::new(SPIN_WINDOW / 4);
    assert!(b.allows(SPIN_WINDOW));
    b.charge(SPIN_WINDOW / 4 - 1);
    assert!(b.allows(SPIN_WINDOW + 1));
    b.charge(1);
    assert!(!b.allows(2 * SPIN_WINDOW - 1), "spent within the window");
    assert!(b.allows(2 * SPIN_WINDOW), "a new window starts afresh");
}

#[test]
fn a_frame_leaves_from_the_ring_only_when_due_with_nothing_ahead() {
    assert!(leaves_from_ring(100, 100, true, (0, 64), true));
    assert!(
        !leaves_from_ring(101, 100, true, (0, 64), true),
        "not yet due"
    );
    assert!(
        !leaves_from_ring(100, 100, false, (0, 64), true),
        "would overtake"
    );
    assert!(
        !leaves_from_ring(100, 100, true, (64, 64), true),
        "a full send"
    );
    assert!(
        !leaves_from_ring(100, 100, true, (0, 64), false),
        "needs a copy"
    );
}

#[test]
fn a_release_stops_after_a_short_send_a_blocked_ring_an_arrival_or_a_lone_send() {
    let never = || -> bool { panic!("read although the answer was known") };
    assert!(another_send(8, 8, false, || false, || false));
    assert!(
        !another_send(7, 8, false, never, never),
        "nothing more was due"
    );
    assert!(
        !another_send(8, 8, true, never, never),
        "the TX ring is full"
    );
    assert!(
        !another_send(8, 8, false, || true, never),
        "a frame waits in the ring"
    );
    assert!(
        !another_send(8, 8, false, || false, || true),
        "a lone frame left"
    );
}
