//! crr — connect, request, response, close, per transaction, from `concurrency` threads (as
//! netperf TCP_CRR). The client closes first, so TIME_WAIT piles up on the client host, which
//! is what is sampled. Connect failures are the subject of the test, not a reason to stop:
//! EADDRNOTAVAIL (ports exhausted), ECONNREFUSED (accept queue full / no listener) and other
//! errors are counted per second and the transaction is tried again.
//!
//! SYN retransmissions are shown twice: inferred from connect times (a lost SYN costs the
//! initial RTO, 1 s, then 2 s more: connects near 1 s and 3 s) and counted by the kernel
//! (TcpExt TCPSynRetrans in /proc/thread-self/net/netstat, the client's namespace).
//!
//! With a live callback ([`run_client_live`], `--ndjson`) a reporter thread prints one
//! [`CrrInterval`] per interval: connections and failures from the run's shared counters, the
//! TIME_WAIT sampler's latest count, and the kernel's SYN retransmissions in the interval.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;
use tcplab_results::facts::Facts;
use tcplab_results::spec::WorkloadSpec;

use hdrhistogram::Histogram;

use crate::clock::{ThreadTimes, now_ns};
use crate::error::Result;
use crate::live::{OnLive, Span, with_reporter};
use crate::net::{self, ConnectError};
use crate::proto::{Ctrl, ServerReport};
use crate::serve_ctx::ServerCtx;
use crate::session::FoldIn;
use crate::session::{RunMeta, Session};
use crate::sockopt::read_back;
use crate::stats::{Percentiles, latency_histogram, ratio};
use crate::sysinfo;
pub use tcplab_results::crr::*;

/// What one connection thread collected.
struct Worker {
    connect: Histogram<u64>,
    txn: Histogram<u64>,
    dropped: u64,
    errors: Vec<[u64; 3]>,
    times: ThreadTimes,
}

/// Shared run state: claims, stop flag, target.
struct Plan<'a> {
    cfg: &'a CrrConfig,
    addr: SocketAddr,
    t0: u64,
    deadline: u64,
    claimed: AtomicU64,
    completed: AtomicU64,
    /// Failed connects or transactions (for the live reporter; the JSON counts them per second).
    failed: AtomicU64,
    /// The TIME_WAIT sampler's latest count (for the live reporter).
    time_wait_now: AtomicU64,
    stop: AtomicBool,
    /// Raw samples, slot = completion number (unique), preallocated.
    slots: Vec<[AtomicU64; 3]>,
}

/// Runs crr against `target`. Must be called on a thread in the client's namespace: the
/// kernel counters and TIME_WAIT are read from there.
pub fn run_client(cfg: &CrrConfig, target: SocketAddr, facts: Option<Facts>) -> Result<CrrResult> {
    run_client_live(cfg, target, facts, 1_000, None)
}

