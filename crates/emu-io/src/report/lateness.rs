//! Lateness accounting: how far behind its scheduled departure each frame actually left.
//!
//! A log-linear histogram (HDR-style: 16 linear sub-buckets per power of two, so any recorded
//! value is reported within +6.25 %) of `AtomicU64` buckets. One thread writes (plain
//! load + store, no locked RMW on the packet path), any thread reads a snapshot while it runs.
//! Preallocated; recording never allocates. Quantiles report the bucket's upper bound
//! (pessimistic), the maximum is exact.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::time::Nanos;

const SUB_BITS: u32 = 5;
const HALF: usize = 1 << (SUB_BITS - 1);
/// Buckets covering every u64 value.
const BUCKETS: usize = (64 - SUB_BITS as usize + 1) * HALF + HALF;

/// Bucket index of `v`.
fn index(v: u64) -> usize {
    if v < (1 << SUB_BITS) {
        return v as usize;
    }
    let msb = 63 - v.leading_zeros();
    let exp = msb - (SUB_BITS - 1);
    let mantissa = (v >> exp) as usize;
    exp as usize * HALF + mantissa
}

/// Largest value that falls in bucket `idx`.
fn upper_bound(idx: usize) -> u64 {
    if idx < (1 << SUB_BITS) {
        return idx as u64;
    }
    let exp = (idx / HALF - 1) as u32;
    let mantissa = (idx % HALF + HALF) as u64;
    let ub = (u128::from(mantissa + 1) << exp) - 1;
    u64::try_from(ub).unwrap_or(u64::MAX)
}

/// A histogram's summary, and the lateness past which a frame counts as late in it (the
/// types every snapshot carries, `tcplab_results::emulator`).
pub use tcplab_results::emulator::{LATE_LIMIT_NS, LatenessSummary};

fn bump(a: &AtomicU64, n: u64) {
    a.store(a.load(Relaxed).wrapping_add(n), Relaxed);
}

/// Lateness distribution written by one thread, readable by all.
#[derive(Debug)]
pub struct LatenessHistogram {
    buckets: Box<[AtomicU64]>,
    count: AtomicU64,
    sum: AtomicU64,
    max: AtomicU64,
    /// Frames more than [`LATE_LIMIT_NS`] late: exact, and it subtracts, so a caller holding
    /// two summaries can judge the frames between them (quantiles of a cumulative histogram
    /// cannot be subtracted).
    late: AtomicU64,
}

impl Default for LatenessHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl LatenessHistogram {
    /// An empty histogram (about 8 KiB).
    pub fn new() -> Self {
        Self {
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            count: AtomicU64::new(0),
            sum: AtomicU64::new(0),
            max: AtomicU64::new(0),
            late: AtomicU64::new(0),
        }
    }

    /// Records one frame's lateness. Single writer only.
    pub fn record(&self, late: Nanos) {
        if let Some(b) = self.buckets.get(index(late)) {
            bump(b, 1);
        }
        bump(&self.count, 1);
        bump(&self.sum, late);
        if late > self.max.load(Relaxed) {
            self.max.store(late, Relaxed);
        }
        if late > LATE_LIMIT_NS {
            bump(&self.late, 1);
        }
    }

    /// Records the frames of one batch call that ran from `start` to `end`, given their
    /// scheduled departures in the order they were handed over ([`handoff_time`]).
    pub fn record_batch(
        &self,
        start: Nanos,
        end: Nanos,
        departures: impl ExactSizeIterator<Item = Nanos>,
    ) {
        self.record_batch_marked(None, start, end, departures.map(|at| (at, false)));
    }

    /// [`Self::record_batch`] for `(departure, marked)` pairs: every frame is recorded here, a
    /// marked one also in `marked` (a direction's lone frames, the probes whose lateness a
    /// bulk flow's frames would hide in this histogram's quantiles).
    pub fn record_batch_marked(
        &self,
        marked: Option<&Self>,
        start: Nanos,
        end: Nanos,
        frames: impl ExactSizeIterator<Item = (Nanos, bool)>,
    ) {
        let n = frames.len();
        for (i, (at, mark)) in frames.enumerate() {
            let late = handoff_time(start, end, i, n).saturating_sub(at);
            self.record(late);
            if let Some(m) = marked.filter(|_| mark) {
                m.record(late);
            }
        }
    }

    /// Summary of what was recorded so far.
    pub fn summary(&self) -> LatenessSummary {
        let counts: Vec<u64> = self.buckets.iter().map(|b| b.load(Relaxed)).collect();
        let total: u64 = counts.iter().sum();
        let max = self.max.load(Relaxed);
        let quantile = |q: f64| -> u64 {
            if total == 0 {
                return 0;
            }
            let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
            let mut seen = 0;
            for (idx, c) in counts.iter().enumerate() {
                seen += c;
                if seen >= rank {
                    return upper_bound(idx).min(max);
                }
            }
            max
        };
        LatenessSummary {
            count: total,
            mean_ns: self.sum.load(Relaxed).checked_div(total).unwrap_or(0),
            p50_ns: quantile(0.50),
            p99_ns: quantile(0.99),
            p999_ns: quantile(0.999),
            max_ns: max,
            late_count: self.late.load(Relaxed),
            sum_ns: self.sum.load(Relaxed),
        }
    }
}

