//! msgs — the sfperf test: a one-way stream of `count` messages of `size` bytes, optionally
//! paced, with a CLOCK_MONOTONIC stamp before every write (client) and at the read that
//! completes every message (server). The receiver knows `size`, so message i ends at byte
//! (i+1)·size; no framing bytes are added. Inside one machine the two clocks are the same, so
//! `recv_ns[i] - send_ns[i]` is the exact one-way delay.
//!
//! `--pattern write-write-read` splits each message into two writes and waits for a 1-byte
//! reply: with Nagle on, the second write waits for the ACK of the first, which the receiver
//! delays (it has nothing to say until the message is whole) — the classic delayed-ACK stall.
//!
//! The timed loops only push into preallocated arrays ([`StampLog`]: past a million messages
//! the stamps go on to a file, so a run's memory does not grow with its count); summaries come
//! after, exact for runs held in memory and streamed for longer ones. With a live
//! callback ([`run_client_live`], `--ndjson`) a reporter thread prints one [`MsgsInterval`] per
//! interval from the count the send loop publishes with one relaxed store per message (a plain
//! move, taken with and without a reporter so runs compare; see [`crate::live`]).

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::time::Duration;
use tcplab_results::facts::Facts;
use tcplab_results::spec::WorkloadSpec;

use crate::clock::{ThreadTimes, now_ns, pace_until_ns};
use crate::error::{LoadError, Result};
use crate::live::{OnLive, Published, Span, with_reporter};
use crate::net::reason;
use crate::proto::ServerReport;
use crate::serve_ctx::ServerCtx;
use crate::session::FoldIn;
use crate::session::{RunMeta, Session};
use crate::sockopt::{read_back, rearm_quickack};
use crate::stamplog::StampLog;
use crate::stats::{Dist, NsDist, Summary};
pub use tcplab_results::msgs::*;
use tcplab_results::stamps::Stamps;

/// Runs msgs against the server at `target` (one run per size), never failing after the first
/// run has started: later faults give a partial result.
pub fn run_client(
    cfg: &MsgsConfig,
    target: SocketAddr,
    facts: Option<Facts>,
) -> Result<MsgsResult> {
    run_client_live(cfg, target, facts, 1_000, None)
}

/// [`run_client`], and `on_interval` sees each `interval_ms` of every run as it closes.
pub fn run_client_live(
    cfg: &MsgsConfig,
    target: SocketAddr,
    facts: Option<Facts>,
    interval_ms: u64,
    on_interval: OnLive<'_, MsgsInterval>,
) -> Result<MsgsResult> {
    cfg.validate()?;
    let mut meta = crate::session::new_meta(target, facts);
    let sizes = if cfg.sizes.is_empty() {
        vec![cfg.size]
    } else {
        cfg.sizes.clone()
    };
    let mut runs = Vec::with_capacity(sizes.len());
    for (k, &size) in sizes.iter().enumerate() {
        let one = cfg.one(size);
        match run_one(&one, target, &mut meta, (interval_ms, on_interval)) {
            Ok(run) => runs.push(run),
            Err(e) if k == 0 => return Err(e),
            Err(e) => meta.cut(format!("size {size}: {e}")),
        }
        if !meta.complete {
            break;
        }
    }
    let summary = runs
        .first()
        .map(|r| MsgsSummary {
            total_s: r.total_s,
            per_message_us: r.per_message_us,
            one_way_us: r.one_way_us,
        })
        .unwrap_or_default();
    let threshold_size = threshold(&runs);
    Ok(MsgsResult {
        meta,
        config: cfg.clone(),
        summary,
        runs,
        threshold_size,
    })
}

