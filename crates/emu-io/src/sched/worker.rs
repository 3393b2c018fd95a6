//! What a worker does between its turns, decided in one place without a clock or a system
//! call: take another turn, pause, wait for the TX ring, or wait for the next departure (sleep,
//! spin, or both), and which scheduling class to run in. [`WorkerSched::after_turn`] takes what
//! the turn saw and the time, and returns a [`Step`]; `run::worker` carries it out and reports
//! back what it cost ([`WorkerSched::slept`], [`WorkerSched::spun`]).
//!
//! The order of the checks is the policy:
//! 1. the class (`policy`): a light worker runs SCHED_OTHER, one holding frames SCHED_FIFO;
//! 2. a worker that has run `yield_after_ns` without sleeping while it holds frames pauses
//!    `yield_for_ns`, so normal-priority endpoints on its CPU get a turn;
//! 3. a busy worker pauses once for a lone frame sent from another CPU (`lone`);
//! 4. frames received: another turn at once (they may be due now);
//! 5. a full TX ring: a short sleep for the kernel to free slots;
//! 6. the other direction still has overdue frames to help with: another turn;
//! 7. otherwise wait for the next departure ([`plan_wait`]): spin only to a frame lone in
//!    its flow and within the spin budget, else sleep (on the RX rings) to it.

use crate::report::lateness::LATE_LIMIT_NS;
use crate::sched::lone::{self, LonePause};
use crate::sched::policy::{Class, ClassPolicy, TurnLoad};
use crate::time::Nanos;
use crate::tuning::Tuning;

/// Pause when the TX ring is full, to let the kernel free slots.
pub(crate) const TX_BLOCKED_PAUSE: Nanos = 50_000;
/// Longest sleep with nothing queued (a safety net; stop and reconfigure wake via eventfd).
pub(crate) const IDLE_SLEEP: Nanos = 200_000_000;
/// Window over which spinning is budgeted (`Tuning::spin_budget_ns` per window).
pub(crate) const SPIN_WINDOW: Nanos = 10_000_000;

/// Spin time used in the current window, against a limit per window; past it, the worker
/// sleeps to the exact departure instead. Without a budget, departures closer together than
/// the spin margin (a rate limit: one frame every 12 µs at 1 Gbit/s) keep a SCHED_FIFO worker
/// spinning non-stop, and the kernel's RT throttling (`sched_rt_runtime_us`, 95 %) then stops
/// it for 50 ms: lateness max 37-48 ms under a 1 Gbit/s bulk flow before this budget
/// (emu-io-bench.md).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct SpinBudget {
    window_start: Nanos,
    spun: Nanos,
    limit: Nanos,
}

impl SpinBudget {
    /// A budget of `limit` ns of spinning per [`SPIN_WINDOW`].
    pub(crate) fn new(limit: Nanos) -> Self {
        Self {
            limit,
            ..Self::default()
        }
    }

    /// True if spinning is still allowed at `now` (starts a new window when the last ended).
    pub(crate) fn allows(&mut self, now: Nanos) -> bool {
        if now.saturating_sub(self.window_start) >= SPIN_WINDOW {
            self.window_start = now;
            self.spun = 0;
        }
        self.spun < self.limit
    }

    /// Charges `ns` of spinning.
    pub(crate) fn charge(&mut self, ns: Nanos) {
        self.spun = self.spun.saturating_add(ns);
    }
}

/// What one turn (release, receive, release) left for the decision.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct TurnEnd {
    /// Frames received in the turn.
    pub received: usize,
    /// The TX ring was full.
    pub tx_blocked: bool,
    /// The earliest departure held.
    pub next: Option<Nanos>,
    /// The frame leaving at `next` is lone in its flow (`Entry::lone`): worth a spin.
    pub next_lone: bool,
    /// Some frame held for later is lone (a lone pause must not make it late).
    pub holds_lone: bool,
    /// The other direction, helped this turn, still has overdue frames.
    pub helping: bool,
}

/// What to do with the wait when a turn found nothing to do at once. Pure, so the schedule
/// arithmetic is tested without a clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WaitPlan {
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

/// What the worker does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// Take another turn at once.
    Again,
    /// Sleep this long from now, keeping the CPUs awake (a pause for the endpoints).
    Pause(Nanos),
    /// The TX ring is full: sleep this long for the kernel to free slots.
    TxBlocked(Nanos),
    /// Wait for the next departure or an arriving frame.
    Wait {
        /// How.
        plan: WaitPlan,
        /// The departure waited for (keep the CPUs awake until it).
        until: Option<Nanos>,
    },
}

/// The decision after a turn: a class change, if any, then the action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Step {
    /// Switch the worker to this class before acting.
    pub class: Option<Class>,
    /// What to do.
    pub action: Action,
}

/// One worker's scheduling state: the spin budget, when it last gave the CPU up, the lone
/// pauses it took, and its class.
#[derive(Debug, Clone)]
pub(crate) struct WorkerSched {
    tuning: Tuning,
    busy_poll: bool,
    budget: SpinBudget,
    awake_since: Nanos,
    lone_pause: LonePause,
    class: ClassPolicy,
}

impl WorkerSched {
    /// A worker that starts at `now`; `realtime` when it runs SCHED_FIFO (only then may it
    /// drop to SCHED_OTHER while light).
    pub(crate) fn new(tuning: Tuning, busy_poll: bool, realtime: bool, now: Nanos) -> Self {
        Self {
            tuning,
            busy_poll,
            budget: SpinBudget::new(tuning.spin_budget_ns),
            awake_since: now,
            lone_pause: LonePause::default(),
            class: ClassPolicy::new(if realtime {
                tuning.light_other_after_ns
            } else {
                0
            }),
        }
    }

