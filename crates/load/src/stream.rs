//! stream — bulk throughput over N parallel flows, up (client sends), down (server sends) or
//! both (N flows each way). Bounded by duration and/or bytes; the first `omit` seconds are
//! excluded from the figures (slow start). Both sides run the same engine (`run_flows`): one
//! thread per flow moving data, plus a sampler that every interval reads each flow's byte
//! counter and its tcp_info. CPU cost per GB is taken from each flow thread's CPU clock.
//!
//! Throughput is what the *receiver* got: for up it comes from the server's intervals, for down
//! from the client's. Data connections are opened one after the other, so the server's accept
//! order equals the client's flow order (sending flows first, then receiving flows).

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;
use tcplab_results::facts::Facts;
use tcplab_results::spec::WorkloadSpec;

use crate::clock::{ThreadTimes, now_ns};
use crate::error::Result;
use crate::net::reason;
use crate::proto::{Ctrl, ServerReport};
use crate::serve_ctx::ServerCtx;
use crate::session::FoldIn;
use crate::session::Session;
use crate::sockopt::{read_back, rearm_quickack};
use crate::stats::ratio;
use crate::tcpinfo::{self};
pub use tcplab_results::stream::*;

/// What one side's flows did.
#[derive(Debug, Default)]
pub(crate) struct FlowsOutcome {
    pub intervals: Vec<IntervalSample>,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// CPU time and CPU wait of the flow threads, summed.
    pub times: ThreadTimes,
    pub elapsed_ns: u64,
    pub cut: Option<String>,
}

/// A callback that receives each interval as it closes (for --ndjson).
pub type OnInterval<'a> = Option<&'a (dyn Fn(&IntervalReport) + Sync)>;

/// Runs every flow on its own thread plus the sampler; returns when all flows are done.
pub(crate) fn run_flows(
    flows: &[(TcpStream, bool)],
    cfg: &StreamConfig,
    on_interval: OnInterval<'_>,
) -> FlowsOutcome {
    let counters: Vec<AtomicU64> = flows.iter().map(|_| AtomicU64::new(0)).collect();
    let finished = AtomicUsize::new(0);
    let t0 = now_ns();
    let n_send = flows.iter().filter(|f| f.1).count().max(1) as u64;
    let first_send = flows.iter().position(|f| f.1);
    let (results, intervals) = std::thread::scope(|s| {
        let sampler = s.spawn(|| sample(flows, cfg, t0, &counters, &finished, on_interval));
        let handles: Vec<_> = flows
            .iter()
            .enumerate()
            .map(|(i, (stream, sending))| {
                let (counter, finished) = (&counters[i], &finished);
                let sampler = sampler.thread().clone();
                let quota = cfg
                    .bytes
                    .map(|b| b / n_send + if Some(i) == first_send { b % n_send } else { 0 });
                s.spawn(move || {
                    let r = if *sending {
                        send_flow(stream, cfg, t0, quota, counter)
                    } else {
                        recv_flow(stream, cfg, counter)
                    };
                    finished.fetch_add(1, Ordering::AcqRel);
                    // The sampler sleeps until its next tick; wake it to close the last interval.
                    sampler.unpark();
                    r
                })
            })
            .collect();
        let results: Vec<(ThreadTimes, Option<String>)> = handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or((ThreadTimes::default(), Some("flow thread panicked".into())))
            })
            .collect();
        (results, sampler.join().unwrap_or_default())
    });
    let mut out = FlowsOutcome {
        intervals,
        elapsed_ns: now_ns() - t0,
        times: ThreadTimes::zero(),
        ..FlowsOutcome::default()
    };
    for (times, cut) in results {
        out.times = out.times + times;
        if out.cut.is_none() {
            out.cut = cut;
        }
    }
    for (c, (_, sending)) in counters.iter().zip(flows) {
        let v = c.load(Ordering::Acquire);
        if *sending {
            out.bytes_sent += v;
        } else {
            out.bytes_received += v;
        }
    }
    out
}

/// Sends until the deadline or the quota; returns (what the thread took, reason if cut short).
fn send_flow(
    mut s: &TcpStream,
    cfg: &StreamConfig,
    t0: u64,
    quota: Option<u64>,
    counter: &AtomicU64,
) -> (ThreadTimes, Option<String>) {
    let times0 = ThreadTimes::now();
    let buf = vec![0x55u8; cfg.write_size as usize];
    let deadline = cfg.duration_ms.map_or(u64::MAX, |d| t0 + d * 1_000_000);
    let mut left = quota.unwrap_or(u64::MAX);
    let mut cut = None;
    while left > 0 && now_ns() < deadline {
        let k = (buf.len() as u64).min(left) as usize;
        match s.write(&buf[..k]) {
            Ok(0) => {
                cut = Some("sending: connection closed".into());
                break;
            }
            Ok(w) => {
                counter.fetch_add(w as u64, Ordering::Relaxed);
                left -= w as u64;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                cut = Some(reason("sending", &e));
                break;
            }
        }
    }
    let _ = s.shutdown(Shutdown::Write);
    (ThreadTimes::now().since(times0), cut)
}

