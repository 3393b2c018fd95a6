//! RED (Floyd & Jacobson 1993) with the gentle variant (Floyd 2000), as RFC 2309 recommended and
//! Linux's `sch_red` implements: an exponentially weighted average of the backlog, no early
//! drops below `min_th`, a probability rising linearly to `max_p` at `max_th`, then (gentle)
//! to 1 at twice `max_th`; beyond, every packet. Drops are spread out by counting packets since
//! the last one (`pa = pb / (1 - count * pb)`), and the average decays over idle time as if
//! `mean_packet_bytes` packets had kept leaving at the link's rate. With ECN, an ECN-capable
//! packet is marked instead of dropped (Linux's default, without `harddrop`). Each arriving
//! packet draws one uniform value, used or not.

use rand::Rng as _;

use super::fifo::FifoQueue;
use super::{AqmCounters, AqmDrop, Backlog, Dequeued, Dropped, Packet};
use crate::aqm::config::RedParams;
use crate::rng::{Rng, Stream, stream};
use crate::{Direction, Nanos, QueueLimit};

/// RED's state.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RedVars {
    /// The average backlog, bytes.
    pub avg: f64,
    /// Packets since the last early drop in the probabilistic zones (None: below `min_th`).
    pub count: Option<u32>,
    /// When the queue went idle (None: it is not idle).
    pub idle_since: Option<Nanos>,
}

/// RED.
#[derive(Debug, Clone)]
pub struct Red {
    params: RedParams,
    rate_bps: Option<u64>,
    queue: FifoQueue,
    vars: RedVars,
    rng: Rng,
    pub(super) counters: AqmCounters,
}

impl Red {
    /// An empty RED queue of `limit` on a link of `rate_bps`, drawing from `seed`'s stream for
    /// `direction`.
    pub fn new(
        params: RedParams,
        limit: QueueLimit,
        rate_bps: Option<u64>,
        seed: u64,
        direction: Direction,
    ) -> Red {
        Red {
            params,
            rate_bps,
            queue: FifoQueue::new(limit),
            vars: RedVars {
                idle_since: Some(0),
                ..RedVars::default()
            },
            rng: stream(seed, direction, Stream::Aqm),
            counters: AqmCounters::default(),
        }
    }

    /// RED's state (for tests and the emulator's account).
    pub fn vars(&self) -> &RedVars {
        &self.vars
    }

    /// The average after a new arrival at `now`.
    fn average(&mut self, now: Nanos) {
        let p = &self.params;
        let v = &mut self.vars;
        match v.idle_since.take() {
            Some(since) => {
                // Idle: decay as if m packets of the mean size had left at the link's rate.
                let m = match self.rate_bps {
                    Some(rate) => {
                        let secs = now.saturating_sub(since) as f64 / 1e9;
                        secs * rate as f64 / 8.0 / f64::from(p.mean_packet_bytes.max(1))
                    }
                    None => f64::INFINITY,
                };
                v.avg *= (1.0 - p.wq).powf(m);
            }
            None => v.avg = (1.0 - p.wq) * v.avg + p.wq * self.queue.backlog().bytes as f64,
        }
    }

    /// Whether the arriving packet is dropped (or marked) early; `u` is its uniform draw.
    fn early(&mut self, u: f64) -> bool {
        let p = &self.params;
        let v = &mut self.vars;
        let (min, max) = (p.min_th_bytes as f64, p.max_th_bytes as f64);
        let pb = if v.avg < min {
            v.count = None;
            return false;
        } else if v.avg < max {
            p.max_p * (v.avg - min) / (max - min)
        } else if v.avg < 2.0 * max {
            p.max_p + (1.0 - p.max_p) * (v.avg - max) / max
        } else {
            v.count = Some(0);
            return true;
        };
        let count = v.count.map_or(0, |c| c.saturating_add(1));
        let spread = 1.0 - f64::from(count) * pb;
        let pa = if spread <= 0.0 { 1.0 } else { pb / spread };
        if u < pa {
            v.count = Some(0);
            true
        } else {
            v.count = Some(count);
            false
        }
    }

