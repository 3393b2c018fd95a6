//! The emulator's verdict over one run in a lab: from its counters before and after the run,
//! judged for what the run measures ([`Need`]: latency, or throughput over the lab's RTT;
//! [`crate::emulator::need`] has the argument for each bound), and what its model really gave the
//! run's packets ([`RunAccount`]). Pure: the counters come in as values.
//!
//! Who calls what: `tcplab_front::lab` judges each workload it runs in a lab (a stream as
//! throughput, the rest as latency) into `facts.emulator.fidelity`; the study's executor does
//! the same per workload of a run; a caller that runs workloads itself reads the emulator's
//! status before and after each one and calls [`judge_for`]. [`judge`] stays for callers
//! that do not know the need: it judges as latency, the stricter need.

use crate::emulator::counters::DirSnapshot;
use crate::emulator::need::{RunLateness, lateness_reasons};
use serde::{Deserialize, Serialize};
use tcplab_emu::LinkConfig;

/// What a run measures ([`judge_for`] takes it), and the emulator's counters as
/// `EmulatorStatus::counters` carries them.
pub use crate::emulator::{Need, Snapshot};

/// Lateness p99 above which a latency run is untrustworthy (the emulator's own default).
pub const LATENESS_P99_LIMIT_NS: u64 = crate::emulator::LATE_LIMIT_NS;

/// Whether one run that crossed the emulator can be trusted, and why not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunFidelity {
    /// False when the emulator fell behind what the run needs or dropped frames for reasons
    /// of its own.
    pub trustworthy: bool,
    /// One sentence per problem.
    pub reasons: Vec<String>,
    /// What the run was judged for (absent in records written before needs existed, and when
    /// the emulator could not be asked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub need: Option<Need>,
}

/// The round trip the emulator was configured for: both directions' fixed delays. Jitter,
/// serialisation and queueing only add to a real round trip, so a bound derived from this one
/// errs on the strict side.
pub fn configured_rtt_ns(link: &LinkConfig) -> u64 {
    link.forward.delay_ns.saturating_add(link.reverse.delay_ns)
}

/// The need of a bulk-throughput run across `link` ([`configured_rtt_ns`]).
pub fn throughput_over(link: &LinkConfig) -> Need {
    Need::Throughput {
        rtt_ns: configured_rtt_ns(link),
    }
}

/// The need of a diagnosis's run across `link` ([`configured_rtt_ns`]).
pub fn diagnosis_over(link: &LinkConfig) -> Need {
    Need::Diagnosis {
        rtt_ns: configured_rtt_ns(link),
    }
}

/// What the emulator's model really did over one run, per direction: the queue stay and the
/// realised delay of that run's packets alone (`tcplab_emu::RunRealised`); a direction with
/// neither a queue nor a delay line has none. The model publishes its account every 50 ms, so
/// the last 50 ms of a run may fall into the next one.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunAccount {
    /// Client → server.
    pub forward: Option<tcplab_emu::RunRealised>,
    /// Server → client.
    pub reverse: Option<tcplab_emu::RunRealised>,
    /// Packets the link model dropped during the run, by cause, client → server.
    #[serde(default)]
    pub forward_drops: ModelDrops,
    /// The same, server → client.
    #[serde(default)]
    pub reverse_drops: ModelDrops,
}

/// Packets the link model dropped on purpose in one direction during a run: what a diagnosis
/// of the path may take as the path's own losses (the emulator's faults are the verdict's).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelDrops {
    /// Frames that reached the model.
    pub frames: u64,
    /// Dropped by the loss process (random, Gilbert-Elliott, pattern).
    pub loss: u64,
    /// Dropped because the bottleneck queue was full (tail drop).
    pub queue_full: u64,
}

impl ModelDrops {
    fn between(before: &DirSnapshot, after: &DirSnapshot) -> Self {
        Self {
            frames: after.frames_in.saturating_sub(before.frames_in),
            loss: after.drops.loss.saturating_sub(before.drops.loss),
            queue_full: after
                .drops
                .queue_full
                .saturating_sub(before.drops.queue_full),
        }
    }
}