    /// Decides what follows a turn that ended as `end` at `now`. `lone_elsewhere` is the
    /// count of sends that carried a lone frame on other CPUs so far, read only when lone
    /// pauses are on (`Tuning::lone_pause_ns`).
    pub(crate) fn after_turn(
        &mut self,
        end: &TurnEnd,
        lone_elsewhere: impl FnOnce() -> u64,
        now: Nanos,
    ) -> Step {
        let load = TurnLoad {
            received: end.received,
            holds: end.next.is_some() || end.helping,
        };
        let class = self.class.after_turn(load, now);
        let step = |action| Step { class, action };
        if self.should_pause(end, now) {
            return step(Action::Pause(self.tuning.yield_for_ns));
        }
        if let Some(len) = self.owed_lone_pause(end, lone_elsewhere, now) {
            return step(Action::Pause(len));
        }
        if end.received > 0 {
            return step(Action::Again);
        }
        if end.tx_blocked {
            return step(Action::TxBlocked(TX_BLOCKED_PAUSE));
        }
        if end.helping {
            return step(Action::Again);
        }
        // The budget is asked first: it keeps state (its window).
        let lone = end.next_lone || self.tuning.spin_to_every_departure;
        let spin_ok = self.budget.allows(now) && lone;
        let plan = plan_wait(end.next, now, self.tuning.spin_ns, self.busy_poll, spin_ok);
        step(Action::Wait {
            plan,
            until: end.next,
        })
    }

    /// The worker gave the CPU up (slept or paused) until `now`.
    pub(crate) fn slept(&mut self, now: Nanos) {
        self.awake_since = now;
    }

    /// The worker spun `ns`.
    pub(crate) fn spun(&mut self, ns: Nanos) {
        self.budget.charge(ns);
    }

    /// Whether to pause now (see `Tuning::yield_after_ns`): the worker has run that long
    /// without sleeping while it holds frames for later departures (a delay line, a rate
    /// queue). Holding frames is what keeps a worker awake for milliseconds (it spins to, or is
    /// behind, a continuous schedule); frames due on arrival (no impairment) leave as they come
    /// and the worker sleeps when its ring is empty, so there a pause would only take capacity
    /// away. Overdue frames are sent meanwhile by the other worker (`Tuning::help_due`). A
    /// helper that keeps sending the other direction's backlog counts as holding frames.
    fn should_pause(&self, end: &TurnEnd, now: Nanos) -> bool {
        self.tuning.yield_after_ns > 0
            && (end.next.is_some() || end.helping)
            && now.saturating_sub(self.awake_since) >= self.tuning.yield_after_ns
    }

    /// How long to pause now for a lone frame sent from another CPU (`crate::sched::lone`), if
    /// at all. Nothing is read when lone pauses are off.
    fn owed_lone_pause(
        &mut self,
        end: &TurnEnd,
        lone_elsewhere: impl FnOnce() -> u64,
        now: Nanos,
    ) -> Option<Nanos> {
        let t = &self.tuning;
        if t.lone_pause_ns == 0 {
            return None;
        }
        let busy = end.received > 0 || end.helping || end.next.is_some_and(|at| at <= now);
        // A lone frame is someone's probe, request or reply: never late for a pause.
        let late = if end.holds_lone {
            0
        } else {
            t.lone_pause_late_ns
        };
        let len = lone::pause_len(
            t.lone_pause_ns,
            (t.spin_ns, LATE_LIMIT_NS, late),
            end.next,
            now,
        );
        self.lone_pause
            .take(lone_elsewhere(), now, busy && len > 0)
            .then_some(len)
    }
}

/// Whether a frame the model sends once, uncorrupted, at `at` leaves straight from the RX ring
/// at `now` (the direct path: no copy) rather than through the schedule: only when it is due,
/// nothing is queued ahead of it (`nothing_queued`: else it would overtake), the frames already held for
/// this send are fewer than a batch, and the egress can send from the ring (`from_ring`:
/// `sendmmsg`, and the frame needs no rewriting: no VLAN tag to re-insert, no checksum to
/// complete).
pub(crate) fn leaves_from_ring(
    at: Nanos,
    now: Nanos,
    nothing_queued: bool,
    (held, batch): (usize, usize),
    from_ring: bool,
) -> bool {
    from_ring && at <= now && nothing_queued && held < batch
}

/// Whether a release goes on to another send after one that moved `moved` frames (sends of at
/// most `due_batch`): not when that send was short (nothing more is due), the TX ring is full,
/// a frame waits in the RX ring (behind a backlog, a newly arrived frame of another flow must
/// reach the schedule to get its turn, `due`), or a lone frame just left here or in the other
/// direction (the worker may owe a pause for the thread it woke, `lone`). The last two are
/// read only when the first two leave the question open (each reads shared memory).
pub(crate) fn another_send(
    moved: usize,
    due_batch: usize,
    tx_blocked: bool,
    rx_waiting: impl FnOnce() -> bool,
    lone_sent: impl FnOnce() -> bool,
) -> bool {
    moved >= due_batch && !tx_blocked && !rx_waiting() && !lone_sent()
}

/// Plans the wait for the earliest departure `next` at `now`. `spin_ok` false (spin budget
/// spent, or the frame is not lone in its flow) turns every spin into a sleep to the exact
/// departure.
pub(crate) fn plan_wait(
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

#[cfg(test)]
#[path = "worker_tests.rs"]
mod tests;
