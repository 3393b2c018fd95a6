//! The probes split into phases, and the inflation derived from them — pure: samples and the
//! measured edges of the load come in as arguments, so every rule here is tested exactly on
//! synthetic samples.
//!
//! A probe belongs to the phase in which it was *due* (its `intended_ns`, the schedule's
//! instant), not the one in which it was answered: a probe sent just before the load ends and
//! answered after it measured the loaded queue, and the schedule does not depend on the
//! latency being measured, so the phases hold the probes the schedule put there.
//!
//! Windows are half-open, `[start_ns, end_ns)`, in CLOCK_MONOTONIC ns:
//! - `before`: the `--before` span that ends where the load started (later if the probes
//!   started later);
//! - `during`: from the instant the load started to the instant it ended, as measured (the
//!   queue's drain after the senders stop is load, since its bytes still queue ahead of the
//!   probes);
//! - `after`: the `--after` span from the load's end (shorter if the probes ended first).
//!
//! Probes outside every window (set-up moments before `before`, the tail after `after`) are
//! counted, not placed, so each phase covers what it says and the counts still add up.

use serde::{Deserialize, Serialize};

use crate::rr::RrSample;
use crate::stats::{Percentiles, latency_histogram, ratio};

/// A phase of an rrul run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PhaseName {
    /// Idle path, before the load.
    #[default]
    Before,
    /// While the bulk load runs (including its queue's drain).
    During,
    /// Idle path again, after the load.
    After,
}

impl PhaseName {
    /// The three phases in time order.
    pub const ALL: [PhaseName; 3] = [Self::Before, Self::During, Self::After];

    /// The name as in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Before => "before",
            Self::During => "during",
            Self::After => "after",
        }
    }

    /// 0, 1, 2 in time order (the `phase` column of the samples file).
    pub fn index(self) -> usize {
        match self {
            Self::Before => 0,
            Self::During => 1,
            Self::After => 2,
        }
    }
}

/// When the bulk load really ran, CLOCK_MONOTONIC ns (measured, not planned).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadSpan {
    /// The instant the bulk flows started sending.
    pub start_ns: u64,
    /// The instant every bulk byte had been delivered and the server had said so.
    pub end_ns: u64,
}

/// The span in which probes were due, CLOCK_MONOTONIC ns, `[first_ns, end_ns)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeSpan {
    /// The first probe's intended send time.
    pub first_ns: u64,
    /// The last probe's intended send time plus one spacing: the end of its slot.
    pub end_ns: u64,
}

impl ProbeSpan {
    /// The span of `samples` on a schedule with `spacing_ns` between probes; unbounded
    /// (`0..u64::MAX`) when there are none, so the windows then follow the load alone.
    pub fn of(samples: &[RrSample], spacing_ns: u64) -> Self {
        let first = samples.iter().map(|s| s.intended_ns).min();
        let last = samples.iter().map(|s| s.intended_ns).max();
        match (first, last) {
            (Some(first_ns), Some(last)) => Self {
                first_ns,
                end_ns: last.saturating_add(spacing_ns),
            },
            _ => Self {
                first_ns: 0,
                end_ns: u64::MAX,
            },
        }
    }
}

/// One phase: its window and the probes due in it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Phase {
    /// `before`, `during` or `after`.
    pub name: PhaseName,
    /// Window start, CLOCK_MONOTONIC ns (inclusive).
    pub start_ns: u64,
    /// Window end, CLOCK_MONOTONIC ns (exclusive).
    pub end_ns: u64,
    /// Probe transactions due in the window.
    pub transactions: u64,
    /// Their latency, µs, from the intended send time (coordinated-omission corrected).
    pub latency_us: Percentiles,
}

impl Phase {
    /// Window length, s.
    pub fn duration_s(&self) -> f64 {
        self.end_ns.saturating_sub(self.start_ns) as f64 / 1e9
    }

    /// True when `intended_ns` lies in the window.
    pub fn holds(&self, intended_ns: u64) -> bool {
        (self.start_ns..self.end_ns).contains(&intended_ns)
    }
}

