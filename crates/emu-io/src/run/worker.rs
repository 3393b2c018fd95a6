//! The worker loop: one thread serving one or both directions.
//!
//! Each turn: release everything due, apply reconfigurations, drain the RX rings, release what
//! became due, send the other direction's overdue frames if its worker is not running
//! (`Tuning::help_due`), then wait.
//! Waiting is on an absolute schedule: the next departure is an absolute CLOCK_MONOTONIC time;
//! the worker sleeps in `ppoll` on the RX fds (and a wake-up eventfd) with a timeout computed
//! from that absolute time *minus* `spin_ns`, then spins to the departure (only for a frame
//! alone in its flow, `spin_min_gap_ns`, and within a spin budget). Every wake-up
//! releases every frame due, so a burst leaves in one TX kick. `ppoll` (an hrtimer, slack set to
//! 1 ns) rather than `clock_nanosleep(TIMER_ABSTIME)` because the worker must also wake for
//! arriving frames; since the timeout is recomputed from the absolute deadline at each call,
//! no error accumulates. With `busy_poll` it never sleeps.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::io::sys::clock::{
    Nanos, current_cpu, current_tid, monotonic_ns, pin_to_cpu, set_fifo, set_other,
    set_timer_slack_min, sleep_until, thread_cpu_ns, wait_readable,
};
use crate::io::sys::wake::Waker;
use crate::model::Model;
use crate::report::lateness::LATE_LIMIT_NS;
use crate::report::verdict::ThreadUsage;
use crate::run::awake::{AwakeHandle, LINGER};
use crate::run::direction::Direction;
use crate::sched::lone::{self, LonePause, LoneSignal};
use crate::sched::policy::{Class, ClassPolicy, TurnLoad};
use crate::tuning::Tuning;

/// How often the kernel's RX-ring drop counters are read.
const STATS_EVERY: Nanos = 50_000_000;
/// Pause when the TX ring is full, to let the kernel free slots.
const TX_BLOCKED_PAUSE: Nanos = 50_000;
/// Longest sleep with nothing queued (a safety net; stop and reconfigure wake via eventfd).
const IDLE_SLEEP: Nanos = 200_000_000;
/// Window over which spinning is budgeted (`Tuning::spin_budget_ns` per window).
pub const SPIN_WINDOW: Nanos = 10_000_000;

/// Spin time used in the current window, against a limit per window; past it, the worker
/// sleeps to the exact departure instead. Without a budget, departures closer together than
/// the spin margin (a rate limit: one frame every 12 µs at 1 Gbit/s) keep a SCHED_FIFO worker
/// spinning non-stop, and the kernel's RT throttling (`sched_rt_runtime_us`, 95 %) then stops
/// it for 50 ms: lateness max 37-48 ms under a 1 Gbit/s bulk flow before this budget
/// (BENCH.md).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SpinBudget {
    window_start: Nanos,
    spun: Nanos,
    limit: Nanos,
}

impl SpinBudget {
    /// A budget of `limit` ns of spinning per [`SPIN_WINDOW`].
    pub fn new(limit: Nanos) -> Self {
        Self {
            limit,
            ..Self::default()
        }
    }

    /// True if spinning is still allowed at `now` (starts a new window when the last ended).
    pub fn allows(&mut self, now: Nanos) -> bool {
        if now.saturating_sub(self.window_start) >= SPIN_WINDOW {
            self.window_start = now;
            self.spun = 0;
        }
        self.spun < self.limit
    }

    /// Charges `ns` of spinning.
    pub fn charge(&mut self, ns: Nanos) {
        self.spun = self.spun.saturating_add(ns);
    }
}

/// What the worker needs besides its directions.
#[derive(Debug)]
pub struct WorkerCtl {
    /// Set by `Bridge::stop`.
    pub stop: Arc<AtomicBool>,
    /// Woken by stop/reconfigure.
    pub waker: Arc<Waker>,
    /// Spin instead of sleeping.
    pub busy_poll: bool,
    /// Spin margins and budgets, pauses, the light worker's class (see [`Tuning`]).
    pub tuning: Tuning,
    /// Counts sends of lone frames in either direction, by the CPU that made them.
    pub lone: LoneSignal,
    /// CPU to pin to.
    pub cpu: Option<usize>,
    /// SCHED_FIFO priority.
    pub rt_priority: Option<u8>,
    /// Keeps the CPUs awake while a frame waits (None: keep-awake off).
    pub awake: Option<AwakeHandle>,
}

