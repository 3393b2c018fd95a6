//! Small summaries computed once a run is over (never in a timed loop): moments of a sample
//! set and percentiles of an HDR histogram. Values that do not exist (sd of one sample, the
//! percentiles of nothing) are `None`, serialized as null, never NaN.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Mean, standard deviation, extremes. Units are those of the field that holds it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Number of samples.
    pub n: u64,
    /// Arithmetic mean; null for no samples.
    pub mean: Option<f64>,
    /// Sample standard deviation (n-1); null for fewer than two samples.
    pub sd: Option<f64>,
    /// Smallest sample.
    pub min: Option<f64>,
    /// Largest sample.
    pub max: Option<f64>,
}

impl Summary {
    /// Summarises `values` in two passes over a cloned iterator: the sum (and extremes), then
    /// the squared deviations from the mean with the Chan–Golub–LeVeque correction term
    /// (m2 = Σd² − (Σd)²/n). As accurate as Welford's one-pass update (results differ only by
    /// rounding), without its division per sample in a dependency chain, which made it the
    /// slowest step of a 100,000-message summary.
    pub fn of<I>(values: I) -> Self
    where
        I: IntoIterator<Item = f64>,
        I::IntoIter: Clone,
    {
        let values = values.into_iter();
        let (mut n, mut sum) = (0u64, 0.0f64);
        let (mut min, mut max) = (f64::INFINITY, f64::NEG_INFINITY);
        for v in values.clone() {
            n += 1;
            sum += v;
            min = min.min(v);
            max = max.max(v);
        }
        if n == 0 {
            return Self::default();
        }
        let mean = sum / n as f64;
        let (sum_d, sum_d2) = values.fold((0.0f64, 0.0f64), |(s, s2), v| {
            let d = v - mean;
            (s + d, s2 + d * d)
        });
        let m2 = (sum_d2 - sum_d * sum_d / n as f64).max(0.0);
        Self {
            n,
            mean: Some(mean),
            sd: (n > 1).then(|| (m2 / (n - 1) as f64).sqrt()),
            min: Some(min),
            max: Some(max),
        }
    }
}

/// Latency percentiles in µs from a histogram of nanoseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    /// Samples in the histogram.
    pub n: u64,
    /// Smallest, µs.
    pub min: Option<f64>,
    /// Mean, µs.
    pub mean: Option<f64>,
    /// Median, µs.
    pub p50: Option<f64>,
    /// 90th percentile, µs.
    pub p90: Option<f64>,
    /// 99th percentile, µs.
    pub p99: Option<f64>,
    /// 99.9th percentile, µs.
    pub p999: Option<f64>,
    /// 99.99th percentile, µs.
    pub p9999: Option<f64>,
    /// Largest, µs.
    pub max: Option<f64>,
}

impl Percentiles {
    /// Reads percentiles from `h` (recorded in ns) and reports them in µs.
    pub fn from_ns(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return Self::default();
        }
        let us = |ns: u64| Some(ns as f64 / 1000.0);
        Self {
            n: h.len(),
            min: us(h.min()),
            mean: Some(h.mean() / 1000.0),
            p50: us(h.value_at_quantile(0.5)),
            p90: us(h.value_at_quantile(0.9)),
            p99: us(h.value_at_quantile(0.99)),
            p999: us(h.value_at_quantile(0.999)),
            p9999: us(h.value_at_quantile(0.9999)),
            max: us(h.max()),
        }
    }
}

/// A histogram for nanosecond latencies from 1 ns to 1 hour at 3 significant digits, allocated
/// once up front so recording never allocates.
pub fn latency_histogram() -> Histogram<u64> {
    #[allow(clippy::expect_used)]
    Histogram::new_with_bounds(1, 3_600_000_000_000, 3)
        .expect("constant bounds 1..3.6e12 at 3 sig. figures are valid")
}

/// Moments and exact percentiles of a sample set (selected post-run), in the caller's unit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Dist {
    /// Number of samples.
    pub n: u64,
    /// Mean.
    pub mean: Option<f64>,
    /// Sample standard deviation.
    pub sd: Option<f64>,
    /// Smallest.
    pub min: Option<f64>,
    /// Median (nearest rank).
    pub p50: Option<f64>,
    /// 90th percentile (nearest rank).
    pub p90: Option<f64>,
    /// 99th percentile (nearest rank).
    pub p99: Option<f64>,
    /// 99.9th percentile (nearest rank).
    pub p999: Option<f64>,
    /// Largest.
    pub max: Option<f64>,
}

/// The quantiles [`Dist`] reports, in increasing order.
const DIST_QUANTILES: [f64; 4] = [0.5, 0.9, 0.99, 0.999];

