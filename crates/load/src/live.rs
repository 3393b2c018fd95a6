//! Live interval figures (`--ndjson`) for msgs, rr and crr, the way stream has them: a
//! reporter thread wakes once per interval, reads counters the timed loop publishes through
//! atomics (relaxed stores of values the loop keeps anyway, so the loop takes no lock, makes no
//! call and allocates nothing for it), and hands one line to a callback.
//!
//! The reporter exists only when a callback is given; without one the workloads run exactly as
//! before. It sleeps with `park_timeout` and is woken by `unpark` when the work ends, so it
//! costs one wake-up per interval and never delays the end of a run. A run shorter than one
//! interval yields no interval line (its result says it all); a longer one ends with a line for
//! the partial last interval, as stream's does.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use crate::clock::now_ns;

/// Where one interval lies, as in stream's interval objects.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Span {
    /// Interval number from 0.
    pub index: u32,
    /// Start, s since the reporter started.
    pub start_s: f64,
    /// End, s since the reporter started.
    pub end_s: f64,
}

impl Span {
    /// `count / (end_s - start_s)`, or `None` for an empty interval.
    pub fn rate(&self, count: u64) -> Option<f64> {
        crate::stats::ratio(count as f64, self.end_s - self.start_s)
    }
}

/// A callback that receives each interval of a workload as it closes (the argument is the
/// workload's own interval type, serialised by the CLI as `{"type":"interval","interval":..}`).
pub type OnLive<'a, T> = Option<&'a (dyn Fn(&T) + Sync)>;

/// Shortest reporting interval, ms (as stream's `--interval`).
pub const MIN_INTERVAL_MS: u64 = 10;

/// A counter the timed loop owns and the reporter reads: the loop keeps the value in a local
/// and publishes it with a relaxed store (a plain move on x86 and ARM), never a read-modify-write.
#[derive(Debug, Default)]
pub struct Published(AtomicU64);

impl Published {
    /// Publishes `v` (single writer).
    #[inline]
    pub fn set(&self, v: u64) {
        self.0.store(v, Ordering::Relaxed);
    }

    /// The last published value.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// The largest value seen since the reporter last took it. The writer pays a read per value
/// and a read-modify-write only when a new maximum appears (rare after the first few values).
#[derive(Debug, Default)]
pub struct MaxSince(AtomicU64);

impl MaxSince {
    /// Offers `v`.
    #[inline]
    pub fn offer(&self, v: u64) {
        if v > self.0.load(Ordering::Relaxed) {
            self.0.fetch_max(v, Ordering::Relaxed);
        }
    }

    /// The maximum since the last `take` (0 if nothing was offered), and a reset.
    pub fn take(&self) -> u64 {
        self.0.swap(0, Ordering::Relaxed)
    }
}

/// Runs `work` on the calling thread; when `report` is given, a reporter thread calls it once
/// per `interval_ms` with the closing interval (see the module doc for the last one). The
/// reporter is stopped and joined before this returns, also when `work` panics.
pub fn with_reporter<R, F>(interval_ms: u64, report: Option<F>, work: impl FnOnce() -> R) -> R
where
    F: FnMut(Span) + Send,
{
    let Some(report) = report else {
        return work();
    };
    let stop = AtomicBool::new(false);
    let t0 = now_ns();
    let step = interval_ms.max(MIN_INTERVAL_MS) * 1_000_000;
    std::thread::scope(|s| {
        let reporter = s.spawn(|| ticker(t0, step, &stop, report));
        let _stop = StopOnDrop {
            stop: &stop,
            thread: reporter.thread(),
        };
        work()
    })
}

/// Sets the stop flag and wakes the reporter when dropped (also while unwinding).
struct StopOnDrop<'a> {
    stop: &'a AtomicBool,
    thread: &'a std::thread::Thread,
}

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        self.thread.unpark();
    }
}

/// The reporter loop: one call per full interval until stopped, then one for the partial last
/// interval if any full one was reported.
fn ticker(t0: u64, step: u64, stop: &AtomicBool, mut report: impl FnMut(Span)) {
    let secs = |ns: u64| (ns - t0) as f64 / 1e9;
    let (mut index, mut start) = (0u32, t0);
    loop {
        let tick = t0 + (u64::from(index) + 1) * step;
        loop {
            if stop.load(Ordering::Acquire) {
                if index > 0 {
                    let end = now_ns().max(start);
                    if end > start {
                        report(Span {
                            index,
                            start_s: secs(start),
                            end_s: secs(end),
                        });
                    }
                }
                return;
            }
            let now = now_ns();
            if now >= tick {
                break;
            }
            std::thread::park_timeout(std::time::Duration::from_nanos(tick - now));
        }
        report(Span {
            index,
            start_s: secs(start),
            end_s: secs(tick),
        });
        index += 1;
        start = tick;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn reports_each_interval_then_the_partial_last() {
        let spans = Mutex::new(Vec::new());
        let counter = Published::default();
        let got = with_reporter(
            20,
            Some(|s: Span| {
                if let Ok(mut v) = spans.lock() {
                    v.push((s, counter.get()));
                }
            }),
            || {
                for i in 1..=5u64 {
                    counter.set(i);
                    std::thread::sleep(std::time::Duration::from_millis(11));
                }
                7
            },
        );
        assert_eq!(got, 7, "the work's value comes back");
        let spans = spans.into_inner().expect("lock");
        assert!(
            (2..=4).contains(&spans.len()),
            "~55 ms at 20 ms: 2 full intervals and a partial one, got {spans:?}"
        );
        for (k, (s, _)) in spans.iter().enumerate() {
            assert_eq!(s.index as usize, k);
            assert!(s.end_s > s.start_s, "{s:?}");
        }
        let (first, _) = spans[0];
        assert!(
            (first.end_s - 0.020).abs() < 1e-9,
            "ticks on the grid: {first:?}"
        );
        let (last, last_count) = spans[spans.len() - 1];
        assert!(last.end_s - last.start_s < 0.020 + 1e-9, "{last:?}");
        assert_eq!(last_count, 5, "the last line sees the final count");
        assert!(
            spans.windows(2).all(|w| w[0].1 <= w[1].1),
            "counts only grow: {spans:?}"
        );
    }

    #[test]
    fn a_short_run_has_no_interval_line_and_ends_at_once() {
        let calls = Mutex::new(0);
        let t = now_ns();
        with_reporter(
            10_000,
            Some(|_| {
                if let Ok(mut c) = calls.lock() {
                    *c += 1;
                }
            }),
            || (),
        );
        assert!(
            now_ns() - t < 100_000_000,
            "the reporter is woken, not waited for"
        );
        assert_eq!(*calls.lock().expect("lock"), 0);
    }

    #[test]
    fn max_since_resets_on_take() {
        let m = MaxSince::default();
        for v in [3, 9, 4] {
            m.offer(v);
        }
        assert_eq!(m.take(), 9);
        assert_eq!(m.take(), 0);
        m.offer(2);
        assert_eq!(m.take(), 2);
    }
}