/// A direction shared between its own worker and, with `Tuning::help_due`, the other
/// direction's worker. The owner holds the lock for its whole turn and its spins and lets go
/// only to sleep, so the other worker sends its overdue frames only while it sleeps or waits
/// for a CPU. A worker never holds two directions' locks unless it owns both (one thread).
pub type Shared<M> = Arc<Mutex<Direction<M>>>;

/// The worker's own directions, locked (one, or two for a single thread).
type Locked<'a, M> = [Option<MutexGuard<'a, Direction<M>>>; 2];

/// Locks the worker's own directions, in order. A lock poisoned by a panic in the other
/// worker is taken anyway: the direction's state is consistent between frames, and the
/// panic itself is reported when that worker is joined.
fn lock_own<M: Model>(own: &[Shared<M>]) -> Locked<'_, M> {
    let lock = |i: usize| {
        own.get(i)
            .map(|d| d.lock().unwrap_or_else(PoisonError::into_inner))
    };
    [lock(0), lock(1)]
}

/// The locked directions, one by one.
fn each<'g, 'a: 'g, M: Model>(
    g: &'g mut Locked<'a, M>,
) -> impl Iterator<Item = &'g mut Direction<M>> + 'g {
    g.iter_mut().flatten().map(|d| &mut **d)
}

/// Sends one batch of what is overdue in the directions this worker helps, each only if its
/// lock is free (its owner is not running a turn). Returns true if one of them still has
/// overdue frames: the worker takes its own turn and comes back instead of sleeping.
fn help_overdue<M: Model>(helped: &[Shared<M>]) -> bool {
    let mut more = false;
    for d in helped {
        if let Ok(mut d) = d.try_lock() {
            more |= d.release_overdue(monotonic_ns());
        }
    }
    more
}

/// What one turn left for the wait.
struct TurnEnd {
    received: usize,
    tx_blocked: bool,
    next: Option<Nanos>,
    /// The frame leaving at `next` is lone in its flow (`Entry::lone`): worth a spin.
    next_lone: bool,
    /// Some frame held for later is lone (a lone pause must not make it late).
    holds_lone: bool,
}

/// Releases what is due, applies reconfigurations, drains the RX rings, and releases what
/// became due (unless a lone frame left meanwhile: the worker may pause first, see
/// `crate::sched::lone`).
fn turn<M: Model>(g: &mut Locked<'_, M>, last_stats: &mut Nanos, lone: &LoneSignal) -> TurnEnd {
    let lone_epoch = lone.epoch();
    // Release first: a wait ends at a departure time, and everything else (reconfigure,
    // draining the RX ring) would otherwise run between the deadline and the kick (2-6 µs
    // of cold code on the test VM, 15-20 µs in a debug build).
    let now = monotonic_ns();
    each(g).for_each(|d| {
        d.release(now);
    });
    each(g).for_each(|d| d.apply_reconfig(now));
    let received: usize = each(g).map(|d| d.receive()).sum();
    let now = monotonic_ns();
    // Frames that arrived already due (no delay) leave in the same turn.
    if lone.epoch() == lone_epoch {
        each(g).for_each(|d| {
            d.release(now);
        });
    }
    if now.saturating_sub(*last_stats) >= STATS_EVERY {
        each(g).for_each(|d| {
            d.poll_ring_stats();
            d.publish_realised(now);
        });
        *last_stats = now;
    }
    let tx_blocked = each(g).any(|d| d.tx_blocked);
    let next = each(g).filter_map(|d| d.next_departure()).min();
    let next_lone =
        next.is_some() && each(g).any(|d| d.next_departure() == next && d.next_is_lone());
    TurnEnd {
        received,
        tx_blocked,
        next,
        next_lone,
        holds_lone: each(g).any(|d| d.holds_lone()),
    }
}

