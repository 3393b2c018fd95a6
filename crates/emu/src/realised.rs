//! What one direction of the model really did, as reports show it: how full the bottleneck
//! queue got and how long packets stayed in it, and what delay the delay line really gave
//! beside the configured one.
//!
//! Emulators are blamed for hidden queues and for jitter that is not what was asked (netem's
//! undershoots, and order-keeping turns a flow's jitter into mostly extra delay); this puts
//! both in the emulator's status and a run's record, so a user sees them instead of guessing.

use serde::{Deserialize, Serialize};

use crate::delay::DelayLineStats;
use crate::queue_stats::QueueStats;
use crate::{DirectionConfig, Distribution, Nanos};

/// One direction's realised queue and delay.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Realised {
    /// The bottleneck queue, when the direction has a rate (or had one).
    pub queue: Option<QueueSummary>,
    /// The delay line, when the direction delays packets (or did) and some went through.
    pub delay_line: Option<DelaySummary>,
}

/// The bottleneck queue: now, at its fullest, on average, and how long packets stayed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct QueueSummary {
    /// Packets in the queue now (the one being serialised included).
    pub packets: u64,
    /// Their bytes.
    pub bytes: u64,
    /// The most packets it held.
    pub max_packets: u64,
    /// The most bytes it held.
    pub max_bytes: u64,
    /// Time-weighted mean packet count since the first arrival.
    pub mean_packets: f64,
    /// Packets accepted (the ones dropped because it was full are the drops' `queue_full`).
    pub accepted: u64,
    /// Mean time from arrival until the last bit was serialised, ns.
    pub mean_sojourn_ns: Nanos,
    /// The longest such time, ns.
    pub max_sojourn_ns: Nanos,
}

/// The delay line: the realised delay beside the configured one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct DelaySummary {
    /// Packets that went through it.
    pub count: u64,
    /// Mean realised delay, ns.
    pub mean_ns: f64,
    /// Standard deviation of the realised delay, ns.
    pub sd_ns: f64,
    /// The configured delay, ns.
    pub configured_ns: Nanos,
    /// The standard deviation the configured jitter has on its own (before order-keeping and
    /// clamping), when its distribution has a known one: 0 without jitter, `None` for
    /// paretonormal.
    pub configured_sd_ns: Option<f64>,
    /// Packets held back to leave no earlier than the one ahead.
    pub held_for_order: u64,
    /// Mean time those were held back, ns.
    pub mean_held_ns: f64,
    /// Packets whose delay plus jitter was negative, sent with no delay.
    pub clamped_at_zero: u64,
}

impl Realised {
    /// The summary of a direction configured as `cfg` whose bottleneck shows `queue` and
    /// delay line `line`. A queue appears once a rate is configured or a packet was queued;
    /// the delay line once a packet went through it while it delays or jitters.
    pub fn of(cfg: &DirectionConfig, queue: &QueueStats, line: &DelayLineStats) -> Self {
        let delays = cfg.delay_ns > 0 || cfg.jitter.as_ref().is_some_and(|j| j.amount_ns > 0);
        let had_delay = line.sum_ns > 0 || line.clamped_at_zero > 0;
        Self {
            queue: (cfg.rate_bps.is_some() || queue.accepted > 0).then(|| QueueSummary {
                packets: queue.packets,
                bytes: queue.bytes,
                max_packets: queue.max_packets,
                max_bytes: queue.max_bytes,
                mean_packets: queue.mean_packets(),
                accepted: queue.accepted,
                mean_sojourn_ns: queue.mean_sojourn_ns(),
                max_sojourn_ns: queue.max_sojourn_ns,
            }),
            delay_line: (line.count > 0 && (delays || had_delay)).then(|| DelaySummary {
                count: line.count,
                mean_ns: line.mean_ns(),
                sd_ns: line.sd_ns(),
                configured_ns: cfg.delay_ns,
                configured_sd_ns: configured_sd_ns(cfg),
                held_for_order: line.held_for_order,
                mean_held_ns: line.mean_held_ns(),
                clamped_at_zero: line.clamped_at_zero,
            }),
        }
    }
}

