//! The propagation delay line: fixed delay plus jitter, after the bottleneck.
//!
//! A packet that leaves the bottleneck at `t` departs at `t + delay + offset`, never before
//! `t` (a negative total is clamped to zero delay). Unless reordering is allowed, it also
//! never departs before the packet ahead of it: `departure = max(computed, previous)`, which
//! is how a real path with variable delay behaves (the delay varies, the order does not).
//!
//! Both rules change the delay a packet gets from the one drawn, so the line accounts for
//! what it really gave ([`DelayLineStats`]): the realised mean and standard deviation, how
//! many packets were held back to keep order and by how much, how many were clamped at zero.
//! Under a steady flow with packets closer together than the jitter's spread, order-keeping
//! holds back most packets and the realised jitter is far from the configured one; netem
//! users meet the same effect as jitter that "undershoots" without a way to see it.

use crate::Nanos;

/// What the delay line really did, summed over the packets that went through it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DelayLineStats {
    /// Packets that went through the line.
    pub count: u64,
    /// Sum of their realised delays (departure − entry), ns.
    pub sum_ns: u128,
    /// Sum of the squares of those delays, ns².
    pub sum_sq_ns2: u128,
    /// Packets held back to leave no earlier than the packet ahead (jitter without reordering).
    pub held_for_order: u64,
    /// Sum of the time those were held back, ns.
    pub held_ns: u128,
    /// Packets whose delay plus jitter was negative, sent with no delay instead.
    pub clamped_at_zero: u64,
}

impl DelayLineStats {
    fn record(&mut self, realised: Nanos, held: Nanos, clamped: bool) {
        let d = u128::from(realised);
        self.count += 1;
        self.sum_ns += d;
        self.sum_sq_ns2 = self.sum_sq_ns2.saturating_add(d * d);
        if held > 0 {
            self.held_for_order += 1;
            self.held_ns += u128::from(held);
        }
        self.clamped_at_zero += u64::from(clamped);
    }

    /// Mean realised delay, ns (0 before any packet).
    pub fn mean_ns(&self) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        self.sum_ns as f64 / self.count as f64
    }

    /// Standard deviation of the realised delay, ns (population; 0 before any packet).
    pub fn sd_ns(&self) -> f64 {
        sd_from_sums(self.count, self.sum_ns, self.sum_sq_ns2)
    }

    /// Mean time a held-back packet was held, ns (0 if none was).
    pub fn mean_held_ns(&self) -> f64 {
        if self.held_for_order == 0 {
            return 0.0;
        }
        self.held_ns as f64 / self.held_for_order as f64
    }
}

/// The population standard deviation of `n` values from their sum and sum of squares:
/// `√(n·Σx² − (Σx)²) / n`, in exact integers while they fit (so equal values give exactly 0,
/// where `Σx²/n − mean²` in floating point leaves a rounding residue), in `f64` beyond.
pub fn sd_from_sums(n: u64, sum: u128, sum_sq: u128) -> f64 {
    if n == 0 {
        return 0.0;
    }
    let exact = u128::from(n)
        .checked_mul(sum_sq)
        .zip(sum.checked_mul(sum))
        .map(|(a, b)| a.saturating_sub(b));
    match exact {
        Some(var_n2) => (var_n2 as f64).sqrt() / n as f64,
        None => {
            let mean = sum as f64 / n as f64;
            (sum_sq as f64 / n as f64 - mean * mean).max(0.0).sqrt()
        }
    }
}

/// The delay line of one direction.
#[derive(Debug, Clone, Default)]
pub struct DelayLine {
    delay: Nanos,
    keep_order: bool,
    last: Nanos,
    stats: DelayLineStats,
}

impl DelayLine {
    /// A line with fixed `delay`; `keep_order` forbids departures earlier than the previous one.
    pub fn new(delay: Nanos, keep_order: bool) -> Self {
        Self {
            delay,
            keep_order,
            last: 0,
            stats: DelayLineStats::default(),
        }
    }

    /// New settings; the last departure is kept so packets already scheduled keep their order
    /// with the ones that follow (a shorter delay drains gradually, as on a real path).
    pub fn reconfigure(&mut self, delay: Nanos, keep_order: bool) {
        self.delay = delay;
        self.keep_order = keep_order;
    }