    pub(super) fn enqueue(
        &mut self,
        packet: Packet,
        now: Nanos,
        on_wire: Backlog,
        dropped: &mut Vec<Dropped>,
    ) {
        let u: f64 = self.rng.random();
        self.average(now);
        if !self.queue.fits(on_wire, packet.len) {
            dropped.push(Dropped {
                packet,
                why: AqmDrop::Overlimit,
            });
            return;
        }
        let mut marked = false;
        if self.early(u) {
            if !(self.params.ecn && packet.ecn.capable()) {
                dropped.push(Dropped {
                    packet,
                    why: AqmDrop::Early,
                });
                if self.queue.is_empty() {
                    self.vars.idle_since = Some(now);
                }
                return;
            }
            marked = true;
        }
        self.queue.push(packet, marked, on_wire, dropped);
    }

    pub(super) fn dequeue(&mut self, now: Nanos) -> Option<Dequeued> {
        let d = self.queue.pop()?;
        if self.queue.is_empty() {
            self.vars.idle_since = Some(now);
        }
        Some(d)
    }

    pub(super) fn backlog(&self) -> Backlog {
        self.queue.backlog()
    }

    pub(super) fn set_limit(&mut self, limit: QueueLimit) {
        self.queue.set_limit(limit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn red() -> Red {
        Red::new(
            RedParams::default(),
            QueueLimit::Bytes(1 << 20),
            Some(10_000_000),
            1,
            Direction::Forward,
        )
    }

    /// The gentle curve: nothing below min, max_p at max, linear to 1 at twice max; beyond,
    /// every packet. With the count at zero, pa is pb.
    #[test]
    fn the_drop_probability_follows_the_gentle_curve() {
        let mut q = red();
        let pa = |q: &mut Red, avg: f64| -> bool {
            q.vars.avg = avg;
            q.vars.count = None;
            q.early(0.0)
        };
        assert!(!pa(&mut q, 29_999.0), "below min_th: never");
        for (avg, pb) in [(60_000.0, 0.05), (90_000.0, 0.1), (135_000.0, 0.55)] {
            q.vars.avg = avg;
            q.vars.count = None;
            // A draw just under pb drops, one just over does not.
            assert!(q.early(pb - 1e-9), "avg {avg}: pb {pb}");
            q.vars.count = None;
            assert!(!q.early(pb + 1e-9), "avg {avg}: pb {pb}");
        }
        assert!(pa(&mut q, 180_001.0), "beyond twice max_th: always");
    }

    /// Drops are spread: after n packets without one, pa = pb / (1 - n pb).
    #[test]
    fn the_count_since_the_last_drop_raises_the_probability() {
        let mut q = red();
        q.vars.avg = 60_000.0; // pb = 0.05
        q.vars.count = Some(9); // this packet is the 10th: pa = 0.05 / 0.5 = 0.1
        assert!(q.early(0.1 - 1e-9));
        assert_eq!(q.vars.count, Some(0));
        q.vars.count = Some(9);
        assert!(!q.early(0.1 + 1e-9));
        assert_eq!(q.vars.count, Some(10));
        q.vars.count = Some(25); // 26 * 0.05 > 1: certain
        assert!(q.early(0.999));
    }

    /// Over idle time the average decays as if mean-size packets had kept leaving.
    #[test]
    fn the_average_decays_over_idle_time() {
        let mut q = red();
        q.vars.avg = 50_000.0;
        q.vars.idle_since = Some(0);
        // 12 ms at 10 Mbit/s: 15 packets of 1000 bytes.
        q.average(12_000_000);
        let expected = 50_000.0 * (1.0f64 - 0.002).powf(15.0);
        assert!((q.vars.avg - expected).abs() < 1e-6, "{}", q.vars.avg);
        assert_eq!(q.vars.idle_since, None);
    }
}