fn run_one(
    cfg: &MsgsConfig,
    target: SocketAddr,
    meta: &mut RunMeta,
    (interval_ms, on_interval): (u64, OnLive<'_, MsgsInterval>),
) -> Result<MsgsRun> {
    let timeout = Duration::from_millis(cfg.timeout_ms);
    let t_setup = now_ns();
    let mut session = Session::open(target, WorkloadSpec::Msgs(cfg.clone()), timeout)?;
    let mut data = session.connect_data(&cfg.opts)?;
    if meta.options.is_none() {
        meta.options = Some(read_back(data.as_raw_fd(), &cfg.opts));
    }
    let setup_ns = now_ns() - t_setup;
    let mut send_log = stamp_log(cfg)?;
    let buf = vec![0x5au8; cfg.size as usize];
    let times0 = ThreadTimes::now();
    let progress = Published::default();
    let reporter = on_interval.map(|cb| interval_reporter(cfg.size, &progress, cb));
    let (sent, t0, t_end, cut) = with_reporter(interval_ms, reporter, || {
        send_loop(cfg, &mut data, &buf, send_log.as_mut(), &progress)
    });
    meta.add_thread_times(ThreadTimes::now().since(times0));
    if let Some(why) = cut {
        meta.cut(why);
    }
    let _ = data.shutdown(Shutdown::Write);
    let wait = timeout + Duration::from_millis(cfg.gap_us / 1000 + 100);
    let report = match session.report(wait) {
        Ok(r) => r,
        Err(e) => {
            meta.cut(format!("no report from the server: {e}"));
            ServerReport::default()
        }
    };
    let t_report = now_ns();
    // Messages still in flight after the last write are the workload's time, not the report's.
    let drained = report.recv_ns.last().map_or(t_end, |r| r.max(t_end));
    meta.absorb(&report);
    let send_ns = match send_log.map(StampLog::finish).transpose() {
        Ok(stamps) => stamps.unwrap_or_default(),
        Err(e) => {
            meta.cut(format!("the send stamps were lost: {e}"));
            Stamps::default()
        }
    };
    let received = report.transactions;
    let (mut run, unread) = summarise(
        cfg,
        (sent, received),
        t_end.saturating_sub(t0),
        send_ns,
        report.recv_ns,
        t_end,
    );
    if let Some(e) = unread {
        meta.cut(format!("the stamps could not be read back: {e}"));
    }
    run.phases = Phases {
        setup_ns,
        report_ns: t_report.saturating_sub(drained),
        summary_ns: now_ns() - t_report,
    };
    Ok(run)
}

/// The stamp log of one side of a run (none with timestamps off); its spill file, if the
/// count needs one, is made now, before the timed loop.
fn stamp_log(cfg: &MsgsConfig) -> Result<Option<StampLog>> {
    cfg.timestamps
        .then(|| StampLog::new(cfg.count))
        .transpose()
        .map_err(|e| LoadError::io("keeping the per-message stamps", e))
}

/// The reporter's per-interval step: the difference of the published count.
fn interval_reporter<'a>(
    size: u32,
    progress: &'a Published,
    cb: &'a (dyn Fn(&MsgsInterval) + Sync),
) -> impl FnMut(Span) + Send + 'a {
    let mut last = 0u64;
    move |span: Span| {
        let now = progress.get();
        let n = now.saturating_sub(last);
        last = now;
        cb(&MsgsInterval {
            index: span.index,
            start_s: span.start_s,
            end_s: span.end_s,
            size,
            messages: n,
            messages_per_s: span.rate(n),
            sent_bps: span.rate(n * u64::from(size) * 8),
        });
    }
}