/// [`run_client`], and `on_interval` sees each `interval_ms` as it closes.
pub fn run_client_live(
    cfg: &CrrConfig,
    target: SocketAddr,
    facts: Option<Facts>,
    interval_ms: u64,
    on_interval: OnLive<'_, CrrInterval>,
) -> Result<CrrResult> {
    cfg.validate()?;
    let timeout = Duration::from_millis(cfg.timeout_ms);
    let mut meta = crate::session::new_meta(target, facts);
    let mut session = Session::open(target, WorkloadSpec::Crr(cfg.clone()), timeout)?;
    // One probe connection checks the options and records those in force.
    let probe = session.connect_data(&cfg.opts)?;
    meta.options = Some(read_back(probe.as_raw_fd(), &cfg.opts));
    drop(probe);
    // Built (and written) before the clock starts: 24 bytes a slot, and for a long run this
    // takes a good fraction of a second that must not count against the run.
    let slots = (0..expected_samples(cfg))
        .map(|_| Default::default())
        .collect();
    let syn0 = sysinfo::netstat_counter("TcpExt", "TCPSynRetrans");
    let t0 = now_ns();
    let plan = Plan {
        cfg,
        addr: session.data_addr(),
        t0,
        deadline: cfg.duration_ms.map_or(u64::MAX, |d| t0 + d * 1_000_000),
        claimed: AtomicU64::new(0),
        completed: AtomicU64::new(0),
        failed: AtomicU64::new(0),
        time_wait_now: AtomicU64::new(0),
        stop: AtomicBool::new(false),
        slots,
    };
    let reporter = on_interval.map(|cb| interval_reporter(&plan, syn0, cb));
    let (workers, time_wait, t_end) = with_reporter(interval_ms, reporter, || {
        std::thread::scope(|s| {
            let sampler = s.spawn(|| {
                sample_time_wait(&plan.stop, cfg.sample_ms, plan.t0, &plan.time_wait_now)
            });
            let handles: Vec<_> = (0..cfg.concurrency)
                .map(|_| s.spawn(|| worker(&plan)))
                .collect();
            let workers: Vec<Worker> = handles.into_iter().filter_map(|h| h.join().ok()).collect();
            let t_end = now_ns();
            plan.stop.store(true, Ordering::Release);
            let tw = sampler.join().unwrap_or_default();
            (workers, tw, t_end)
        })
    });
    let elapsed_s = (t_end - t0) as f64 / 1e9;
    let filled = (plan.completed.load(Ordering::Acquire) as usize).min(plan.slots.len());
    let samples: Vec<CrrSample> = plan.slots[..filled]
        .iter()
        .map(|[a, b, c]| CrrSample {
            start_ns: a.load(Ordering::Relaxed),
            connected_ns: b.load(Ordering::Relaxed),
            done_ns: c.load(Ordering::Relaxed),
        })
        .collect();
    let syn1 = sysinfo::netstat_counter("TcpExt", "TCPSynRetrans");
    let _ = session.send(&Ctrl::Done);
    let report = session.report(timeout).unwrap_or_else(|e| {
        meta.cut(format!("no report from the server: {e}"));
        ServerReport::default()
    });
    meta.absorb(&report);
    Ok(assemble(
        cfg,
        meta,
        (workers, samples),
        time_wait,
        elapsed_s,
        syn0.zip(syn1).map(|(a, b)| b.saturating_sub(a)),
        report.transactions,
    ))
}

/// Raw-sample slots for a run: its count, or 100,000 connections/s (several times what one
/// machine does) over its duration, at most [`MAX_SAMPLES`].
fn expected_samples(cfg: &CrrConfig) -> u64 {
    let by_time = cfg
        .duration_ms
        .map_or(u64::MAX, |d| d.saturating_mul(100) + 1_000);
    cfg.count.unwrap_or(u64::MAX).min(by_time).min(MAX_SAMPLES)
}

/// The reporter's per-interval step: differences of the shared counters and of the kernel's
/// SYN retransmissions (read on the reporter thread, which is in the client's namespace).
fn interval_reporter<'a>(
    plan: &'a Plan<'a>,
    syn0: Option<u64>,
    cb: &'a (dyn Fn(&CrrInterval) + Sync),
) -> impl FnMut(Span) + Send + 'a {
    let (mut last_done, mut last_failed, mut last_syn) = (0u64, 0u64, syn0);
    move |span: Span| {
        let done = plan.completed.load(Ordering::Acquire);
        let failed = plan.failed.load(Ordering::Relaxed);
        let syn = sysinfo::netstat_counter("TcpExt", "TCPSynRetrans");
        let n = done.saturating_sub(last_done);
        cb(&CrrInterval {
            index: span.index,
            start_s: span.start_s,
            end_s: span.end_s,
            connections: n,
            connections_per_s: span.rate(n),
            failures: failed.saturating_sub(last_failed),
            time_wait: plan.time_wait_now.load(Ordering::Relaxed),
            kernel_syn_retrans: syn.zip(last_syn).map(|(a, b)| a.saturating_sub(b)),
        });
        (last_done, last_failed, last_syn) = (done, failed, syn);
    }
}

