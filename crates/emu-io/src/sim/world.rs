//! The simulated machine: two directions (their RX queues, the real model and schedule), two
//! workers (one per direction, each on its own CPU, deciding with the real `WorkerSched`),
//! the probe's endpoint threads on the CPUs, and one clock that only moves forward. Events are
//! taken in time order: a worker's next step, or an endpoint thread finishing on a free CPU.

use std::collections::BTreeMap;

use tcplab_emu::{DirectionConfig, DirectionModel, Verdict};

use super::cpu::{Cpu, Task};
use super::table::{Class, Quantiles, Table};
use crate::sched::lone::LoneSignal;
use crate::sched::schedule::{Entry, Schedule};
use crate::sched::worker::{Action, TurnEnd, WaitPlan, WorkerSched, another_send};
use crate::time::Nanos;
use crate::tuning::Tuning;

/// What the machine charges for the workers' steps (ns), and how late a sleeper wakes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Costs {
    /// A turn's fixed cost (locks, reconfiguration check, bookkeeping).
    pub turn: Nanos,
    /// Receiving one frame through the model into the schedule.
    pub rx_frame: Nanos,
    /// A `sendmmsg` call's fixed cost.
    pub send_call: Nanos,
    /// Handing one frame to veth, which runs the receiving host's stack for it.
    pub handoff: Nanos,
    /// Least delay from a wake-up (timer or frame) to the worker running.
    pub wake: Nanos,
    /// Extra wake-up delay, uniform in [0, this).
    pub wake_jitter: Nanos,
    /// Wake-ups in 1,000 that come much later: the timer's wake-up queued behind a task
    /// inside the kernel (softirq work, which a `PREEMPT_NONE` kernel lets finish).
    pub late_wakes_per_mille: u64,
    /// How much later such a wake-up comes, uniform in [this, 2x this).
    pub late_wake: Nanos,
    /// CPU the probe's server thread needs to answer a request.
    pub server: Nanos,
    /// CPU the probe's client thread needs to take a response.
    pub client: Nanos,
}

impl Default for Costs {
    /// Figures of the 2-vCPU test machine (`emu-io-bench.md`): 2.7 µs per veth hand-off, hrtimer
    /// wake-ups of a SCHED_FIFO thread 10-40 µs late, and 1 % of them 0.3-0.6 ms late (the
    /// emulator's lateness p99 under an unpaced bulk flow was 0.7-2.4 ms).
    fn default() -> Self {
        Self {
            turn: 1_000,
            rx_frame: 300,
            send_call: 1_000,
            handoff: 2_700,
            wake: 10_000,
            wake_jitter: 30_000,
            late_wakes_per_mille: 10,
            late_wake: 300_000,
            server: 15_000,
            client: 10_000,
        }
    }
}

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

const DATA_LEN: u32 = 1514;
const ACK_LEN: u32 = 66;
const PROBE_LEN: u32 = 100;
/// From a data segment's hand-off to its ACK arriving back at the emulator.
const ACK_AFTER: Nanos = 3_000;

/// A frame in an RX queue or the schedule.
#[derive(Debug, Clone, Copy)]
struct Frame {
    class: Class,
    /// The probe's number (requests and responses).
    probe: u32,
}

/// What an endpoint thread does when it finishes.
#[derive(Debug, Clone, Copy)]
enum Done {
    /// The server answered probe `n`: its response arrives at the emulator.
    Answered(u32),
    /// The client took probe `n`'s response.
    Received(u32),
}

/// One direction: its RX queue, model, schedule and the frames the schedule's slots hold.
struct Dir {
    rx: BTreeMap<(Nanos, u64), Frame>,
    model: DirectionModel,
    sched: Schedule,
    slots: Vec<Option<Frame>>,
    free: Vec<u32>,
}

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
    sched: WorkerSched,
    ready: Nanos,
    state: State,
    /// Asleep on a timer set a spin margin before this departure: spin the rest once awake.
    spin_to: Option<Nanos>,
}

struct World {
    tuning: Tuning,
    costs: Costs,
    traffic: Traffic,
    dirs: [Dir; 2],
    workers: [Worker; 2],
    cpus: [Cpu<Done>; 2],
    lone: LoneSignal,
    rng: u64,
    seq: u64,
    late: [Vec<Nanos>; 4],
    requested: Vec<Nanos>,
    round_trips: Vec<Nanos>,
    delivered_data: u32,
    helped: u64,
    pauses: u64,
}