/// The timed loop. Returns (messages sent, start ns, end ns, reason if cut short).
/// `progress` gets the number of messages started (see the module doc).
fn send_loop(
    cfg: &MsgsConfig,
    data: &mut TcpStream,
    buf: &[u8],
    mut send_ns: Option<&mut StampLog>,
    progress: &Published,
) -> (u64, u64, u64, Option<String>) {
    let fd = data.as_raw_fd();
    let gap_ns = cfg.gap_us * 1000;
    let split = buf.len() / 2;
    let mut reply = [0u8; 1];
    let t0 = now_ns();
    let mut last = t0;
    for i in 0..cfg.count as usize {
        if gap_ns > 0 {
            let slot = if cfg.spaced && i > 0 {
                last + gap_ns
            } else {
                t0 + i as u64 * gap_ns
            };
            pace_until_ns(slot);
        }
        last = now_ns();
        if let Some(log) = send_ns.as_mut() {
            log.push(last);
        }
        progress.set(i as u64 + 1);
        let r = match cfg.pattern {
            Pattern::Write => data.write_all(buf),
            Pattern::WriteWriteRead => data
                .write_all(&buf[..split])
                .and_then(|()| data.write_all(&buf[split..]))
                .and_then(|()| data.read_exact(&mut reply))
                .map(|()| {
                    if cfg.opts.quickack {
                        rearm_quickack(fd);
                    }
                }),
        };
        if let Err(e) = r {
            return (
                i as u64,
                t0,
                now_ns(),
                Some(reason(&format!("message {i}"), &e)),
            );
        }
    }
    (cfg.count, t0, now_ns(), None)
}

/// The run's figures from its stamps, and the store's error if a long run's stamps could not
/// be read back (its per-message figures are then left out, not computed from part of them).
fn summarise(
    cfg: &MsgsConfig,
    (sent, received): (u64, u64),
    total_ns: u64,
    send_ns: Stamps,
    recv_ns: Stamps,
    t_end: u64,
) -> (MsgsRun, Option<std::io::Error>) {
    let total_s = total_ns as f64 / 1e9;
    let mut unread = None;
    let per_message_us = if send_ns.is_empty() {
        let mean = crate::stats::ratio(total_s * 1e6, sent as f64);
        Summary {
            n: sent,
            mean,
            ..Summary::default()
        }
    } else {
        match per_message(&send_ns, t_end) {
            Ok(s) => s,
            Err(e) => {
                unread = Some(e);
                Summary::default()
            }
        }
    };
    let (one_way_us, recv_gap_us, stalls, stall_every) = if recv_ns.is_empty() || send_ns.is_empty()
    {
        (None, None, 0, None)
    } else {
        let stall_us = cfg.stall_ms * 1e3;
        let dists = match (send_ns.as_slice(), recv_ns.as_slice()) {
            (Some(send), Some(recv)) => Ok(both_dists(send, recv, stall_us)),
            _ => streamed_dists(&send_ns, &recv_ns, stall_us),
        };
        match dists {
            Ok((one_way, (gaps, stalls, every))) => (Some(one_way), Some(gaps), stalls, every),
            Err(e) => {
                unread = Some(e);
                (None, None, 0, None)
            }
        }
    };
    let run = MsgsRun {
        size: cfg.size,
        count: cfg.count,
        sent,
        received,
        total_s,
        per_message_us,
        one_way_us,
        recv_gap_us,
        stalls,
        stall_every,
        theoretical: cfg
            .link_rate_bps
            .map(|r| Theory::new(cfg.size, cfg.count, r)),
        send_ns,
        recv_ns,
        phases: Phases::default(),
    };
    (run, unread)
}

/// Per-message cost, µs: from one write's start to the next's (the last to `t_end`).
fn per_message(send_ns: &Stamps, t_end: u64) -> std::io::Result<Summary> {
    if let Some(send) = send_ns.as_slice() {
        let next = send.iter().skip(1).copied().chain(std::iter::once(t_end));
        return Ok(Summary::of(
            send.iter()
                .zip(next)
                .map(|(a, b)| b.saturating_sub(*a) as f64 / 1e3),
        ));
    }
    let mut costs = NsDist::default();
    let (mut this, mut next) = (send_ns.iter(), send_ns.iter());
    next.next();
    for a in this.by_ref() {
        costs.add(next.next().unwrap_or(t_end).saturating_sub(a));
    }
    this.finish()?;
    next.finish()?;
    let d = costs.dist();
    Ok(Summary {
        n: d.n,
        mean: d.mean,
        sd: d.sd,
        min: d.min,
        max: d.max,
    })
}

