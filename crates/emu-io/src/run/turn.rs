//! The emulator's turn, written once: release what is due, apply reconfigurations, receive,
//! release what became due (unless a lone frame left meanwhile), help the other direction with
//! its overdue frames, then decide what the worker does next ([`WorkerSched::after_turn`]).
//!
//! [`Turner::turn`] is generic over the directions' ports, the [`Clock`] it reads and how the
//! directions are held (a worker's locked own directions, the other worker's behind a lock it
//! only tries): `run::worker` calls it with the packet sockets, the machine's clocks and
//! mutexes; the scheduling harness (`sim`) with simulated ports, virtual time and plain
//! references, so the harness measures this code. Carrying the decision out (sleeping,
//! spinning, the scheduling class) stays with each caller: that is the machine, real or
//! simulated.

use std::ops::DerefMut;
use std::sync::Mutex;

use crate::model::Model;
use crate::run::direction::Direction;
use crate::run::ports::{RecvPort, SendPort};
use crate::sched::lone::LoneSignal;
use crate::sched::worker::{Step, TurnEnd, WorkerSched};
use crate::time::{Clock, Nanos};

/// How often the receive ports' drop counters are read and the models' accounts published.
pub const STATS_EVERY: Nanos = 50_000_000;

/// A direction another worker owns: it is helped only while that worker is not running its
/// turn (or spinning), which for the real worker means its lock is free.
pub trait Helped<D> {
    /// Runs `f` on the direction if its owner is not running a turn now; `None` if it is.
    fn if_idle<O>(self, f: impl FnOnce(&mut D) -> O) -> Option<O>;
}

/// The real worker's: the owner holds the lock for its whole turn and its spins, so a lock
/// that is taken (or poisoned by a panic there) means hands off.
impl<D> Helped<D> for &Mutex<D> {
    fn if_idle<O>(self, f: impl FnOnce(&mut D) -> O) -> Option<O> {
        self.try_lock().ok().map(|mut d| f(&mut d))
    }
}

/// The harness's: it hands a direction over only when its owner is asleep.
impl<D> Helped<D> for &mut D {
    fn if_idle<O>(self, f: impl FnOnce(&mut D) -> O) -> Option<O> {
        Some(f(self))
    }
}

/// The directions held in `own`, one by one.
pub fn each<G: DerefMut>(own: &mut [Option<G>]) -> impl Iterator<Item = &mut G::Target> {
    own.iter_mut().flatten().map(|g| &mut **g)
}

/// What a turn ended with: the worker's next step and the time it was decided at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decided {
    /// What to do next.
    pub step: Step,
    /// When it was decided (the start of a pause or a wait).
    pub now: Nanos,
}

/// One worker's turns: its scheduling decisions and when it last read the ring statistics.
#[derive(Debug, Clone)]
pub struct Turner {
    sched: WorkerSched,
    last_stats: Nanos,
}

impl Turner {
    /// A worker deciding with `sched`, started at `now`.
    pub fn new(sched: WorkerSched, now: Nanos) -> Self {
        Self {
            sched,
            last_stats: now,
        }
    }

    /// One turn over the directions in `own` (held for the turn, let go before helping) and
    /// the overdue frames of those in `helped`, then the decision of what follows.
    pub fn turn<M, R, T, C, G, I, const N: usize>(
        &mut self,
        mut own: [Option<G>; N],
        helped: I,
        clock: &C,
        lone: &LoneSignal,
    ) -> Decided
    where
        M: Model,
        R: RecvPort,
        T: SendPort,
        C: Clock,
        G: DerefMut<Target = Direction<M, R, T>>,
        I: IntoIterator<Item: Helped<Direction<M, R, T>>>,
    {
        let mut end = self.own_turn(&mut own, clock, lone);
        // Let go of the own directions first: the other worker may help them meanwhile.
        drop(own);
        end.helping = help_overdue::<M, R, T, C, I>(helped, clock);
        let now = clock.now();
        let step = self
            .sched
            .after_turn(&end, || lone.elsewhere(clock.cpu()), now);
        Decided { step, now }
    }

    /// The worker gave the CPU up (slept or paused) until `now`.
    pub fn slept(&mut self, now: Nanos) {
        self.sched.slept(now);
    }

    /// The worker spun `ns`.
    pub fn spun(&mut self, ns: Nanos) {
        self.sched.spun(ns);
    }

    /// Releases what is due, applies reconfigurations, drains the receive ports, and releases
    /// what became due (unless a lone frame left meanwhile: the worker may pause first, see
    /// `crate::sched::lone`).
    fn own_turn<M, R, T, C, G>(
        &mut self,
        own: &mut [Option<G>],
        clock: &C,
        lone: &LoneSignal,
    ) -> TurnEnd
    where
        M: Model,
        R: RecvPort,
        T: SendPort,
        C: Clock,
        G: DerefMut<Target = Direction<M, R, T>>,
    {
        let lone_epoch = lone.epoch();
        // Release first: a wait ends at a departure time, and everything else (reconfigure,
        // draining the RX ring) would otherwise run between the deadline and the kick (2-6 µs
        // of cold code on the test VM, 15-20 µs in a debug build).
        let now = clock.now();
        each(own).for_each(|d| {
            d.release(clock, now);
        });
        each(own).for_each(|d| d.apply_reconfig(now));
        clock.fixed_work_done();
        let received: usize = each(own).map(|d| d.receive(clock)).sum();
        let now = clock.now();
        // Frames that arrived already due (no delay) leave in the same turn.
        if lone.epoch() == lone_epoch {
            each(own).for_each(|d| {
                d.release(clock, now);
            });
        }
        if now.saturating_sub(self.last_stats) >= STATS_EVERY {
            each(own).for_each(|d| {
                d.poll_ring_stats();
                d.publish_realised(now);
            });
            self.last_stats = now;
        }
        let tx_blocked = each(own).any(|d| d.tx_blocked);
        let next = each(own).filter_map(|d| d.next_departure()).min();
        let next_lone =
            next.is_some() && each(own).any(|d| d.next_departure() == next && d.next_is_lone());
        TurnEnd {
            received,
            tx_blocked,
            next,
            next_lone,
            holds_lone: each(own).any(|d| d.holds_lone()),
            helping: false,
        }
    }
}

/// Sends one batch of what is overdue in the directions in `helped`, each only if its owner is
/// not running a turn ([`Helped`]). Returns true if one of them still has overdue frames: the
/// worker takes its own turn and comes back instead of sleeping.
pub fn help_overdue<M, R, T, C, I>(helped: I, clock: &C) -> bool
where
    M: Model,
    R: RecvPort,
    T: SendPort,
    C: Clock,
    I: IntoIterator<Item: Helped<Direction<M, R, T>>>,
{
    let mut more = false;
    for d in helped {
        more |= d
            .if_idle(|d| d.release_overdue(clock, clock.now()))
            .unwrap_or(false);
    }
    more
}