/// The three windows (no transactions yet) for a load that ran over `load`, probes due over
/// `probes`, and idle phases of `before_ns` and `after_ns`.
pub fn windows(load: LoadSpan, probes: ProbeSpan, before_ns: u64, after_ns: u64) -> [Phase; 3] {
    let load_end = load.end_ns.max(load.start_ns);
    let before_start = load
        .start_ns
        .saturating_sub(before_ns)
        .max(probes.first_ns)
        .min(load.start_ns);
    let after_end = load_end
        .saturating_add(after_ns)
        .min(probes.end_ns)
        .max(load_end);
    let window = |name, start_ns, end_ns| Phase {
        name,
        start_ns,
        end_ns,
        ..Phase::default()
    };
    [
        window(PhaseName::Before, before_start, load.start_ns),
        window(PhaseName::During, load.start_ns, load_end),
        window(PhaseName::After, load_end, after_end),
    ]
}

/// The phase whose window holds `intended_ns`, if any.
pub fn phase_of(intended_ns: u64, phases: &[Phase]) -> Option<PhaseName> {
    phases.iter().find(|p| p.holds(intended_ns)).map(|p| p.name)
}

/// The probes split into `windows`: each phase's transactions and latency percentiles (HDR,
/// as rr records them: `done_ns - intended_ns`, at least 1 ns), and how many probes fell
/// outside every window.
pub fn split(samples: &[RrSample], windows: [Phase; 3]) -> ([Phase; 3], u64) {
    let mut hists = [
        latency_histogram(),
        latency_histogram(),
        latency_histogram(),
    ];
    let mut outside = 0u64;
    for s in samples {
        match phase_of(s.intended_ns, &windows) {
            Some(name) => {
                let lat = s.done_ns.saturating_sub(s.intended_ns).max(1);
                let _ = hists[name.index()].record(lat);
            }
            None => outside += 1,
        }
    }
    let mut phases = windows;
    for (p, h) in phases.iter_mut().zip(&hists) {
        p.transactions = h.len();
        p.latency_us = Percentiles::from_ns(h);
    }
    (phases, outside)
}

/// How much the load inflated the probes' latency: the figures bufferbloat is judged by, all
/// against the idle (`before`) median.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Inflation {
    /// Idle median, µs.
    pub before_p50_us: Option<f64>,
    /// Loaded median, µs.
    pub during_p50_us: Option<f64>,
    /// Loaded 99th percentile, µs.
    pub during_p99_us: Option<f64>,
    /// Median after the load, µs.
    pub after_p50_us: Option<f64>,
    /// `during_p50_us - before_p50_us`: the queueing delay the load added to a typical probe.
    pub p50_added_us: Option<f64>,
    /// `during_p99_us - before_p50_us`: what the load added to the slowest 1 %.
    pub p99_added_us: Option<f64>,
    /// `during_p50_us / before_p50_us` (null when the idle median is 0 or missing).
    pub p50_ratio: Option<f64>,
    /// `during_p99_us / before_p50_us`.
    pub p99_ratio: Option<f64>,
    /// `after_p50_us - before_p50_us`: how far from idle the path came back.
    pub after_p50_added_us: Option<f64>,
}

