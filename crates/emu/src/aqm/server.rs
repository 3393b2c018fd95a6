//! The link that drains a discipline: it asks for the next packet at the instant the last one
//! finished serialising (or when one arrives at an idle link), and serialises it at the rate
//! with the same exact arithmetic as the drop-tail bottleneck (the sub-ns remainder carried
//! through a back-to-back train).
//!
//! Event order is the caller's contract: before offering a packet that arrives at `now`, every
//! dequeue due by `now` is made (each at its own instant, so CoDel sees each packet's true
//! sojourn and FQ-CoDel chooses among the flows queued at that instant); [`Server::arrive`]
//! does this itself, and the caller also calls [`Server::advance`] at [`Server::next_due`]. In
//! virtual time this is exact; in real time a late call still dequeues at the instants that
//! were due, as the drop-tail model keeps departures exact under lateness.

use super::{Backlog, Discipline, Dropped, Packet};
use crate::Nanos;
use crate::queue_stats::QueueStats;

const NS_PER_S: u128 = 1_000_000_000;

/// A packet the link took: when its serialisation started and ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Served {
    /// The packet.
    pub packet: Packet,
    /// The discipline marked it CE.
    pub marked: bool,
    /// When it was dequeued (its first bit on the wire).
    pub starts: Nanos,
    /// When its last bit is serialised: it leaves the bottleneck.
    pub leaves: Nanos,
}

/// A discipline and the rate that drains it.
#[derive(Debug, Clone)]
pub struct Server {
    discipline: Discipline,
    rate_bps: Option<u64>,
    overhead: u32,
    /// When the packet on the wire finishes.
    busy_until: Nanos,
    /// Its length.
    on_wire_len: u32,
    /// Fraction of a ns owed by `busy_until`, in units of 1/rate ns.
    remainder: u128,
    /// Since when the discipline has held packets (None: empty).
    nonempty_since: Option<Nanos>,
    /// Occupancy as the drop-tail bottleneck counts it: a packet is in the queue from its
    /// arrival until its last bit is serialised.
    stats: QueueStats,
}

impl Server {
    /// `discipline` drained at `rate_bps` (None: infinitely fast), `overhead` bytes per frame.
    pub fn new(discipline: Discipline, rate_bps: Option<u64>, overhead: u32) -> Server {
        Server {
            discipline,
            rate_bps,
            overhead,
            busy_until: 0,
            on_wire_len: 0,
            remainder: 0,
            nonempty_since: None,
            stats: QueueStats::default(),
        }
    }

    /// A packet arrives at `now`: the dequeues due by then are made first (appended to `out`,
    /// drops to `dropped`), then it is offered, then served at once if the link is idle.
    pub fn arrive(
        &mut self,
        packet: Packet,
        now: Nanos,
        out: &mut Vec<Served>,
        dropped: &mut Vec<Dropped>,
    ) {
        self.advance(now, out, dropped);
        self.wire_done(now);
        self.stats.advance(now);
        let on_wire = if self.busy_until > now {
            Backlog {
                packets: 1,
                bytes: u64::from(self.on_wire_len),
            }
        } else {
            Backlog::default()
        };
        let from = dropped.len();
        self.discipline.enqueue(packet, now, on_wire, dropped);
        if dropped[from..].iter().all(|d| d.packet.id != packet.id) {
            self.stats.enter(packet.len);
        }
        // Packets of other flows dropped to make room (FQ-CoDel) leave now.
        for d in dropped[from..].iter().filter(|d| d.packet.id != packet.id) {
            self.stats.leave(d.packet.len);
        }
        if self.nonempty_since.is_none() && self.discipline.backlog().packets > 0 {
            self.nonempty_since = Some(now);
        }
        self.advance(now, out, dropped);
    }

    /// Makes every dequeue due by `now`, each at its own instant.
    pub fn advance(&mut self, now: Nanos, out: &mut Vec<Served>, dropped: &mut Vec<Dropped>) {
        while let Some(t) = self.next_due() {
            if t > now {
                break;
            }
            self.wire_done(t);
            self.stats.advance(t);
            let from = dropped.len();
            let served = self.discipline.dequeue(t, dropped);
            for d in &dropped[from..] {
                self.stats.leave(d.packet.len);
            }
            match served {
                Some(d) => {
                    let leaves = self.serialise(d.packet.len, t);
                    self.stats.record_sojourn(d.packet.enqueued_at, leaves);
                    out.push(Served {
                        packet: d.packet,
                        marked: d.marked,
                        starts: t,
                        leaves,
                    });
                }
                None => self.nonempty_since = None,
            }
            if self.discipline.backlog().packets == 0 {
                self.nonempty_since = None;
            }
        }
    }

    /// The packet on the wire has left the queue if its last bit is out by `t`.
    fn wire_done(&mut self, t: Nanos) {
        if self.on_wire_len > 0 && self.busy_until <= t {
            self.stats.advance(self.busy_until);
            self.stats.leave(self.on_wire_len);
            self.on_wire_len = 0;
        }
    }

    /// Occupancy statistics projected to `now`.
    pub fn stats_at(&self, now: Nanos) -> QueueStats {
        let mut s = self.stats;
        if self.on_wire_len > 0 && self.busy_until <= now {
            s.advance(self.busy_until);
            s.leave(self.on_wire_len);
        }
        s.advance(now);
        s
    }

    /// When the next dequeue is due (None: nothing is queued).
    pub fn next_due(&self) -> Option<Nanos> {
        self.nonempty_since.map(|since| since.max(self.busy_until))
    }

    /// Occupies the link with a frame of `len` bytes from `t`; returns when it is done.
    fn serialise(&mut self, len: u32, t: Nanos) -> Nanos {
        self.on_wire_len = len;
        let Some(rate) = self.rate_bps else {
            self.busy_until = self.busy_until.max(t);
            return t;
        };
        if self.busy_until < t {
            self.busy_until = t;
            self.remainder = 0;
        }
        let bits = (u128::from(len) + u128::from(self.overhead)) * 8;
        let numerator = bits * NS_PER_S + self.remainder;
        let rate = u128::from(rate);
        self.remainder = numerator % rate;
        let service = u64::try_from(numerator / rate).unwrap_or(u64::MAX);
        self.busy_until = self.busy_until.saturating_add(service);
        self.busy_until
    }

    /// A new rate, overhead and queue limit from `now` on; the packet on the wire finishes
    /// at the old rate, what is queued stays.
    pub fn reconfigure(&mut self, rate_bps: u64, overhead: u32, limit: crate::QueueLimit) {
        self.remainder = match self.rate_bps {
            Some(old) => self.remainder * u128::from(rate_bps) / u128::from(old.max(1)),
            None => 0,
        };
        self.rate_bps = Some(rate_bps);
        self.overhead = overhead;
        self.discipline.set_limit(limit);
    }

    /// The discipline (its counters and state).
    pub fn discipline(&self) -> &Discipline {
        &self.discipline
    }

    /// What is queued.
    pub fn backlog(&self) -> Backlog {
        self.discipline.backlog()
    }
}
