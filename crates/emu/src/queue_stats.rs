//! Time-weighted occupancy of the bottleneck queue.
//!
//! The occupancy is a step function that changes at arrivals and at departures from the
//! bottleneck; the integral of packets (and bytes) over time divided by the time observed is
//! the mean occupancy a sampler would see at random instants, which is what Little's law and
//! a "how big did the queue really get" question need. Sampling at arrivals instead would
//! over-weight bursts.

use crate::Nanos;

/// Queue occupancy statistics of one direction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueStats {
    /// Packets in the queue now (including the one being serialised).
    pub packets: u64,
    /// Frame bytes in the queue now.
    pub bytes: u64,
    /// Largest packet count seen.
    pub max_packets: u64,
    /// Largest byte count seen.
    pub max_bytes: u64,
    /// ∫ packets dt, in packet·ns.
    pub packet_ns: u128,
    /// ∫ bytes dt, in byte·ns.
    pub byte_ns: u128,
    /// Start of observation (first arrival).
    pub since: Nanos,
    /// End of observation (last update).
    pub until: Nanos,
    /// Packets accepted into the queue (a GSO train counts its segments).
    pub accepted: u64,
    /// Sum over accepted packets of their time in the bottleneck: from arrival until their
    /// last bit is serialised (waiting behind others plus their own serialisation).
    pub sojourn_ns: u128,
    /// The longest such time.
    pub max_sojourn_ns: Nanos,
    started: bool,
}

impl QueueStats {
    /// Accumulates the current occupancy up to `t` (ignored if `t` is not later).
    pub fn advance(&mut self, t: Nanos) {
        if !self.started {
            // Observation starts at the first event.
            self.started = true;
            self.since = t;
            self.until = t;
            return;
        }
        if t <= self.until {
            return;
        }
        let dt = u128::from(t - self.until);
        self.packet_ns += u128::from(self.packets) * dt;
        self.byte_ns += u128::from(self.bytes) * dt;
        self.until = t;
    }

    /// A packet of `len` bytes entered (call after [`Self::advance`] to its arrival time).
    pub fn enter(&mut self, len: u32) {
        self.packets += 1;
        self.bytes += u64::from(len);
        self.max_packets = self.max_packets.max(self.packets);
        self.max_bytes = self.max_bytes.max(self.bytes);
    }

    /// A packet of `len` bytes left (call after [`Self::advance`] to its departure time).
    pub fn leave(&mut self, len: u32) {
        self.packets = self.packets.saturating_sub(1);
        self.bytes = self.bytes.saturating_sub(u64::from(len));
    }

    /// A packet accepted at `arrived` leaves the bottleneck at `leaves`: counts its sojourn.
    pub fn record_sojourn(&mut self, arrived: Nanos, leaves: Nanos) {
        let ns = leaves.saturating_sub(arrived);
        self.accepted += 1;
        self.sojourn_ns += u128::from(ns);
        self.max_sojourn_ns = self.max_sojourn_ns.max(ns);
    }

    /// Mean time an accepted packet spent in the bottleneck, ns (0 before any).
    pub fn mean_sojourn_ns(&self) -> Nanos {
        if self.accepted == 0 {
            0
        } else {
            u64::try_from(self.sojourn_ns / u128::from(self.accepted)).unwrap_or(u64::MAX)
        }
    }

    /// Time-weighted mean packet count over the observation (0 before any time has passed).
    pub fn mean_packets(&self) -> f64 {
        self.mean(self.packet_ns)
    }

    /// Time-weighted mean byte count over the observation.
    pub fn mean_bytes(&self) -> f64 {
        self.mean(self.byte_ns)
    }

    fn mean(&self, integral: u128) -> f64 {
        let span = self.until.saturating_sub(self.since);
        if span == 0 {
            0.0
        } else {
            integral as f64 / span as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_is_time_weighted() {
        let mut s = QueueStats::default();
        s.advance(1000);
        s.enter(100);
        s.enter(100);
        s.advance(2000); // 2 packets for 1000 ns
        s.leave(100);
        s.advance(5000); // 1 packet for 3000 ns
        s.leave(100);
        s.advance(6000); // 0 for 1000 ns
        assert_eq!(s.packet_ns, 2 * 1000 + 3000);
        assert_eq!(s.byte_ns, 200 * 1000 + 100 * 3000);
        assert!((s.mean_packets() - 5000.0 / 5000.0).abs() < 1e-12);
        assert_eq!(s.max_packets, 2);
        assert_eq!(s.max_bytes, 200);
    }
}