/// Runs until `ctl.stop`, serving `own` and helping `helped`; returns the thread's CPU use.
/// `ready` receives the outcome of the thread set-up (pinning, priority, poll descriptors;
/// on success the thread's kernel id)
/// before any frame moves, so `Bridge` start-up can report it.
pub fn run<M: Model>(
    own: &[Shared<M>],
    helped: &[Shared<M>],
    ctl: &WorkerCtl,
    ready: &std::sync::mpsc::Sender<Result<i32, String>>,
) -> Result<ThreadUsage, String> {
    let fds = match setup_thread(ctl).and_then(|()| poll_fds(own)) {
        Ok(fds) => fds,
        Err(e) => {
            // The starter may have gone; the error is returned from join as well.
            let _ = ready.send(Err(e.clone()));
            return Err(e);
        }
    };
    let _ = ready.send(Ok(current_tid()));
    let name = each(&mut lock_own(own))
        .map(|d| d.name)
        .collect::<Vec<_>>()
        .join(",");
    let (start, cpu0) = (monotonic_ns(), thread_cpu_ns());
    let mut last_stats = start;
    let mut budget = SpinBudget::new(ctl.tuning.spin_budget_ns);
    let mut awake_since = start;
    let mut lone_pause = LonePause::default();
    let mut class = ClassPolicy::new(match ctl.rt_priority {
        Some(_) => ctl.tuning.light_other_after_ns,
        None => 0,
    });
    while !ctl.stop.load(Ordering::Acquire) {
        let end = turn(&mut lock_own(own), &mut last_stats, &ctl.lone);
        let more_help = help_overdue(helped);
        let now = monotonic_ns();
        let load = TurnLoad {
            received: end.received,
            holds: end.next.is_some() || more_help,
        };
        if let Some(c) = class.after_turn(load, now) {
            apply_class(c, ctl.rt_priority)?;
        }
        if should_pause(ctl, &end, more_help, awake_since, now) {
            pause(ctl, now, ctl.tuning.yield_for_ns);
            awake_since = monotonic_ns();
            continue;
        }
        if let Some(len) = owed_lone_pause(ctl, &mut lone_pause, &end, more_help, now) {
            pause(ctl, now, len);
            awake_since = monotonic_ns();
            continue;
        }
        if end.received > 0 {
            continue;
        }
        if end.tx_blocked {
            // The kernel still owns the next TX slot. Sleep (not yield: a SCHED_FIFO yield
            // would never let a SCHED_OTHER ksoftirqd run, and it may be what frees the slot).
            sleep_until(monotonic_ns() + TX_BLOCKED_PAUSE);
            awake_since = monotonic_ns();
            continue;
        }
        if more_help {
            continue;
        }
        if wait(own, &fds, (end.next, end.next_lone), ctl, &mut budget)
            .map_err(|e| format!("poll failed: {e}"))?
        {
            awake_since = monotonic_ns();
        }
    }
    let end = monotonic_ns();
    each(&mut lock_own(own)).for_each(|d| {
        d.poll_ring_stats();
        d.publish_realised(end);
    });
    Ok(ThreadUsage {
        name,
        cpu_ns: thread_cpu_ns() - cpu0,
        wall_ns: end - start,
    })
}

/// How long to pause now for a lone frame sent from another CPU (`crate::sched::lone`), if at all.
/// Nothing is computed when lone pauses are off.
fn owed_lone_pause(
    ctl: &WorkerCtl,
    state: &mut LonePause,
    end: &TurnEnd,
    helping: bool,
    now: Nanos,
) -> Option<Nanos> {
    if ctl.tuning.lone_pause_ns == 0 {
        return None;
    }
    let busy = end.received > 0 || helping || end.next.is_some_and(|t| t <= now);
    // A lone frame is someone's probe, request or reply: never late for a pause.
    let late = if end.holds_lone {
        0
    } else {
        ctl.tuning.lone_pause_late_ns
    };
    let limits = (ctl.tuning.spin_ns, LATE_LIMIT_NS, late);
    let len = lone::pause_len(ctl.tuning.lone_pause_ns, limits, end.next, now);
    let sent_elsewhere = ctl.lone.elsewhere(current_cpu());
    state
        .take(sent_elsewhere, now, busy && len > 0)
        .then_some(len)
}

/// Sleeps `len` from `now`, keeping the CPUs awake meanwhile. Sleep, not `sched_yield`: a
/// SCHED_FIFO yield never lets a SCHED_OTHER task run.
fn pause(ctl: &WorkerCtl, now: Nanos, len: Nanos) {
    if let Some(awake) = &ctl.awake {
        awake.hold_until(now + len + LINGER, now);
    }
    sleep_until(now + len);
}

