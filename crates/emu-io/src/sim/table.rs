//! The harness's result: lateness per frame class (median, p99, max) and the probe's
//! request-to-response time, as a fixed-width text table for a snapshot.

use std::fmt;

use crate::time::Nanos;

/// What a frame is in the harness's traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Class {
    /// A bulk flow's data segment (a->b).
    Bulk,
    /// Its ACK (b->a).
    Ack,
    /// The probe's request (a->b), alone in its flow.
    Request,
    /// The probe's response (b->a), alone in its flow.
    Response,
}

impl Class {
    pub(crate) const ALL: [Class; 4] = [Class::Bulk, Class::Ack, Class::Request, Class::Response];

    fn name(self) -> &'static str {
        match self {
            Class::Bulk => "bulk data",
            Class::Ack => "bulk ACKs",
            Class::Request => "probe requests",
            Class::Response => "probe responses",
        }
    }
}

/// Median, 99th percentile and maximum of a sample, in ns (zeros when empty).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Quantiles {
    /// How many values.
    pub n: usize,
    /// Median.
    pub p50: Nanos,
    /// 99th percentile (nearest rank).
    pub p99: Nanos,
    /// Largest.
    pub max: Nanos,
}

impl Quantiles {
    pub(crate) fn of(mut v: Vec<Nanos>) -> Self {
        if v.is_empty() {
            return Self::default();
        }
        v.sort_unstable();
        let rank = |q: f64| v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
        Self {
            n: v.len(),
            p50: rank(0.5),
            p99: rank(0.99),
            max: v[v.len() - 1],
        }
    }
}

/// Lateness per class and the probe's round trips.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Table {
    /// Lateness (hand-off minus scheduled departure) per class, in [`Class::ALL`]'s order.
    pub lateness: [Quantiles; 4],
    /// From a request's arrival at the emulator to its response's client thread finishing.
    pub round_trip: Quantiles,
    /// Frames sent by the worker that did not own their direction (`help_due`).
    pub helped: u64,
    /// Pauses the workers took (`yield_after_ns` and lone pauses).
    pub pauses: u64,
    /// Frames the directions' own counters saw leave, both directions (not printed: the
    /// tests check it against the frames the sources sent).
    pub sent: u64,
}

impl Table {
    /// The lateness of `class`.
    pub(crate) fn late(&self, class: Class) -> Quantiles {
        self.lateness[class as usize]
    }
}

fn us(ns: Nanos) -> String {
    format!("{:.1}", ns as f64 / 1_000.0)
}

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:<16} {:>7} {:>10} {:>10} {:>10}",
            "lateness (µs)", "frames", "median", "p99", "max"
        )?;
        for c in Class::ALL {
            let q = self.late(c);
            writeln!(
                f,
                "{:<16} {:>7} {:>10} {:>10} {:>10}",
                c.name(),
                q.n,
                us(q.p50),
                us(q.p99),
                us(q.max)
            )?;
        }
        let r = self.round_trip;
        writeln!(
            f,
            "{:<16} {:>7} {:>10} {:>10} {:>10}",
            "probe RTT (ms)",
            r.n,
            format!("{:.3}", r.p50 as f64 / 1e6),
            format!("{:.3}", r.p99 as f64 / 1e6),
            format!("{:.3}", r.max as f64 / 1e6)
        )?;
        writeln!(f, "helped frames {}, pauses {}", self.helped, self.pauses)
    }
}
