//! rr — request/response on one connection. Closed loop keeps `depth` requests in flight
//! (depth 1 = ping-pong, as sockperf/netperf TCP_RR); open loop sends at a target rate on a
//! fixed (or Poisson, seeded) schedule from a writer thread while the calling thread reads
//! responses, and measures latency from the *intended* send time — the coordinated-omission
//! correction of wrk2 — next to the uncorrected figure. Latencies go into HDR histograms
//! allocated before the run; raw samples into preallocated arrays.
//!
//! `--sizes` runs a NetPIPE-style sweep: for each size s, points at s-3, s and s+3 bytes
//! (request = response = the point's size), one fresh connection each.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use hdrhistogram::Histogram;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::clock::{now_ns, pace_until_ns, thread_cpu_ns};
use crate::error::{LoadError, Result};
use crate::net::reason;
use crate::proto::{ServerReport, TestSpec};
use crate::server::ServerCtx;
use crate::session::{RunMeta, Session};
use crate::sockopt::{SockOpts, read_back, rearm_quickack};
use crate::stats::{Percentiles, latency_histogram, ratio};

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
        match (self.count, self.duration_ms) {
            (None, None) => {
                return Err(LoadError::config(
                    "count",
                    "give --count or --duration (every run is bounded)",
                ));
            }
            (Some(0), _) => return Err(LoadError::config("count", "must be at least 1")),
            (_, Some(0)) => return Err(LoadError::config("duration", "must be above 0 s")),
            _ => {}
        }
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

/// Runs rr (or the sweep) against `target`.
pub fn run_client(
    cfg: &RrConfig,
    target: SocketAddr,
    facts: serde_json::Value,
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
        match run_point(&cfg.point(req, resp), target, &mut meta, &mut all) {
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
struct Recorder {
    hist: Histogram<u64>,
    uncorrected: Option<Histogram<u64>>,
    samples: Vec<RrSample>,
    dropped: u64,
}

impl Recorder {
    fn new(expected: u64, open: bool) -> Self {
        Self {
            hist: latency_histogram(),
            uncorrected: open.then(latency_histogram),
            samples: Vec::with_capacity(expected.min(MAX_SAMPLES as u64) as usize),
            dropped: 0,
        }
    }

    /// Records one transaction without allocating (samples past capacity are counted).
    #[inline]
    fn record(&mut self, s: RrSample) {
        let _ = self
            .hist
            .record(s.done_ns.saturating_sub(s.intended_ns).max(1));
        if let Some(u) = &mut self.uncorrected {
            let _ = u.record(s.done_ns.saturating_sub(s.sent_ns).max(1));
        }
        if self.samples.len() < self.samples.capacity() {
            self.samples.push(s);
        } else {
            self.dropped += 1;
        }
    }
}

fn run_point(
    cfg: &RrConfig,
    target: SocketAddr,
    meta: &mut RunMeta,
    all: &mut Histogram<u64>,
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
    let mut rec = Recorder::new(expected, cfg.rate.is_some());
    let cpu0 = thread_cpu_ns();
    let t0 = now_ns();
    let (done, cut) = if cfg.rate.is_some() {
        open_loop(cfg, &data, &mut rec)
    } else {
        closed_loop(cfg, &data, &mut rec)
    };
    let elapsed_s = (now_ns() - t0) as f64 / 1e9;
    meta.client_cpu_s += (thread_cpu_ns() - cpu0) as f64 / 1e9;
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
        samples: rec.samples,
    })
}

/// Closed loop with `depth` requests in flight; stamps live in a fixed ring.
fn closed_loop(cfg: &RrConfig, mut data: &TcpStream, rec: &mut Recorder) -> (u64, Option<String>) {
    let fd = data.as_raw_fd();
    let depth = cfg.depth as usize;
    let max_tx = cfg.count.unwrap_or(u64::MAX);
    let deadline = cfg
        .duration_ms
        .map_or(u64::MAX, |d| now_ns() + d * 1_000_000);
    let req = vec![0x52u8; cfg.req as usize];
    let mut resp = vec![0u8; cfg.resp as usize];
    let mut ring = vec![0u64; depth];
    let (mut issued, mut done) = (0u64, 0u64);
    while issued < max_tx && (issued as usize) < depth {
        ring[issued as usize % depth] = now_ns();
        if let Err(e) = data.write_all(&req) {
            return (done, Some(reason("sending a request", &e)));
        }
        issued += 1;
    }
    while done < issued {
        if let Err(e) = data.read_exact(&mut resp) {
            return (
                done,
                Some(reason(&format!("waiting for response {done}"), &e)),
            );
        }
        let t = now_ns();
        if cfg.opts.quickack {
            rearm_quickack(fd);
        }
        let sent = ring[done as usize % depth];
        rec.record(RrSample {
            intended_ns: sent,
            sent_ns: sent,
            done_ns: t,
        });
        done += 1;
        if issued < max_tx && t < deadline {
            ring[issued as usize % depth] = now_ns();
            if let Err(e) = data.write_all(&req) {
                return (done, Some(reason("sending a request", &e)));
            }
            issued += 1;
        }
    }
    (done, None)
}