/// Whether to pause now (see `Tuning::yield_after_ns`): the worker has run that long
/// without sleeping while it holds frames for later departures (a delay line, a rate queue).
/// Holding frames is what keeps a worker awake for milliseconds (it spins to, or is behind,
/// a continuous schedule); frames due on arrival (no impairment) leave as they come and the
/// worker sleeps when its ring is empty, so there a pause would only take capacity away.
/// Overdue frames are sent meanwhile by the other worker (`Tuning::help_due`). A helper
/// that keeps sending the other direction's backlog counts as holding frames (`helping`).
fn should_pause(
    ctl: &WorkerCtl,
    end: &TurnEnd,
    helping: bool,
    awake_since: Nanos,
    now: Nanos,
) -> bool {
    ctl.tuning.yield_after_ns > 0
        && (end.next.is_some() || helping)
        && now.saturating_sub(awake_since) >= ctl.tuning.yield_after_ns
}

/// Moves the calling worker to `class` (`crate::sched::policy`). Failing to get SCHED_FIFO back
/// would leave a delay line timed by an ordinary task, so it ends the worker with an error.
fn apply_class(class: Class, rt_priority: Option<u8>) -> Result<(), String> {
    match (class, rt_priority) {
        (Class::Fifo, Some(p)) => {
            set_fifo(p).map_err(|e| format!("restoring SCHED_FIFO priority {p}: {e}"))
        }
        (Class::Other, _) | (Class::Fifo, None) => {
            set_other().map_err(|e| format!("switching to SCHED_OTHER: {e}"))
        }
    }
}

/// Copies of the own directions' RX descriptors to sleep on without holding their locks.
fn poll_fds<M: Model>(own: &[Shared<M>]) -> Result<Vec<OwnedFd>, String> {
    each(&mut lock_own(own))
        .map(|d| d.rx_fd().try_clone_to_owned())
        .collect::<std::io::Result<_>>()
        .map_err(|e| format!("duplicating an RX socket to poll on: {e}"))
}

/// Timer slack, CPU pinning and scheduling policy of the calling worker thread.
fn setup_thread(ctl: &WorkerCtl) -> Result<(), String> {
    set_timer_slack_min();
    if let Some(cpu) = ctl.cpu {
        pin_to_cpu(cpu).map_err(|e| format!("pinning to CPU {cpu}: {e}"))?;
    }
    if let Some(p) = ctl.rt_priority {
        set_fifo(p).map_err(|e| {
            format!(
                "SCHED_FIFO priority {p}: {e}: run as root (CAP_SYS_NICE) or set IoOptions::rt_priority to None"
            )
        })?;
    }
    Ok(())
}

/// What to do when a loop turn found nothing to receive. Pure, so the schedule arithmetic is
/// tested without a clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitPlan {
    /// A departure is already due: go round again at once.
    Now,
    /// Spin until this absolute time (or a frame arrives).
    Spin(Nanos),
    /// Sleep in `ppoll` for `timeout` ns, then (unless woken by a frame) spin until `then_spin`.
    Sleep {
        /// Relative timeout, computed from the absolute deadline minus the spin margin.
        timeout: Nanos,
        /// Absolute departure to spin to after the sleep, if any.
        then_spin: Option<Nanos>,
    },
}

/// Plans the wait for the earliest departure `next` at `now`. `spin_ok` false (spin budget
/// spent) turns every spin into a sleep to the exact departure.
pub fn plan_wait(
    next: Option<Nanos>,
    now: Nanos,
    spin_ns: Nanos,
    busy_poll: bool,
    spin_ok: bool,
) -> WaitPlan {
    match next {
        Some(t) if t <= now => WaitPlan::Now,
        Some(t) if !busy_poll && !spin_ok => WaitPlan::Sleep {
            timeout: t - now,
            then_spin: None,
        },
        Some(t) if busy_poll || t.saturating_sub(spin_ns) <= now => WaitPlan::Spin(t),
        Some(t) => WaitPlan::Sleep {
            timeout: t - spin_ns - now,
            then_spin: Some(t),
        },
        None if busy_poll => WaitPlan::Spin(now + IDLE_SLEEP),
        None => WaitPlan::Sleep {
            timeout: IDLE_SLEEP,
            then_spin: None,
        },
    }
}

