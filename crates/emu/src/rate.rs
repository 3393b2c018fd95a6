//! The bottleneck: a rate limit with a finite drop-tail queue, ahead of the delay line.
//!
//! This is dummynet's model, not netem's: the queue fills only when packets arrive faster than
//! the rate drains them, and its limit is separate from the propagation delay, so a 100 ms
//! path does not need a 100 ms-deep queue to hold its packets in flight.
//!
//! * A frame of `len` bytes takes `(len + overhead) · 8 / rate` seconds to serialise. The
//!   division is exact: the remainder (in units of 1/rate ns) is carried to the next packet
//!   of a back-to-back train, so a million packets end exactly where the ideal link would.
//!   When the link goes idle the remainder is dropped, since the next packet starts on an
//!   integer nanosecond.
//! * A packet leaves the bottleneck when its last bit is serialised; until then it counts
//!   against the queue limit. So a limit of 64 packets means the one on the wire plus 63
//!   waiting (dummynet counts the same way).
//! * Without a rate the bottleneck is infinitely fast, but still FIFO: when a rate is removed
//!   on a live link, new packets wait behind those already queued.

use std::collections::VecDeque;

use crate::queue_stats::QueueStats;
use crate::{Nanos, QueueLimit};

const NS_PER_S: u128 = 1_000_000_000;

/// Why the bottleneck refused a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueFull;

/// The rate limiter and its queue.
#[derive(Debug, Clone)]
pub struct Bottleneck {
    rate_bps: Option<u64>,
    overhead: u32,
    limit: QueueLimit,
    /// When the last accepted packet finishes serialising.
    busy_until: Nanos,
    /// Fraction of a ns owed by `busy_until`, in units of 1/rate ns (always < rate).
    remainder: u128,
    /// Packets not yet serialised: (leaves at, frame bytes), in order.
    queue: VecDeque<(Nanos, u32)>,
    stats: QueueStats,
}

impl Bottleneck {
    /// A bottleneck of `rate_bps` (`None`: infinitely fast) with `overhead` bytes per frame.
    pub fn new(rate_bps: Option<u64>, overhead: u32, limit: QueueLimit) -> Self {
        let capacity = match (rate_bps, limit) {
            (None, _) => 0,
            (Some(_), QueueLimit::Packets(n)) => n.min(4096) as usize,
            (Some(_), QueueLimit::Bytes(b)) => (b / 64).min(4096) as usize,
        };
        Self {
            rate_bps,
            overhead,
            limit,
            busy_until: 0,
            remainder: 0,
            queue: VecDeque::with_capacity(capacity),
            stats: QueueStats::default(),
        }
    }

    /// New settings, keeping every queued packet and its departure (a smaller limit only
    /// refuses new arrivals until the queue drains below it).
    pub fn reconfigure(&mut self, rate_bps: Option<u64>, overhead: u32, limit: QueueLimit) {
        self.remainder = match (self.rate_bps, rate_bps) {
            // Keep the same fraction of a ns in the new rate's units.
            (Some(old), Some(new)) => self.remainder * u128::from(new) / u128::from(old),
            _ => 0,
        };
        self.rate_bps = rate_bps;
        self.overhead = overhead;
        self.limit = limit;
    }

    /// Offers a frame of `len` bytes at `now`; returns when it leaves the bottleneck.
    /// `now` must not go backwards (the model enforces that).
    pub fn offer(&mut self, len: u32, now: Nanos) -> Result<Nanos, QueueFull> {
        self.offer_train(len, 1, now)
    }

