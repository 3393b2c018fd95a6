//! What one direction of the model really did, as reports show it: how full the bottleneck
//! queue got and how long packets stayed in it, and what delay the delay line really gave
//! beside the configured one.
//!
//! Emulators are blamed for hidden queues and for jitter that is not what was asked (netem's
//! undershoots, and order-keeping turns a flow's jitter into mostly extra delay); this puts
//! both in the emulator's status and a run's record, so a user sees them instead of guessing.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::delay::{DelayLineStats, sd_from_sums};
use crate::describe::format_ns;
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
    /// What the queue discipline did (marks, drops by cause, flows), when the direction has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub discipline: Option<crate::aqm::AqmCounters>,
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
    /// Sum of those times, ns: what [`RunRealised::between`] subtracts (in JSON as a decimal
    /// string, like the other sums: they outgrow what a JSON number holds exactly).
    #[serde(default, with = "u128_text")]
    pub sojourn_sum_ns: u128,
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
    /// Sum of the realised delays, ns (for [`RunRealised::between`]).
    #[serde(default, with = "u128_text")]
    pub sum_ns: u128,
    /// Sum of their squares, ns² (past 2^64 after some 200 000 packets of 10 ms).
    #[serde(default, with = "u128_text")]
    pub sum_sq_ns2: u128,
}

/// One direction's realised queue stay and delay over one run: the difference of two
/// [`Realised`] taken before and after it, so an earlier run does not blend into a later one.
/// Maxima and the time-weighted queue fill cover the whole life of the link and are left out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct RunRealised {
    /// Packets that entered the bottleneck queue during the run.
    pub queue_accepted: u64,
    /// Their mean stay in it (arrival to last bit serialised), ns; `None` without a queue
    /// or without packets.
    pub queue_mean_sojourn_ns: Option<Nanos>,
    /// Packets that went through the delay line during the run.
    pub delay_count: u64,
    /// Their mean realised delay, ns (`None` without packets or without a delay line).
    pub delay_mean_ns: Option<f64>,
    /// The standard deviation of their realised delay, ns.
    pub delay_sd_ns: Option<f64>,
    /// The configured jitter's own standard deviation, ns (as in [`DelaySummary`]).
    pub configured_sd_ns: Option<f64>,
    /// Of them, packets held back to keep order.
    pub held_for_order: u64,
    /// Of them, packets whose delay plus jitter was negative.
    pub clamped_at_zero: u64,
}

impl RunRealised {
    /// What happened between `before` and `after` (the same direction's accounts). `None` when
    /// the direction has neither a queue nor a delay line.
    pub fn between(before: &Realised, after: &Realised) -> Option<Self> {
        if after.queue.is_none() && after.delay_line.is_none() {
            return None;
        }
        let mut run = Self::default();
        if let Some(q) = &after.queue {
            let b = before.queue.unwrap_or_default();
            run.queue_accepted = q.accepted.saturating_sub(b.accepted);
            let sum = q.sojourn_sum_ns.saturating_sub(b.sojourn_sum_ns);
            run.queue_mean_sojourn_ns = (run.queue_accepted > 0)
                .then(|| u64::try_from(sum / u128::from(run.queue_accepted)).unwrap_or(u64::MAX));
        }
        if let Some(d) = &after.delay_line {
            let b = before.delay_line.unwrap_or_default();
            let n = d.count.saturating_sub(b.count);
            run.delay_count = n;
            run.configured_sd_ns = d.configured_sd_ns;
            run.held_for_order = d.held_for_order.saturating_sub(b.held_for_order);
            run.clamped_at_zero = d.clamped_at_zero.saturating_sub(b.clamped_at_zero);
            if n > 0 {
                let sum = d.sum_ns.saturating_sub(b.sum_ns);
                let sum_sq = d.sum_sq_ns2.saturating_sub(b.sum_sq_ns2);
                run.delay_mean_ns = Some(sum as f64 / n as f64);
                run.delay_sd_ns = Some(sd_from_sums(n, sum, sum_sq));
            }
        }
        Some(run)
    }
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
                sojourn_sum_ns: queue.sojourn_ns,
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
                sum_ns: line.sum_ns,
                sum_sq_ns2: line.sum_sq_ns2,
            }),
            discipline: None,
        }
    }
}

impl fmt::Display for RunRealised {
    /// `queue stay 5.24 ms mean (24580 packets); delay 5.48 ms mean, sd 281 µs (configured sd
    /// 577 µs), 16682 of 24580 held back to keep order`, each part only when it applies.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ns = |x: f64| format_ns(x.round() as u64);
        let mut parts = Vec::new();
        if let Some(stay) = self.queue_mean_sojourn_ns {
            parts.push(format!(
                "queue stay {} mean ({} packets)",
                format_ns(stay),
                self.queue_accepted
            ));
        }
        if let (Some(mean), Some(sd)) = (self.delay_mean_ns, self.delay_sd_ns) {
            let mut part = format!("delay {} mean, sd {}", ns(mean), ns(sd));
            if let Some(c) = self.configured_sd_ns.filter(|&c| c > 0.0) {
                part.push_str(&format!(" (configured sd {})", ns(c)));
            }
            if self.held_for_order > 0 {
                part.push_str(&format!(
                    ", {} of {} held back to keep order",
                    self.held_for_order, self.delay_count
                ));
            }
            if self.clamped_at_zero > 0 {
                part.push_str(&format!(
                    ", {} drew a negative delay and left with none",
                    self.clamped_at_zero
                ));
            }
            parts.push(part);
        }
        if parts.is_empty() {
            return f.write_str("no packets");
        }
        f.write_str(&parts.join("; "))
    }
}

