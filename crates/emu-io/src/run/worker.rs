//! The worker loop: one thread serving one or both directions.
//!
//! Each turn ([`crate::run::turn`], the one the scheduling harness runs too): release
//! everything due, apply reconfigurations, drain the RX rings, release what became due, send the
//! other direction's overdue frames if its worker is not running (`Tuning::help_due`), decide;
//! then this loop carries the decision out: a class change, a pause, or the wait.
//! Waiting is on an absolute schedule: the next departure is an absolute CLOCK_MONOTONIC time;
//! the worker sleeps in `ppoll` on the RX fds (and a wake-up eventfd) with a timeout computed
//! from that absolute time *minus* `spin_ns`, then spins to the departure (only for a frame
//! alone in its flow, `sched::schedule::LONE_GAP`, and within a spin budget). Every wake-up
//! releases every frame due, so a burst leaves in one TX kick. `ppoll` (an hrtimer, slack set to
//! 1 ns) rather than `clock_nanosleep(TIMER_ABSTIME)` because the worker must also wake for
//! arriving frames; since the timeout is recomputed from the absolute deadline at each call,
//! no error accumulates. With `busy_poll` it never sleeps.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::error::WorkerError;
use crate::io::sys::clock::{
    SysClock, current_tid, monotonic_ns, pin_to_cpu, set_fifo, set_other, set_timer_slack_min,
    sleep_until, thread_cpu_ns, wait_readable,
};
use crate::io::sys::wake::Waker;
use crate::model::Model;
use crate::report::verdict::ThreadUsage;
use crate::run::awake::{AwakeHandle, LINGER};
use crate::run::direction::Direction;
use crate::run::turn::{Decided, Turner, each};
use crate::sched::lone::LoneSignal;
use crate::sched::policy::Class;
use crate::sched::worker::{Action, WaitPlan, WorkerSched};
use crate::time::Nanos;
use crate::tuning::Tuning;

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

/// The directions this worker helps, as the turn tries them: their locks.
fn helped_locks<M: Model>(helped: &[Shared<M>]) -> impl Iterator<Item = &Mutex<Direction<M>>> {
    helped.iter().map(|d| &**d)
}