fn assemble(
    cfg: &CrrConfig,
    mut meta: RunMeta,
    (workers, mut samples): (Vec<Worker>, Vec<CrrSample>),
    time_wait: TimeWait,
    elapsed_s: f64,
    kernel_syn: Option<u64>,
    server_transactions: u64,
) -> CrrResult {
    let (mut connect, mut txn) = (latency_histogram(), latency_histogram());
    let mut per_sec = vec![[0u64; 3]; cfg.deadline_s() as usize + 1];
    let mut dropped = 0;
    for w in workers {
        let _ = connect.add(&w.connect);
        let _ = txn.add(&w.txn);
        for (acc, e) in per_sec.iter_mut().zip(&w.errors) {
            for k in 0..3 {
                acc[k] += e[k];
            }
        }
        meta.add_thread_times(w.times);
        dropped += w.dropped;
    }
    samples.sort_unstable_by_key(|s| s.start_ns);
    let errors: Vec<ErrorSecond> = per_sec
        .iter()
        .enumerate()
        .filter(|(_, e)| e.iter().any(|&v| v > 0))
        .map(|(i, e)| ErrorSecond {
            second: i as u64,
            addrnotavail: e[0],
            connrefused: e[1],
            other: e[2],
        })
        .collect();
    let errors_total = errors
        .iter()
        .fold(ErrorSecond::default(), |a, e| ErrorSecond {
            second: 0,
            addrnotavail: a.addrnotavail + e.addrnotavail,
            connrefused: a.connrefused + e.connrefused,
            other: a.other + e.other,
        });
    let transactions = connect.len();
    if let Some(c) = cfg.count
        && transactions < c
    {
        meta.cut(format!(
            "{transactions} of {c} transactions completed before the deadline"
        ));
    }
    let syn_retrans = SynRetrans {
        connects_near_1s: connect.count_between(800_000_000, 2_499_999_999),
        connects_near_3s: connect.count_between(2_500_000_000, u64::MAX / 2),
        kernel_syn_retrans: kernel_syn,
    };
    CrrResult {
        meta,
        config: cfg.clone(),
        summary: CrrSummary {
            connections_per_s: ratio(transactions as f64, elapsed_s),
            connect_us: Percentiles::from_ns(&connect),
            transactions,
        },
        elapsed_s,
        transaction_us: Percentiles::from_ns(&txn),
        server_transactions,
        errors,
        errors_total,
        syn_retrans,
        time_wait,
        samples_dropped: dropped,
        samples,
    }
}