/// Runs `traffic` through the emulator's scheduling with `tuning` on a machine with `costs`,
/// and returns the lateness table. Deterministic: the same arguments give the same table.
pub(crate) fn run(tuning: Tuning, costs: Costs, traffic: Traffic) -> Table {
    let mut w = World::new(tuning, costs, traffic);
    w.run_to(traffic.duration + 4 * traffic.delay);
    w.table()
}

impl World {
    fn new(tuning: Tuning, costs: Costs, traffic: Traffic) -> Self {
        let dir = |seed| {
            let cfg = DirectionConfig {
                delay_ns: traffic.delay,
                ..DirectionConfig::default()
            };
            Dir {
                rx: BTreeMap::new(),
                model: DirectionModel::new(&cfg, seed).expect("a delay-only link is valid"),
                sched: Schedule::new(1 << 16, false),
                slots: Vec::new(),
                free: Vec::new(),
            }
        };
        let worker = || Worker {
            sched: WorkerSched::new(tuning, false, true, 0),
            ready: 0,
            state: State::Busy,
            spin_to: None,
        };
        let mut w = World {
            tuning,
            costs,
            traffic,
            dirs: [dir(1), dir(2)],
            workers: [worker(), worker()],
            cpus: [Cpu::default(), Cpu::default()],
            lone: if tuning.lone_pause_ns > 0 {
                LoneSignal::on(2)
            } else {
                LoneSignal::off()
            },
            rng: 0x5eed,
            seq: 0,
            late: Default::default(),
            requested: Vec::new(),
            round_trips: Vec::new(),
            delivered_data: 0,
            helped: 0,
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

    /// A frame arrives at direction `d`'s RX ring at `at`; a sleeping or spinning owner wakes.
    fn arrive(&mut self, d: usize, at: Nanos, frame: Frame) {
        self.seq += 1;
        self.dirs[d].rx.insert((at, self.seq), frame);
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
        let c = self.costs;
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

    /// Worker `w` runs at `now`: one turn, help, the decision, and carrying it out.
    fn step(&mut self, w: usize, mut now: Nanos) {
        if let Some(t) = self.workers[w].spin_to.take().filter(|&t| t > now) {
            // Woken by its timer a spin margin early: spin to the departure with the CPU.
            self.workers[w].sched.slept(now);
            let next_rx = self.dirs[w].rx.keys().next().map(|&(at, _)| at);
            self.workers[w].state = State::Spinning(now);
            self.workers[w].ready = next_rx.map_or(t, |at| at.clamp(now, t));
            return;
        }
        match self.workers[w].state {
            State::Asleep => self.workers[w].sched.slept(now),
            State::Spinning(from) => self.workers[w].sched.spun(now - from),
            State::Busy => {}
        }
        self.workers[w].state = State::Busy;
        // The turn: release, receive, release again unless a lone frame left meanwhile.
        let epoch = self.lone.epoch();
        now = self.release(w, w, now, usize::MAX);
        now += self.costs.turn;
        let received = self.receive(w, now);
        now += Nanos::from(received as u32) * self.costs.rx_frame;
        if self.lone.epoch() == epoch {
            now = self.release(w, w, now, usize::MAX);
        }
        let s = &self.dirs[w].sched;
        let mut end = TurnEnd {
            received,
            tx_blocked: false,
            next: s.next_departure(),
            next_lone: s.next_is_lone(),
            holds_lone: s.holds_lone(),
            helping: false,
        };
        let other = 1 - w;
        if self.tuning.help_due && self.workers[other].state == State::Asleep {
            let overdue = self.dirs[other].sched.next_departure();
            if overdue.is_some_and(|t| t <= now) {
                let due_batch = self.tuning.due_batch as usize;
                now = self.release(w, other, now, due_batch);
                let more = self.dirs[other].sched.next_departure();
                end.helping = more.is_some_and(|t| t <= now);
            }
        }
        let lone = self.lone.clone();
        let step = self.workers[w]
            .sched
            .after_turn(&end, || lone.elsewhere(w), now);
        self.carry_out(w, step.action, now);
    }

    /// Sets worker `w`'s next step for `action` decided at `now`.
    fn carry_out(&mut self, w: usize, action: Action, now: Nanos) {
        let next_rx = self.dirs[w].rx.keys().next().map(|&(t, _)| t);
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

    /// Frames of direction `d` that arrived by `now`, at most a batch, through the model into
    /// the schedule. Returns how many.
    fn receive(&mut self, d: usize, now: Nanos) -> usize {
        let batch = self.tuning.batch as usize;
        let mut n = 0;
        while n < batch {
            let Some((&(at, seq), _)) = self.dirs[d].rx.first_key_value() else {
                break;
            };
            if at > now {
                break;
            }
            let frame = self.dirs[d].rx.remove(&(at, seq)).expect("present");
            n += 1;
            let len = match frame.class {
                Class::Bulk => DATA_LEN,
                Class::Ack => ACK_LEN,
                Class::Request | Class::Response => PROBE_LEN,
            };
            let flow = match (self.tuning.flow_turns, frame.class) {
                (false, _) => 0,
                (true, Class::Bulk | Class::Ack) => 1,
                (true, Class::Request | Class::Response) => 2,
            };
            let dir = &mut self.dirs[d];
            if let Verdict::Send(deps) = dir.model.arrive(len, at) {
                let slot = match dir.free.pop() {
                    Some(s) => {
                        dir.slots[s as usize] = Some(frame);
                        s
                    }
                    None => {
                        dir.slots.push(Some(frame));
                        (dir.slots.len() - 1) as u32
                    }
                };
                dir.sched.push(deps.first().at, slot, len, flow);
            }
        }
        n
    }

    /// Worker `w` (on CPU `w`) sends direction `d`'s due frames at `now`, in sends of at most
    /// `due_batch`, at most `limit` frames (and a batch) in all; returns the time after.
    fn release(&mut self, w: usize, d: usize, mut now: Nanos, limit: usize) -> Nanos {
        let due_batch = self.tuning.due_batch as usize;
        let limit = limit.min(self.tuning.batch as usize);
        let epoch = self.lone.epoch();
        let mut released = 0;
        while released < limit {
            let mut due: Vec<Entry> = Vec::with_capacity(due_batch);
            while due.len() < due_batch {
                match self.dirs[d].sched.pop_due(now) {
                    Some(e) => due.push(e),
                    None => break,
                }
            }
            if due.is_empty() {
                break;
            }
            now = self.send(w, d, now, &due);
            released += due.len();
            if w != d {
                self.helped += due.len() as u64;
            }
            let rx = &self.dirs[d].rx;
            let rx_waiting = || rx.keys().next().is_some_and(|&(t, _)| t <= now);
            let lone_sent = || self.lone.epoch() != epoch;
            if !another_send(due.len(), due_batch, false, rx_waiting, lone_sent) {
                break;
            }
        }
        now
    }

    /// One `sendmmsg` of `due` from CPU `w` at `now`; returns when it ends.
    fn send(&mut self, w: usize, d: usize, now: Nanos, due: &[Entry]) -> Nanos {
        let start = now + self.costs.send_call;
        for (i, e) in due.iter().enumerate() {
            let handed = start + (i as Nanos + 1) * self.costs.handoff;
            let frame = self.dirs[d].slots[e.slot as usize]
                .take()
                .expect("a scheduled slot holds a frame");
            self.dirs[d].free.push(e.slot);
            self.late[frame.class as usize].push(handed.saturating_sub(e.at));
            self.deliver(w, handed, frame);
        }
        if due.iter().any(|e| e.lone) {
            self.lone.note(w);
        }
        start + due.len() as Nanos * self.costs.handoff
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
                work: self.costs.server,
                done: Done::Answered(frame.probe),
            }),
            Class::Response => self.cpus[other].wake(Task {
                woken: at,
                work: self.costs.client,
                done: Done::Received(frame.probe),
            }),
        }
    }

    fn table(&mut self) -> Table {
        let mut lateness = [Quantiles::default(); 4];
        for c in Class::ALL {
            lateness[c as usize] = Quantiles::of(std::mem::take(&mut self.late[c as usize]));
        }
        Table {
            lateness,
            round_trip: Quantiles::of(std::mem::take(&mut self.round_trips)),
            helped: self.helped,
            pauses: self.pauses,
        }
    }
}
