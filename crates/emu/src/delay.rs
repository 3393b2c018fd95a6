//! The propagation delay line: fixed delay plus jitter, after the bottleneck.
//!
//! A packet that leaves the bottleneck at `t` departs at `t + delay + offset`, never before
//! `t` (a negative total is clamped to zero delay). Unless reordering is allowed, it also
//! never departs before the packet ahead of it: `departure = max(computed, previous)`, which
//! is how a real path with variable delay behaves (the delay varies, the order does not).

use crate::Nanos;

/// The delay line of one direction.
#[derive(Debug, Clone, Default)]
pub struct DelayLine {
    delay: Nanos,
    keep_order: bool,
    last: Nanos,
}

impl DelayLine {
    /// A line with fixed `delay`; `keep_order` forbids departures earlier than the previous one.
    pub fn new(delay: Nanos, keep_order: bool) -> Self {
        Self {
            delay,
            keep_order,
            last: 0,
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
        let mut at = entered.saturating_add(total.clamp(0, i128::from(u64::MAX)) as u64);
        if self.keep_order {
            at = at.max(self.last);
        }
        self.last = self.last.max(at);
        at
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
    }
}
