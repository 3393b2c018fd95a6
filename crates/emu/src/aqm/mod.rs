//! Queue management at the bottleneck, pure: the disciplines Linux, ns-3 and mahimahi ship,
//! each written from its specification, and the rate server that drives them.
//!
//! The drop-tail [`crate::rate::Bottleneck`] decides when a packet leaves the moment it
//! arrives. Queue management cannot: CoDel judges a packet by its sojourn time when it is
//! dequeued, FQ-CoDel picks which flow's packet goes next only when the link is free, and a
//! drop at dequeue frees link time for the packets behind. So a discipline here is a queue
//! with `enqueue(packet, now)` and `dequeue(now)`, and [`server::Server`] calls `dequeue` at
//! the exact instants the link becomes free (event order in virtual time; the I/O layer's
//! timer in real time).
//!
//! ```text
//! arrive ─► Discipline::enqueue ─(tail drop, RED/PIE early drop or CE mark,
//!                                 FQ-CoDel's memory limit on the fattest flow)
//! link free ─► Discipline::dequeue ─(CoDel: drop or CE mark by sojourn time)─► serialise ─► delay line
//! ```
//!
//! | discipline | specification | decides at |
//! |---|---|---|
//! | [`fifo::Fifo`] | drop-tail, packet or byte limit | enqueue |
//! | [`red::Red`] | Floyd & Jacobson 1993, gentle variant (Floyd 2000), RFC 2309/7567 | enqueue |
//! | [`codel::Codel`] | RFC 8289 | dequeue |
//! | [`fq_codel::FqCodel`] | RFC 8290 | enqueue (memory limit) and dequeue |
//! | [`pie::Pie`] | RFC 8033 | enqueue, with a probability updated every `tupdate` |
//!
//! ECN: a packet whose IP header says ECT(0) or ECT(1) is marked CE where the discipline
//! would drop it (each discipline's own rule on when it may mark instead: CoDel and FQ-CoDel
//! always, PIE while its probability is at most 10 %, RED below the hard limit); a not-ECT
//! packet is dropped. The I/O layer sets the bits and fixes the IP checksum.

pub mod codel;
pub mod config;
pub mod fifo;
pub mod fq_codel;
pub mod pie;
pub mod red;
pub mod server;
pub mod spec;

pub use config::{AqmConfig, CodelParams, FqCodelParams, PieParams, RedParams};
pub use spec::parse_queue_discipline;

use serde::{Deserialize, Serialize};

use crate::{Direction, Nanos, QueueLimit};

/// A packet's ECN codepoint (RFC 3168), from its IP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Ecn {
    /// Not ECN-capable: a discipline drops it.
    #[default]
    NotEct,
    /// ECN-capable transport (0).
    Ect0,
    /// ECN-capable transport (1) (L4S uses it).
    Ect1,
    /// Congestion experienced: already marked.
    Ce,
}

impl Ecn {
    /// The codepoint of an IP header's ECN bits (the low two bits of the TOS/traffic class).
    pub fn from_bits(bits: u8) -> Ecn {
        match bits & 0b11 {
            0b00 => Ecn::NotEct,
            0b10 => Ecn::Ect0,
            0b01 => Ecn::Ect1,
            _ => Ecn::Ce,
        }
    }

    /// Whether a discipline may mark it instead of dropping it (ECT or already CE).
    pub fn capable(self) -> bool {
        self != Ecn::NotEct
    }
}

/// A packet as a discipline sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet {
    /// The caller's handle on the frame (the I/O layer's slot).
    pub id: u64,
    /// Frame bytes.
    pub len: u32,
    /// A hash of its flow (the 5-tuple): FQ-CoDel's bucket.
    pub flow: u32,
    /// Its ECN codepoint on arrival.
    pub ecn: Ecn,
    /// When it was enqueued (set by the discipline).
    pub enqueued_at: Nanos,
}

impl Packet {
    /// A packet of `len` bytes of flow `flow`, with handle `id`.
    pub fn new(id: u64, len: u32, flow: u32, ecn: Ecn) -> Packet {
        Packet {
            id,
            len,
            flow,
            ecn,
            enqueued_at: 0,
        }
    }
}

/// Why a discipline dropped a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AqmDrop {
    /// The queue's packet or byte limit (drop-tail).
    Overlimit,
    /// RED's or PIE's random early drop at enqueue.
    Early,
    /// CoDel's control law at dequeue.
    Codel,
    /// FQ-CoDel's memory or packet limit: a packet of the fattest flow.
    Memory,
}