/// When frame `i` (0-based) of a batch of `n` handed to the kernel in one call that ran from
/// `start` to `end` can be taken to have left. The kernel passes a batch's frames to the driver
/// one after another inside the call, and on veth each hand-off also runs the receiving
/// host's stack for that frame before the next one goes: a 64-frame `sendmmsg` took 170-600 µs
/// under a bulk TCP flow (emu-io-bench.md, "why a bulk flow makes the emulator late"). Stamping every frame with `start` understated
/// the lateness of a batch's last frames by up to that; spreading the call evenly over its
/// frames puts the first at `start` and the last one frame's share before `end`.
pub fn handoff_time(start: Nanos, end: Nanos, i: usize, n: usize) -> Nanos {
    if n <= 1 || end <= start {
        return start;
    }
    // The per-frame share is rounded down to whole ns (an error of at most `i` ns), so the
    // product never exceeds the span and cannot overflow.
    let share = (end - start) / n as u64;
    start + share * i.min(n - 1) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_call_is_spread_evenly_over_its_frames() {
        // 4 frames in a call of 400 ns: they left at 0, 100, 200, 300 ns into it.
        let at: Vec<_> = (0..4).map(|i| handoff_time(1_000, 1_400, i, 4)).collect();
        assert_eq!(at, [1_000, 1_100, 1_200, 1_300]);
        // One frame, or a clock that did not move: the call's start.
        assert_eq!(handoff_time(1_000, 9_000, 0, 1), 1_000);
        assert_eq!(handoff_time(1_000, 1_000, 3, 4), 1_000);
        assert_eq!(
            handoff_time(1_000, 900, 3, 4),
            1_000,
            "a clock going back is ignored"
        );
        // An index past the batch is clamped to its last frame.
        assert_eq!(handoff_time(0, 64_000, 99, 64), 63_000);
        // A span of the whole clock range does not overflow.
        let max = u64::MAX;
        let exact = (u128::from(max) * 3 / 4) as u64;
        assert!(
            exact - handoff_time(0, max, 3, 4) <= 3,
            "no overflow, within i ns"
        );
    }

    #[test]
    fn buckets_are_contiguous_and_bounds_are_tight() {
        let mut prev = 0;
        for v in (0..100_000_u64).chain([u64::MAX / 3, u64::MAX]) {
            let i = index(v);
            assert!(i >= prev && i < BUCKETS, "v {v} index {i}");
            prev = i;
            let ub = upper_bound(i);
            assert!(ub >= v, "v {v} above its bucket bound {ub}");
            assert!(
                (ub - v) as f64 <= v as f64 / 16.0 + 1.0,
                "v {v} bound {ub} too loose"
            );
        }
        assert_eq!(upper_bound(index(31)), 31);
        assert_eq!(index(32), 32);
        assert_eq!(upper_bound(32), 33);
    }

    #[test]
    fn quantiles_and_max_of_a_known_distribution() {
        let h = LatenessHistogram::new();
        // 990 frames 1-2 µs late, 9 at 50 µs, one at 3 ms.
        for i in 0..990 {
            h.record(1_000 + i);
        }
        for _ in 0..9 {
            h.record(50_000);
        }
        h.record(3_000_000);
        let s = h.summary();
        assert_eq!(s.count, 1_000);
        assert_eq!(s.max_ns, 3_000_000);
        assert!((1_000..=2_100).contains(&s.p99_ns), "p99 {}", s.p99_ns);
        assert!(
            (50_000..=53_200).contains(&s.p999_ns),
            "p99.9 {}",
            s.p999_ns
        );
        assert!((1_400..=1_600).contains(&s.p50_ns), "p50 {}", s.p50_ns);
        let expected_mean = (990 * 1_000 + 989 * 990 / 2 + 9 * 50_000 + 3_000_000) / 1_000;
        assert_eq!(s.mean_ns, expected_mean);
        assert_eq!(
            s.sum_ns,
            990 * 1_000 + 989 * 990 / 2 + 9 * 50_000 + 3_000_000
        );
        assert_eq!(s.late_count, 1, "only the 3 ms frame is past 100 µs");
    }

    #[test]
    fn late_frames_are_counted_exactly_at_the_limit() {
        let h = LatenessHistogram::new();
        h.record(LATE_LIMIT_NS);
        assert_eq!(
            h.summary().late_count,
            0,
            "exactly at the limit is not late"
        );
        h.record(LATE_LIMIT_NS + 1);
        h.record_batch(0, 0, [0_u64, 0].into_iter());
        h.record(u64::MAX);
        assert_eq!(h.summary().late_count, 2);
    }

    #[test]
    fn a_batch_records_each_frame_against_its_share_of_the_call() {
        let h = LatenessHistogram::new();
        // Due at 0, 0, 150, 900; the call ran 1_000..1_400: handed over at 1000, 1100, 1200, 1300.
        h.record_batch(1_000, 1_400, [0, 0, 150, 900].into_iter());
        let s = h.summary();
        assert_eq!(s.count, 4);
        assert_eq!(s.max_ns, 1_100);
        assert_eq!(s.mean_ns, (1_000 + 1_100 + 1_050 + 400) / 4);
    }

    #[test]
    fn marked_frames_are_also_recorded_on_their_own() {
        let all = LatenessHistogram::new();
        let lone = LatenessHistogram::new();
        // Handed over at 1000, 1100, 1200, 1300: late 1000, 1100, 1050, 400; the second and
        // fourth are marked.
        let frames = [(0, false), (0, true), (150, false), (900, true)];
        all.record_batch_marked(Some(&lone), 1_000, 1_400, frames.into_iter());
        let (a, l) = (all.summary(), lone.summary());
        assert_eq!((a.count, a.max_ns), (4, 1_100));
        assert_eq!((l.count, l.max_ns, l.mean_ns), (2, 1_100, 750));
        all.record_batch_marked(None, 0, 0, [(0, true)].into_iter());
        assert_eq!(
            (all.summary().count, lone.summary().count),
            (5, 2),
            "no second histogram, nothing else recorded"
        );
    }

    #[test]
    fn empty_summary_is_zero() {
        assert_eq!(
            LatenessHistogram::new().summary(),
            LatenessSummary::default()
        );
    }
}
