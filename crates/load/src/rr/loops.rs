//! rr's timed loops (closed and open) and what they record into: HDR histograms and raw
//! samples allocated — and touched — before the run, plus the counters a live reporter reads.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use hdrhistogram::Histogram;
use rand::{Rng, SeedableRng};

use super::{MAX_SAMPLES, RrConfig, RrSample};
use crate::clock::{now_ns, pace_until_ns};
use crate::live::{MaxSince, Published};
use crate::net::reason;
use crate::sockopt::rearm_quickack;
use crate::stats::latency_histogram;

/// Raw samples whose memory is written before the run (64 MiB): a first touch of a page inside
/// the timed loop is a page fault — on a VM also a fault in the hypervisor — that lands in the
/// latency of whichever transaction takes it. Runs longer than this fault lazily past it.
const PREFAULT_SAMPLES: usize = (64 << 20) / std::mem::size_of::<RrSample>();

/// What a live reporter reads while a point runs (published by the loop, never locked).
#[derive(Debug, Default)]
pub(crate) struct RrLive {
    /// Completed transactions.
    pub done: Published,
    /// Sum of their latencies, ns.
    pub sum_ns: Published,
    /// Largest latency since the reporter last looked, ns.
    pub max_ns: MaxSince,
}

/// Histograms, raw samples and live counters one point fills.
pub(super) struct Recorder<'a> {
    pub hist: Histogram<u64>,
    pub uncorrected: Option<Histogram<u64>>,
    pub samples: Vec<RrSample>,
    pub dropped: u64,
    live: Option<&'a RrLive>,
    n: u64,
    sum_ns: u64,
}

impl<'a> Recorder<'a> {
    pub fn new(expected: u64, open: bool, live: Option<&'a RrLive>) -> Self {
        let cap = expected.min(MAX_SAMPLES as u64) as usize;
        let mut samples = Vec::with_capacity(cap);
        // Touch the pages now (resize writes every slot), keep the capacity, start empty.
        samples.resize(cap.min(PREFAULT_SAMPLES), RrSample::default());
        samples.clear();
        Self {
            hist: latency_histogram(),
            uncorrected: open.then(latency_histogram),
            samples,
            dropped: 0,
            live,
            n: 0,
            sum_ns: 0,
        }
    }

    /// Records one transaction without allocating (samples past capacity are counted).
    #[inline]
    pub fn record(&mut self, s: RrSample) {
        let lat = s.done_ns.saturating_sub(s.intended_ns).max(1);
        let _ = self.hist.record(lat);
        if let Some(u) = &mut self.uncorrected {
            let _ = u.record(s.done_ns.saturating_sub(s.sent_ns).max(1));
        }
        if self.samples.len() < self.samples.capacity() {
            self.samples.push(s);
        } else {
            self.dropped += 1;
        }
        if let Some(live) = self.live {
            self.n += 1;
            self.sum_ns += lat;
            live.done.set(self.n);
            live.sum_ns.set(self.sum_ns);
            live.max_ns.offer(lat);
        }
    }
}

/// Closed loop with `depth` requests in flight; send stamps live in a fixed ring.
///
/// Per transaction: one read, one clock read, one write, then the recording. The next request
/// goes out before the finished one is recorded, so the recording overlaps the round trip
/// instead of lengthening it, and the response's arrival stamp doubles as the next request's
/// send stamp (with `--quickack`, whose setsockopt comes in between, a fresh stamp is taken).
pub(super) fn closed_loop(
    cfg: &RrConfig,
    mut data: &TcpStream,
    rec: &mut Recorder<'_>,
) -> (u64, Option<String>) {
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
        let finished = RrSample {
            intended_ns: ring[done as usize % depth],
            sent_ns: ring[done as usize % depth],
            done_ns: t,
        };
        done += 1;
        let mut cut = None;
        if issued < max_tx && t < deadline {
            ring[issued as usize % depth] = if cfg.opts.quickack { now_ns() } else { t };
            match data.write_all(&req) {
                Ok(()) => issued += 1,
                Err(e) => cut = Some(reason("sending a request", &e)),
            }
        }
        rec.record(finished);
        if cut.is_some() {
            return (done, cut);
        }
    }
    (done, None)
}

/// The open-loop schedule: offsets from the start, ns.
pub(super) fn schedule(cfg: &RrConfig) -> Vec<u64> {
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
pub(super) fn open_loop(
    cfg: &RrConfig,
    data: &TcpStream,
    rec: &mut Recorder<'_>,
) -> (u64, Option<String>) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorder_keeps_samples_and_publishes_live_counters() {
        let live = RrLive::default();
        let mut rec = Recorder::new(3, false, Some(&live));
        assert_eq!(rec.samples.capacity(), 3);
        for (sent, done) in [
            (100u64, 1_100u64),
            (2_000, 2_500),
            (3_000, 6_000),
            (7_000, 7_010),
        ] {
            rec.record(RrSample {
                intended_ns: sent,
                sent_ns: sent,
                done_ns: done,
            });
        }
        assert_eq!(rec.samples.len(), 3);
        assert_eq!(rec.dropped, 1, "past capacity: counted, not kept");
        assert_eq!(rec.hist.len(), 4, "the histogram sees every transaction");
        assert_eq!(live.done.get(), 4);
        assert_eq!(live.sum_ns.get(), 1_000 + 500 + 3_000 + 10);
        assert_eq!(live.max_ns.take(), 3_000);
    }
}
