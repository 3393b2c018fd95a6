//! The simulated machine: two CPUs, one worker on each (deciding with the real turn,
//! `run::turn`, over the real direction code, `run::direction`, on simulated ports), the
//! traffic sources, the probe's endpoint threads on the CPUs, and one clock that only moves
//! forward. Events are taken in time order: a worker's next step, or an endpoint thread
//! finishing on a free CPU. A worker's step runs one turn in virtual time and then carries its
//! decision out as the machine would: a sleep woken late, a spin, a pause that frees the CPU.

use std::rc::Rc;
use std::sync::{Arc, mpsc};

use tcplab_emu::{DirectionConfig, DirectionModel};

use super::costs::Costs;
use super::cpu::{Cpu, Task};
use super::frames::Frame;
use super::ports::{Bench, SimClock, SimRx, SimTx};
use super::table::{Class, Quantiles, Table};
use crate::report::counters::DirCounters;
use crate::run::direction::{DirSettings, Direction};
use crate::run::turn::{Decided, Turner};
use crate::sched::lone::LoneSignal;
use crate::sched::worker::{Action, WaitPlan, WorkerSched};
use crate::time::Nanos;
use crate::tuning::Tuning;

/// The traffic: a bulk flow a->b in bursts with its ACKs b->a, and a sparse probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Traffic {
    /// How long the sources send.
    pub duration: Nanos,
    /// One-way delay of the emulated link, each direction.
    pub delay: Nanos,
    /// Data segments per burst, arriving `burst_spacing` apart.
    pub burst: u32,
    /// Between a burst's segments.
    pub burst_spacing: Nanos,
    /// Between bursts.
    pub burst_every: Nanos,
    /// One ACK per this many data segments delivered.
    pub ack_every: u32,
    /// Between probe requests (open loop).
    pub probe_every: Nanos,
}

impl Traffic {
    /// A bulk flow paced at about 1 Gbit/s (bursts of 16 segments of 1514 bytes every 200 µs)
    /// through 10 ms each way, and a probe every 5 ms, for 300 ms.
    pub(crate) fn paced() -> Self {
        Self {
            duration: 300_000_000,
            delay: 10_000_000,
            burst: 16,
            burst_spacing: 2_000,
            burst_every: 200_000,
            ack_every: 2,
            probe_every: 5_000_000,
        }
    }

    /// The same rate unpaced: a window's worth of 64 segments back to back every 800 µs.
    pub(crate) fn unpaced() -> Self {
        Self {
            burst: 64,
            burst_spacing: 1_200,
            burst_every: 800_000,
            ..Self::paced()
        }
    }
}

/// From a data segment's hand-off to its ACK arriving back at the emulator.
const ACK_AFTER: Nanos = 3_000;
/// Slab slots per direction: far more than the frames a 10 ms delay line holds here (about a
/// thousand), so none is dropped for want of a slot.
const SLAB_SLOTS: u32 = 1 << 14;

/// What an endpoint thread does when it finishes.
#[derive(Debug, Clone, Copy)]
enum Done {
    /// The server answered probe `n`: its response arrives at the emulator.
    Answered(u32),
    /// The client took probe `n`'s response.
    Received(u32),
}

/// A direction of the emulator, on the simulated ports.
type SimDirection = Direction<DirectionModel, SimRx, SimTx>;

/// A worker's state between steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Running turns (its direction's lock is held).
    Busy,
    /// Spinning from this time (the lock is held).
    Spinning(Nanos),
    /// Asleep or paused: the CPU and the lock are free.
    Asleep,
}

struct Worker {
    turns: Turner,
    ready: Nanos,
    state: State,
    /// Asleep on a timer set a spin margin before this departure: spin the rest once awake.
    spin_to: Option<Nanos>,
}