/// The standard deviation of the configured jitter on its own, ns (see [`crate::dist`]).
fn configured_sd_ns(cfg: &DirectionConfig) -> Option<f64> {
    let Some(j) = cfg.jitter.as_ref().filter(|j| j.amount_ns > 0) else {
        return Some(0.0);
    };
    let z_sd = match &j.distribution {
        Distribution::Uniform => 1.0 / 3f64.sqrt(),
        Distribution::Normal => 1.0,
        Distribution::Pareto => crate::dist::PARETO_Z_SD,
        Distribution::Paretonormal => return None,
        Distribution::Table(t) => table_sd(t.values()),
    };
    Some(z_sd * j.amount_ns as f64)
}

/// The standard deviation of a netem table's variates (values / 8192).
fn table_sd(values: &[i16]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let n = values.len() as f64;
    let z = |v: &i16| f64::from(*v) / 8192.0;
    let mean = values.iter().map(z).sum::<f64>() / n;
    (values.iter().map(|v| (z(v) - mean).powi(2)).sum::<f64>() / n).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::delay::DelayLine;
    use crate::rate::Bottleneck;
    use crate::{DistTable, Jitter, QueueLimit};

    fn jitter(amount_ns: Nanos, distribution: Distribution) -> Option<Jitter> {
        Some(Jitter {
            amount_ns,
            distribution,
            correlation: 0.0,
            allow_reorder: false,
        })
    }

    #[test]
    fn an_unimpaired_direction_reports_neither_queue_nor_delay_line() {
        let mut line = DelayLine::new(0, true);
        line.depart(5, 0);
        let r = Realised::of(
            &DirectionConfig::default(),
            &QueueStats::default(),
            line.stats(),
        );
        assert_eq!(r, Realised::default());
    }

    #[test]
    fn a_rate_reports_its_queue_and_a_delay_its_line() {
        let cfg = DirectionConfig {
            delay_ns: 1_000,
            rate_bps: Some(100_000_000),
            jitter: jitter(600, Distribution::Normal),
            ..DirectionConfig::default()
        };
        let mut b = Bottleneck::new(Some(100_000_000), 0, QueueLimit::Packets(2));
        let mut line = DelayLine::new(1_000, true);
        for _ in 0..3 {
            if let Ok(left) = b.offer(1500, 0) {
                line.depart(left, 0);
            }
        }
        let r = Realised::of(&cfg, b.stats(), line.stats());
        let q = r.queue.expect("a rate has a queue");
        assert_eq!((q.accepted, q.max_packets, q.max_bytes), (2, 2, 3000));
        assert_eq!((q.mean_sojourn_ns, q.max_sojourn_ns), (180_000, 240_000));
        let d = r.delay_line.expect("a delay has a line");
        assert_eq!((d.count, d.mean_ns, d.sd_ns), (2, 1_000.0, 0.0));
        assert_eq!(d.configured_ns, 1_000);
        assert_eq!(d.configured_sd_ns, Some(600.0), "normal: sd = amount");
    }

    #[test]
    fn configured_sd_follows_the_distribution() {
        let sd = |distribution| {
            configured_sd_ns(&DirectionConfig {
                jitter: jitter(3_000, distribution),
                ..DirectionConfig::default()
            })
        };
        let uniform = sd(Distribution::Uniform).unwrap();
        assert!((uniform - 3_000.0 / 3f64.sqrt()).abs() < 1e-9);
        assert_eq!(sd(Distribution::Paretonormal), None);
        // A two-value table at ±1 (8192) has sd 1.
        let table = DistTable::new(vec![-8192, 8192]).unwrap();
        assert_eq!(sd(Distribution::Table(table)), Some(3_000.0));
        assert_eq!(configured_sd_ns(&DirectionConfig::default()), Some(0.0));
    }
}
