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
//! The timed loops only write into preallocated arrays; summaries come after. With a live
//! callback ([`run_client_live`], `--ndjson`) a reporter thread prints one [`MsgsInterval`] per
//! interval from the count the send loop publishes with one relaxed store per message (a plain
//! move, taken with and without a reporter so runs compare; see [`crate::live`]).

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::time::Duration;

use crate::clock::{ThreadTimes, now_ns, pace_until_ns};
use crate::error::Result;
use crate::live::{OnLive, Published, Span, with_reporter};
use crate::net::reason;
use crate::proto::{ServerReport, TestSpec};
use crate::server::ServerCtx;
use crate::session::FoldIn;
use crate::session::{RunMeta, Session};
use crate::sockopt::{read_back, rearm_quickack};
use crate::stats::{Dist, Summary};
pub use tcplab_results::msgs::*;

/// Runs msgs against the server at `target` (one run per size), never failing after the first
/// run has started: later faults give a partial result.
pub fn run_client(
    cfg: &MsgsConfig,
    target: SocketAddr,
    facts: serde_json::Value,
) -> Result<MsgsResult> {
    run_client_live(cfg, target, facts, 1_000, None)
}

/// [`run_client`], and `on_interval` sees each `interval_ms` of every run as it closes.
pub fn run_client_live(
    cfg: &MsgsConfig,
    target: SocketAddr,
    facts: serde_json::Value,
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
    let mut session = Session::open(target, TestSpec::Msgs(cfg.clone()), timeout)?;
    let mut data = session.connect_data(&cfg.opts)?;
    if meta.options.is_none() {
        meta.options = Some(read_back(data.as_raw_fd(), &cfg.opts));
    }
    let setup_ns = now_ns() - t_setup;
    let n = cfg.count as usize;
    let mut send_ns = if cfg.timestamps {
        vec![0u64; n]
    } else {
        Vec::new()
    };
    let buf = vec![0x5au8; cfg.size as usize];
    let times0 = ThreadTimes::now();
    let progress = Published::default();
    let reporter = on_interval.map(|cb| interval_reporter(cfg.size, &progress, cb));
    let (sent, t0, t_end, cut) = with_reporter(interval_ms, reporter, || {
        send_loop(cfg, &mut data, &buf, &mut send_ns, &progress)
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
    let drained = report.recv_ns.last().map_or(t_end, |&r| r.max(t_end));
    meta.absorb(&report);
    send_ns.truncate(sent as usize);
    let received = report.transactions;
    let mut run = summarise(
        cfg,
        (sent, received),
        t_end.saturating_sub(t0),
        send_ns,
        report.recv_ns,
        t_end,
    );
    run.phases = Phases {
        setup_ns,
        report_ns: t_report.saturating_sub(drained),
        summary_ns: now_ns() - t_report,
    };
    Ok(run)
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
    send_ns: &mut [u64],
    progress: &Published,
) -> (u64, u64, u64, Option<String>) {
    let fd = data.as_raw_fd();
    let gap_ns = cfg.gap_us * 1000;
    let split = buf.len() / 2;
    let mut reply = [0u8; 1];
    let t0 = now_ns();
    for i in 0..cfg.count as usize {
        if gap_ns > 0 {
            pace_until_ns(t0 + i as u64 * gap_ns);
        }
        if let Some(slot) = send_ns.get_mut(i) {
            *slot = now_ns();
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

fn summarise(
    cfg: &MsgsConfig,
    (sent, received): (u64, u64),
    total_ns: u64,
    send_ns: Vec<u64>,
    recv_ns: Vec<u64>,
    t_end: u64,
) -> MsgsRun {
    let total_s = total_ns as f64 / 1e9;
    let per_message_us = if send_ns.is_empty() {
        let mean = crate::stats::ratio(total_s * 1e6, sent as f64);
        Summary {
            n: sent,
            mean,
            ..Summary::default()
        }
    } else {
        let next = send_ns
            .iter()
            .skip(1)
            .copied()
            .chain(std::iter::once(t_end));
        Summary::of(
            send_ns
                .iter()
                .zip(next)
                .map(|(a, b)| b.saturating_sub(*a) as f64 / 1e3),
        )
    };
    let (one_way_us, recv_gap_us, stalls, stall_every) = if recv_ns.is_empty() || send_ns.is_empty()
    {
        (None, None, 0, None)
    } else {
        let (one_way, (gaps, stalls, every)) = both_dists(&send_ns, &recv_ns, cfg.stall_ms * 1e3);
        (Some(one_way), Some(gaps), stalls, every)
    };
    MsgsRun {
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
    }
}

/// The one-way delay and receive-gap summaries, on two threads: they are independent and each
/// takes a millisecond or more on 100,000 values (both here, in turn, if no thread starts).
fn both_dists(send_ns: &[u64], recv_ns: &[u64], stall_us: f64) -> (Dist, (Dist, u64, Option<f64>)) {
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
fn gap_dist(recv_ns: &[u64], stall_us: f64) -> (Dist, u64, Option<f64>) {
    let mut us: Vec<f64> = recv_ns
        .windows(2)
        .map(|w| w[1].saturating_sub(w[0]) as f64 / 1e3)
        .collect();
    let (stalls, every) = stall_stats(&us, stall_us);
    (Dist::of(&mut us), stalls, every)
}

/// Counts gaps above `limit_us` and the median spacing (in messages) between them.
fn stall_stats(gaps_us: &[f64], limit_us: f64) -> (u64, Option<f64>) {
    let idx: Vec<usize> = gaps_us
        .iter()
        .enumerate()
        .filter(|(_, g)| **g > limit_us)
        .map(|(i, _)| i)
        .collect();
    let spacing: Vec<f64> = idx.windows(2).map(|w| (w[1] - w[0]) as f64).collect();
    (idx.len() as u64, crate::stats::median(&spacing))
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
    let times0 = ThreadTimes::now();
    let t0 = now_ns();
    let mut recv_ns = if cfg.timestamps {
        vec![0u64; cfg.count as usize]
    } else {
        Vec::new()
    };
    let (received, bytes, cut) = recv_loop(cfg, &mut data, &mut recv_ns);
    report.elapsed_ns = now_ns() - t0;
    report.set_times(ThreadTimes::now().since(times0));
    report.bytes_received = bytes;
    report.transactions = received;
    if let Some(why) = cut {
        report.complete = false;
        report.incomplete_reason = Some(why);
    }
    recv_ns.truncate(received as usize);
    report.recv_ns = recv_ns;
    report
}

/// The receiver's timed loop: one stamp per read, given to every message that read completed.
fn recv_loop(
    cfg: &MsgsConfig,
    data: &mut TcpStream,
    recv_ns: &mut [u64],
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
            if let Some(slot) = recv_ns.get_mut(done as usize) {
                *slot = ts;
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