/// The model's account of one run from the emulator's counters before and after it (see
/// [`RunAccount`]); `None` if either cannot be read (the verdict says why).
pub fn account(before: &serde_json::Value, after: &serde_json::Value) -> Option<RunAccount> {
    let read = |v: &serde_json::Value| serde_json::from_value::<Snapshot>(v.clone()).ok();
    let (b, a) = (read(before)?, read(after)?);
    Some(RunAccount {
        forward: tcplab_emu::RunRealised::between(&b.forward.realised, &a.forward.realised),
        reverse: tcplab_emu::RunRealised::between(&b.reverse.realised, &a.reverse.realised),
        forward_drops: ModelDrops::between(&b.forward, &a.forward),
        reverse_drops: ModelDrops::between(&b.reverse, &a.reverse),
    })
}

/// The emulator's verdict over one run, judged as latency (the stricter need) for callers that
/// do not know what the run measures; see [`judge_for`].
pub fn judge(before: &serde_json::Value, after: &serde_json::Value, running: bool) -> RunFidelity {
    judge_for(before, after, running, Need::Latency)
}

/// The emulator's verdict over one run that measured `need`, from its counters
/// (`EmulatorStatus::counters`) before and after the run; see [`judge_snapshots_for`].
/// Counters that cannot be read make the run untrustworthy rather than passing it unjudged.
pub fn judge_for(
    before: &serde_json::Value,
    after: &serde_json::Value,
    running: bool,
    need: Need,
) -> RunFidelity {
    let read = |v: &serde_json::Value| match v["error"].as_str() {
        Some(e) => Err(e.to_string()),
        None => serde_json::from_value::<Snapshot>(v.clone()).map_err(|e| e.to_string()),
    };
    match (read(before), read(after)) {
        (Ok(b), Ok(a)) => judge_snapshots_for(&b, &a, running, need),
        (Err(e), _) | (_, Err(e)) => RunFidelity {
            trustworthy: false,
            reasons: vec![format!("the emulator's counters could not be read: {e}")],
            need: Some(need),
        },
    }
}

/// [`judge_snapshots_for`] as latency, the stricter need.
pub fn judge_snapshots(before: &Snapshot, after: &Snapshot, running: bool) -> RunFidelity {
    judge_snapshots_for(before, after, running, Need::Latency)
}