/// A packet a discipline dropped, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dropped {
    /// The packet.
    pub packet: Packet,
    /// Why.
    pub why: AqmDrop,
}

/// A packet that leaves the queue for the link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dequeued {
    /// The packet.
    pub packet: Packet,
    /// The discipline set CE on it (it was ECT; the I/O layer rewrites the header).
    pub marked: bool,
}

/// What a discipline did so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AqmCounters {
    /// Packets offered.
    pub arrived: u64,
    /// Packets that left for the link.
    pub dequeued: u64,
    /// Of them, marked CE by the discipline.
    pub marked: u64,
    /// Dropped at the limit.
    pub dropped_overlimit: u64,
    /// Dropped early at enqueue (RED, PIE).
    pub dropped_early: u64,
    /// Dropped by CoDel at dequeue.
    pub dropped_codel: u64,
    /// Dropped by FQ-CoDel's memory limit.
    pub dropped_memory: u64,
    /// Of all drops, those of ECN-capable packets (none below the limits when ECN is on).
    pub dropped_ect: u64,
    /// Distinct flow buckets that ever held a packet (FQ-CoDel).
    pub flows_seen: u64,
    /// Sum of the sojourn times of dequeued packets, ns (their mean is this over `dequeued`).
    #[serde(default, with = "crate::realised::u128_text")]
    pub sojourn_ns_sum: u128,
    /// Longest sojourn time of a dequeued packet, ns.
    pub sojourn_ns_max: u64,
}

impl AqmCounters {
    fn dropped(&mut self, d: &Dropped) {
        match d.why {
            AqmDrop::Overlimit => self.dropped_overlimit += 1,
            AqmDrop::Early => self.dropped_early += 1,
            AqmDrop::Codel => self.dropped_codel += 1,
            AqmDrop::Memory => self.dropped_memory += 1,
        }
        if d.packet.ecn.capable() {
            self.dropped_ect += 1;
        }
    }

    fn left(&mut self, d: &Dequeued, now: Nanos) {
        self.dequeued += 1;
        self.marked += u64::from(d.marked);
        let sojourn = now.saturating_sub(d.packet.enqueued_at);
        self.sojourn_ns_sum += u128::from(sojourn);
        self.sojourn_ns_max = self.sojourn_ns_max.max(sojourn);
    }

    /// Every drop, whatever its cause.
    pub fn dropped_total(&self) -> u64 {
        self.dropped_overlimit + self.dropped_early + self.dropped_codel + self.dropped_memory
    }
}

/// What a queue holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Backlog {
    /// Packets.
    pub packets: u64,
    /// Frame bytes.
    pub bytes: u64,
}

impl Backlog {
    fn add(&mut self, p: &Packet) {
        self.packets += 1;
        self.bytes += u64::from(p.len);
    }

    fn remove(&mut self, p: &Packet) {
        self.packets = self.packets.saturating_sub(1);
        self.bytes = self.bytes.saturating_sub(u64::from(p.len));
    }

    /// Whether one more packet of `len` bytes stays within `limit`, counting `on_wire` (the
    /// packet being serialised counts against the limit, as in the drop-tail bottleneck and
    /// dummynet: a 64-packet queue holds the one on the wire and 63 waiting).
    fn fits(&self, on_wire: Backlog, limit: QueueLimit, len: u32) -> bool {
        match limit {
            QueueLimit::Packets(n) => self.packets + on_wire.packets < u64::from(n),
            QueueLimit::Bytes(b) => self.bytes + on_wire.bytes + u64::from(len) <= b,
        }
    }
}

/// A discipline, chosen once per direction (static dispatch: no allocation or indirect call
/// per packet).
#[derive(Debug, Clone)]
pub enum Discipline {
    /// Drop-tail.
    Fifo(fifo::Fifo),
    /// RED.
    Red(red::Red),
    /// CoDel.
    Codel(codel::Codel),
    /// FQ-CoDel.
    FqCodel(fq_codel::FqCodel),
    /// PIE.
    Pie(pie::Pie),
}