    /// Offers a train of `segments` back-to-back packets totalling `total_len` bytes (a GSO
    /// super-packet as the wire packets it stands for) at `now`; returns when its last packet
    /// leaves. The train is accepted whole or refused whole: every segment must fit the queue
    /// limit (packets count segments, bytes count `total_len`). Each segment is queued and
    /// charged `overhead` on its own, so the train ends exactly where `segments` packets
    /// offered one by one would (the split of `total_len` among them does not change the end).
    pub fn offer_train(
        &mut self,
        total_len: u32,
        segments: u32,
        now: Nanos,
    ) -> Result<Nanos, QueueFull> {
        let segments = segments.max(1);
        self.drain(now);
        let Some(rate) = self.rate_bps else {
            // Infinitely fast: leave now, or behind what a removed rate left queued.
            return Ok(self.busy_until.max(now));
        };
        if !self.fits(total_len, segments) {
            return Err(QueueFull);
        }
        if self.busy_until <= now {
            self.busy_until = now;
            self.remainder = 0;
        }
        let (each, extra) = (total_len / segments, total_len % segments);
        for k in 0..segments {
            let len = each + u32::from(k < extra);
            let bits = (u128::from(len) + u128::from(self.overhead)) * 8;
            let numerator = bits * NS_PER_S + self.remainder;
            let rate = u128::from(rate);
            let service = numerator / rate;
            self.remainder = numerator % rate;
            let leaves = self
                .busy_until
                .saturating_add(u64::try_from(service).unwrap_or(u64::MAX));
            self.busy_until = leaves;
            self.queue.push_back((leaves, len));
            self.stats.enter(len);
            self.stats.record_sojourn(now, leaves);
        }
        Ok(self.busy_until)
    }

    /// Would `segments` packets of `len` bytes in total fit now (after [`Self::drain`])?
    fn fits(&self, len: u32, segments: u32) -> bool {
        match self.limit {
            QueueLimit::Packets(n) => self.stats.packets + u64::from(segments) <= u64::from(n),
            QueueLimit::Bytes(b) => self.stats.bytes + u64::from(len) <= b,
        }
    }

    /// Removes packets that have left by `now`, accounting occupancy at each departure.
    fn drain(&mut self, now: Nanos) {
        while let Some(&(leaves, len)) = self.queue.front() {
            if leaves > now {
                break;
            }
            self.stats.advance(leaves);
            self.stats.leave(len);
            self.queue.pop_front();
        }
        self.stats.advance(now);
    }

    /// Occupancy statistics up to the last arrival.
    pub fn stats(&self) -> &QueueStats {
        &self.stats
    }

    /// Occupancy statistics as they will be at `now` (no state change).
    pub fn stats_at(&self, now: Nanos) -> QueueStats {
        let mut s = self.stats;
        for &(leaves, len) in &self.queue {
            if leaves > now {
                break;
            }
            s.advance(leaves);
            s.leave(len);
        }
        s.advance(now);
        s
    }