/// Reads until EOF; returns (what the thread took, reason if cut short).
fn recv_flow(
    mut s: &TcpStream,
    cfg: &StreamConfig,
    counter: &AtomicU64,
) -> (ThreadTimes, Option<String>) {
    let times0 = ThreadTimes::now();
    let fd = s.as_raw_fd();
    let mut buf = vec![0u8; (cfg.write_size as usize).max(RECV_BUF)];
    let mut cut = None;
    let paced = cfg.read_rate_bps.map(|r| (r, now_ns()));
    let mut read = 0u64;
    loop {
        if let Some((rate, t0)) = paced {
            wait_for_budget(rate, t0, read);
        }
        let want = match paced {
            // Small reads keep a paced reader close to its rate.
            Some(_) => buf.len().min(PACED_READ),
            None => buf.len(),
        };
        match s.read(&mut buf[..want]) {
            Ok(0) => break,
            Ok(k) => {
                read += k as u64;
                counter.fetch_add(k as u64, Ordering::Relaxed);
                if cfg.opts.quickack {
                    rearm_quickack(fd);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                cut = Some(reason("receiving", &e));
                break;
            }
        }
    }
    (ThreadTimes::now().since(times0), cut)
}

/// Largest read of a paced reader, bytes.
const PACED_READ: usize = 16 << 10;
/// Sleeps until `read` bytes are within what `rate` bit/s allows since `t0`.
fn wait_for_budget(rate: u64, t0: u64, read: u64) {
    let due = t0 + (u128::from(read) * 8 * 1_000_000_000 / u128::from(rate.max(1))) as u64;
    let now = now_ns();
    if due > now {
        std::thread::sleep(Duration::from_nanos(due - now));
    }
}

/// Bytes received and not yet read on `fd` (FIONREAD), `None` when the ioctl fails.
fn unread(fd: std::os::fd::RawFd) -> Option<u32> {
    let mut n: libc::c_int = 0;
    // Safety: FIONREAD writes one int through the pointer, which is valid for the call.
    let rc = unsafe { libc::ioctl(fd, libc::FIONREAD, &mut n) };
    (rc == 0).then(|| u32::try_from(n).unwrap_or(0))
}

/// Every interval: per flow, the bytes moved and tcp_info; the last interval ends when the
/// last flow does.
fn sample(
    flows: &[(TcpStream, bool)],
    cfg: &StreamConfig,
    t0: u64,
    counters: &[AtomicU64],
    finished: &AtomicUsize,
    on_interval: OnInterval<'_>,
) -> Vec<IntervalSample> {
    let step = cfg.interval_ms * 1_000_000;
    let expected = cfg.duration_ms.map_or(64, |d| d / cfg.interval_ms + 2) as usize * flows.len();
    let mut out = Vec::with_capacity(expected.min(1 << 20));
    let mut last = vec![0u64; flows.len()];
    let (mut index, mut start) = (0u32, t0);
    loop {
        let tick = t0 + (u64::from(index) + 1) * step;
        let mut all_done = finished.load(Ordering::Acquire) == flows.len();
        // One wake-up per interval (flows unpark the sampler when they end): on two shared
        // cores, a sampler polling every few ms takes its slices from the flows it measures.
        loop {
            let now = now_ns();
            if all_done || now >= tick {
                break;
            }
            std::thread::park_timeout(Duration::from_nanos(tick - now));
            all_done = finished.load(Ordering::Acquire) == flows.len();
        }
        let end = now_ns().min(tick);
        let (start_s, end_s) = ((start - t0) as f64 / 1e9, (end - t0) as f64 / 1e9);
        let omitted = end_s <= cfg.omit_ms as f64 / 1000.0 + 1e-9;
        let first = out.len();
        for (i, (stream, sending)) in flows.iter().enumerate() {
            let now = counters[i].load(Ordering::Acquire);
            let bytes = now - last[i];
            last[i] = now;
            out.push(IntervalSample {
                index,
                flow: i as u32,
                sending: *sending,
                start_s,
                end_s,
                bytes,
                bps: ratio(bytes as f64 * 8.0, end_s - start_s),
                omitted,
                tcp_info: tcpinfo::read(stream.as_raw_fd()),
                unread_bytes: if *sending {
                    None
                } else {
                    unread(stream.as_raw_fd())
                },
            });
        }
        if let Some(cb) = on_interval {
            cb(&interval_report(&out[first..]));
        }
        if all_done {
            return out;
        }
        index += 1;
        start = end;
    }
}

fn interval_report(flows: &[IntervalSample]) -> IntervalReport {
    let first = flows.first().copied().unwrap_or_default();
    let sum = |sending: bool| -> Option<f64> {
        let v: Vec<f64> = flows
            .iter()
            .filter(|f| f.sending == sending)
            .filter_map(|f| f.bps)
            .collect();
        (!v.is_empty()).then(|| v.iter().sum())
    };
    IntervalReport {
        index: first.index,
        start_s: first.start_s,
        end_s: first.end_s,
        omitted: first.omitted,
        sent_bps: sum(true),
        received_bps: sum(false),
        flows: flows.to_vec(),
    }
}

/// Retransmitted segments over the sending flows (their last tcp_info).
fn retransmits(intervals: &[IntervalSample]) -> u64 {
    let mut last: std::collections::BTreeMap<u32, u32> = std::collections::BTreeMap::new();
    for i in intervals.iter().filter(|i| i.sending) {
        if let Some(t) = i.tcp_info {
            last.insert(i.flow, t.total_retrans);
        }
    }
    last.values().map(|&v| u64::from(v)).sum()
}

/// Runs stream against `target`; `on_interval` sees each client interval as it closes.
pub fn run_client(
    cfg: &StreamConfig,
    target: SocketAddr,
    facts: Option<Facts>,
    on_interval: OnInterval<'_>,
) -> Result<StreamResult> {
    cfg.validate()?;
    let timeout = Duration::from_millis(cfg.timeout_ms);
    let mut meta = crate::session::new_meta(target, facts);
    let mut session = Session::open(target, WorkloadSpec::Stream(cfg.clone()), timeout)?;
    let mut flows = Vec::new();
    for sending in cfg.client_roles() {
        flows.push((session.connect_data(&cfg.opts)?, sending));
    }
    meta.options = flows
        .first()
        .map(|(s, _)| read_back(s.as_raw_fd(), &cfg.opts));
    session.send(&Ctrl::Start)?;
    let out = run_flows(&flows, cfg, on_interval);
    if let Some(why) = &out.cut {
        meta.cut(format!("client: {why}"));
    }
    let report = session.report(timeout).unwrap_or_else(|e| {
        meta.cut(format!("no report from the server: {e}"));
        ServerReport::default()
    });
    meta.absorb(&report);
    meta.add_thread_times(out.times);
    let up_bps = matches!(cfg.direction, Direction::Up | Direction::Bidir)
        .then(|| received_bps(&report.intervals))
        .flatten();
    let down_bps = matches!(cfg.direction, Direction::Down | Direction::Bidir)
        .then(|| received_bps(&out.intervals))
        .flatten();
    let throughput_bps = match (up_bps, down_bps) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
    };
    let per_gb = |cpu_ns: u64, bytes: u64| ratio(cpu_ns as f64 / 1e9, bytes as f64 / 1e9);
    let summary = StreamSummary {
        throughput_bps,
        up_bps,
        down_bps,
        retransmits: retransmits(&out.intervals) + retransmits(&report.intervals),
    };
    Ok(StreamResult {
        meta,
        config: cfg.clone(),
        summary,
        elapsed_s: out.elapsed_ns as f64 / 1e9,
        client_bytes_sent: out.bytes_sent,
        client_bytes_received: out.bytes_received,
        server_bytes_sent: report.bytes_sent,
        server_bytes_received: report.bytes_received,
        client_cpu_s_per_gb: per_gb(out.times.cpu_ns, out.bytes_sent + out.bytes_received),
        server_cpu_s_per_gb: per_gb(report.cpu_ns, report.bytes_sent + report.bytes_received),
        intervals: out.intervals,
        server_intervals: report.intervals,
    })
}

