//! One direction of the bridge: receive port on the ingress interface → model → slab +
//! schedule → send port on the egress interface, with its counters. Generic over its ports
//! ([`RecvPort`], [`SendPort`]) and, per call, the [`Clock`] it reads: the real worker runs it
//! on the packet sockets' rings, the scheduling harness (`sim`) on simulated ports in virtual
//! time, so the harness proves this code and not a copy.
//!
//! The jobs, one file each: [`receive`] drains up to a batch of frames and asks the model for
//! each; [`store`] copies what it keeps into the slab and schedules it; [`send`] moves every
//! frame due at `now` to the send port (TX ring + one kick, or one `sendmmsg`). None of them
//! sleeps: waiting is the worker's job.
//!
//! Direct path (batch sends, a receive port that can hold frames): a frame that is due on
//! arrival with nothing queued ahead of it, needs no rewriting (VLAN tag, checksum,
//! corruption) and is not duplicated is not copied at all: the RX entry is held, sent from the
//! ring with the other such frames of the batch in one `sendmmsg`, then given back.
//!
//! GSO mode: each RX entry starts with a virtio-net header ([`crate::wire::gso`]), which travels
//! with the frame (in the slab slot, or straight from the ring) to the egress socket; the
//! model is charged the wire packets a super-packet stands for. When the model needs
//! per-packet granularity ([`Model::needs_per_packet`]), each wire segment of a TCP/USO
//! super-packet goes through the model as one packet. If the model left all of them intact
//! (sent once, uncorrupted, in order), the super-packet still leaves whole, at its last
//! segment's departure; otherwise it is cut ([`crate::wire::segment`]) and each surviving copy is
//! written straight into its own slab slot (no allocation; a preallocated scratch frame only
//! when a VLAN tag must be re-inserted first) and leaves as its own frame.

mod deferred;
mod receive;
mod send;
mod store;

use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender};

use crate::io::port::{RxPort, TxPort};
use crate::io::ring::RxNext;
use crate::model::Model;
use crate::report::counters::DirCounters;
use crate::run::ports::{RecvPort, SendPort};
use crate::sched::lone::LoneSignal;
use crate::sched::schedule::{Entry, Schedule};
use crate::sched::slab::Slab;
use crate::time::{Clock, Nanos};
use crate::tuning::Tuning;
use tcplab_emu::Verdict;

/// A reconfiguration request and where to send the model's answer.
pub type ReconfigRequest<C> = (C, Sender<Result<(), String>>);

/// Most segment decisions held at once (a 64 KiB super-packet at `gso_size` 64).
const MAX_DECISIONS: usize = 1024;

/// A frame held in the RX ring for the direct path.
#[derive(Debug, Clone, Copy)]
struct Held {
    /// Offset of the bytes to send (virtio-net header first in GSO mode).
    off: usize,
    /// Their length.
    len: usize,
    /// Scheduled departure.
    at: Nanos,
}

/// Per-direction settings fixed at start.
#[derive(Debug, Clone, Copy)]
pub struct DirSettings {
    /// Slab slots.
    pub slab_slots: u32,
    /// Virtio-net headers on both sockets (`IoOptions::carries_vnet`: GSO mode or `vnet_hdr`):
    /// each frame's header, partial checksum included, is carried from RX to TX.
    pub vnet: bool,
    /// GSO mode: super-packets may arrive (and are cut when the model needs single packets).
    pub gso: bool,
    /// Batches, flow turns, arrival stamps and which frames are lone (see [`Tuning`]).
    pub tuning: Tuning,
}

/// One direction's state, owned by its worker thread. `R` and `T` are its ports: the packet
/// sockets' by default.
#[derive(Debug)]
pub struct Direction<M: Model, R = RxPort, T = TxPort> {
    /// "a->b" or "b->a".
    pub name: &'static str,
    rx: R,
    tx: T,
    model: M,
    slab: Slab,
    sched: Schedule,
    counters: Arc<DirCounters>,
    reconfig: Receiver<ReconfigRequest<M::Config>>,
    /// Departures of the frames in the current TX-ring batch, each with whether it is lone
    /// (preallocated).
    batch_at: Vec<(Nanos, bool)>,
    /// Schedule entries of the current `sendmmsg` batch (preallocated).
    due: Vec<Entry>,
    /// Frames held in the RX ring for the direct path (preallocated).
    held: Vec<Held>,
    batch: usize,
    /// Most frames per send from the schedule (see `Tuning::due_batch`).
    due_batch: usize,
    flow_turns: bool,
    /// A due frame found the TX ring full; retry soon instead of sleeping.
    pub tx_blocked: bool,
    ring_timestamps: bool,
    /// Frames carry a virtio-net header ([`DirSettings::vnet`]).
    vnet: bool,
    gso: bool,
    /// GSO mode and the model needs per-packet granularity: cut super-packets.
    segmenting: bool,
    /// A super-packet with its VLAN tag re-inserted, to cut from (GSO mode only; allocated
    /// once).
    scratch: Vec<u8>,
    /// The model's decisions for the segments of one super-packet (preallocated).
    decisions: Vec<Verdict>,
    /// The latest departure the model has given in this direction (GSO mode).
    latest: Nanos,
    /// Counts sends that carried a lone frame (`Tuning::lone_pause_ns`; off by default).
    lone: LoneSignal,
    /// The frames a deferring model holds ([`Model::defers`]).
    deferred: deferred::Deferred,
}