impl Dist {
    /// Summarises `values`, reordering them in place: the nearest-rank percentiles are found
    /// by selection (O(n); several times faster than sorting 100,000 values) under
    /// [`f64::total_cmp`], so they equal those of a full sort bit for bit.
    pub fn of(values: &mut [f64]) -> Self {
        let s = Summary::of(values.iter().copied());
        let n = values.len();
        let ranks = DIST_QUANTILES.map(|p| ((p * n as f64).ceil() as usize).clamp(1, n.max(1)) - 1);
        let q = select_ranks(values, ranks);
        Self {
            n: s.n,
            mean: s.mean,
            sd: s.sd,
            min: s.min,
            p50: q[0],
            p90: q[1],
            p99: q[2],
            p999: q[3],
            max: s.max,
        }
    }
}

/// A [`Dist`] built one value at a time, for series too long to hold (a long msgs run's
/// stamps stream back from a file). n, mean, sd, min and max are exact (the sums are shifted
/// by the first value, so the variance does not cancel); the percentiles come from an HDR
/// histogram at 3 significant digits, within 0.1 % of the exact nearest rank. Values are
/// added in ns; the [`Dist`] is in µs, as [`Dist::of`]'s callers report.
#[derive(Debug, Clone)]
pub struct NsDist {
    hist: Histogram<u64>,
    n: u64,
    shift: f64,
    sum: f64,
    sum2: f64,
    min: u64,
    max: u64,
}

impl Default for NsDist {
    fn default() -> Self {
        Self {
            hist: latency_histogram(),
            n: 0,
            shift: 0.0,
            sum: 0.0,
            sum2: 0.0,
            min: u64::MAX,
            max: 0,
        }
    }
}

impl NsDist {
    /// Adds one value, ns (values past an hour count as an hour in the percentiles only).
    pub fn add(&mut self, ns: u64) {
        if self.n == 0 {
            self.shift = ns as f64;
        }
        self.n += 1;
        let d = ns as f64 - self.shift;
        self.sum += d;
        self.sum2 += d * d;
        self.min = self.min.min(ns);
        self.max = self.max.max(ns);
        self.hist.saturating_record(ns);
    }

    /// The value at quantile `q` (0 to 1) so far, µs, within 0.1 %; `None` before any value.
    pub fn quantile_us(&self, q: f64) -> Option<f64> {
        (self.n > 0).then(|| self.hist.value_at_quantile(q).clamp(self.min, self.max) as f64 / 1e3)
    }

    /// The distribution so far, µs.
    pub fn dist(&self) -> Dist {
        if self.n == 0 {
            return Dist::default();
        }
        let n = self.n as f64;
        let mean_d = self.sum / n;
        let m2 = (self.sum2 - self.sum * mean_d).max(0.0);
        let us = |ns: u64| ns as f64 / 1e3;
        let at = |q: f64| self.quantile_us(q);
        Dist {
            n: self.n,
            mean: Some((self.shift + mean_d) / 1e3),
            sd: (self.n > 1).then(|| (m2 / (n - 1.0)).sqrt() / 1e3),
            min: Some(us(self.min)),
            p50: at(0.5),
            p90: at(0.9),
            p99: at(0.99),
            p999: at(0.999),
            max: Some(us(self.max)),
        }
    }
}

/// The values of 0-based `ranks` (non-decreasing) in the total order of `values`, found by
/// successive `select_nth_unstable_by` calls, each on the part right of the previous rank;
/// `None` for ranks past the end. Equal keys under `total_cmp` are identical bits, so the
/// answer is exactly what indexing a sorted copy would give.
fn select_ranks<const K: usize>(values: &mut [f64], ranks: [usize; K]) -> [Option<f64>; K] {
    let mut out = [None; K];
    let mut done = 0usize; // values[..done] hold the `done` smallest, in place
    let mut last: Option<f64> = None;
    for (slot, &r) in out.iter_mut().zip(&ranks) {
        if r >= values.len() {
            break;
        }
        if r + 1 == done {
            *slot = last;
            continue;
        }
        let start = done.min(r);
        let (_, v, _) = values[start..].select_nth_unstable_by(r - start, f64::total_cmp);
        last = Some(*v);
        *slot = last;
        done = r + 1;
    }
    out
}

/// Median of a slice by selection on a copy (post-run only); equal to the sorted median.
pub fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    let m = v.len() / 2;
    let (below, mid, _) = v.select_nth_unstable_by(m, f64::total_cmp);
    let mid = *mid;
    if values.len() % 2 == 1 {
        return Some(mid);
    }
    // Everything below the middle is <= it; the largest of those is the sorted v[m - 1].
    below
        .iter()
        .copied()
        .max_by(f64::total_cmp)
        .map(|lo| (lo + mid) / 2.0)
}