/// Server side: accept the flows in connect order, wait for Start, run the same engine.
pub(crate) fn serve(ctx: &mut ServerCtx, cfg: &StreamConfig) -> ServerReport {
    let mut report = ServerReport::default();
    let mut flows = Vec::new();
    for client_sends in cfg.client_roles() {
        match ctx.accept() {
            Ok(s) => flows.push((s, !client_sends)),
            Err(e) => {
                report.incomplete_reason = Some(reason(
                    &format!("waiting for data connection {}", flows.len()),
                    &e,
                ));
                return report;
            }
        }
    }
    report.options = flows
        .first()
        .map(|(s, _)| read_back(s.as_raw_fd(), &cfg.opts));
    let _ = ctx.ctrl.set_read_timeout(Some(ctx.timeout));
    match crate::proto::read_frame(&mut ctx.ctrl) {
        Ok(Ctrl::Start) => {}
        Ok(other) => {
            report.incomplete_reason = Some(format!("expected Start, got {}", other.kind()));
            return report;
        }
        Err(e) => {
            report.incomplete_reason = Some(format!("waiting for Start: {e}"));
            return report;
        }
    }
    let out = run_flows(&flows, cfg, None);
    if let Some((first, _)) = flows.first() {
        crate::tcpinfo::record_end(&mut report.view, first.as_raw_fd());
    }
    report.complete = out.cut.is_none();
    report.incomplete_reason = out.cut;
    report.set_times(out.times);
    report.bytes_sent = out.bytes_sent;
    report.bytes_received = out.bytes_received;
    report.elapsed_ns = out.elapsed_ns;
    report.intervals = out.intervals;
    report
}