/// The inflation of `during` (and the recovery of `after`) over `before`.
pub fn inflation(before: &Percentiles, during: &Percentiles, after: &Percentiles) -> Inflation {
    let base = before.p50;
    let minus = |v: Option<f64>| v.zip(base).map(|(v, b)| v - b);
    let over = |v: Option<f64>| v.zip(base).and_then(|(v, b)| ratio(v, b));
    Inflation {
        before_p50_us: base,
        during_p50_us: during.p50,
        during_p99_us: during.p99,
        after_p50_us: after.p50,
        p50_added_us: minus(during.p50),
        p99_added_us: minus(during.p99),
        p50_ratio: over(during.p50),
        p99_ratio: over(during.p99),
        after_p50_added_us: minus(after.p50),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A probe due at `at` ns, answered `lat` ns later (sent on time).
    fn probe(at: u64, lat: u64) -> RrSample {
        RrSample {
            intended_ns: at,
            sent_ns: at,
            done_ns: at + lat,
        }
    }

    const MS: u64 = 1_000_000;

    fn load() -> LoadSpan {
        LoadSpan {
            start_ns: 1_000 * MS,
            end_ns: 2_500 * MS,
        }
    }

    #[test]
    fn windows_follow_the_measured_load_and_clip_to_the_probes() {
        let probes = ProbeSpan {
            first_ns: 100 * MS,
            end_ns: 10_000 * MS,
        };
        let [b, d, a] = windows(load(), probes, 500 * MS, 700 * MS);
        assert_eq!(
            (b.name, b.start_ns, b.end_ns),
            (PhaseName::Before, 500 * MS, 1_000 * MS)
        );
        assert_eq!(
            (d.name, d.start_ns, d.end_ns),
            (PhaseName::During, 1_000 * MS, 2_500 * MS)
        );
        assert_eq!(
            (a.name, a.start_ns, a.end_ns),
            (PhaseName::After, 2_500 * MS, 3_200 * MS)
        );
        assert_eq!(a.duration_s(), 0.7);

        // Probes that started late and ended early shorten the idle phases, never the load.
        let late = ProbeSpan {
            first_ns: 800 * MS,
            end_ns: 2_900 * MS,
        };
        let [b, d, a] = windows(load(), late, 500 * MS, 700 * MS);
        assert_eq!((b.start_ns, b.end_ns), (800 * MS, 1_000 * MS));
        assert_eq!((d.start_ns, d.end_ns), (1_000 * MS, 2_500 * MS));
        assert_eq!((a.start_ns, a.end_ns), (2_500 * MS, 2_900 * MS));

        // Probes that ended before the load did leave an empty after window, not a negative one.
        let short = ProbeSpan {
            first_ns: 0,
            end_ns: 2_000 * MS,
        };
        let [_, _, a] = windows(load(), short, 500 * MS, 700 * MS);
        assert_eq!((a.start_ns, a.end_ns), (2_500 * MS, 2_500 * MS));
        // A `before` longer than the clock so far starts at 0.
        let [b, _, _] = windows(load(), ProbeSpan::of(&[], MS), 5_000 * MS, 0);
        assert_eq!((b.start_ns, b.end_ns), (0, 1_000 * MS));
    }

    #[test]
    fn the_probe_span_is_first_due_to_the_end_of_the_last_slot() {
        let s = [probe(300, 5), probe(100, 5), probe(200, 5)];
        assert_eq!(
            ProbeSpan::of(&s, 100),
            ProbeSpan {
                first_ns: 100,
                end_ns: 400
            }
        );
        assert_eq!(
            ProbeSpan::of(&[], 100),
            ProbeSpan {
                first_ns: 0,
                end_ns: u64::MAX
            }
        );
    }

    #[test]
    fn probes_go_to_the_phase_they_were_due_in_with_half_open_edges() {
        let w = windows(
            load(),
            ProbeSpan {
                first_ns: 0,
                end_ns: u64::MAX,
            },
            500 * MS,
            500 * MS,
        );
        assert_eq!(phase_of(500 * MS - 1, &w), None, "before the before window");
        assert_eq!(phase_of(500 * MS, &w), Some(PhaseName::Before));
        assert_eq!(phase_of(1_000 * MS - 1, &w), Some(PhaseName::Before));
        assert_eq!(phase_of(1_000 * MS, &w), Some(PhaseName::During));
        assert_eq!(phase_of(2_500 * MS - 1, &w), Some(PhaseName::During));
        assert_eq!(phase_of(2_500 * MS, &w), Some(PhaseName::After));
        assert_eq!(phase_of(3_000 * MS - 1, &w), Some(PhaseName::After));
        assert_eq!(
            phase_of(3_000 * MS, &w),
            None,
            "the tail after the after window"
        );
    }

    #[test]
    fn split_counts_and_percentiles_per_phase_exactly() {
        let w = windows(
            load(),
            ProbeSpan {
                first_ns: 0,
                end_ns: u64::MAX,
            },
            500 * MS,
            500 * MS,
        );
        // Latencies below 2048 ns are exact in the 3-digit HDR histogram.
        let samples = [
            probe(100 * MS, 999),          // outside (set-up)
            probe(600 * MS, 100),          // before
            probe(700 * MS, 200),          // before
            probe(999 * MS, 300),          // before
            probe(1_000 * MS - 1, 1_900),  // before: due before the load, answered in it
            probe(1_000 * MS, 1_000),      // during
            probe(2_000 * MS, 2_000),      // during
            probe(2_500 * MS - 10, 1_500), // during
            probe(2_500 * MS, 120),        // after
            probe(2_900 * MS, 140),        // after
            probe(3_100 * MS, 5),          // outside (tail)
        ];
        let ([b, d, a], outside) = split(&samples, w);
        assert_eq!(outside, 2);
        assert_eq!((b.transactions, d.transactions, a.transactions), (4, 3, 2));
        assert_eq!(b.latency_us.n, 4);
        // p50 of {100, 200, 300, 1900}: the 2nd of 4.
        assert_eq!(b.latency_us.p50, Some(0.2));
        assert_eq!(b.latency_us.max, Some(1.9));
        assert_eq!(b.latency_us.mean, Some(0.625));
        assert_eq!(d.latency_us.p50, Some(1.5));
        assert_eq!(d.latency_us.p90, Some(2.0));
        assert_eq!(d.latency_us.p99, Some(2.0));
        assert_eq!(a.latency_us.p50, Some(0.12));
        assert_eq!(a.latency_us.max, Some(0.14));
        // The windows are carried through unchanged.
        assert_eq!((d.start_ns, d.end_ns), (1_000 * MS, 2_500 * MS));
    }

    #[test]
    fn split_of_nothing_is_empty_phases_with_null_figures() {
        let w = windows(load(), ProbeSpan::of(&[], MS), 500 * MS, 500 * MS);
        let ([b, d, a], outside) = split(&[], w);
        assert_eq!(outside, 0);
        for p in [b, d, a] {
            assert_eq!(p.transactions, 0);
            assert_eq!(p.latency_us, Percentiles::default());
        }
    }

    fn p(p50: Option<f64>, p99: Option<f64>) -> Percentiles {
        Percentiles {
            p50,
            p99,
            ..Percentiles::default()
        }
    }

    #[test]
    fn inflation_is_against_the_idle_median() {
        let i = inflation(
            &p(Some(10_000.0), Some(12_000.0)),
            &p(Some(612_000.0), Some(650_000.0)),
            &p(Some(10_500.0), Some(30_000.0)),
        );
        assert_eq!(
            i,
            Inflation {
                before_p50_us: Some(10_000.0),
                during_p50_us: Some(612_000.0),
                during_p99_us: Some(650_000.0),
                after_p50_us: Some(10_500.0),
                p50_added_us: Some(602_000.0),
                p99_added_us: Some(640_000.0),
                p50_ratio: Some(61.2),
                p99_ratio: Some(65.0),
                after_p50_added_us: Some(500.0),
            }
        );
    }

    #[test]
    fn inflation_without_an_idle_median_is_null_not_nan() {
        let i = inflation(&p(None, None), &p(Some(5.0), Some(9.0)), &p(None, None));
        assert_eq!(i.during_p50_us, Some(5.0));
        assert_eq!(i.p50_added_us, None);
        assert_eq!(i.p50_ratio, None);
        assert_eq!(i.after_p50_added_us, None);
        let zero = inflation(
            &p(Some(0.0), None),
            &p(Some(5.0), Some(9.0)),
            &p(Some(1.0), None),
        );
        assert_eq!(zero.p50_added_us, Some(5.0));
        assert_eq!(zero.p50_ratio, None, "no ratio over a zero median");
        assert_eq!(zero.p99_ratio, None);
    }
}