/// One connection loop: claim a transaction, run it, record; failures are counted and the
/// claim given back so a bounded run still completes exactly `count`.
fn worker(plan: &Plan<'_>) -> Worker {
    let cfg = plan.cfg;
    let mut w = Worker {
        connect: latency_histogram(),
        txn: latency_histogram(),
        dropped: 0,
        errors: vec![[0u64; 3]; cfg.deadline_s() as usize + 1],
        times: ThreadTimes::default(),
    };
    let req = vec![0x43u8; cfg.req as usize];
    let mut resp = vec![0u8; cfg.resp as usize];
    let connect_timeout = Duration::from_millis(cfg.connect_timeout_ms);
    let io_timeout = Duration::from_millis(cfg.timeout_ms);
    let limit = cfg.count.unwrap_or(u64::MAX);
    let times0 = ThreadTimes::now();
    while !plan.stop.load(Ordering::Relaxed) && now_ns() < plan.deadline {
        if plan.claimed.fetch_add(1, Ordering::AcqRel) >= limit {
            plan.claimed.fetch_sub(1, Ordering::AcqRel);
            break;
        }
        let start = now_ns();
        let outcome = net::connect(plan.addr, &cfg.opts, connect_timeout).map_err(|e| match e {
            ConnectError::Io(e) => e,
            ConnectError::Option(e) => std::io::Error::other(e.to_string()),
        });
        let connected = now_ns();
        let r = outcome.and_then(|mut s| {
            crate::sockopt::set_timeouts(s.as_raw_fd(), io_timeout)?;
            s.write_all(&req)?;
            s.read_exact(&mut resp)
        });
        let done = now_ns();
        match r {
            Ok(()) => {
                let _ = w.connect.record(connected.saturating_sub(start).max(1));
                let _ = w.txn.record(done.saturating_sub(start).max(1));
                let slot = plan.completed.fetch_add(1, Ordering::AcqRel) as usize;
                match plan.slots.get(slot) {
                    Some([a, b, c]) => {
                        a.store(start, Ordering::Relaxed);
                        b.store(connected, Ordering::Relaxed);
                        c.store(done, Ordering::Relaxed);
                    }
                    None => w.dropped += 1,
                }
            }
            Err(e) => {
                plan.claimed.fetch_sub(1, Ordering::AcqRel);
                plan.failed.fetch_add(1, Ordering::Relaxed);
                let kind = match e.raw_os_error() {
                    Some(libc::EADDRNOTAVAIL) => 0,
                    Some(libc::ECONNREFUSED) => 1,
                    _ => 2,
                };
                let sec = ((done - plan.t0) / 1_000_000_000) as usize;
                let last = w.errors.len().saturating_sub(1);
                if let Some(slot) = w.errors.get_mut(sec.min(last)) {
                    slot[kind] += 1;
                }
                // Back off a little so a full port range does not become a busy loop.
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }
    w.times = ThreadTimes::now().since(times0);
    w
}

/// Samples the calling thread's namespace's TIME_WAIT count every `sample_ms` until `stop`
/// (publishing the latest count in `now_count` for a live reporter), one last time after it.
pub fn sample_time_wait(
    stop: &AtomicBool,
    sample_ms: u64,
    t0: u64,
    now_count: &AtomicU64,
) -> TimeWait {
    let period = Duration::from_millis(sample_ms);
    let mut tw = TimeWait {
        samples: Vec::with_capacity(1024),
        ..TimeWait::default()
    };
    loop {
        let stopping = stop.load(Ordering::Acquire);
        if let Some(n) = sysinfo::count_time_wait() {
            now_count.store(n, Ordering::Relaxed);
            tw.max = tw.max.max(n);
            tw.last = n;
            if tw.samples.len() < 36_000 {
                tw.samples
                    .push((now_ns().saturating_sub(t0) as f64 / 1e9, n));
            }
        }
        if stopping {
            return tw;
        }
        // Sleep in short steps so the end of the run is seen (and sampled) promptly.
        let wake = now_ns() + period.as_nanos() as u64;
        while !stop.load(Ordering::Acquire) && now_ns() < wake {
            std::thread::sleep(Duration::from_millis(5).min(period));
        }
    }
}

/// Server side: `concurrency` accept loops (plus spares) answer one transaction per
/// connection and close after the client does, until the client says Done.
pub(crate) fn serve(ctx: &mut ServerCtx, cfg: &CrrConfig) -> ServerReport {
    let stop = AtomicBool::new(false);
    let served = AtomicU64::new(0);
    let t0 = now_ns();
    let threads = cfg
        .server_threads
        .unwrap_or(cfg.concurrency.min(256) + 1)
        .max(1) as usize;
    let ctx_ref = &*ctx;
    let (times, done) = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| s.spawn(|| serve_loop(ctx_ref, cfg, &stop, &served)))
            .collect();
        // The client says Done after its run: wait its whole bound plus the idle timeout.
        let wait =
            Duration::from_millis(cfg.duration_ms.unwrap_or(3_600_000) + cfg.connect_timeout_ms)
                + ctx_ref.timeout;
        let mut ctrl = match ctx_ref.ctrl.try_clone() {
            Ok(c) => c,
            Err(e) => {
                stop.store(true, Ordering::Release);
                return (ThreadTimes::default(), Err(e.to_string()));
            }
        };
        let done = wait_done(&mut ctrl, wait);
        stop.store(true, Ordering::Release);
        let times = handles
            .into_iter()
            .filter_map(|h| h.join().ok())
            .fold(ThreadTimes::zero(), |a, b| a + b);
        (times, done)
    });
    let mut report = ServerReport {
        complete: done.is_ok(),
        incomplete_reason: done.err(),
        ..ServerReport::default()
    };
    report.set_times(times);
    report.transactions = served.load(Ordering::Acquire);
    report.bytes_received = report.transactions * u64::from(cfg.req);
    report.bytes_sent = report.transactions * u64::from(cfg.resp);
    report.elapsed_ns = now_ns() - t0;
    report
}