/// The receive gaps' distribution, the stalls among them and their median spacing.
type Gaps = (Dist, u64, Option<f64>);

/// [`both_dists`] for stamps too many to hold: one pass over both, reading them back in
/// chunks; the same figures with the percentiles within 0.1 % ([`NsDist`]).
fn streamed_dists(
    send_ns: &Stamps,
    recv_ns: &Stamps,
    stall_us: f64,
) -> std::io::Result<(Dist, Gaps)> {
    let (mut one_way, mut gaps) = (NsDist::default(), NsDist::default());
    let mut stalls = StallCount::new(stall_us);
    let (mut send, mut recv) = (send_ns.iter(), recv_ns.iter());
    let mut prev: Option<u64> = None;
    let mut received = |r: u64, gaps: &mut NsDist| {
        if let Some(p) = prev {
            let gap = r.saturating_sub(p);
            gaps.add(gap);
            stalls.add(gap as f64 / 1e3);
        }
        prev = Some(r);
    };
    for (s, r) in send.by_ref().zip(recv.by_ref()) {
        one_way.add(r.saturating_sub(s));
        received(r, &mut gaps);
    }
    // Receive stamps past the last send stamp (none in a whole run) still make gaps.
    for r in recv.by_ref() {
        received(r, &mut gaps);
    }
    send.finish()?;
    recv.finish()?;
    let (count, every) = stalls.figures();
    Ok((one_way.dist(), (gaps.dist(), count, every)))
}

/// The one-way delay and receive-gap summaries, on two threads: they are independent and each
/// takes a millisecond or more on 100,000 values (both here, in turn, if no thread starts).
fn both_dists(send_ns: &[u64], recv_ns: &[u64], stall_us: f64) -> (Dist, Gaps) {
    std::thread::scope(|scope| {
        let gaps = std::thread::Builder::new()
            .name("tcplab-summary".into())
            .spawn_scoped(scope, || gap_dist(recv_ns, stall_us));
        let one_way = one_way_dist(send_ns, recv_ns);
        let gaps = match gaps {
            Ok(h) => h
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            Err(_) => gap_dist(recv_ns, stall_us),
        };
        (one_way, gaps)
    })
}

/// One-way delays, µs.
fn one_way_dist(send_ns: &[u64], recv_ns: &[u64]) -> Dist {
    let mut us: Vec<f64> = send_ns
        .iter()
        .zip(recv_ns)
        .map(|(s, r)| r.saturating_sub(*s) as f64 / 1e3)
        .collect();
    Dist::of(&mut us)
}

/// Gaps between consecutive receptions, µs: their distribution, the stalls above
/// `stall_us` and the median spacing between those ([`stall_stats`]).
fn gap_dist(recv_ns: &[u64], stall_us: f64) -> Gaps {
    let mut us: Vec<f64> = recv_ns
        .windows(2)
        .map(|w| w[1].saturating_sub(w[0]) as f64 / 1e3)
        .collect();
    let (stalls, every) = stall_stats(&us, stall_us);
    (Dist::of(&mut us), stalls, every)
}

/// Counts gaps above `limit_us` and the median spacing (in messages) between them.
fn stall_stats(gaps_us: &[f64], limit_us: f64) -> (u64, Option<f64>) {
    let mut stalls = StallCount::new(limit_us);
    for &g in gaps_us {
        stalls.add(g);
    }
    stalls.figures()
}

/// Stalls counted one receive gap at a time: their number and the spacings between them (one
/// value per stall, so bounded by the run's time over the stall limit, not its count).
struct StallCount {
    limit_us: f64,
    at: usize,
    last: Option<usize>,
    spacing: Vec<f64>,
    count: u64,
}

