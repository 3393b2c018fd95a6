//! How late the emulator's frames may leave before a run's figure is wrong depends on what the
//! run measures: a [`Need`]. Pure; judged over the frames between two snapshots
//! ([`RunLateness::between`]), so one run's verdict is its own.
//!
//! **Latency** (rr, msgs, crr, a probe beside a flow). A latency figure is off by its own
//! frames' lateness, whatever the path: a request 150 µs late makes that transaction 150 µs
//! slower than the configured path, on a 10 ms path as on a 0 ms one. So the bound is absolute,
//! the emulator's delay-accuracy target ([`LATE_LIMIT_NS`], 100 µs: an RTT within 0.1 ms of the
//! configured one), for all frames' p99 and, on their own, for the lone frames' p99: a probe's
//! frames are a fraction of a per cent of a bulk flow's, and they are what it measures.
//!
//! **Throughput** of bulk flows on a path of known RTT. A window-limited flow delivers W bytes
//! per round trip, W/RTT; frames that leave L late stretch the round trip they clock (data one
//! way, ACKs the other) by L, so the figure comes out about L/(RTT + L) ≈ L/RTT low. Over a run
//! the stretch is the frames' *mean* lateness in each direction, added: (mean forward + mean
//! reverse) / RTT. The bound on that is [`THROUGHPUT_ACCURACY_PERCENT`] (1 %): the accuracy
//! the absolute bound asks of a round trip on a 10 ms path (100 µs), now asked of the
//! throughput figure on a path of any length. A flow held by the emulator's rate instead (its
//! queue full) loses nothing to lateness at all as long as the schedule catches up, because
//! departures are fixed at arrival; the window-limited case is the worse one, and the one
//! bounded. The mean is exact (the sums of lateness subtract between snapshots,
//! [`crate::emulator::counters::LatenessSummary::sum_ns`]), and it weighs each late frame by how late
//! it was: 3 % of the frames 150 µs late stretch a 10 ms round trip by
//! 0.045 %, 3 % of them 5 ms late by 1.5 %, and a count over any one limit cannot tell the
//! two apart. Lone frames (a flow's handshake and teardown) carry no byte of the figure and
//! are not judged. A stall long enough to matter shows in the mean: 200 ms of frames held at
//! 1 Gbit/s in a 10-s run add 2 ms to it. Where 1 % of the RTT is less than the emulator can
//! promise (small RTTs), the absolute bound every run gets still holds: a throughput run
//! passes when its frames meet either bound, so it is never judged more strictly than a
//! latency run on the same frames, and its verdict falls back to the absolute bound as the
//! RTT goes to 0.
//!
//! **Diagnosis** (`tcplab doctor`) of a path of known RTT: the same mean bound as throughput,
//! at [`DIAGNOSIS_ACCURACY_PERCENT`] (5 %). A diagnosis reads effects at the scale of the round
//! trip or of timer ticks (a window per RTT, queueing of tens of ms, stalls of a jiffy), each
//! judged against a threshold at least 10 % from a healthy path's value (the closest: a flow
//! below 90 % of the path's rate, where a full path delivers 95 % in payload), so a distortion
//! of half that cannot move a finding across it; what the 1 % asks of a figure a user quotes is
//! not what a diagnosis needs. A schedule that really falls behind grows its mean without
//! bound and fails this as surely as the stricter one.
//!
//! Frames the emulator dropped for reasons of its own (ring overflow and the rest of
//! `DirSnapshot::own_faults`) fail every need: the flow then saw losses the path does not have.

use std::fmt;

use crate::emulator::counters::DirSnapshot;
use crate::emulator::counters::LATE_LIMIT_NS;
use crate::emulator::summary::format_ns;

/// The largest distortion of a throughput figure a run may carry and still be trusted, in per
/// cent: the frames' mean lateness, both directions added, over the path's round trip.
pub const THROUGHPUT_ACCURACY_PERCENT: u64 = 1;

/// The largest distortion a diagnosis's run may carry, in per cent of its round trip.
pub const DIAGNOSIS_ACCURACY_PERCENT: u64 = 5;