fn wait_done(ctrl: &mut tcplab_auth::Channel, wait: Duration) -> std::result::Result<(), String> {
    let _ = ctrl.set_read_timeout(Some(wait));
    match crate::proto::read_frame(ctrl) {
        Ok(Ctrl::Done) => Ok(()),
        Ok(other) => Err(format!("expected Done, got {}", other.kind())),
        Err(e) => Err(e.to_string()),
    }
}

fn serve_loop(
    ctx: &ServerCtx,
    cfg: &CrrConfig,
    stop: &AtomicBool,
    served: &AtomicU64,
) -> ThreadTimes {
    let times0 = ThreadTimes::now();
    let mut req = vec![0u8; cfg.req as usize];
    let resp = vec![0x61u8; cfg.resp as usize];
    let mut tail = [0u8; 64];
    while !stop.load(Ordering::Acquire) {
        let mut s = match ctx.listener.accept() {
            Ok((s, _)) => s,
            Err(_) => continue, // the 100 ms accept timeout: look at the stop flag again
        };
        if crate::sockopt::set_timeouts(s.as_raw_fd(), ctx.timeout).is_err() {
            continue;
        }
        if s.read_exact(&mut req).is_ok() && s.write_all(&resp).is_ok() {
            served.fetch_add(1, Ordering::AcqRel);
            // Wait for the client's FIN so the TIME_WAIT lands on the client, as in real
            // request/response traffic where the client closes.
            let _ = s.read(&mut tail);
        }
    }
    ThreadTimes::now().since(times0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syn_retransmits_are_inferred_from_connect_times() {
        let mut w = Worker {
            connect: latency_histogram(),
            txn: latency_histogram(),
            dropped: 0,
            errors: vec![[0; 3]; 4],
            times: ThreadTimes::default(),
        };
        // 0.2 ms (no loss) twice, 1.03 s (one SYN lost), 3.05 s (two lost).
        for ns in [200_000u64, 200_000, 1_030_000_000, 3_050_000_000] {
            w.connect.record(ns).expect("record");
            w.txn.record(ns + 50_000).expect("record");
        }
        w.errors[1] = [3, 1, 0];
        let cfg = CrrConfig {
            duration_ms: Some(2_000),
            ..CrrConfig::default()
        };
        let tw = TimeWait::default();
        let r = assemble(
            &cfg,
            RunMeta::default(),
            (vec![w], Vec::new()),
            tw,
            4.0,
            Some(2),
            4,
        );
        assert_eq!(r.syn_retrans.connects_near_1s, 1);
        assert_eq!(r.syn_retrans.connects_near_3s, 1);
        assert_eq!(r.syn_retrans.kernel_syn_retrans, Some(2));
        assert_eq!(r.summary.transactions, 4);
        assert_eq!(r.summary.connections_per_s, Some(1.0));
        let second1 = ErrorSecond {
            second: 1,
            addrnotavail: 3,
            connrefused: 1,
            other: 0,
        };
        assert_eq!(r.errors, vec![second1]);
        assert_eq!(
            (r.errors_total.addrnotavail, r.errors_total.connrefused),
            (3, 1)
        );
    }
}