impl<M: Model, R: RecvPort, T: SendPort> Direction<M, R, T> {
    /// Assembles a direction; allocates its slab and schedule now, never on the packet path.
    pub fn new(
        name: &'static str,
        (rx, tx): (R, T),
        model: M,
        settings: DirSettings,
        counters: Arc<DirCounters>,
        reconfig: Receiver<ReconfigRequest<M::Config>>,
    ) -> Self {
        let slot = tx.max_frame();
        let reorder = model.may_reorder();
        let t = settings.tuning;
        let batch = t.batch as usize;
        let segmenting = settings.gso && model.needs_per_packet();
        let model_defers = model.defers();
        let scratch = if settings.gso {
            vec![0; slot]
        } else {
            Vec::new()
        };
        Self {
            name,
            rx,
            tx,
            model,
            slab: Slab::new(settings.slab_slots, slot),
            sched: Schedule::new(settings.slab_slots as usize, reorder),
            counters,
            reconfig,
            batch_at: Vec::with_capacity(batch),
            due: Vec::with_capacity(batch),
            held: Vec::with_capacity(batch),
            batch,
            due_batch: t.due_batch.clamp(1, t.batch) as usize,
            flow_turns: t.flow_turns,
            tx_blocked: false,
            ring_timestamps: t.ring_timestamps,
            vnet: settings.vnet,
            gso: settings.gso,
            segmenting,
            scratch,
            decisions: Vec::with_capacity(if settings.gso { MAX_DECISIONS } else { 0 }),
            latest: 0,
            lone: LoneSignal::off(),
            deferred: if model_defers {
                deferred::Deferred::with_capacity(settings.slab_slots as usize)
            } else {
                deferred::Deferred::default()
            },
        }
    }

    /// Shares `lone` with the other direction and the workers: sends of lone frames are
    /// counted there by the CPU they were made on, and a release stops between sends when
    /// any count changes.
    pub fn with_lone_signal(mut self, lone: LoneSignal) -> Self {
        self.lone = lone;
        self
    }

    /// The receive port (the real worker polls its socket).
    pub fn rx_port(&self) -> &R {
        &self.rx
    }

    /// Earliest queued departure, or the deferring model's next decision if sooner.
    pub fn next_departure(&self) -> Option<Nanos> {
        match (self.sched.next_departure(), self.model.next_due()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Whether the next frame to leave is lone in its flow (the worker may spin to it).
    pub fn next_is_lone(&self) -> bool {
        self.sched.next_is_lone()
    }

    /// Whether any frame held for departure is lone (see `Schedule::holds_lone`).
    pub fn holds_lone(&self) -> bool {
        self.sched.holds_lone()
    }

    /// True if the receive port has a frame ready (no system call).
    pub fn rx_ready(&mut self) -> bool {
        self.rx.peek() != RxNext::Empty
    }

    /// Applies a pending reconfiguration, if any, and answers the caller.
    pub fn apply_reconfig(&mut self, now: Nanos) {
        while let Ok((cfg, answer)) = self.reconfig.try_recv() {
            let result = self.model.reconfigure(&cfg, now);
            self.sched.set_reorder(self.model.may_reorder());
            self.segmenting = self.gso && self.model.needs_per_packet();
            // The caller may have given up waiting; the change applied either way.
            let _ = answer.send(result);
        }
    }

    /// Adds the frames the receive port lost (a full ring) to the counters.
    pub fn poll_ring_stats(&mut self) {
        DirCounters::add(&self.counters.drop_ring_overflow, self.rx.take_drops());
    }

    /// Publishes the model's own account up to `now` (`DirSnapshot::realised`).
    pub fn publish_realised(&self, now: Nanos) {
        self.counters.publish_realised(self.model.realised(now));
    }

    /// Counts a wake-up from poll.
    pub fn count_wakeup(&self) {
        DirCounters::add(&self.counters.wakeups, 1);
    }

    /// Notes a send that carried a lone frame, on the CPU `clock` says it was made on.
    fn note_lone<C: Clock>(&self, clock: &C) {
        self.lone.note(clock.cpu());
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod deferred_tests;
