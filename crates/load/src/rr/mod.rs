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
use tcplab_results::facts::Facts;
use tcplab_results::spec::WorkloadSpec;

use hdrhistogram::Histogram;

use crate::clock::{ThreadTimes, now_ns};
use crate::error::Result;
use crate::live::{OnLive, Span, with_reporter};
use crate::proto::ServerReport;
use crate::session::FoldIn;
use crate::session::{RunMeta, Session};
use crate::sockopt::read_back;
use crate::stats::{Percentiles, latency_histogram, ratio};
use loops::{Recorder, RrLive, closed_loop, open_loop};
pub(crate) use serve::serve;
pub use tcplab_results::rr::*;

/// Runs rr (or the sweep) against `target`.
pub fn run_client(cfg: &RrConfig, target: SocketAddr, facts: Option<Facts>) -> Result<RrResult> {
    run_client_live(cfg, target, facts, 1_000, None)
}

/// [`run_client`], and `on_interval` sees each `interval_ms` of every point as it closes.
pub fn run_client_live(
    cfg: &RrConfig,
    target: SocketAddr,
    facts: Option<Facts>,
    interval_ms: u64,
    on_interval: OnLive<'_, RrInterval>,
) -> Result<RrResult> {
    cfg.validate()?;
    let mut meta = crate::session::new_meta(target, facts);
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
    let mut session = Session::open(target, WorkloadSpec::Rr(cfg.clone()), timeout)?;
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
    meta.add_thread_times(ThreadTimes::now().since(times0));
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
