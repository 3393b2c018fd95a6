//! PIE (RFC 8033): a drop probability steered every `tupdate` by the queue delay's distance
//! from `target` and its trend, applied at enqueue, with a burst allowance after an idle queue.
//!
//! The queue delay is measured by timestamps (RFC 8033 section 5.2's alternative, Linux's
//! default): the sojourn time of the packet last dequeued, zero when the queue empties. The
//! update runs at multiples of `tupdate` from the first packet, caught up whenever the
//! discipline is called (the RFC's timer, in event time). Drops are de-randomised as in the
//! RFC's section 5.1 (`accu_prob`), so drops neither bunch nor starve at low probabilities.
//! Each arriving packet draws one uniform value from the seeded stream, used or not, so the
//! draws of packet k do not depend on earlier decisions.

use rand::Rng as _;

use super::fifo::FifoQueue;
use super::{AqmCounters, AqmDrop, Backlog, Dequeued, Dropped, Packet};
use crate::aqm::config::PieParams;
use crate::rng::{Rng, Stream, stream};
use crate::{Direction, Nanos, QueueLimit};

/// PIE's state (RFC 8033's `drop_prob_`, `burst_allow_`, `qdelay_old_`, `accu_prob`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PieVars {
    /// The drop probability.
    pub prob: f64,
    /// Burst still allowed through without drops, ns.
    pub burst_allowance: Nanos,
    /// The queue delay now, ns.
    pub qdelay: Nanos,
    /// The queue delay at the last update, ns.
    pub qdelay_old: Nanos,
    /// Probability accumulated since the last drop (de-randomisation).
    pub accu_prob: f64,
    /// When the next update is due (0: the first packet has not come).
    pub next_update: Nanos,
}

/// PIE.
#[derive(Debug, Clone)]
pub struct Pie {
    params: PieParams,
    queue: FifoQueue,
    vars: PieVars,
    rng: Rng,
    pub(super) counters: AqmCounters,
}

/// Updates that may run in one catch-up before the state is fast-forwarded (an idle queue's
/// updates only decay the probability; after this many it is as good as zero).
const MAX_CATCH_UP: u32 = 10_000;

impl Pie {
    /// An empty PIE queue of `limit`, drawing from `seed`'s stream for `direction`.
    pub fn new(params: PieParams, limit: QueueLimit, seed: u64, direction: Direction) -> Pie {
        Pie {
            params,
            queue: FifoQueue::new(limit),
            vars: PieVars {
                burst_allowance: params.max_burst_ns,
                ..PieVars::default()
            },
            rng: stream(seed, direction, Stream::Aqm),
            counters: AqmCounters::default(),
        }
    }

    /// PIE's state (for tests and the emulator's account).
    pub fn vars(&self) -> &PieVars {
        &self.vars
    }

    /// Runs every update due by `now`.
    fn catch_up(&mut self, now: Nanos) {
        let t = self.params.tupdate_ns.max(1);
        if self.vars.next_update == 0 {
            self.vars.next_update = now.saturating_add(t);
            return;
        }
        let mut n = 0;
        while now >= self.vars.next_update {
            if n == MAX_CATCH_UP {
                let periods = (now - self.vars.next_update) / t + 1;
                self.vars.next_update += periods * t;
                self.vars.prob = 0.0;
                self.vars.burst_allowance = self.params.max_burst_ns;
                break;
            }
            self.update();
            self.vars.next_update += t;
            n += 1;
        }
    }

    /// RFC 8033 section 4.2 (`calculate_drop_prob`) with section 5.1's auto-tuning of the
    /// gains by the probability's scale.
    pub(crate) fn update(&mut self) {
        let p = &self.params;
        let v = &mut self.vars;
        let (qdelay, old, target) = (secs(v.qdelay), secs(v.qdelay_old), secs(p.target_ns));
        let mut delta = p.alpha * (qdelay - target) + p.beta * (qdelay - old);
        delta /= if v.prob < 0.000_001 {
            2048.0
        } else if v.prob < 0.000_01 {
            512.0
        } else if v.prob < 0.000_1 {
            128.0
        } else if v.prob < 0.001 {
            32.0
        } else if v.prob < 0.01 {
            8.0
        } else if v.prob < 0.1 {
            2.0
        } else {
            1.0
        };
        // At high probabilities, no step above 2 % (a sudden rise would starve the link).
        if v.prob >= 0.1 && delta > 0.02 {
            delta = 0.02;
        }
        v.prob += delta;
        // Decay when the queue has been empty for two updates.
        if v.qdelay == 0 && v.qdelay_old == 0 {
            v.prob *= 0.98;
        }
        v.prob = v.prob.clamp(0.0, 1.0);
        v.burst_allowance = v.burst_allowance.saturating_sub(p.tupdate_ns);
        if v.prob == 0.0 && 2 * v.qdelay < p.target_ns && 2 * v.qdelay_old < p.target_ns {
            v.burst_allowance = p.max_burst_ns;
        }
        v.qdelay_old = v.qdelay;
    }