struct World {
    tuning: Tuning,
    traffic: Traffic,
    bench: Rc<Bench>,
    clock: SimClock,
    dirs: [SimDirection; 2],
    counters: [Arc<DirCounters>; 2],
    workers: [Worker; 2],
    cpus: [Cpu<Done>; 2],
    lone: LoneSignal,
    rng: u64,
    seq: u64,
    requested: Vec<Nanos>,
    round_trips: Vec<Nanos>,
    delivered_data: u32,
    pauses: u64,
}

/// Runs `traffic` through the emulator's scheduling with `tuning` on a machine with `costs`,
/// and returns the lateness table. Deterministic: the same arguments give the same table.
pub(crate) fn run(tuning: Tuning, costs: Costs, traffic: Traffic) -> Table {
    let mut w = World::new(tuning, costs, traffic);
    w.run_to(traffic.duration + 4 * traffic.delay);
    w.table()
}

/// Direction `d` (0: a->b, 1: b->a) on the simulated ports, its model delaying every frame by
/// `traffic.delay`, and its counters.
fn direction(
    d: usize,
    bench: &Rc<Bench>,
    tuning: Tuning,
    traffic: Traffic,
    lone: &LoneSignal,
) -> (SimDirection, Arc<DirCounters>) {
    let cfg = DirectionConfig {
        delay_ns: traffic.delay,
        ..DirectionConfig::default()
    };
    let model = DirectionModel::new(&cfg, d as u64 + 1).expect("a delay-only link is valid");
    let settings = DirSettings {
        slab_slots: SLAB_SLOTS,
        vnet: false,
        gso: false,
        tuning,
    };
    let counters = Arc::new(DirCounters::default());
    // Never reconfigured: the sender goes at once.
    let (_, reconfig) = mpsc::channel();
    let ports = (SimRx::new(bench, d), SimTx::new(bench));
    let name = ["a->b", "b->a"][d];
    let dir = Direction::new(
        name,
        ports,
        model,
        settings,
        Arc::clone(&counters),
        reconfig,
    )
    .with_lone_signal(lone.clone());
    (dir, counters)
}

impl World {
    fn new(tuning: Tuning, costs: Costs, traffic: Traffic) -> Self {
        let bench = Rc::new(Bench::new(costs));
        let lone = if tuning.lone_pause_ns > 0 {
            LoneSignal::on(2)
        } else {
            LoneSignal::off()
        };
        let (ab, ab_counters) = direction(0, &bench, tuning, traffic, &lone);
        let (ba, ba_counters) = direction(1, &bench, tuning, traffic, &lone);
        let worker = || Worker {
            turns: Turner::new(WorkerSched::new(tuning, false, true, 0), 0),
            ready: 0,
            state: State::Busy,
            spin_to: None,
        };
        let mut w = World {
            tuning,
            traffic,
            clock: SimClock(Rc::clone(&bench)),
            bench,
            dirs: [ab, ba],
            counters: [ab_counters, ba_counters],
            workers: [worker(), worker()],
            cpus: [Cpu::default(), Cpu::default()],
            lone,
            rng: 0x5eed,
            seq: 0,
            requested: Vec::new(),
            round_trips: Vec::new(),
            delivered_data: 0,
            pauses: 0,
        };
        w.schedule_sources();
        w
    }

    /// The bulk bursts and the probe's requests, all arriving at a->b.
    fn schedule_sources(&mut self) {
        let t = self.traffic;
        let mut at = 0;
        while at < t.duration {
            for i in 0..t.burst {
                let frame = Frame {
                    class: Class::Bulk,
                    probe: 0,
                };
                self.arrive(0, at + Nanos::from(i) * t.burst_spacing, frame);
            }
            at += t.burst_every;
        }
        // Probes start mid-burst-cycle so they meet the bulk flow's backlog.
        let mut at = 1_000_000 + t.burst_every / 3;
        let mut n = 0;
        while at < t.duration {
            self.requested.push(at);
            let frame = Frame {
                class: Class::Request,
                probe: n,
            };
            self.arrive(0, at, frame);
            n += 1;
            at += t.probe_every;
        }
    }