/// A `u128` as a decimal string in JSON (read back from a string or a plain number): JSON
/// numbers are doubles to most readers, and `serde_json::Value` holds at most a `u64`.
pub(crate) mod u128_text {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &u128, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(v)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u128, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Repr {
            Text(String),
            Number(u64),
        }
        match Repr::deserialize(d)? {
            Repr::Text(t) => t.parse().map_err(serde::de::Error::custom),
            Repr::Number(n) => Ok(u128::from(n)),
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
        Distribution::Table(t) => t.z_sd(),
    };
    Some(z_sd * j.amount_ns as f64)
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

    /// 100 Mbit/s, 1 µs ± 600 ns normal jitter.
    fn rated_and_delayed() -> DirectionConfig {
        DirectionConfig {
            delay_ns: 1_000,
            rate_bps: Some(100_000_000),
            jitter: jitter(600, Distribution::Normal),
            ..DirectionConfig::default()
        }
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
        let cfg = rated_and_delayed();
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
    fn a_run_counts_only_its_own_packets() {
        let cfg = rated_and_delayed();
        let mut b = Bottleneck::new(Some(100_000_000), 0, QueueLimit::Packets(100));
        let mut line = DelayLine::new(1_000, false);
        // Before the run: a 10-packet burst (stays 120 µs .. 1.2 ms), delays of 1000 ± 500.
        for k in 0..10 {
            let left = b.offer(1500, 0).unwrap();
            line.depart(left, if k % 2 == 0 { 500 } else { -500 });
        }
        let before = Realised::of(&cfg, &b.stats_at(0), line.stats());
        // The run: two packets on an idle link (each stays 120 µs), delays 1000 and 3000.
        for (at, offset) in [(10_000_000, 0), (20_000_000, 2_000)] {
            let left = b.offer(1500, at).unwrap();
            line.depart(left, offset);
        }
        let after = Realised::of(&cfg, &b.stats_at(20_000_000), line.stats());
        let run = RunRealised::between(&before, &after).unwrap();
        assert_eq!(run.queue_accepted, 2);
        assert_eq!(run.queue_mean_sojourn_ns, Some(120_000));
        assert_eq!(run.delay_count, 2);
        assert_eq!(run.delay_mean_ns, Some(2_000.0));
        assert_eq!(run.delay_sd_ns, Some(1_000.0));
        assert_eq!(run.configured_sd_ns, Some(600.0));
        assert_eq!((run.held_for_order, run.clamped_at_zero), (0, 0));
        assert_eq!(
            run.to_string(),
            "queue stay 120 µs mean (2 packets); delay 2.00 µs mean, sd 1.00 µs (configured sd 600 ns)"
        );
        // The whole life of the link blends the burst in.
        assert_eq!(after.delay_line.unwrap().count, 12);
        // A run with no packets has no means; an unimpaired direction has no account.
        let idle = RunRealised::between(&after, &after).unwrap();
        assert_eq!(
            (idle.delay_mean_ns, idle.queue_mean_sojourn_ns),
            (None, None)
        );
        assert_eq!(idle.to_string(), "no packets");
        assert_eq!(
            RunRealised::between(&Realised::default(), &Realised::default()),
            None
        );
    }

    #[test]
    fn a_run_reads_with_what_order_keeping_and_clamping_did() {
        let run = RunRealised {
            delay_count: 24_580,
            delay_mean_ns: Some(5_480_000.0),
            delay_sd_ns: Some(281_000.0),
            configured_sd_ns: Some(577_350.3),
            held_for_order: 16_682,
            clamped_at_zero: 3,
            ..RunRealised::default()
        };
        assert_eq!(
            run.to_string(),
            "delay 5.48 ms mean, sd 281 µs (configured sd 577 µs), 16682 of 24580 held back to \
             keep order, 3 drew a negative delay and left with none"
        );
    }

    #[test]
    fn the_account_survives_json_exactly() {
        let r = Realised {
            queue: None,
            delay_line: Some(DelaySummary {
                count: 3,
                sum_ns: u128::from(u64::MAX) * 4,
                sum_sq_ns2: u128::MAX / 3,
                ..DelaySummary::default()
            }),
            discipline: Some(crate::aqm::AqmCounters {
                marked: 7,
                sojourn_ns_sum: u128::MAX / 5,
                ..crate::aqm::AqmCounters::default()
            }),
        };
        let json = serde_json::to_string(&r).unwrap();
        assert_eq!(serde_json::from_str::<Realised>(&json).unwrap(), r);
        // Through `serde_json::Value` too, which is how the lab carries the counters.
        let value = serde_json::to_value(r).unwrap();
        assert_eq!(
            value["delay_line"]["sum_sq_ns2"],
            (u128::MAX / 3).to_string().as_str()
        );
        assert_eq!(serde_json::from_value::<Realised>(value).unwrap(), r);
        let plain = serde_json::json!({"delay_line": {"count": 1, "mean_ns": 5.0, "sd_ns": 0.0,
            "configured_ns": 5, "configured_sd_ns": 0.0, "held_for_order": 0, "mean_held_ns": 0.0,
            "clamped_at_zero": 0, "sum_ns": 5, "sum_sq_ns2": 25}});
        let read = serde_json::from_value::<Realised>(plain).unwrap();
        assert_eq!(
            read.delay_line.unwrap().sum_sq_ns2,
            25,
            "a plain number reads too"
        );
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
