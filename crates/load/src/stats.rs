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
    /// Summarises `values` (Welford's one-pass algorithm, numerically stable).
    pub fn of(values: impl IntoIterator<Item = f64>) -> Self {
        let (mut n, mut mean, mut m2) = (0u64, 0.0f64, 0.0f64);
        let (mut min, mut max) = (f64::INFINITY, f64::NEG_INFINITY);
        for v in values {
            n += 1;
            let d = v - mean;
            mean += d / n as f64;
            m2 += d * (v - mean);
            min = min.min(v);
            max = max.max(v);
        }
        if n == 0 {
            return Self::default();
        }
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

/// Moments and exact percentiles of a sample set (sorted post-run), in the caller's unit.
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

impl Dist {
    /// Summarises `values`, sorting them in place (nearest-rank percentiles).
    pub fn of(values: &mut [f64]) -> Self {
        let s = Summary::of(values.iter().copied());
        values.sort_by(f64::total_cmp);
        let q = |p: f64| -> Option<f64> {
            if values.is_empty() {
                return None;
            }
            let rank = ((p * values.len() as f64).ceil() as usize).clamp(1, values.len());
            Some(values[rank - 1])
        };
        Self {
            n: s.n,
            mean: s.mean,
            sd: s.sd,
            min: s.min,
            p50: q(0.5),
            p90: q(0.9),
            p99: q(0.99),
            p999: q(0.999),
            max: s.max,
        }
    }
}

/// Median of a slice by sorting a copy (post-run only).
pub fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    Some(if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    })
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
}