/// The open-loop schedule: offsets from the start, ns.
fn schedule(cfg: &RrConfig) -> Vec<u64> {
    let n = cfg.schedule_len() as usize;
    let rate = cfg.rate.unwrap_or(1.0);
    let period = 1e9 / rate;
    if !cfg.poisson {
        return (0..n).map(|i| (i as f64 * period) as u64).collect();
    }
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(cfg.seed.unwrap_or(0));
    let mut t = 0.0f64;
    (0..n)
        .map(|_| {
            let at = t as u64;
            let u: f64 = rng.random::<f64>();
            t += -(1.0 - u).ln() * period;
            at
        })
        .collect()
}

/// Open loop: a writer thread follows the schedule; this thread reads responses in order.
fn open_loop(cfg: &RrConfig, data: &TcpStream, rec: &mut Recorder) -> (u64, Option<String>) {
    let plan = schedule(cfg);
    let sent: Vec<AtomicU64> = (0..plan.len()).map(|_| AtomicU64::new(0)).collect();
    let writer_failed = AtomicBool::new(false);
    let issued = AtomicU64::new(0);
    let deadline = cfg
        .duration_ms
        .map_or(u64::MAX, |d| now_ns() + d * 1_000_000 + 1);
    let t0 = now_ns() + 1_000_000;
    std::thread::scope(|s| {
        let writer = s.spawn(|| {
            let mut w = data;
            let req = vec![0x52u8; cfg.req as usize];
            for (i, at) in plan.iter().enumerate() {
                let when = t0 + at;
                if when > deadline {
                    break;
                }
                pace_until_ns(when);
                sent[i].store(now_ns(), Ordering::Release);
                if let Err(e) = w.write_all(&req) {
                    writer_failed.store(true, Ordering::Release);
                    let _ = data.shutdown(Shutdown::Read);
                    return Some(reason("sending a request", &e));
                }
                issued.store(i as u64 + 1, Ordering::Release);
            }
            None
        });
        let fd = data.as_raw_fd();
        let mut r = data;
        let mut resp = vec![0u8; cfg.resp as usize];
        let mut done = 0u64;
        let mut cut = None;
        while (done as usize) < plan.len() {
            // Read only with a request outstanding, so no read can wait for a response that
            // will never be asked for; otherwise wait (poll, no data consumed) for the writer.
            let finished = writer.is_finished() || writer_failed.load(Ordering::Acquire);
            if done >= issued.load(Ordering::Acquire) {
                if finished {
                    break;
                }
                poll_readable(fd, 1);
                continue;
            }
            if let Err(e) = r.read_exact(&mut resp) {
                cut = Some(reason(&format!("waiting for response {done}"), &e));
                break;
            }
            let t = now_ns();
            if cfg.opts.quickack {
                rearm_quickack(fd);
            }
            let i = done as usize;
            let intended = t0 + plan[i];
            let actual = match sent[i].load(Ordering::Acquire) {
                0 => intended,
                v => v,
            };
            rec.record(RrSample {
                intended_ns: intended,
                sent_ns: actual,
                done_ns: t,
            });
            done += 1;
        }
        if cut.is_some() {
            let _ = data.shutdown(Shutdown::Both);
        }
        let wcut = writer
            .join()
            .unwrap_or_else(|_| Some("request writer panicked".into()));
        (done, wcut.or(cut))
    })
}

/// Waits up to `ms` for `fd` to become readable (or for nothing), without reading.
fn poll_readable(fd: std::os::fd::RawFd, ms: i32) {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // Safety: one live pollfd; the result only shortens the wait.
    let _ = unsafe { libc::poll(&mut pfd, 1, ms) };
}

/// Reads until `buf` is full or EOF; returns the bytes read.
fn read_full(s: &mut TcpStream, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match s.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(k) => got += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// Server side: answer every request until the client closes.
pub(crate) fn serve(ctx: &mut ServerCtx, cfg: &RrConfig) -> ServerReport {
    let mut report = ServerReport {
        complete: true,
        ..ServerReport::default()
    };
    let mut data = match ctx.accept() {
        Ok(s) => s,
        Err(e) => {
            report.complete = false;
            report.incomplete_reason = Some(reason("waiting for the data connection", &e));
            return report;
        }
    };
    let fd = data.as_raw_fd();
    report.options = Some(read_back(fd, &cfg.opts));
    let cpu0 = thread_cpu_ns();
    let t0 = now_ns();
    let mut req = vec![0u8; cfg.req as usize];
    let resp = vec![0x41u8; cfg.resp as usize];
    loop {
        match read_full(&mut data, &mut req) {
            Ok(0) => break,
            Ok(k) if k < req.len() => {
                report.complete = false;
                report.incomplete_reason = Some(format!(
                    "peer closed inside request {} ({k} of {} bytes)",
                    report.transactions,
                    req.len()
                ));
                break;
            }
            Ok(_) => {}
            Err(e) => {
                report.complete = false;
                report.incomplete_reason = Some(reason(
                    &format!("waiting for request {}", report.transactions),
                    &e,
                ));
                break;
            }
        }
        if cfg.opts.quickack {
            rearm_quickack(fd);
        }
        if let Err(e) = data.write_all(&resp) {
            report.complete = false;
            report.incomplete_reason = Some(reason("sending a response", &e));
            break;
        }
        report.transactions += 1;
    }
    report.bytes_received = report.transactions * u64::from(cfg.req);
    report.bytes_sent = report.transactions * u64::from(cfg.resp);
    report.elapsed_ns = now_ns() - t0;
    report.cpu_ns = thread_cpu_ns() - cpu0;
    report
}

#[cfg(test)]
mod tests {
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
}