    /// A frame arrives at direction `d`'s RX queue at `at`; a sleeping or spinning owner
    /// wakes.
    fn arrive(&mut self, d: usize, at: Nanos, frame: Frame) {
        self.seq += 1;
        self.bench.rx[d].borrow_mut().insert((at, self.seq), frame);
        let wake = self.wake_delay();
        let w = &mut self.workers[d];
        match w.state {
            State::Asleep if w.ready > at + wake => {
                w.ready = at + wake;
                w.spin_to = None;
            }
            State::Spinning(_) if w.ready > at => w.ready = at,
            _ => {}
        }
    }

    /// When the first frame in direction `d`'s RX queue arrives (or arrived).
    fn next_rx(&self, d: usize) -> Option<Nanos> {
        self.bench.rx[d].borrow().keys().next().map(|&(at, _)| at)
    }

    /// A seeded 64-bit draw (SplitMix64).
    fn draw(&mut self) -> u64 {
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A wake-up's delay: the fixed part, a uniform part, and now and then a late one.
    fn wake_delay(&mut self) -> Nanos {
        let c = self.bench.costs;
        let mut delay = c.wake + self.draw() % c.wake_jitter.max(1);
        if self.draw() % 1_000 < c.late_wakes_per_mille {
            delay += c.late_wake + self.draw() % c.late_wake.max(1);
        }
        delay
    }

    fn run_to(&mut self, end: Nanos) {
        loop {
            let (w, tw) = if self.workers[0].ready <= self.workers[1].ready {
                (0, self.workers[0].ready)
            } else {
                (1, self.workers[1].ready)
            };
            let task = (0..2)
                .filter_map(|c| self.cpus[c].next_completion().map(|t| (t, c)))
                .min();
            let next = task.map_or(tw, |(t, _)| t.min(tw));
            if next > end {
                break;
            }
            match task {
                Some((t, c)) if t < tw => {
                    for (at, done) in self.cpus[c].run_until(t, false) {
                        self.finish(at, done);
                    }
                }
                _ => {
                    for (at, done) in self.cpus[w].run_until(tw, true) {
                        self.finish(at, done);
                    }
                    self.step(w, tw);
                }
            }
        }
    }

    /// An endpoint thread finished at `at`.
    fn finish(&mut self, at: Nanos, done: Done) {
        match done {
            Done::Answered(n) => {
                let frame = Frame {
                    class: Class::Response,
                    probe: n,
                };
                self.arrive(1, at, frame);
            }
            Done::Received(n) => {
                let asked = self.requested[n as usize];
                self.round_trips.push(at - asked);
            }
        }
    }

    /// Worker `w` runs at `now`: one turn (the real one, on its CPU's clock), then the
    /// frames it handed off reach their hosts, and the worker carries its decision out.
    fn step(&mut self, w: usize, now: Nanos) {
        if let Some(t) = self.workers[w].spin_to.take().filter(|&t| t > now) {
            // Woken by its timer a spin margin early: spin to the departure with the CPU.
            self.workers[w].turns.slept(now);
            let next_rx = self.next_rx(w);
            self.workers[w].state = State::Spinning(now);
            self.workers[w].ready = next_rx.map_or(t, |at| at.clamp(now, t));
            return;
        }
        match self.workers[w].state {
            State::Asleep => self.workers[w].turns.slept(now),
            // A frame handed off during another worker's step may end a spin before it began
            // (a step runs ahead in virtual time): nothing spun then.
            State::Spinning(from) => self.workers[w].turns.spun(now.saturating_sub(from)),
            State::Busy => {}
        }
        self.workers[w].state = State::Busy;
        self.bench.now.set(now);
        self.bench.cpu.set(w);
        // The other direction's lock is free while its owner sleeps or pauses.
        let other = 1 - w;
        let helps = self.tuning.help_due && self.workers[other].state == State::Asleep;
        let [ab, ba] = &mut self.dirs;
        let (own, helped) = if w == 0 { (ab, ba) } else { (ba, ab) };
        let Decided { step, now } = self.workers[w].turns.turn(
            [Some(own)],
            helps.then_some(helped),
            &self.clock,
            &self.lone,
        );
        self.deliver_handed();
        self.carry_out(w, step.action, now);
    }

    /// What the sends of the step just run handed to the hosts, in the order they did.
    fn deliver_handed(&mut self) {
        let handed = std::mem::take(&mut *self.bench.handed.borrow_mut());
        for h in handed {
            self.deliver(h.cpu, h.at, h.frame);
        }
    }

    /// Sets worker `w`'s next step for `action` decided at `now`.
    fn carry_out(&mut self, w: usize, action: Action, now: Nanos) {
        let next_rx = self.next_rx(w);
        match action {
            Action::Again
            | Action::Wait {
                plan: WaitPlan::Now,
                ..
            } => self.workers[w].ready = now,
            Action::Pause(len) | Action::TxBlocked(len) => {
                self.pauses += u64::from(matches!(action, Action::Pause(_)));
                let wake = self.wake_delay();
                self.sleep(w, now, now + len + wake);
            }
            Action::Wait {
                plan: WaitPlan::Spin(until),
                ..
            } => {
                let until = next_rx.map_or(until, |t| t.clamp(now, until));
                self.workers[w].state = State::Spinning(now);
                self.workers[w].ready = until.max(now);
            }
            Action::Wait {
                plan: WaitPlan::Sleep { timeout, then_spin },
                ..
            } => {
                let wake = self.wake_delay();
                let timer = now + timeout + wake;
                match next_rx.filter(|&t| t.max(now) + wake < timer) {
                    Some(t) => self.sleep(w, now, t.max(now) + wake),
                    None => {
                        self.sleep(w, now, timer);
                        self.workers[w].spin_to = then_spin;
                    }
                }
            }
        }
    }

    fn sleep(&mut self, w: usize, now: Nanos, until: Nanos) {
        self.workers[w].state = State::Asleep;
        self.workers[w].ready = until;
        self.cpus[w].free(now);
    }

    /// What a frame handed off at `at` from CPU `w` causes on the receiving host.
    fn deliver(&mut self, w: usize, at: Nanos, frame: Frame) {
        // The thread a frame wakes is queued on the other CPU (emu-io-bench.md, "what the
        // normal-priority rr threads wait for").
        let other = 1 - w;
        match frame.class {
            Class::Bulk => {
                self.delivered_data += 1;
                if self.delivered_data % self.traffic.ack_every == 0 {
                    let ack = Frame {
                        class: Class::Ack,
                        probe: 0,
                    };
                    self.arrive(1, at + ACK_AFTER, ack);
                }
            }
            Class::Ack => {}
            Class::Request => self.cpus[other].wake(Task {
                woken: at,
                work: self.bench.costs.server,
                done: Done::Answered(frame.probe),
            }),
            Class::Response => self.cpus[other].wake(Task {
                woken: at,
                work: self.bench.costs.client,
                done: Done::Received(frame.probe),
            }),
        }
    }

    fn table(&mut self) -> Table {
        let mut late = self.bench.late.borrow_mut();
        let mut lateness = [Quantiles::default(); 4];
        for c in Class::ALL {
            lateness[c as usize] = Quantiles::of(std::mem::take(&mut late[c as usize]));
        }
        let counted = self.counters.each_ref().map(|c| c.snapshot());
        Table {
            lateness,
            round_trip: Quantiles::of(std::mem::take(&mut self.round_trips)),
            helped: counted.iter().map(|c| c.helped).sum(),
            pauses: self.pauses,
            sent: counted.iter().map(|c| c.frames_out).sum(),
        }
    }
}