/// Ratio that is `None` instead of NaN/inf when the denominator is zero.
pub fn ratio(num: f64, den: f64) -> Option<f64> {
    (den > 0.0 && num.is_finite()).then(|| num / den)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_matches_hand_computation() {
        let s = Summary::of([2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]);
        assert_eq!(s.n, 8);
        assert_eq!(s.mean, Some(5.0));
        let sd = s.sd.expect("sd");
        assert!((sd - 2.138_089_935).abs() < 1e-6, "{sd}");
        assert_eq!((s.min, s.max), (Some(2.0), Some(9.0)));
    }

    /// Far from zero, a naive Σx² − (Σx)²/n loses every digit; the two-pass form keeps them.
    #[test]
    fn summary_is_stable_far_from_zero() {
        let pattern = |i: u32| f64::from(i % 1000);
        let near = Summary::of((0..100_000).map(pattern));
        let far = Summary::of((0..100_000).map(|i| 1e9 + pattern(i)));
        let (sd_near, sd_far) = (near.sd.expect("sd"), far.sd.expect("sd"));
        // sd of 0..999 repeated: sqrt((1000² − 1)/12 · n/(n − 1)).
        let exact = ((1_000_000.0f64 - 1.0) / 12.0 * 100_000.0 / 99_999.0).sqrt();
        assert!(
            (sd_near - exact).abs() < 1e-9 * exact,
            "{sd_near} vs {exact}"
        );
        assert!((sd_far - exact).abs() < 1e-6 * exact, "{sd_far} vs {exact}");
        assert_eq!(far.mean, Some(1e9 + 499.5));
        assert_eq!((far.min, far.max), (Some(1e9), Some(1e9 + 999.0)));
    }

    #[test]
    fn empty_and_single_give_nulls_not_nan() {
        assert_eq!(Summary::of([]).mean, None);
        let one = Summary::of([3.0]);
        assert_eq!((one.mean, one.sd), (Some(3.0), None));
        let json = serde_json::to_string(&one).expect("json");
        assert!(json.contains("\"sd\":null"), "{json}");
        assert_eq!(ratio(1.0, 0.0), None);
    }

    #[test]
    fn percentiles_in_microseconds() {
        let mut h = latency_histogram();
        for v in 1..=1000u64 {
            h.record(v * 1000).expect("record");
        }
        let p = Percentiles::from_ns(&h);
        assert_eq!(p.n, 1000);
        let p50 = p.p50.expect("p50");
        assert!((p50 - 500.0).abs() <= 1.0, "{p50}");
        let max = p.max.expect("max");
        assert!((max - 1000.0).abs() <= 1.0, "{max}");
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
    }

    #[test]
    fn dist_nearest_rank() {
        let mut v: Vec<f64> = (1..=100).rev().map(f64::from).collect();
        let d = Dist::of(&mut v);
        assert_eq!(
            (d.p50, d.p90, d.p99, d.max),
            (Some(50.0), Some(90.0), Some(99.0), Some(100.0))
        );
        assert_eq!(Dist::of(&mut []).p50, None);
    }

    /// Nearest-rank percentiles and medians as a stable sort gives them, on data with ties,
    /// signed zeros and NaN, for sizes around the rank boundaries.
    #[test]
    fn selection_equals_sorting_bit_for_bit() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        let sorted_q = |v: &[f64], p: f64| {
            let rank = ((p * v.len() as f64).ceil() as usize).clamp(1, v.len());
            v[rank - 1].to_bits()
        };
        for n in [
            1usize, 2, 3, 9, 10, 11, 999, 1000, 1001, 1999, 2000, 100_000,
        ] {
            let mut v: Vec<f64> = (0..n)
                .map(|_| match rng.random_range(0..20) {
                    0 => -0.0,
                    1 => 0.0,
                    2 => f64::NAN,
                    3 => -f64::INFINITY,
                    _ => f64::from(rng.random_range(0..50u32)) * 0.25,
                })
                .collect();
            let mut reference = v.clone();
            reference.sort_by(f64::total_cmp);
            let med = median(&v).expect("median");
            let d = Dist::of(&mut v);
            let got = [d.p50, d.p90, d.p99, d.p999].map(|x| x.expect("quantile").to_bits());
            let want = [0.5, 0.9, 0.99, 0.999].map(|p| sorted_q(&reference, p));
            assert_eq!(got, want, "n = {n}");
            let m = n / 2;
            let want_med = if n % 2 == 1 {
                reference[m]
            } else {
                (reference[m - 1] + reference[m]) / 2.0
            };
            assert_eq!(med.to_bits(), want_med.to_bits(), "n = {n}");
        }
    }
}