/// What a run measures, which decides how late its frames may leave (see the module's doc).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "measures", rename_all = "snake_case")]
pub enum Need {
    /// Latencies (rr, msgs, crr, probes): lateness p99 within 100 µs, of all frames and of the
    /// lone frames on their own. The conservative need, for callers that do not know theirs.
    #[default]
    Latency,
    /// The throughput of bulk flows on a path whose round trip is `rtt_ns` (the configured
    /// delays of both directions: what the flow's window is clocked by).
    Throughput {
        /// Round-trip time the emulator was configured for, ns.
        rtt_ns: u64,
    },
    /// A diagnosis of a path whose round trip is `rtt_ns`: effects at the scale of the round
    /// trip, judged like a throughput at [`DIAGNOSIS_ACCURACY_PERCENT`].
    Diagnosis {
        /// Round-trip time the emulator was configured for, ns.
        rtt_ns: u64,
    },
}

impl Need {
    /// The round trip and the share of it (per cent) a run's mean lateness may reach; `None`
    /// for a latency run, bound per frame instead.
    pub fn mean_share(&self) -> Option<(u64, u64)> {
        match *self {
            Need::Latency => None,
            Need::Throughput { rtt_ns } => Some((rtt_ns, THROUGHPUT_ACCURACY_PERCENT)),
            Need::Diagnosis { rtt_ns } => Some((rtt_ns, DIAGNOSIS_ACCURACY_PERCENT)),
        }
    }

    /// The bound on the mean lateness (both directions added) a throughput run may have:
    /// [`THROUGHPUT_ACCURACY_PERCENT`] of its RTT ([`DIAGNOSIS_ACCURACY_PERCENT`] for a
    /// diagnosis); `None` for a latency run.
    pub fn mean_bound_ns(&self) -> Option<u64> {
        let (rtt_ns, percent) = self.mean_share()?;
        let bound = u128::from(rtt_ns) * u128::from(percent) / 100;
        Some(u64::try_from(bound).unwrap_or(u64::MAX))
    }
}

impl fmt::Display for Need {
    /// `latency` or `throughput over a 10.0 ms RTT`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Need::Latency => f.write_str("latency"),
            Need::Throughput { rtt_ns } => {
                write!(f, "throughput over a {} RTT", format_ns(rtt_ns))
            }
            Need::Diagnosis { rtt_ns } => {
                write!(f, "a diagnosis over a {} RTT", format_ns(rtt_ns))
            }
        }
    }
}

/// One direction's frames over a run: the difference of two snapshots' lateness counts, which
/// (unlike quantiles of the cumulative histograms) subtract.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunLateness {
    /// Frames released.
    pub frames: u64,
    /// Of them, later than [`LATE_LIMIT_NS`].
    pub late: u64,
    /// Their lateness added up, ns.
    pub sum_ns: u64,
    /// Lone frames released (a probe's, a handshake's).
    pub lone_frames: u64,
    /// Of them, later than [`LATE_LIMIT_NS`].
    pub lone_late: u64,
    /// Whether `sum_ns` is missing: an emulator too old to report its sums (`sum_ns` absent,
    /// read as 0) has a mean nobody can judge, and is then held to the absolute bound alone.
    pub sum_missing: bool,
}

impl RunLateness {
    /// The frames of one direction between snapshots `before` and `after` of its counters.
    pub fn between(before: &DirSnapshot, after: &DirSnapshot) -> RunLateness {
        let (b, a) = (&before.lateness, &after.lateness);
        let (lb, la) = (&before.lone_lateness, &after.lone_lateness);
        RunLateness {
            frames: a.count.saturating_sub(b.count),
            late: a.late_count.saturating_sub(b.late_count),
            sum_ns: a.sum_ns.saturating_sub(b.sum_ns),
            lone_frames: la.count.saturating_sub(lb.count),
            lone_late: la.late_count.saturating_sub(lb.late_count),
            // A sum of 0 over frames with a non-zero mean was never reported.
            sum_missing: a.sum_ns == 0 && a.mean_ns > 0,
        }
    }

    /// Exact mean lateness of the run's frames, ns (0 without frames).
    pub fn mean_ns(&self) -> u64 {
        self.sum_ns.checked_div(self.frames).unwrap_or(0)
    }
}

/// Fewest frames of a direction a throughput or diagnosis run is judged on: a p99 needs 100.
pub const MIN_JUDGED_FRAMES: u64 = 100;