    /// RFC 8033 section 4.1 (`drop_early`) with section 5.1's de-randomisation; `u` is the
    /// packet's uniform draw.
    fn drop_early(&mut self, len: u32, u: f64) -> bool {
        let (p, v) = (&self.params, &mut self.vars);
        if v.burst_allowance > 0 {
            return false;
        }
        if 2 * v.qdelay_old < p.target_ns && v.prob < 0.2 {
            return false;
        }
        if self.queue.backlog().bytes + u64::from(len) <= 2 * u64::from(p.mtu_bytes) {
            return false;
        }
        if v.prob == 0.0 {
            v.accu_prob = 0.0;
        }
        v.accu_prob += v.prob;
        if v.accu_prob < 0.85 {
            return false;
        }
        if v.accu_prob >= 8.5 || u < v.prob {
            v.accu_prob = 0.0;
            return true;
        }
        false
    }

    pub(super) fn enqueue(
        &mut self,
        packet: Packet,
        now: Nanos,
        on_wire: Backlog,
        dropped: &mut Vec<Dropped>,
    ) {
        self.catch_up(now);
        let u: f64 = self.rng.random();
        if !self.queue.fits(on_wire, packet.len) {
            dropped.push(Dropped {
                packet,
                why: AqmDrop::Overlimit,
            });
            return;
        }
        let mut marked = false;
        if self.drop_early(packet.len, u) {
            let may_mark = self.params.ecn
                && packet.ecn.capable()
                && self.vars.prob <= self.params.mark_ecn_th;
            if !may_mark {
                dropped.push(Dropped {
                    packet,
                    why: AqmDrop::Early,
                });
                return;
            }
            // Marked on its way in; the mark is reported when it leaves.
            marked = true;
        }
        self.queue.push(packet, marked, on_wire, dropped);
    }

    pub(super) fn dequeue(&mut self, now: Nanos) -> Option<Dequeued> {
        self.catch_up(now);
        let Some(d) = self.queue.pop() else {
            self.vars.qdelay = 0;
            return None;
        };
        self.vars.qdelay = if self.queue.is_empty() {
            0
        } else {
            now.saturating_sub(d.packet.enqueued_at)
        };
        Some(d)
    }

    pub(super) fn backlog(&self) -> Backlog {
        self.queue.backlog()
    }

    pub(super) fn set_limit(&mut self, limit: QueueLimit) {
        self.queue.set_limit(limit);
    }
}

fn secs(ns: Nanos) -> f64 {
    ns as f64 / 1e9
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Nanos = 1_000_000;

    fn pie() -> Pie {
        Pie::new(
            PieParams::default(),
            QueueLimit::Packets(1000),
            1,
            Direction::Forward,
        )
    }

    /// The RFC's update by hand: delay 30 ms against a 15 ms target, rising from 15 ms.
    #[test]
    fn the_probability_moves_as_rfc_8033_computes_it() {
        let mut q = pie();
        q.vars.qdelay = 30 * MS;
        q.vars.qdelay_old = 15 * MS;
        q.update();
        // 0.125 * (0.030 - 0.015) + 1.25 * (0.030 - 0.015) = 0.020625, scaled by 1/2048 at a
        // probability below 1e-6.
        let first = 0.020_625 / 2048.0;
        assert!((q.vars.prob - first).abs() < 1e-12, "{}", q.vars.prob);
        assert_eq!(q.vars.qdelay_old, 30 * MS);
        assert_eq!(q.vars.burst_allowance, 135 * MS, "150 ms less one tupdate");
        // Delay steady at 30 ms: only the distance from target counts, scaled by 1/128 at a
        // probability in [1e-5, 1e-4).
        q.update();
        let second = first + 0.125 * 0.015 / 128.0;
        assert!((q.vars.prob - second).abs() < 1e-12, "{}", q.vars.prob);
        // At high probabilities a step is capped at 2 %.
        q.vars.prob = 0.5;
        q.vars.qdelay = 500 * MS;
        q.update();
        assert!((q.vars.prob - 0.52).abs() < 1e-12, "{}", q.vars.prob);
        // An empty queue for two updates decays the probability by 2 % each.
        q.vars.qdelay = 0;
        q.vars.qdelay_old = 0;
        let before = q.vars.prob;
        q.update();
        let expected = (before + 0.125 * -0.015 / 1.0) * 0.98;
        assert!((q.vars.prob - expected).abs() < 1e-12, "{}", q.vars.prob);
    }

    #[test]
    fn the_burst_allowance_comes_back_once_the_queue_is_calm() {
        let mut q = pie();
        q.vars.burst_allowance = 0;
        q.vars.prob = 0.0;
        q.vars.qdelay = 2 * MS;
        q.vars.qdelay_old = 2 * MS;
        q.update();
        assert_eq!(q.vars.prob, 0.0);
        assert_eq!(q.vars.burst_allowance, 150 * MS);
    }

    #[test]
    fn a_long_idle_catches_up_without_looping_for_ever() {
        let mut q = pie();
        q.catch_up(1);
        q.vars.prob = 0.3;
        q.catch_up(10_000 * 3_600 * 1_000 * MS);
        assert_eq!(q.vars.prob, 0.0);
        assert!(q.vars.next_update > 10_000 * 3_600 * 1_000 * MS);
    }
}