impl StallCount {
    fn new(limit_us: f64) -> Self {
        Self {
            limit_us,
            at: 0,
            last: None,
            spacing: Vec::new(),
            count: 0,
        }
    }

    fn add(&mut self, gap_us: f64) {
        if gap_us > self.limit_us {
            if let Some(last) = self.last {
                self.spacing.push((self.at - last) as f64);
            }
            self.last = Some(self.at);
            self.count += 1;
        }
        self.at += 1;
    }

    fn figures(&self) -> (u64, Option<f64>) {
        (self.count, crate::stats::median(&self.spacing))
    }
}

/// Seed 004's K: the smallest swept size from which on nothing stalls, if smaller ones did.
fn threshold(runs: &[MsgsRun]) -> Option<u32> {
    let mut by_size: Vec<(u32, u64)> = runs.iter().map(|r| (r.size, r.stalls)).collect();
    by_size.sort_unstable();
    let last_stalling = by_size.iter().rposition(|(_, s)| *s > 0)?;
    by_size.get(last_stalling + 1).map(|(size, _)| *size)
}

/// Server side: receive, stamp every message, reply per message for write-write-read.
pub(crate) fn serve(ctx: &mut ServerCtx, cfg: &MsgsConfig) -> ServerReport {
    let (data, mut report) = ctx.accept_data();
    let Some(mut data) = data else {
        return report;
    };
    let mut recv_log = match stamp_log(cfg) {
        Ok(log) => log,
        Err(e) => {
            report.complete = false;
            report.incomplete_reason = Some(e.to_string());
            return report;
        }
    };
    let times0 = ThreadTimes::now();
    let t0 = now_ns();
    let (received, bytes, cut) = recv_loop(cfg, &mut data, recv_log.as_mut());
    report.elapsed_ns = now_ns() - t0;
    crate::tcpinfo::record_end(&mut report.view, data.as_raw_fd());
    report.set_times(ThreadTimes::now().since(times0));
    report.bytes_received = bytes;
    report.transactions = received;
    if let Some(why) = cut {
        report.complete = false;
        report.incomplete_reason = Some(why);
    }
    match recv_log.map(StampLog::finish).transpose() {
        Ok(stamps) => report.recv_ns = stamps.unwrap_or_default(),
        Err(e) => {
            report.complete = false;
            report.incomplete_reason = Some(format!("the receive stamps were lost: {e}"));
        }
    }
    report
}