/// Whether more than 1 % of `frames` are `late`: their p99 is above the limit exactly then.
fn p99_over(late: u64, frames: u64) -> bool {
    late.saturating_mul(100) > frames
}

/// The reasons a run's lateness fails `need`, per direction (`(name, frames)`, forward first);
/// empty when it is within what the measurement needs.
pub fn lateness_reasons(need: Need, mut dirs: [(&str, RunLateness); 2]) -> Vec<String> {
    let limit = LATE_LIMIT_NS / 1_000;
    if need.mean_share().is_some() {
        // A bulk figure over fewer frames than a p99 needs is no figure: a flow that moved
        // nothing (a black-holed path) leaves its handshake's wake-up lateness, which distorts
        // nothing it measured.
        for (_, r) in dirs
            .iter_mut()
            .filter(|(_, r)| r.frames < MIN_JUDGED_FRAMES)
        {
            *r = RunLateness::default();
        }
    }
    let over = |which: &str, dir: &str, late: u64, frames: u64| {
        format!(
            "{dir}: {which}lateness p99 above {limit} µs ({late} of {frames} frames later than that)"
        )
    };
    let mut absolute = Vec::new();
    for (dir, r) in &dirs {
        if p99_over(r.late, r.frames) {
            absolute.push(over("", dir, r.late, r.frames));
        }
    }
    match need {
        Need::Latency => {
            for (dir, r) in &dirs {
                if p99_over(r.lone_late, r.lone_frames) {
                    absolute.push(over("lone frames' ", dir, r.lone_late, r.lone_frames));
                }
            }
            absolute
        }
        Need::Throughput { .. } | Need::Diagnosis { .. } => {
            let (rtt_ns, percent) = need.mean_share().unwrap_or((0, 0));
            let what = if matches!(need, Need::Diagnosis { .. }) {
                "a diagnosis"
            } else {
                "a throughput figure"
            };
            if absolute.is_empty() {
                return absolute;
            }
            if dirs.iter().any(|(_, r)| r.sum_missing) {
                absolute.push(
                    "the emulator reports no sum of lateness, so the throughput's distortion \
                     cannot be judged (rebuild the lab with this tcplab)"
                        .into(),
                );
                return absolute;
            }
            let mean: u64 = dirs.iter().map(|(_, r)| r.mean_ns()).sum();
            let bound = need.mean_bound_ns().unwrap_or(0);
            if mean <= bound {
                return Vec::new();
            }
            let each: Vec<String> = dirs
                .iter()
                .map(|(dir, r)| format!("{dir} {}", format_ns(r.mean_ns())))
                .collect();
            absolute.push(format!(
                "frames left {} late on average ({}), {:.2} % of the {} RTT; {what} needs at \
                 most {percent} %",
                format_ns(mean),
                each.join(", "),
                mean as f64 * 100.0 / rtt_ns.max(1) as f64,
                format_ns(rtt_ns)
            ));
            absolute
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::emulator::counters::LatenessSummary;

    const MS: u64 = 1_000_000;
    const US: u64 = 1_000;

    /// `frames` frames, `late` of them `late_by` ns late and the rest `on_time_by` ns.
    fn frames(n: u64, late: u64, late_by: u64, on_time_by: u64) -> RunLateness {
        RunLateness {
            frames: n,
            late: if late_by > LATE_LIMIT_NS { late } else { 0 },
            sum_ns: late * late_by + (n - late) * on_time_by,
            ..Default::default()
        }
    }

    fn judge(need: Need, forward: RunLateness, reverse: RunLateness) -> Vec<String> {
        lateness_reasons(need, [("forward", forward), ("reverse", reverse)])
    }

    const TEN_MS: Need = Need::Throughput { rtt_ns: 10 * MS };

    #[test]
    fn three_per_cent_of_frames_150_us_late_pass_as_throughput_and_fail_as_latency() {
        // A bulk run: 100 000 data frames, 3 % of them 150 µs late, the rest 20 µs; 50 000 ACKs
        // 10 µs late. Mean 23.9 + 10 µs: 0.34 % of 10 ms.
        let fwd = frames(100_000, 3_000, 150 * US, 20 * US);
        let rev = frames(50_000, 0, 0, 10 * US);
        assert_eq!(
            fwd.mean_ns(),
            3_000 * 150 * US / 100_000 + 97 * 20 * US / 100
        );
        assert_eq!(judge(TEN_MS, fwd, rev), Vec::<String>::new());
        assert_eq!(
            judge(Need::Latency, fwd, rev),
            ["forward: lateness p99 above 100 µs (3000 of 100000 frames later than that)"]
        );
    }

    #[test]
    fn a_diagnosis_allows_a_twentieth_of_its_rtt_where_a_throughput_allows_a_hundredth() {
        // 20 ms RTT, an rr run: 2 of 132 frames 10 ms late, the rest 60 µs; 218 µs on average
        // (1.09 %), the same way 20 µs.
        let fwd = frames(132, 2, 10 * MS, 60 * US);
        let rev = frames(132, 0, 0, 20 * US);
        let rtt_ns = 20 * MS;
        assert!(!judge(Need::Throughput { rtt_ns }, fwd, rev).is_empty());
        assert_eq!(
            judge(Need::Diagnosis { rtt_ns }, fwd, rev),
            Vec::<String>::new()
        );
        // A schedule that fell behind by 1.2 ms on average (6 %) fails both.
        let behind = frames(132, 132, 1_200 * US, 0);
        let r = judge(Need::Diagnosis { rtt_ns }, behind, rev);
        assert_eq!(r.len(), 2, "{r:?}");
        assert!(r[1].ends_with("a diagnosis needs at most 5 %"), "{r:?}");
        assert_eq!(
            Need::Diagnosis { rtt_ns }.to_string(),
            "a diagnosis over a 20.0 ms RTT"
        );
    }

    #[test]
    fn a_bulk_run_that_moved_a_handful_of_frames_is_not_judged_by_them() {
        // A stream into a black hole: 21 frames, 4 of them 1 ms late on waking the emulator.
        let fwd = frames(21, 4, MS, 10 * US);
        let rev = frames(18, 0, 0, 10 * US);
        let rtt_ns = MS;
        assert_eq!(
            judge(Need::Diagnosis { rtt_ns }, fwd, rev),
            Vec::<String>::new()
        );
        assert_eq!(
            judge(Need::Throughput { rtt_ns }, fwd, rev),
            Vec::<String>::new()
        );
        // A latency figure is distorted by each of its frames, however few.
        assert!(!judge(Need::Latency, fwd, rev).is_empty());
    }

    #[test]
    fn the_mean_decides_a_throughput_run_at_exactly_one_per_cent_of_its_rtt() {
        // 10 ms RTT: the bound is a mean of 100 µs, both directions added.
        let fwd = frames(1_000, 500, 150 * US, 30 * US); // mean 90 µs
        let rev = frames(1_000, 0, 0, 10 * US); // mean 10 µs
        assert_eq!(fwd.mean_ns() + rev.mean_ns(), 100 * US);
        assert!(judge(TEN_MS, fwd, rev).is_empty(), "at the bound passes");
        let rev = frames(1_000, 0, 0, 10 * US + 1);
        let reasons = judge(TEN_MS, fwd, rev);
        assert_eq!(
            reasons,
            [
                "forward: lateness p99 above 100 µs (500 of 1000 frames later than that)",
                "frames left 100 µs late on average (forward 90.0 µs, reverse 10.0 µs), 1.00 % \
                 of the 10.0 ms RTT; a throughput figure needs at most 1 %"
            ]
        );
        // The same frames on a 100 ms path distort its throughput by 0.1 %.
        assert!(judge(Need::Throughput { rtt_ns: 100 * MS }, fwd, rev).is_empty());
    }

    #[test]
    fn few_very_late_frames_weigh_by_how_late_they_were() {
        // 3 % of the frames 5 ms late: the same count over 100 µs as 150 µs late, but they
        // alone stretch a 10 ms round trip by 1.5 %.
        let fwd = frames(100_000, 3_000, 5 * MS, 20 * US);
        let r = judge(TEN_MS, fwd, RunLateness::default());
        assert_eq!(r.len(), 2, "{r:?}");
        assert!(r[1].contains("1.69 % of the 10.0 ms RTT"), "{r:?}");
    }

    #[test]
    fn lone_frames_decide_latency_runs_and_not_throughput_runs() {
        // A bulk run's 17 handshake and teardown frames, 2 of them late: 12 %.
        let mut rev = frames(10_000, 0, 0, 5 * US);
        rev.lone_frames = 17;
        rev.lone_late = 2;
        let fwd = frames(20_000, 0, 0, 5 * US);
        assert!(
            judge(TEN_MS, fwd, rev).is_empty(),
            "not a byte of throughput"
        );
        assert_eq!(
            judge(Need::Latency, fwd, rev),
            ["reverse: lone frames' lateness p99 above 100 µs (2 of 17 frames later than that)"]
        );
        // An rr probe's 200 lone frames: 2 late is its p99, 3 is over it.
        rev.lone_frames = 200;
        assert!(judge(Need::Latency, fwd, rev).is_empty());
        rev.lone_late = 3;
        assert_eq!(judge(Need::Latency, fwd, rev).len(), 1);
    }

    #[test]
    fn a_small_rtt_falls_back_to_the_absolute_bound() {
        // No delay at all: 1 % of the RTT is 0, so only the absolute bound can pass a run.
        let zero = Need::Throughput { rtt_ns: 0 };
        let within = frames(10_000, 100, 150 * US, 15 * US);
        assert!(judge(zero, within, within).is_empty(), "p99 within 100 µs");
        let over = frames(10_000, 101, 150 * US, 15 * US);
        assert_eq!(judge(zero, over, within).len(), 2);
        // 2 ms: 1 % is 20 µs, which the bulk frames' own 15 µs leaves no room under.
        let two = Need::Throughput { rtt_ns: 2 * MS };
        assert!(judge(two, within, within).is_empty());
        assert_eq!(judge(two, over, within).len(), 2);
        // Never stricter than a latency run on the same frames.
        for f in [within, over] {
            let lat = judge(Need::Latency, f, within).is_empty();
            assert!(!lat || judge(two, f, within).is_empty());
        }
    }

    #[test]
    fn an_unknown_sum_leaves_only_the_absolute_bound() {
        let mut fwd = frames(10_000, 300, 150 * US, 15 * US);
        fwd.sum_missing = true;
        let r = judge(TEN_MS, fwd, RunLateness::default());
        assert_eq!(r.len(), 2, "{r:?}");
        assert!(r[1].starts_with("the emulator reports no sum of lateness"));
    }

    #[test]
    fn a_run_is_the_difference_of_two_snapshots() {
        let mut before = DirSnapshot {
            lateness: LatenessSummary {
                count: 1_000,
                late_count: 40,
                sum_ns: 9_000_000,
                mean_ns: 9_000,
                ..Default::default()
            },
            ..Default::default()
        };
        before.lone_lateness.count = 10;
        let mut after = before;
        after.lateness.count = 3_000;
        after.lateness.late_count = 45;
        after.lateness.sum_ns = 49_000_000;
        after.lone_lateness.count = 30;
        after.lone_lateness.late_count = 1;
        let r = RunLateness::between(&before, &after);
        assert_eq!(
            r,
            RunLateness {
                frames: 2_000,
                late: 5,
                sum_ns: 40_000_000,
                lone_frames: 20,
                lone_late: 1,
                sum_missing: false,
            }
        );
        assert_eq!(r.mean_ns(), 20_000);
        after.lateness.sum_ns = 0;
        assert!(RunLateness::between(&before, &after).sum_missing);
        assert!(!RunLateness::between(&before, &DirSnapshot::default()).sum_missing);
    }

    #[test]
    fn needs_read_as_people_and_json_say_them() {
        assert_eq!(Need::Latency.to_string(), "latency");
        assert_eq!(TEN_MS.to_string(), "throughput over a 10.0 ms RTT");
        assert_eq!(TEN_MS.mean_bound_ns(), Some(100 * US));
        assert_eq!(Need::Latency.mean_bound_ns(), None);
        let json = serde_json::to_value(TEN_MS).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"measures": "throughput", "rtt_ns": 10_000_000})
        );
        assert_eq!(serde_json::from_value::<Need>(json).unwrap(), TEN_MS);
        assert_eq!(Need::default(), Need::Latency);
    }
}
