//! rr — request/response on one connection. Closed loop keeps `depth` requests in flight
//! (depth 1 = ping-pong, as sockperf/netperf TCP_RR); open loop sends at a target rate on a
//! fixed (or Poisson, seeded) schedule from a writer thread while the calling thread reads
//! responses, and measures latency from the *intended* send time — the coordinated-omission
//! correction of wrk2 — next to the uncorrected figure. Latencies go into HDR histograms
//! allocated before the run; raw samples into preallocated arrays.
//!
//! `--sizes` runs a NetPIPE-style sweep: for each size s, points at s-3, s and s+3 bytes
//! (request = response = the point's size), one fresh connection each.
//!
//! Files: this one holds the configuration, the result types and the run of each point;
//! `loops` the timed loops and their recorder; `serve` the server side. With a live callback
//! ([`run_client_live`], `--ndjson`) a reporter thread prints one [`RrInterval`] per interval
//! from counters the loop publishes (see [`crate::live`]).

mod loops;
mod serve;

use std::net::{Shutdown, SocketAddr};
use std::os::fd::AsRawFd;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::clock::{ThreadTimes, now_ns};
use crate::error::{LoadError, Result};
use crate::live::{OnLive, Span, with_reporter};
use crate::proto::{ServerReport, TestSpec};
use crate::session::{RunMeta, Session};
use crate::sockopt::{SockOpts, read_back};
use crate::stats::{Percentiles, latency_histogram, ratio};
use loops::{Recorder, RrLive, closed_loop, open_loop};
pub(crate) use serve::serve;

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
#[serde(default)]
pub struct RrConfig {
    /// Request size, bytes (`--req`).
    pub req: u32,
    /// Response size, bytes (`--resp`).
    pub resp: u32,
    /// Requests in flight in closed loop (`--depth`).
    pub depth: u32,
    /// Open loop at this many transactions/s (`--rate`); closed loop when null.
    pub rate: Option<f64>,
    /// Open loop with exponential (Poisson) inter-send times (`--poisson`).
    pub poisson: bool,
    /// Seed of the Poisson schedule (`--seed`; chosen and recorded when absent).
    pub seed: Option<u64>,
    /// Stop after this many transactions (`--count`).
    pub count: Option<u64>,
    /// Stop after this long, ms (`--duration`).
    pub duration_ms: Option<u64>,
    /// NetPIPE sweep sizes (`--sizes`).
    pub sizes: Vec<u32>,
    /// Socket options of the data connection (both sides).
    pub opts: SockOpts,
    /// Idle timeout of every wait, ms (`--timeout`).
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
    pub fn validate(&self) -> Result<()> {
        let size_ok = |v: u32| (1..=MAX_SIZE).contains(&v);
        if !size_ok(self.req) {
            return Err(LoadError::config(
                "req",
                format!("{} bytes is outside 1..={MAX_SIZE}", self.req),
            ));
        }
        if !size_ok(self.resp) {
            return Err(LoadError::config(
                "resp",
                format!("{} bytes is outside 1..={MAX_SIZE}", self.resp),
            ));
        }
        if let Some(&s) = self
            .sizes
            .iter()
            .find(|&&s| !size_ok(s) || s > MAX_SIZE - 3)
        {
            return Err(LoadError::config(
                "sizes",
                format!("{s} bytes is outside 1..={}", MAX_SIZE - 3),
            ));
        }
        if self.depth == 0 || self.depth > MAX_DEPTH {
            return Err(LoadError::config(
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
            return Err(LoadError::config(
                "depth",
                "depth x message size above 64 KiB could deadlock both sides in write; lower --depth",
            ));
        }
        crate::error::check_bounds(self.count, self.duration_ms)?;
        if let Some(rate) = self.rate {
            if !(rate.is_finite() && rate > 0.0 && rate <= 10_000_000.0) {
                return Err(LoadError::config(
                    "rate",
                    "must be within (0, 10,000,000] transactions/s",
                ));
            }
            if self.schedule_len() > MAX_SCHEDULE {
                return Err(LoadError::config(
                    "rate",
                    format!("rate x duration exceeds {MAX_SCHEDULE} transactions; give --count"),
                ));
            }
            if self.depth != 1 {
                return Err(LoadError::config(
                    "depth",
                    "open loop (--rate) sets its own concurrency; leave --depth at 1",
                ));
            }
        } else if self.poisson {
            return Err(LoadError::config("poisson", "needs --rate (open loop)"));
        }
        if self.timeout_ms == 0 {
            return Err(LoadError::config("timeout", "must be above 0"));
        }
        if !(self.stall_ms.is_finite() && self.stall_ms > 0.0) {
            return Err(LoadError::config(
                "stall-ms",
                "must be a positive number of ms",
            ));
        }
        self.opts.validate()
    }

    /// Transactions an open-loop run schedules.
    fn schedule_len(&self) -> u64 {
        let by_time = match (self.rate, self.duration_ms) {
            (Some(r), Some(d)) => (r * d as f64 / 1000.0).ceil() as u64,
            _ => u64::MAX,
        };
        self.count.unwrap_or(u64::MAX).min(by_time).max(1)
    }

    fn point(&self, req: u32, resp: u32) -> Self {
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

/// Runs rr (or the sweep) against `target`.
pub fn run_client(
    cfg: &RrConfig,
    target: SocketAddr,
    facts: serde_json::Value,
) -> Result<RrResult> {
    run_client_live(cfg, target, facts, 1_000, None)
}

/// [`run_client`], and `on_interval` sees each `interval_ms` of every point as it closes.
pub fn run_client_live(
    cfg: &RrConfig,
    target: SocketAddr,
    facts: serde_json::Value,
    interval_ms: u64,
    on_interval: OnLive<'_, RrInterval>,
) -> Result<RrResult> {
    cfg.validate()?;
    let mut meta = RunMeta::new(target, facts);
    let mut cfg = cfg.clone();
    if cfg.poisson && cfg.seed.is_none() {
        cfg.seed = Some(now_ns() ^ u64::from(std::process::id()).rotate_left(32));
    }
    meta.seed = cfg.seed.filter(|_| cfg.poisson);
    let mut plan: Vec<(u32, u32)> = Vec::new();
    for &s in &cfg.sizes {
        for p in [s.saturating_sub(3), s, s + 3] {
            if p >= 1 && !plan.contains(&(p, p)) {
                plan.push((p, p));
            }
        }
    }
    if plan.is_empty() {
        plan.push((cfg.req, cfg.resp));
    }
    let mut all = latency_histogram();
    let (mut points, mut total_s) = (Vec::with_capacity(plan.len()), 0.0);
    for (k, &(req, resp)) in plan.iter().enumerate() {
        match run_point(
            &cfg.point(req, resp),
            target,
            &mut meta,
            &mut all,
            (interval_ms, on_interval),
        ) {
            Ok(p) => {
                total_s += p.elapsed_s;
                points.push(p);
            }
            Err(e) if k == 0 => return Err(e),
            Err(e) => meta.cut(format!("size {req}: {e}")),
        }
        if !meta.complete {
            break;
        }
    }
    let transactions = points.iter().map(|p| p.transactions).sum::<u64>();
    let summary = RrSummary {
        transactions_per_s: ratio(transactions as f64, total_s),
        latency_us: Percentiles::from_ns(&all),
        transactions,
        stalls: points.iter().map(|p| p.stalls).sum(),
    };
    let mode = if cfg.rate.is_some() { "open" } else { "closed" }.to_string();
    Ok(RrResult {
        meta,
        config: cfg,
        mode,
        summary,
        points,
    })
}

/// Histograms and raw samples a run fills.
fn run_point(
    cfg: &RrConfig,
    target: SocketAddr,
    meta: &mut RunMeta,
    all: &mut Histogram<u64>,
    (interval_ms, on_interval): (u64, OnLive<'_, RrInterval>),
) -> Result<RrPoint> {
    let timeout = Duration::from_millis(cfg.timeout_ms);
    let mut session = Session::open(target, TestSpec::Rr(cfg.clone()), timeout)?;
    let data = session.connect_data(&cfg.opts)?;
    if meta.options.is_none() {
        meta.options = Some(read_back(data.as_raw_fd(), &cfg.opts));
    }
    let expected = match (cfg.count, cfg.duration_ms) {
        (Some(c), _) => c,
        (None, Some(d)) => cfg.rate.map_or(d.saturating_mul(200), |r| {
            (r * d as f64 / 1000.0) as u64 + 1
        }),
        (None, None) => 0,
    };
    let live = RrLive::default();
    let mut rec = Recorder::new(expected, cfg.rate.is_some(), on_interval.map(|_| &live));
    let report_interval = on_interval.map(|cb| interval_reporter(cfg, &live, cb));
    let times0 = ThreadTimes::now();
    let t0 = now_ns();
    let (done, cut) = with_reporter(interval_ms, report_interval, || {
        if cfg.rate.is_some() {
            open_loop(cfg, &data, &mut rec)
        } else {
            closed_loop(cfg, &data, &mut rec)
        }
    });
    let elapsed_s = (now_ns() - t0) as f64 / 1e9;
    meta.add_client_times(ThreadTimes::now().since(times0));
    if let Some(why) = cut {
        meta.cut(why);
    }
    let _ = data.shutdown(Shutdown::Write);
    let report = session.report(timeout).unwrap_or_else(|e| {
        meta.cut(format!("no report from the server: {e}"));
        ServerReport::default()
    });
    meta.absorb(&report);
    let _ = all.add(&rec.hist);
    let tps = ratio(done as f64, elapsed_s);
    Ok(RrPoint {
        req: cfg.req,
        resp: cfg.resp,
        transactions: done,
        server_transactions: report.transactions,
        elapsed_s,
        transactions_per_s: tps,
        throughput_bps: tps.map(|t| t * f64::from(cfg.req + cfg.resp) * 8.0),
        latency_us: Percentiles::from_ns(&rec.hist),
        latency_uncorrected_us: rec.uncorrected.as_ref().map(Percentiles::from_ns),
        samples_dropped: rec.dropped,
        stalls: slower_than(&rec.hist, cfg.stall_ms),
        samples: rec.samples,
    })
}

/// Transactions in `hist` (recorded in ns) slower than `ms`.
fn slower_than(hist: &Histogram<u64>, ms: f64) -> u64 {
    let limit = (ms * 1e6) as u64;
    hist.iter_recorded()
        .filter(|v| v.value_iterated_to() > limit)
        .map(|v| v.count_at_value())
        .sum()
}

/// The reporter's per-interval step: differences of the published counters.
fn interval_reporter<'a>(
    cfg: &RrConfig,
    live: &'a RrLive,
    cb: &'a (dyn Fn(&RrInterval) + Sync),
) -> impl FnMut(Span) + Send + 'a {
    let (req, resp) = (cfg.req, cfg.resp);
    let (mut last_done, mut last_sum) = (0u64, 0u64);
    move |span: Span| {
        let (done, sum) = (live.done.get(), live.sum_ns.get());
        let n = done.saturating_sub(last_done);
        let mean = ratio(sum.saturating_sub(last_sum) as f64 / 1e3, n as f64);
        let max = live.max_ns.take();
        (last_done, last_sum) = (done, sum);
        cb(&RrInterval {
            index: span.index,
            start_s: span.start_s,
            end_s: span.end_s,
            req,
            resp,
            transactions: n,
            transactions_per_s: span.rate(n),
            latency_mean_us: mean,
            latency_max_us: (n > 0).then_some(max as f64 / 1e3),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::loops::schedule;
    use super::*;

    #[test]
    fn fixed_schedule_is_evenly_spaced() {
        let cfg = RrConfig {
            rate: Some(1000.0),
            count: Some(5),
            ..RrConfig::default()
        };
        assert_eq!(
            schedule(&cfg),
            vec![0, 1_000_000, 2_000_000, 3_000_000, 4_000_000]
        );
    }

    #[test]
    fn poisson_schedule_is_seeded_and_has_the_right_mean() {
        let cfg = RrConfig {
            rate: Some(10_000.0),
            poisson: true,
            seed: Some(7),
            count: Some(20_000),
            ..RrConfig::default()
        };
        let a = schedule(&cfg);
        assert_eq!(a, schedule(&cfg), "same seed, same schedule");
        let mean_gap = *a.last().expect("nonempty") as f64 / (a.len() - 1) as f64;
        assert!(
            (mean_gap - 100_000.0).abs() < 3_000.0,
            "mean gap {mean_gap} ns"
        );
        let other = RrConfig {
            seed: Some(8),
            ..cfg
        };
        assert_ne!(a, schedule(&other));
    }

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

    #[test]
    fn stalls_count_the_transactions_slower_than_the_limit() {
        let mut h = Histogram::<u64>::new(3).unwrap();
        for ns in [100_000u64, 4_000_000, 4_990_000, 5_100_000, 200_000_000] {
            h.record(ns).unwrap();
        }
        assert_eq!(slower_than(&h, 5.0), 2);
        assert_eq!(slower_than(&h, 0.05), 5);
        assert_eq!(slower_than(&h, 1_000.0), 0);
    }
}