/// The receiver's timed loop: one stamp per read, given to every message that read completed.
fn recv_loop(
    cfg: &MsgsConfig,
    data: &mut TcpStream,
    mut recv_ns: Option<&mut StampLog>,
) -> (u64, u64, Option<String>) {
    let fd = data.as_raw_fd();
    let size = u64::from(cfg.size);
    let mut buf = vec![0u8; 256 << 10];
    let (mut got, mut done) = (0u64, 0u64);
    let reply = [1u8; 1];
    while done < cfg.count {
        let k = match data.read(&mut buf) {
            Ok(0) => {
                return (
                    done,
                    got,
                    Some(format!(
                        "peer closed after {done} of {} messages",
                        cfg.count
                    )),
                );
            }
            Ok(k) => k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                return (
                    done,
                    got,
                    Some(reason(&format!("receiving message {done}"), &e)),
                );
            }
        };
        let ts = now_ns();
        if cfg.opts.quickack {
            rearm_quickack(fd);
        }
        got += k as u64;
        let whole = (got / size).min(cfg.count);
        while done < whole {
            if let Some(log) = recv_ns.as_mut() {
                log.push(ts);
            }
            done += 1;
            if cfg.pattern == Pattern::WriteWriteRead
                && let Err(e) = data.write_all(&reply)
            {
                return (done, got, Some(reason("replying", &e)));
            }
        }
    }
    (done, got, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stalls_and_their_spacing() {
        let mut gaps = vec![10.0; 100];
        for i in [10, 51, 92] {
            gaps[i] = 20_000.0;
        }
        assert_eq!(stall_stats(&gaps, 5_000.0), (3, Some(41.0)));
    }

    /// A synthetic run's stamps, in memory and stored (a log keeping only 1,000 in memory).
    fn stamps_both_ways(n: u64) -> ((Stamps, Stamps), (Stamps, Stamps)) {
        let send: Vec<u64> = (0..n).map(|i| 5_000_000_000 + i * 55_000).collect();
        let recv: Vec<u64> = send
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let stall = if i % 41 == 0 { 12_000_000 } else { 0 };
                s + 40_000 + (i as u64 * 7_919) % 9_000 + stall
            })
            .collect();
        let stored = |v: &[u64]| {
            let mut log = crate::stamplog::StampLog::with_limit(n, 1_000).unwrap();
            v.iter().for_each(|&x| log.push(x));
            log.finish().unwrap()
        };
        let mem = (Stamps::from(send.clone()), Stamps::from(recv.clone()));
        let disk = (stored(&send), stored(&recv));
        assert!(disk.0.is_stored() && disk.1.is_stored());
        (mem, disk)
    }

    #[test]
    fn a_stored_run_gives_the_figures_of_one_in_memory() {
        let cfg = MsgsConfig {
            count: 200_000,
            ..MsgsConfig::default()
        };
        let ((ms, mr), (ds, dr)) = stamps_both_ways(cfg.count);
        let t_end = ms.last().unwrap() + 55_000;
        let (exact, e1) = summarise(&cfg, (cfg.count, cfg.count), 1, ms, mr, t_end);
        let (streamed, e2) = summarise(&cfg, (cfg.count, cfg.count), 1, ds, dr, t_end);
        assert!(e1.is_none() && e2.is_none());
        assert_eq!(
            (streamed.stalls, streamed.stall_every),
            (exact.stalls, exact.stall_every)
        );
        assert!(exact.stalls > 4_000, "{}", exact.stalls);
        let close = |a: Option<f64>, b: Option<f64>, rel: f64, what: &str| {
            let (a, b) = (a.unwrap(), b.unwrap());
            assert!(
                (a - b).abs() <= rel * b.abs() + 1e-9,
                "{what}: {a} vs exact {b}"
            );
        };
        let pm = (&streamed.per_message_us, &exact.per_message_us);
        assert_eq!(pm.0.n, pm.1.n);
        close(pm.0.mean, pm.1.mean, 1e-9, "per-message mean");
        close(pm.0.sd, pm.1.sd, 1e-6, "per-message sd");
        for (s, e) in [
            (streamed.one_way_us.unwrap(), exact.one_way_us.unwrap()),
            (streamed.recv_gap_us.unwrap(), exact.recv_gap_us.unwrap()),
        ] {
            assert_eq!(s.n, e.n);
            assert_eq!((s.min, s.max), (e.min, e.max));
            close(s.mean, e.mean, 1e-9, "mean");
            close(s.sd, e.sd, 1e-6, "sd");
            for (a, b) in [
                (s.p50, e.p50),
                (s.p90, e.p90),
                (s.p99, e.p99),
                (s.p999, e.p999),
            ] {
                close(a, b, 1e-3, "percentile");
            }
        }
    }

    #[test]
    fn threshold_is_first_clean_size_above_the_last_stall() {
        let run = |size, stalls| MsgsRun {
            size,
            stalls,
            ..MsgsRun::default()
        };
        assert_eq!(
            threshold(&[run(64, 3), run(128, 1), run(256, 0), run(512, 0)]),
            Some(256)
        );
        assert_eq!(threshold(&[run(64, 0), run(128, 0)]), None);
        assert_eq!(threshold(&[run(64, 0), run(128, 2)]), None);
    }
}