impl Discipline {
    /// The discipline `cfg` describes, with the queue's `limit`; `rate_bps` is the link's
    /// (RED's idle-time decay needs it); the random ones draw from `seed`'s stream for
    /// `direction`.
    pub fn new(
        cfg: &AqmConfig,
        limit: QueueLimit,
        rate_bps: Option<u64>,
        seed: u64,
        direction: Direction,
    ) -> Self {
        match cfg {
            AqmConfig::Droptail => Discipline::Fifo(fifo::Fifo::new(limit)),
            AqmConfig::Red(p) => {
                Discipline::Red(red::Red::new(*p, limit, rate_bps, seed, direction))
            }
            AqmConfig::Codel(p) => Discipline::Codel(codel::Codel::new(*p, limit)),
            AqmConfig::FqCodel(p) => Discipline::FqCodel(fq_codel::FqCodel::new(*p, limit)),
            AqmConfig::Pie(p) => Discipline::Pie(pie::Pie::new(*p, limit, seed, direction)),
        }
    }

    /// Takes `packet` at `now`, with `on_wire` on the link (it counts against the queue's
    /// limit); what it drops (the packet itself, or FQ-CoDel's victims from the fattest flow)
    /// is appended to `dropped`.
    pub fn enqueue(
        &mut self,
        packet: Packet,
        now: Nanos,
        on_wire: Backlog,
        dropped: &mut Vec<Dropped>,
    ) {
        let packet = Packet {
            enqueued_at: now,
            ..packet
        };
        let from = dropped.len();
        match self {
            Discipline::Fifo(q) => q.enqueue(packet, on_wire, dropped),
            Discipline::Red(q) => q.enqueue(packet, now, on_wire, dropped),
            Discipline::Codel(q) => q.enqueue(packet, on_wire, dropped),
            Discipline::FqCodel(q) => q.enqueue(packet, on_wire, dropped),
            Discipline::Pie(q) => q.enqueue(packet, now, on_wire, dropped),
        }
        let c = self.counters_mut();
        c.arrived += 1;
        for d in &dropped[from..] {
            c.dropped(d);
        }
    }

    /// The next packet for the link at `now`, if any; what it drops on the way (CoDel) is
    /// appended to `dropped`.
    pub fn dequeue(&mut self, now: Nanos, dropped: &mut Vec<Dropped>) -> Option<Dequeued> {
        let from = dropped.len();
        let out = match self {
            Discipline::Fifo(q) => q.dequeue(),
            Discipline::Red(q) => q.dequeue(now),
            Discipline::Codel(q) => q.dequeue(now, dropped),
            Discipline::FqCodel(q) => q.dequeue(now, dropped),
            Discipline::Pie(q) => q.dequeue(now),
        };
        let c = self.counters_mut();
        for d in &dropped[from..] {
            c.dropped(d);
        }
        if let Some(d) = &out {
            c.left(d, now);
        }
        out
    }

    /// A new queue limit for what arrives next (what is queued stays).
    pub fn set_limit(&mut self, limit: QueueLimit) {
        match self {
            Discipline::Fifo(q) => q.set_limit(limit),
            Discipline::Red(q) => q.set_limit(limit),
            Discipline::Codel(q) => q.set_limit(limit),
            Discipline::FqCodel(q) => q.set_limit(limit),
            Discipline::Pie(q) => q.set_limit(limit),
        }
    }

    /// What it holds.
    pub fn backlog(&self) -> Backlog {
        match self {
            Discipline::Fifo(q) => q.backlog(),
            Discipline::Red(q) => q.backlog(),
            Discipline::Codel(q) => q.backlog(),
            Discipline::FqCodel(q) => q.backlog(),
            Discipline::Pie(q) => q.backlog(),
        }
    }

    /// What it did so far.
    pub fn counters(&self) -> &AqmCounters {
        match self {
            Discipline::Fifo(q) => &q.counters,
            Discipline::Red(q) => &q.counters,
            Discipline::Codel(q) => &q.counters,
            Discipline::FqCodel(q) => &q.counters,
            Discipline::Pie(q) => &q.counters,
        }
    }

    fn counters_mut(&mut self) -> &mut AqmCounters {
        match self {
            Discipline::Fifo(q) => &mut q.counters,
            Discipline::Red(q) => &mut q.counters,
            Discipline::Codel(q) => &mut q.counters,
            Discipline::FqCodel(q) => &mut q.counters,
            Discipline::Pie(q) => &mut q.counters,
        }
    }
}

#[cfg(test)]
mod tests;
