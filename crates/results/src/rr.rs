//! rr's configuration and result: request/response on one connection, closed loop with
//! `depth` requests in flight or open loop at a rate with the coordinated-omission correction,
//! and the `--sizes` sweep's points (the run itself is `tcplab_load::rr`).

use serde::{Deserialize, Serialize};

use crate::error::{ConfigError, check_bounds, config};
use crate::session::RunMeta;
use crate::sockopt::SockOpts;
use crate::stats::Percentiles;

/// Largest request or response.
pub const MAX_SIZE: u32 = 16 << 20;
/// Largest pipelining depth.
pub const MAX_DEPTH: u32 = 1024;
/// Most raw samples kept per run (the histogram still sees every transaction).
pub const MAX_SAMPLES: usize = 10_000_000;
/// Most transactions an open-loop schedule may hold.
pub const MAX_SCHEDULE: u64 = 10_000_000;

/// Parameters of an rr run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RrConfig {
    /// Request size, bytes (`--req`).
    #[serde(with = "crate::units::serde_size_u32")]
    pub req: u32,
    /// Response size, bytes (`--resp`).
    #[serde(with = "crate::units::serde_size_u32")]
    pub resp: u32,
    /// Requests in flight in closed loop (`--depth`).
    pub depth: u32,
    /// Open loop at this many transactions/s (`--rate`); closed loop when null.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// Open loop with exponential (Poisson) inter-send times (`--poisson`).
    pub poisson: bool,
    /// Seed of the Poisson schedule (`--seed`; chosen and recorded when absent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Stop after this many transactions (`--count`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    /// Stop after this long (`--duration`).
    #[serde(
        rename = "duration",
        default,
        with = "crate::units::serde_ms_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub duration_ms: Option<u64>,
    /// NetPIPE sweep sizes (`--sizes`).
    pub sizes: Vec<u32>,
    /// Socket options of the data connection (both sides).
    #[serde(rename = "socket")]
    pub opts: SockOpts,
    /// Idle timeout of every wait (`--timeout`).
    #[serde(rename = "timeout", with = "crate::units::serde_ms")]
    pub timeout_ms: u64,
    /// A transaction slower than this many ms counts as a stall (`--stall-ms`), as a receive
    /// gap does for msgs: the figure the mesh's all-to-all estimate is made of.
    pub stall_ms: f64,
}

impl Default for RrConfig {
    fn default() -> Self {
        Self {
            req: 1,
            resp: 1,
            depth: 1,
            rate: None,
            poisson: false,
            seed: None,
            count: None,
            duration_ms: Some(5_000),
            sizes: Vec::new(),
            opts: SockOpts::default(),
            timeout_ms: 10_000,
            stall_ms: 5.0,
        }
    }
}

impl RrConfig {
    /// Checks every field; errors name the flag.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let size_ok = |v: u32| (1..=MAX_SIZE).contains(&v);
        if !size_ok(self.req) {
            return Err(config(
                "req",
                format!("{} bytes is outside 1..={MAX_SIZE}", self.req),
            ));
        }
        if !size_ok(self.resp) {
            return Err(config(
                "resp",
                format!("{} bytes is outside 1..={MAX_SIZE}", self.resp),
            ));
        }
        if let Some(&s) = self
            .sizes
            .iter()
            .find(|&&s| !size_ok(s) || s > MAX_SIZE - 3)
        {
            return Err(config(
                "sizes",
                format!("{s} bytes is outside 1..={}", MAX_SIZE - 3),
            ));
        }
        if self.depth == 0 || self.depth > MAX_DEPTH {
            return Err(config(
                "depth",
                format!("{} is outside 1..={MAX_DEPTH}", self.depth),
            ));
        }
        let biggest = self
            .sizes
            .iter()
            .map(|s| s + 3)
            .chain([self.req, self.resp])
            .max()
            .unwrap_or(1);
        if self.depth > 1 && u64::from(self.depth) * u64::from(biggest) > 64 << 10 {
            return Err(config(
                "depth",
                "depth x message size above 64 KiB could deadlock both sides in write; lower --depth",
            ));
        }
        check_bounds(self.count, self.duration_ms)?;
        if let Some(rate) = self.rate {
            if !(rate.is_finite() && rate > 0.0 && rate <= 10_000_000.0) {
                return Err(config(
                    "rate",
                    "must be within (0, 10,000,000] transactions/s",
                ));
            }
            if self.schedule_len() > MAX_SCHEDULE {
                return Err(config(
                    "rate",
                    format!("rate x duration exceeds {MAX_SCHEDULE} transactions; give --count"),
                ));
            }
            if self.depth != 1 {
                return Err(config(
                    "depth",
                    "open loop (--rate) sets its own concurrency; leave --depth at 1",
                ));
            }
        } else if self.poisson {
            return Err(config("poisson", "needs --rate (open loop)"));
        }
        if self.timeout_ms == 0 {
            return Err(config("timeout", "must be above 0"));
        }
        if !(self.stall_ms.is_finite() && self.stall_ms > 0.0) {
            return Err(config("stall-ms", "must be a positive number of ms"));
        }
        self.opts.validate()
    }

    /// Transactions an open-loop run schedules.
    pub fn schedule_len(&self) -> u64 {
        let by_time = match (self.rate, self.duration_ms) {
            (Some(r), Some(d)) => (r * d as f64 / 1000.0).ceil() as u64,
            _ => u64::MAX,
        };
        self.count.unwrap_or(u64::MAX).min(by_time).max(1)
    }

    /// The configuration of one point of a sweep: these request and response sizes.
    pub fn point(&self, req: u32, resp: u32) -> Self {
        Self {
            req,
            resp,
            sizes: Vec::new(),
            ..self.clone()
        }
    }
}