    /// When the last accepted packet leaves the bottleneck.
    pub fn busy_until(&self) -> Nanos {
        self.busy_until
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialisation_time_is_exact() {
        // 1500 B at 100 Mbit/s = 120 us.
        let mut b = Bottleneck::new(Some(100_000_000), 0, QueueLimit::Packets(10));
        assert_eq!(b.offer(1500, 0), Ok(120_000));
        assert_eq!(b.offer(1500, 0), Ok(240_000));
        // Idle link: starts at arrival.
        assert_eq!(b.offer(1500, 1_000_000), Ok(1_120_000));
    }

    #[test]
    fn a_train_ends_exactly_where_its_packets_would_and_fits_whole_or_not_at_all() {
        // 10 x 1514 B (+24 B overhead each) at 100 Mbit/s: 123.04 us each, 1230.4 us total.
        let mut one_by_one = Bottleneck::new(Some(100_000_000), 24, QueueLimit::Packets(25));
        let ends: Vec<_> = (0..10)
            .map(|_| one_by_one.offer(1514, 7).unwrap())
            .collect();
        let mut train = Bottleneck::new(Some(100_000_000), 24, QueueLimit::Packets(25));
        assert_eq!(train.offer_train(15_140, 10, 7), Ok(ends[9]));
        assert_eq!(ends[9], 7 + 1_230_400);
        assert_eq!(train.stats().packets, 10, "each segment is queued");
        // An odd total splits unevenly but still ends where the packets would.
        let mut odd = Bottleneck::new(Some(3_000_000_000), 0, QueueLimit::Packets(25));
        assert_eq!(
            odd.offer_train(7, 3, 0),
            Ok(18),
            "7 B = 56 bits at 3 bit/ns = 18.67 ns"
        );
        // 10 queued of 25: a 16-segment train does not fit, a 15-segment one does.
        assert_eq!(train.offer_train(16 * 1514, 16, 7), Err(QueueFull));
        assert_eq!(
            train.stats().packets,
            10,
            "a refused train leaves nothing behind"
        );
        assert!(train.offer_train(15 * 1514, 15, 7).is_ok());
        assert_eq!(train.stats().packets, 25);
        // Once the first train has left, its 10 places are free again.
        assert!(train.offer_train(10 * 1514, 10, 7 + 1_230_400).is_ok());
    }

    #[test]
    fn a_burst_counts_each_accepted_packets_time_in_the_bottleneck() {
        // 100 Mbit/s, 64 packets, a 100-packet burst of 1500 B at t = 0: the k-th accepted
        // packet leaves at k × 120 µs; the 36 that do not fit are not counted.
        let mut b = Bottleneck::new(Some(100_000_000), 0, QueueLimit::Packets(64));
        let accepted = (0..100).filter(|_| b.offer(1500, 0).is_ok()).count();
        assert_eq!(accepted, 64);
        let s = b.stats();
        assert_eq!(s.accepted, 64);
        assert_eq!(s.sojourn_ns, 120_000 * (64 * 65 / 2));
        assert_eq!(s.mean_sojourn_ns(), 3_900_000, "120 µs × 32.5");
        assert_eq!(s.max_sojourn_ns, 7_680_000);
        // A packet arriving to an idle link stays only for its own serialisation.
        b.offer(1500, 10_000_000).unwrap();
        assert_eq!(b.stats().accepted, 65);
        assert_eq!(b.stats().max_sojourn_ns, 7_680_000);
    }

    #[test]
    fn remainder_carries_between_back_to_back_packets() {
        // 1 byte at 3 bit/ns: 8/3 ns each. Three in a row = 8 ns exactly.
        let mut b = Bottleneck::new(Some(3_000_000_000), 0, QueueLimit::Packets(10));
        assert_eq!(b.offer(1, 0), Ok(2));
        assert_eq!(b.offer(1, 0), Ok(5));
        assert_eq!(b.offer(1, 0), Ok(8));
    }

    #[test]
    fn byte_limit_counts_frame_bytes() {
        let mut b = Bottleneck::new(Some(1_000_000), 100, QueueLimit::Bytes(3000));
        assert!(b.offer(1500, 0).is_ok());
        assert!(b.offer(1500, 0).is_ok());
        assert_eq!(b.offer(1, 0), Err(QueueFull));
    }

    #[test]
    fn no_rate_is_fifo_behind_leftover_queue() {
        let mut b = Bottleneck::new(Some(100_000_000), 0, QueueLimit::Packets(10));
        assert_eq!(b.offer(1500, 0), Ok(120_000));
        b.reconfigure(None, 0, QueueLimit::Packets(10));
        assert_eq!(b.offer(1500, 10), Ok(120_000));
        assert_eq!(b.offer(1500, 200_000), Ok(200_000));
    }

    #[test]
    fn stats_at_projects_without_changing_state() {
        let mut b = Bottleneck::new(Some(100_000_000), 0, QueueLimit::Packets(10));
        b.offer(1500, 0).unwrap();
        b.offer(1500, 0).unwrap();
        let s = b.stats_at(240_000);
        // 2 packets for 120 us, 1 for 120 us.
        assert_eq!(s.packet_ns, 2 * 120_000 + 120_000);
        assert_eq!(s.packets, 0);
        assert_eq!(b.stats().packets, 2);
    }
}