/// Waits until a frame arrives, the next departure `next` is due, or the waker fires. Sleeps
/// without the own directions' locks (the other worker may send their overdue frames
/// meanwhile); spins with them. Returns whether it slept (gave the CPU up).
fn wait<M: Model>(
    own: &[Shared<M>],
    fds: &[OwnedFd],
    (next, lone): (Option<Nanos>, bool),
    ctl: &WorkerCtl,
    budget: &mut SpinBudget,
) -> std::io::Result<bool> {
    let now = monotonic_ns();
    // The budget is asked first: it keeps state (its window).
    let spin_ok = budget.allows(now) && lone;
    match plan_wait(next, now, ctl.tuning.spin_ns, ctl.busy_poll, spin_ok) {
        WaitPlan::Now => return Ok(false),
        WaitPlan::Spin(until) => {
            budget.charge(spin(&mut lock_own(own), ctl, until));
            return Ok(false);
        }
        WaitPlan::Sleep { timeout, then_spin } => {
            if let (Some(awake), Some(t)) = (&ctl.awake, next) {
                // A frame waits: its CPU must not halt before the departure (see `awake`).
                awake.hold_until(t.saturating_add(LINGER), now);
            }
            let woke = {
                // No allocation per wait: at most two directions plus the waker.
                let mut polled: [BorrowedFd<'_>; 3] = [ctl.waker.as_fd(); 3];
                for (slot, fd) in polled.iter_mut().skip(1).zip(fds) {
                    *slot = fd.as_fd();
                }
                wait_readable(&polled[..1 + fds.len().min(2)], Some(timeout))?
            };
            if woke.any() {
                // The waker is slot 0; reading it when it did not fire is a wasted syscall
                // on every frame wake-up.
                if woke.has(0) {
                    ctl.waker.clear();
                }
                each(&mut lock_own(own)).for_each(|d| d.count_wakeup());
            } else if let Some(t) = then_spin {
                budget.charge(spin(&mut lock_own(own), ctl, t));
            }
        }
    }
    Ok(true)
}

/// Spins until `deadline`, a frame arrives, or stop is requested; returns the ns spun.
fn spin<M: Model>(g: &mut Locked<'_, M>, ctl: &WorkerCtl, deadline: Nanos) -> Nanos {
    let start = monotonic_ns();
    let mut now = start;
    let mut turns = 0_u32;
    while now < deadline {
        std::hint::spin_loop();
        turns = turns.wrapping_add(1);
        // Checking the rings reads shared cache lines; do it every few turns.
        if turns % 16 == 0 && (each(g).any(|d| d.rx_ready()) || ctl.stop.load(Ordering::Relaxed)) {
            break;
        }
        now = monotonic_ns();
    }
    now.saturating_sub(start)
}

#[cfg(test)]
#[path = "help_tests.rs"]
mod help_tests;

#[cfg(test)]
mod tests {
    use super::*;

    fn ctl(yield_after_ns: Nanos) -> WorkerCtl {
        WorkerCtl {
            stop: Arc::new(AtomicBool::new(false)),
            waker: Arc::new(Waker::new().expect("eventfd")),
            busy_poll: false,
            tuning: Tuning {
                spin_ns: 100_000,
                spin_budget_ns: SPIN_WINDOW / 4,
                yield_after_ns,
                yield_for_ns: 20_000,
                lone_pause_ns: 0,
                lone_pause_late_ns: 0,
                light_other_after_ns: 0,
                ..Tuning::default()
            },
            lone: LoneSignal::off(),
            cpu: None,
            rt_priority: None,
            awake: None,
        }
    }

    fn turn_end(next: Option<Nanos>) -> TurnEnd {
        TurnEnd {
            received: 0,
            tx_blocked: false,
            next,
            next_lone: false,
            holds_lone: false,
        }
    }

    #[test]
    fn a_worker_pauses_only_after_running_long_enough_while_it_holds_frames() {
        let c = ctl(200_000);
        let held = turn_end(Some(5_000_000));
        // Awake since 1 ms: 199.999 µs is not yet long enough, 200 µs is.
        assert!(!should_pause(&c, &held, false, 1_000_000, 1_199_999));
        assert!(should_pause(&c, &held, false, 1_000_000, 1_200_000));
        // Overdue frames count as held.
        assert!(should_pause(
            &c,
            &turn_end(Some(0)),
            false,
            1_000_000,
            1_300_000
        ));
        // Nothing held (frames due on arrival left in the same turn): never...
        assert!(!should_pause(
            &c,
            &turn_end(None),
            false,
            1_000_000,
            9_000_000
        ));
        // ...unless it keeps sending the other direction's overdue frames.
        assert!(should_pause(
            &c,
            &turn_end(None),
            true,
            1_000_000,
            1_200_000
        ));
        // Pauses off.
        assert!(!should_pause(&ctl(0), &held, true, 1_000_000, 9_000_000));
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
}