/// One raw rr sample (CLOCK_MONOTONIC ns).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RrSample {
    /// When the request should have been sent (open loop) or was sent (closed loop).
    pub intended_ns: u64,
    /// When the request write started.
    pub sent_ns: u64,
    /// When the whole response had arrived.
    pub done_ns: u64,
}

/// Figures of one rr run (one request/response size pair).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RrPoint {
    /// Request size, bytes.
    pub req: u32,
    /// Response size, bytes.
    pub resp: u32,
    /// Completed transactions.
    pub transactions: u64,
    /// Transactions the server served (equals `transactions` when nothing was lost).
    pub server_transactions: u64,
    /// Wall time, s.
    pub elapsed_s: f64,
    /// Transactions per second.
    pub transactions_per_s: Option<f64>,
    /// Payload bit/s both ways, (req + resp)·8·transactions/s (NetPIPE's figure).
    pub throughput_bps: Option<f64>,
    /// Latency, µs (open loop: from the intended send time).
    pub latency_us: Percentiles,
    /// Open loop only: latency from the actual send time (not corrected).
    pub latency_uncorrected_us: Option<Percentiles>,
    /// Raw samples beyond [`MAX_SAMPLES`] that were not kept.
    pub samples_dropped: u64,
    /// Transactions slower than `stall_ms` (from the histogram, which sees every one).
    #[serde(default)]
    pub stalls: u64,
    /// Raw samples, kept for --samples.
    #[serde(skip)]
    pub samples: Vec<RrSample>,
}

/// The `summary` object of an rr result (all points merged).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RrSummary {
    /// Transactions per second (all transactions / all run time).
    pub transactions_per_s: Option<f64>,
    /// Latency over all transactions, µs.
    pub latency_us: Percentiles,
    /// Completed transactions.
    pub transactions: u64,
    /// Transactions slower than `stall_ms`.
    #[serde(default)]
    pub stalls: u64,
}

/// An rr result.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RrResult {
    /// Common record.
    #[serde(flatten)]
    pub meta: RunMeta,
    /// What was asked.
    pub config: RrConfig,
    /// "closed" or "open".
    pub mode: String,
    /// Headline figures.
    pub summary: RrSummary,
    /// One entry per size point (one without --sizes).
    pub points: Vec<RrPoint>,
}

/// One interval of a running point, as streamed with `--ndjson` (client side).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct RrInterval {
    /// Interval number from 0 (restarts at each sweep point).
    pub index: u32,
    /// Start, s since the point started.
    pub start_s: f64,
    /// End, s.
    pub end_s: f64,
    /// Request size of the point, bytes.
    pub req: u32,
    /// Response size of the point, bytes.
    pub resp: u32,
    /// Transactions completed in the interval.
    pub transactions: u64,
    /// Their rate, per second.
    pub transactions_per_s: Option<f64>,
    /// Their mean latency, µs (open loop: from the intended send time).
    pub latency_mean_us: Option<f64>,
    /// Their largest latency, µs.
    pub latency_max_us: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_inputs_name_their_flag() {
        let check = |cfg: RrConfig, flag: &str| {
            let e = cfg.validate().expect_err("must fail").to_string();
            assert!(e.starts_with(&format!("invalid --{flag}:")), "{e}");
        };
        check(
            RrConfig {
                req: 0,
                ..RrConfig::default()
            },
            "req",
        );
        check(
            RrConfig {
                resp: MAX_SIZE + 1,
                ..RrConfig::default()
            },
            "resp",
        );
        check(
            RrConfig {
                depth: 0,
                ..RrConfig::default()
            },
            "depth",
        );
        check(
            RrConfig {
                duration_ms: Some(0),
                ..RrConfig::default()
            },
            "duration",
        );
        check(
            RrConfig {
                count: None,
                duration_ms: None,
                ..RrConfig::default()
            },
            "count",
        );
        check(
            RrConfig {
                rate: Some(f64::NAN),
                ..RrConfig::default()
            },
            "rate",
        );
        check(
            RrConfig {
                poisson: true,
                ..RrConfig::default()
            },
            "poisson",
        );
        check(
            RrConfig {
                sizes: vec![0],
                ..RrConfig::default()
            },
            "sizes",
        );
    }
}