/// The emulator's verdict over the frames between two snapshots, for a run that measured
/// `need`: any frame dropped for a reason of the emulator's own
/// (`DirSnapshot::own_faults`: ring overflow and the rest, whatever the need), an emulator
/// that stopped, or frames later than the need allows ([`crate::emulator::need`]: for latency more
/// than 1 % of the run's frames, or of its lone frames on their own, over
/// [`LATENESS_P99_LIMIT_NS`]; for throughput that, unless the frames' mean lateness, both
/// directions added, is within 1 % of the RTT) make the run untrustworthy.
/// Only this run's frames count: an earlier run that fell behind does not taint a later one
/// in the same lab (counts and sums of lateness subtract; quantiles would not).
pub fn judge_snapshots_for(
    before: &Snapshot,
    after: &Snapshot,
    running: bool,
    need: Need,
) -> RunFidelity {
    let mut reasons = Vec::new();
    if !running {
        reasons.push("the emulator stopped during the run".to_string());
    }
    let dirs = [
        ("forward", &before.forward, &after.forward),
        ("reverse", &before.reverse, &after.reverse),
    ];
    for (dir, b, a) in dirs {
        for ((after, what), (before, _)) in a.own_faults().into_iter().zip(b.own_faults()) {
            let n = after.saturating_sub(before);
            if n > 0 {
                reasons.push(format!("{dir}: {n} {what}"));
            }
        }
    }
    reasons.extend(lateness_reasons(
        need,
        dirs.map(|(dir, b, a)| (dir, RunLateness::between(b, a))),
    ));
    RunFidelity {
        trustworthy: reasons.is_empty(),
        reasons,
        need: Some(need),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A snapshot whose forward direction released `frames` frames, `late` of them over
    /// the limit, with `overflow` ring overflows.
    fn snapshot(frames: u64, late: u64, overflow: u64) -> Snapshot {
        let mut s = Snapshot::default();
        s.forward.lateness.count = frames;
        s.forward.lateness.late_count = late;
        s.forward.lateness.p99_ns = if late * 100 > frames {
            2_000_000
        } else {
            5_000
        };
        s.forward.drops.ring_overflow = overflow;
        s
    }

    #[test]
    fn a_run_is_judged_on_its_own_frames() {
        // Before: a bulk run left 5,000 of 100,000 frames late (cumulative p99 2 ms).
        let before = snapshot(100_000, 5_000, 0);
        // This run: 10,000 more frames, 100 of them late (1 %: p99 within the limit).
        let f = judge_snapshots(&before, &snapshot(110_000, 5_100, 0), true);
        assert_eq!(f.reasons, Vec::<String>::new());
        assert!(f.trustworthy, "the earlier run does not taint this one");
        // 101 late of 10,000: p99 over the limit.
        let f = judge_snapshots(&before, &snapshot(110_000, 5_101, 0), true);
        assert!(!f.trustworthy);
        assert_eq!(
            f.reasons,
            ["forward: lateness p99 above 100 µs (101 of 10000 frames later than that)"]
        );
    }

    #[test]
    fn late_lone_frames_make_a_run_untrustworthy_however_many_bulk_frames_kept_time() {
        let before = snapshot(0, 0, 0);
        let mut after = snapshot(100_000, 0, 0);
        // An rr probe's 200 lone frames among them: 2 late is its p99, 3 is over it.
        after.reverse.lone_lateness.count = 200;
        after.reverse.lone_lateness.late_count = 2;
        assert!(judge_snapshots(&before, &after, true).trustworthy);
        after.reverse.lone_lateness.late_count = 3;
        assert_eq!(
            judge_snapshots(&before, &after, true).reasons,
            ["reverse: lone frames' lateness p99 above 100 µs (3 of 200 frames later than that)"]
        );
    }

    #[test]
    fn drops_of_the_emulator_and_a_stopped_emulator_are_reasons_unreadable_counters_too() {
        let f = judge_snapshots(&snapshot(10, 0, 3), &snapshot(20, 0, 7), false);
        assert_eq!(
            f.reasons,
            [
                "the emulator stopped during the run",
                "forward: 4 frames dropped by the kernel: RX ring overflow (emulator fell behind)"
            ]
        );
        let good = serde_json::to_value(snapshot(10, 0, 0)).unwrap();
        assert!(judge(&good, &good, true).trustworthy, "an idle run passes");
        let f = judge(&good, &serde_json::json!({"forward": 1}), true);
        assert!(!f.trustworthy);
        assert!(
            f.reasons[0].starts_with("the emulator's counters could not be read"),
            "{:?}",
            f.reasons
        );
        // Counters the emulator could not encode say so, rather than "invalid type: null".
        let failed = serde_json::json!({"error": "the counters could not be encoded: x"});
        assert_eq!(
            judge(&good, &failed, true).reasons,
            ["the emulator's counters could not be read: the counters could not be encoded: x"]
        );
    }

    /// A bulk run's snapshots over a 10 ms path: `frames` data frames forward, `late` of them
    /// `late_by` ns late and the rest 20 µs, and half as many ACKs back, 10 µs late each.
    fn bulk(frames: u64, late: u64, late_by: u64) -> (Snapshot, Snapshot) {
        let before = Snapshot::default();
        let mut after = Snapshot::default();
        let f = &mut after.forward.lateness;
        f.count = frames;
        f.late_count = late;
        f.sum_ns = late * late_by + (frames - late) * 20_000;
        f.mean_ns = f.sum_ns / frames;
        let r = &mut after.reverse.lateness;
        r.count = frames / 2;
        r.sum_ns = r.count * 10_000;
        r.mean_ns = 10_000;
        (before, after)
    }

    const TEN_MS: Need = Need::Throughput { rtt_ns: 10_000_000 };

    #[test]
    fn a_bulk_run_with_three_per_cent_of_frames_150_us_late_is_good_throughput_not_latency() {
        let (b, a) = bulk(100_000, 3_000, 150_000);
        let f = judge_snapshots_for(&b, &a, true, TEN_MS);
        assert!(f.trustworthy, "{:?}", f.reasons);
        assert_eq!(f.need, Some(TEN_MS));
        let f = judge_snapshots_for(&b, &a, true, Need::Latency);
        assert_eq!(
            f.reasons,
            ["forward: lateness p99 above 100 µs (3000 of 100000 frames later than that)"]
        );
        assert_eq!(judge_snapshots(&b, &a, true), f, "no need given: latency");
        // Through the JSON the lab's status carries, as `judge_for` reads it.
        let (bv, av) = (
            serde_json::to_value(b).unwrap(),
            serde_json::to_value(a).unwrap(),
        );
        assert!(judge_for(&bv, &av, true, TEN_MS).trustworthy);
        assert!(!judge(&bv, &av, true).trustworthy);
    }

    #[test]
    fn lone_frames_decide_a_latency_run_and_not_a_throughput_run() {
        let (b, mut a) = bulk(100_000, 0, 0);
        a.reverse.lone_lateness.count = 17;
        a.reverse.lone_lateness.late_count = 2;
        assert!(judge_snapshots_for(&b, &a, true, TEN_MS).trustworthy);
        assert_eq!(
            judge_snapshots_for(&b, &a, true, Need::Latency).reasons,
            ["reverse: lone frames' lateness p99 above 100 µs (2 of 17 frames later than that)"]
        );
    }

    #[test]
    fn ring_overflow_and_a_stopped_emulator_fail_every_need() {
        let (b, mut a) = bulk(100_000, 0, 0);
        a.reverse.drops.ring_overflow = 1;
        for need in [TEN_MS, Need::Latency, Need::Throughput { rtt_ns: u64::MAX }] {
            let f = judge_snapshots_for(&b, &a, false, need);
            assert_eq!(
                f.reasons,
                [
                    "the emulator stopped during the run",
                    "reverse: 1 frames dropped by the kernel: RX ring overflow (emulator fell behind)"
                ],
                "{need}"
            );
        }
    }

    #[test]
    fn a_small_rtt_falls_back_to_the_absolute_bound() {
        // 3 % of the frames 150 µs late stretch a 1 ms round trip by 3.4 %: not within 1 %,
        // and not within the absolute bound either.
        let (b, a) = bulk(100_000, 3_000, 150_000);
        let one_ms = Need::Throughput { rtt_ns: 1_000_000 };
        let f = judge_snapshots_for(&b, &a, true, one_ms);
        assert_eq!(f.reasons.len(), 2, "{:?}", f.reasons);
        assert!(
            f.reasons[1].contains("of the 1.00 ms RTT"),
            "{:?}",
            f.reasons
        );
        // 1 % of them late is within the absolute bound, which every run keeps.
        let (b, a) = bulk(100_000, 1_000, 150_000);
        assert!(judge_snapshots_for(&b, &a, true, one_ms).trustworthy);
        assert!(judge_snapshots_for(&b, &a, true, Need::Throughput { rtt_ns: 0 }).trustworthy);
    }

    #[test]
    fn the_configured_rtt_is_both_directions_delay() {
        let mut link = LinkConfig::default();
        link.forward.delay_ns = 5_000_000;
        link.reverse.delay_ns = 15_000_000;
        assert_eq!(configured_rtt_ns(&link), 20_000_000);
        assert_eq!(
            throughput_over(&link),
            Need::Throughput { rtt_ns: 20_000_000 }
        );
    }
}