/// Runs until `ctl.stop`, serving `own` and helping `helped`; returns the thread's CPU use.
/// `ready` receives the thread's kernel id once its set-up (pinning, priority, poll
/// descriptors) is done, before any frame moves, or `None` if the set-up failed: the error is
/// then what this returns, so `Bridge` start-up can report it.
pub fn run<M: Model>(
    own: &[Shared<M>],
    helped: &[Shared<M>],
    ctl: &WorkerCtl,
    ready: &Sender<Option<i32>>,
) -> Result<ThreadUsage, WorkerError> {
    let fds = match setup_thread(ctl).and_then(|()| poll_fds(own)) {
        Ok(fds) => fds,
        Err(e) => {
            // The starter may have gone; it joins this thread for the error.
            let _ = ready.send(None);
            return Err(e);
        }
    };
    let _ = ready.send(Some(current_tid()));
    let name = each(&mut lock_own(own))
        .map(|d| d.name)
        .collect::<Vec<_>>()
        .join(",");
    let clock = SysClock;
    let (start, cpu0) = (monotonic_ns(), thread_cpu_ns());
    let sched = WorkerSched::new(ctl.tuning, ctl.busy_poll, ctl.rt_priority.is_some(), start);
    let mut turns = Turner::new(sched, start);
    while !ctl.stop.load(Ordering::Acquire) {
        let Decided { step, now } =
            turns.turn(lock_own(own), helped_locks(helped), &clock, &ctl.lone);
        if let Some(c) = step.class {
            apply_class(c, ctl.rt_priority)?;
        }
        match step.action {
            Action::Again => {}
            Action::Pause(len) => {
                pause(ctl, now, len);
                turns.slept(monotonic_ns());
            }
            Action::TxBlocked(len) => {
                // The kernel still owns the next TX slot. Sleep (not yield: a SCHED_FIFO yield
                // would never let a SCHED_OTHER ksoftirqd run, and it may be what frees it).
                sleep_until(monotonic_ns() + len);
                turns.slept(monotonic_ns());
            }
            Action::Wait { plan, until } => {
                if wait(own, &fds, (plan, until, now), ctl, &mut turns)
                    .map_err(|source| WorkerError::Poll { source })?
                {
                    turns.slept(monotonic_ns());
                }
            }
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

/// Sleeps `len` from `now`, keeping the CPUs awake meanwhile. Sleep, not `sched_yield`: a
/// SCHED_FIFO yield never lets a SCHED_OTHER task run.
fn pause(ctl: &WorkerCtl, now: Nanos, len: Nanos) {
    if let Some(awake) = &ctl.awake {
        awake.hold_until(now + len + LINGER, now);
    }
    sleep_until(now + len);
}

/// Moves the calling worker to `class` (`crate::sched::policy`). Failing to get SCHED_FIFO back
/// would leave a delay line timed by an ordinary task, so it ends the worker with an error.
fn apply_class(class: Class, rt_priority: Option<u8>) -> Result<(), WorkerError> {
    match (class, rt_priority) {
        (Class::Fifo, Some(priority)) => {
            set_fifo(priority).map_err(|source| WorkerError::RestoreFifo { priority, source })
        }
        (Class::Other, _) | (Class::Fifo, None) => {
            set_other().map_err(|source| WorkerError::Other { source })
        }
    }
}

/// Copies of the own directions' RX descriptors to sleep on without holding their locks.
fn poll_fds<M: Model>(own: &[Shared<M>]) -> Result<Vec<OwnedFd>, WorkerError> {
    each(&mut lock_own(own))
        .map(|d| d.rx_port().sock.as_fd().try_clone_to_owned())
        .collect::<std::io::Result<_>>()
        .map_err(|source| WorkerError::PollFd { source })
}

/// Timer slack, CPU pinning and scheduling policy of the calling worker thread.
fn setup_thread(ctl: &WorkerCtl) -> Result<(), WorkerError> {
    set_timer_slack_min();
    if let Some(cpu) = ctl.cpu {
        pin_to_cpu(cpu).map_err(|source| WorkerError::Pin { cpu, source })?;
    }
    if let Some(priority) = ctl.rt_priority {
        set_fifo(priority).map_err(|source| WorkerError::Fifo { priority, source })?;
    }
    Ok(())
}

/// Carries out `plan`, the wait for the departure `until` decided at `now`: until a frame
/// arrives, the departure is due, or the waker fires. Sleeps without the own directions' locks
/// (the other worker may send their overdue frames meanwhile); spins with them. Returns
/// whether it slept (gave the CPU up).
fn wait<M: Model>(
    own: &[Shared<M>],
    fds: &[OwnedFd],
    (plan, until, now): (WaitPlan, Option<Nanos>, Nanos),
    ctl: &WorkerCtl,
    turns: &mut Turner,
) -> std::io::Result<bool> {
    match plan {
        WaitPlan::Now => return Ok(false),
        WaitPlan::Spin(deadline) => {
            turns.spun(spin(&mut lock_own(own), ctl, deadline));
            return Ok(false);
        }
        WaitPlan::Sleep { timeout, then_spin } => {
            if let (Some(awake), Some(t)) = (&ctl.awake, until) {
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
                turns.spun(spin(&mut lock_own(own), ctl, t));
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

    #[test]
    fn a_set_up_failure_is_a_typed_error_that_names_the_fix() {
        let ctl = WorkerCtl {
            stop: Arc::new(AtomicBool::new(false)),
            waker: Arc::new(Waker::new().expect("eventfd")),
            busy_poll: false,
            tuning: Tuning::default(),
            lone: LoneSignal::off(),
            // Past CPU_SETSIZE: refused before the affinity changes.
            cpu: Some(1 << 20),
            rt_priority: None,
            awake: None,
        };
        let e = std::thread::spawn(move || setup_thread(&ctl))
            .join()
            .expect("no panic")
            .expect_err("no such CPU");
        assert!(
            matches!(e, WorkerError::Pin { cpu: 1_048_576, .. }),
            "{e:?}"
        );
        assert!(e.to_string().contains("IoOptions::cpus"), "{e}");
    }
}