    /// Departure for a packet entering the line at `entered` with jitter `offset` ns.
    pub fn depart(&mut self, entered: Nanos, offset: i64) -> Nanos {
        let total = i128::from(self.delay) + i128::from(offset);
        let drawn = entered.saturating_add(total.clamp(0, i128::from(u64::MAX)) as u64);
        let at = if self.keep_order {
            drawn.max(self.last)
        } else {
            drawn
        };
        self.last = self.last.max(at);
        self.stats.record(at - entered, at - drawn, total < 0);
        at
    }

    /// What the line has really given so far.
    pub fn stats(&self) -> &DelayLineStats {
        &self.stats
    }

    /// Latest departure scheduled so far.
    pub fn last_departure(&self) -> Nanos {
        self.last
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_delay_adds_exactly() {
        let mut d = DelayLine::new(10_000_000, true);
        assert_eq!(d.depart(5, 0), 10_000_005);
        assert_eq!(d.depart(7, 0), 10_000_007);
    }

    #[test]
    fn keep_order_holds_a_packet_behind_the_one_ahead() {
        let mut d = DelayLine::new(1000, true);
        assert_eq!(d.depart(0, 500), 1500);
        assert_eq!(d.depart(10, -500), 1500);
        let mut r = DelayLine::new(1000, false);
        assert_eq!(r.depart(0, 500), 1500);
        assert_eq!(r.depart(10, -500), 510);
    }

    #[test]
    fn negative_total_is_clamped_to_zero_delay() {
        let mut d = DelayLine::new(100, false);
        assert_eq!(d.depart(1000, -5000), 1000);
        assert_eq!(d.stats().clamped_at_zero, 1);
        assert_eq!(d.stats().sum_ns, 0);
    }

    #[test]
    fn stats_give_the_realised_delay_and_what_order_keeping_added() {
        // Delays drawn 1500, 500, 1000, 2000 ns for packets entering 10 ns apart; keeping
        // order holds the second to 1500 (entered 10, drawn 510: delay 1490, held 990) and
        // the third to 1500 as well (entered 20, drawn 1020: delay 1480, held 480).
        let mut d = DelayLine::new(1000, true);
        for (entered, offset) in [(0, 500), (10, -500), (20, 0), (30, 1000)] {
            d.depart(entered, offset);
        }
        let s = *d.stats();
        assert_eq!(s.count, 4);
        assert_eq!(s.sum_ns, 1500 + 1490 + 1480 + 2000);
        assert_eq!(
            s.sum_sq_ns2,
            1500 * 1500 + 1490 * 1490 + 1480 * 1480 + 2000 * 2000
        );
        assert_eq!((s.held_for_order, s.held_ns), (2, 990 + 480));
        assert_eq!(s.mean_held_ns(), 735.0);
        assert_eq!(s.mean_ns(), 1617.5);
        // Population sd of 1500, 1490, 1480, 2000.
        let mean = 1617.5_f64;
        let var = [1500.0, 1490.0, 1480.0, 2000.0]
            .iter()
            .map(|x: &f64| (x - mean).powi(2))
            .sum::<f64>()
            / 4.0;
        assert!((s.sd_ns() - var.sqrt()).abs() < 1e-6, "{}", s.sd_ns());
        assert_eq!(s.clamped_at_zero, 0);
        // Equal delays give exactly 0, whatever their size; sums past u128 fall back to f64.
        let n = 34_597_u64;
        let d = 15_000_001_u128;
        assert_eq!(
            sd_from_sums(n, d * u128::from(n), d * d * u128::from(n)),
            0.0
        );
        assert_eq!(sd_from_sums(2, 2, 2), 0.0, "1 and 1");
        assert_eq!(sd_from_sums(2, 4, 10), 1.0, "1 and 3");
        // 2^62 and 3·2^62: n·Σx² = 20·2^124 does not fit, the f64 form gives sd 2^62.
        let (a, b) = (1u128 << 62, 3u128 << 62);
        assert_eq!(sd_from_sums(2, a + b, a * a + b * b), (1u64 << 62) as f64);
        // Without order-keeping nothing is held and the drawn delays are the realised ones.
        let mut r = DelayLine::new(1000, false);
        for (entered, offset) in [(0, 500), (10, -500), (20, 0), (30, 1000)] {
            r.depart(entered, offset);
        }
        assert_eq!(r.stats().held_for_order, 0);
        assert_eq!(r.stats().sum_ns, 1500 + 500 + 1000 + 2000);
    }
}
