//! The bottleneck queue, too deep or too shallow.
//!
//! - `bufferbloat`: queueing under load inflates latency. A loss-based flow fills whatever
//!   queue the bottleneck has before it sees a loss, so a queue much deeper than the path's
//!   BDP turns into delay for every packet behind it (the most common complaint on real
//!   networks). Evidence: the bulk flow's own smoothed RTT under load against the path's RTT
//!   without a queue (tcp_info min_rtt, the idle rr latency, the configured RTT), the probes of
//!   a latency-under-load run when the battery has one, and, on an emulated path, how long the
//!   link model kept the run's packets in its queue.
//! - `shallow_queue`: drops at a bottleneck queue far shorter than the BDP (tail drop at a
//!   shallow queue, or a policer's few packets of burst at a high rate) cap the flow below the
//!   path's rate. On an emulated path the model says which drops were its full queue; elsewhere
//!   the losses are not told apart from random ones and `loss_limited` speaks instead.

use crate::battery::Context;
use crate::finding::{Finding, Fix, Scope, Severity};
use crate::rules::stream_view::StreamView;
use tcplab_results::rrul::LoadDirection;
use tcplab_results::run_facts::EmulatorRecord;

/// Added delay under load below this is not bufferbloat whatever the path: under 30 ms is
/// grade A of the common bufferbloat tests (Waveform, DSLReports), unnoticed by people.
pub const BLOAT_MIN_S: f64 = 0.030;

/// Added delay must also exceed this many times the path's own RTT per loaded direction: a
/// queue of one or two BDPs is what a single loss-based flow needs to keep the link busy (the
/// classic sizing rule), so only a queue beyond twice the BDP is over-provisioned; probes
/// beside a load both ways cross both queues, and a BDP in each adds two RTTs.
pub const BLOAT_RTT_MULTIPLE: f64 = 2.0;

/// Added delay at or above this (and [`BLOAT_ERROR_RTT_MULTIPLE`] x the RTT) is an error:
/// grade D and worse, where interactive use breaks down.
pub const BLOAT_ERROR_S: f64 = 0.200;

/// The RTT multiple of an error, per loaded direction.
pub const BLOAT_ERROR_RTT_MULTIPLE: f64 = 4.0;

pub use crate::limits::PATH_FULL_SHARE;

/// Fewest queue drops during the stream for a finding: fewer are single overflows at the end
/// of slow start, which every drop-tail queue has.
pub const MIN_QUEUE_DROPS: u64 = 10;

/// A queue shorter than this share of the BDP is shallow: a loss-based flow's sawtooth
/// then drains it empty after every halving and the link idles. Drops at a longer queue are
/// another element's doing (a reordering or jittered path that holds packets back).
pub const SHALLOW_SHARE: f64 = 0.5;

/// A queue limit in packets (bytes counted as full-size 1514-byte frames).
fn queue_packets((limit, unit): (f64, &str)) -> f64 {
    if unit == "bytes" {
        limit / 1514.0
    } else {
        limit
    }
}

/// A slow-start threshold under this share of the BDP shows a loss response that cut the
/// window far below what the path holds: then even a few drops cost the flow its rate, since a
/// loss-based flow regains a segment per round trip.
pub const WINDOW_CUT_SHARE: f64 = 0.5;

/// The sending flow's slow-start threshold at the end of the stream, in segments, when a loss
/// left it under [`WINDOW_CUT_SHARE`] of `bdp_packets` (0 in tcp_info: still in its first slow
/// start, or a congestion control such as BBR that keeps none).
fn window_cut(stream: &tcplab_results::stream::StreamResult, bdp_packets: f64) -> Option<f64> {
    let view = StreamView::of(stream)?;
    let ssthresh = view
        .flows
        .iter()
        .map(|f| f.end.ssthresh)
        .filter(|s| *s > 0)
        .min()?;
    let segments = f64::from(ssthresh);
    (segments < WINDOW_CUT_SHARE * bdp_packets).then_some(segments)
}

/// What one measurement says of latency under load: the RTT under load, the RTT without a
/// queue, and where each came from.
struct Inflation {
    loaded: f64,
    base: f64,
    /// How many directions' queues the load filled and the RTT crossed (1 or 2).
    directions: f64,
    base_from: &'static str,
    loaded_from: &'static str,
}

impl Inflation {
    fn added(&self) -> f64 {
        self.loaded - self.base
    }

    fn is_bloat(&self) -> bool {
        self.added() >= BLOAT_MIN_S.max(BLOAT_RTT_MULTIPLE * self.base * self.directions)
    }

    fn is_error(&self) -> bool {
        self.added() >= BLOAT_ERROR_S.max(BLOAT_ERROR_RTT_MULTIPLE * self.base * self.directions)
    }
}

/// The bulk flow's own smoothed RTT under load against the path's RTT without a queue; `None`
/// when the inflation cannot be a queue: more than the flow's own data in flight could fill at
/// the path's rate (a reader that delays its ACKs and window updates inflates the RTT samples
/// too), or, on an emulated path, more than twice what its packets really waited in the queue.
fn from_stream(ctx: &Context<'_>) -> Option<Inflation> {
    let stream = ctx.battery.stream.as_ref()?;
    let view = StreamView::of(stream)?;
    let (base, base_from) = base_rtt(ctx, &view)?;
    let loaded = view.rtt_s?;
    let added = loaded - base;
    let rate = ctx.rate_bps();
    if let (Some(rate), Some(inflight)) = (rate, view.inflight_bytes) {
        if added > QUEUE_FILL_SLACK * inflight * 8.0 / rate {
            return None;
        }
    }
    let stay = stream
        .meta
        .facts
        .emulator
        .as_ref()
        .and_then(|e| e.realised.as_ref())
        .and_then(|a| a.forward.as_ref())
        .and_then(|r| r.queue_mean_sojourn_ns);
    if stay.is_some_and(|ns| 2.0 * ns as f64 / 1e9 < added) {
        return None;
    }
    Some(Inflation {
        loaded,
        base,
        directions: 1.0,
        base_from,
        loaded_from: "median smoothed RTT of the bulk flow (tcp_info), after warm-up",
    })
}

/// A flow's RTT can grow by queueing at most by its data in flight over the bottleneck rate;
/// this much more leaves room for a second flow and the medians' mismatch.
pub const QUEUE_FILL_SLACK: f64 = 2.0;

/// The probes' median latency while bulk flows ran both ways against their median before.
fn from_probes(ctx: &Context<'_>) -> Option<Inflation> {
    let rrul = ctx.battery.rrul.as_ref()?;
    let i = &rrul.summary.inflation;
    let (before, during) = (i.before_p50_us?, i.during_p50_us?);
    let directions = match rrul.config.direction {
        LoadDirection::Both => 2.0,
        LoadDirection::Up | LoadDirection::Down => 1.0,
    };
    // Probes delayed by a queue share it with the load: the load's flows stand it too. Probes
    // delayed far more than the load's flows ever queued waited for something else: a lost
    // probe's retransmission timer, holding every probe behind it (a queue of a few packets
    // under load drops them).
    let per_direction = (during - before) / 1e6 / directions;
    if load_queue(&rrul.bulk).is_some_and(|q| q < LOAD_QUEUE_SHARE * per_direction) {
        return None;
    }
    (before > 0.0).then_some(Inflation {
        loaded: during / 1e6,
        base: before / 1e6,
        directions,
        base_from: "median latency of the probes before the load",
        loaded_from: "median latency of 64-byte request/response probes while bulk flows ran both ways",
    })
}

/// The probes' added delay is a queue's only if the load's flows stood at least this share of
/// it (per direction) themselves.
pub const LOAD_QUEUE_SHARE: f64 = 0.5;

/// The queue the load's flows stood, s: the median over their measured sending intervals of
/// their smoothed RTT above their minimum. `None` without tcp_info.
fn load_queue(bulk: &tcplab_results::stream::StreamResult) -> Option<f64> {
    let excess: Vec<f64> = bulk
        .intervals
        .iter()
        .chain(&bulk.server_intervals)
        .filter(|i| i.sending && !i.omitted)
        .filter_map(|i| i.tcp_info)
        .filter(|t| t.min_rtt_us > 0)
        .map(|t| f64::from(t.rtt_us.saturating_sub(t.min_rtt_us)) / 1e6)
        .collect();
    tcplab_stats::quantile(&excess, 0.5).ok()
}

/// The rule for bufferbloat: the probes beside the load (what other traffic on the path
/// sees) and the bulk flow's own RTT each say how much a queue adds; either over the bounds
/// is bufferbloat, and the larger decides how bad.
pub fn check_bloat(ctx: &Context<'_>) -> Vec<Finding> {
    let stream_view = from_stream(ctx);
    let probes = from_probes(ctx);
    let Some(worst) = [&probes, &stream_view]
        .into_iter()
        .flatten()
        .filter(|i| i.is_bloat())
        .max_by(|a, b| a.added().total_cmp(&b.added()))
    else {
        return Vec::new();
    };
    let (loaded, base, base_from, added) =
        (worst.loaded, worst.base, worst.base_from, worst.added());
    let severity = if worst.is_error() {
        Severity::Error
    } else {
        Severity::Warning
    };
    let mut f = Finding::new(
        "bufferbloat",
        severity,
        format!(
            "queueing under load adds {:.0} ms to a {:.1} ms path ({:.0}x its RTT)",
            added * 1e3,
            base * 1e3,
            loaded / base
        ),
    );
    f.push("rtt_under_load_ms", loaded * 1e3, "ms", worst.loaded_from);
    f.push("base_rtt_ms", base * 1e3, "ms", base_from);
    f.push(
        "added_delay_ms",
        added * 1e3,
        "ms",
        format!(
            "under load minus base; bufferbloat from {:.0} ms and {}x the base",
            BLOAT_MIN_S * 1e3,
            BLOAT_RTT_MULTIPLE * worst.directions
        ),
    );
    for (name, other) in [("probe", &probes), ("bulk_flow", &stream_view)] {
        if let Some(o) = other.as_ref().filter(|o| !std::ptr::eq(*o, worst)) {
            f.push(
                &format!("{name}_added_delay_ms"),
                o.added() * 1e3,
                "ms",
                format!("{} minus {}", o.loaded_from, o.base_from),
            );
        }
    }
    if let Some(p) = ctx
        .battery
        .rrul
        .as_ref()
        .and_then(|r| r.summary.inflation.during_p99_us)
    {
        f.push(
            "probe_p99_under_load_ms",
            p / 1e3,
            "ms",
            "p99 latency of the probes while bulk flows ran",
        );
    }
    let emulated = ctx
        .battery
        .stream
        .as_ref()
        .and_then(|s| s.meta.facts.emulator.as_ref());
    if let Some(stay) = emulated
        .as_ref()
        .and_then(|e| e.realised.as_ref())
        .and_then(|a| a.forward.as_ref())
        .and_then(|r| r.queue_mean_sojourn_ns)
    {
        f.push(
            "emulator_queue_stay_ms",
            stay as f64 / 1e6,
            "ms",
            "mean time the run's packets waited in the emulated bottleneck queue (client → server)",
        );
    }
    let queue = queue_limit(emulated);
    if let Some(q) = &queue {
        f.push(
            "queue_limit",
            q.0,
            q.1,
            "the emulated bottleneck queue (configured)",
        );
    }
    if let Some(r) = ctx.battery.path.rate_bps.filter(|r| *r > 0.0) {
        f.push(
            "queue_delay_at_rate_ms",
            added * 1e3,
            "ms",
            format!(
                "{:.0} kB standing in the queue at {:.1} Mbit/s",
                added * r / 8.0 / 1e3,
                r / 1e6
            ),
        );
    }
    f.explanation = format!(
        "The bottleneck's queue is much deeper than the path needs, and a flow that only slows down on loss fills it: every packet, including those of interactive traffic on the same path, waits {:.0} ms in it. A queue of about one BDP keeps the link busy; an AQM (fq_codel, cake) keeps it short whatever the load; a congestion control that measures the path instead of filling it (BBR) and pacing keep this flow's own queue short.",
        added * 1e3
    );
    f.fixes = bloat_fixes(ctx, base, queue.is_some());
    vec![f]
}

/// The path's RTT without a queue, with where it came from: the configured RTT, else the idle
/// rr latency; the bulk flow's own min_rtt when it is smaller but of the same order (it has no
/// host overhead), never when it is under half of them (packets that overtook the others on a
/// reordering path give a min_rtt that no packet in order sees).
fn base_rtt(ctx: &Context<'_>, view: &StreamView) -> Option<(f64, &'static str)> {
    let p = &ctx.battery.path;
    let positive = |v: Option<f64>| v.filter(|v| *v > 0.0);
    let reference = positive(p.configured_rtt_ms.map(|ms| ms / 1e3))
        .map(|v| (v, "configured path RTT"))
        .or_else(|| {
            positive(p.measured_rtt_ms.map(|ms| ms / 1e3))
                .map(|v| (v, "idle request/response latency"))
        });
    let own =
        positive(view.min_rtt_s).map(|v| (v, "smallest RTT of the bulk flow (tcp_info min_rtt)"));
    match (reference, own) {
        (Some(r), Some(m)) if m.0 >= 0.5 * r.0 && m.0 < r.0 => Some(m),
        (Some(r), _) => Some(r),
        (None, m) => m,
    }
}

/// The emulated bottleneck queue's configured limit, client → server, as (value, unit).
fn queue_limit(e: Option<&EmulatorRecord>) -> Option<(f64, &'static str)> {
    let dir = &e?.link.forward;
    dir.rate_bps?;
    Some(match dir.queue {
        Some(tcplab_emu::QueueLimit::Bytes(b)) => (b as f64, "bytes"),
        Some(tcplab_emu::QueueLimit::Packets(p)) => (f64::from(p), "packets"),
        None => (f64::from(tcplab_emu::DEFAULT_QUEUE_PACKETS), "packets"),
    })
}

fn bloat_fixes(ctx: &Context<'_>, base: f64, emulated: bool) -> Vec<Fix> {
    let mut fixes = Vec::new();
    if emulated {
        if let Some(r) = ctx.battery.path.rate_bps.filter(|r| *r > 0.0) {
            let bdp_packets = (r / 8.0 * base / 1514.0).ceil().max(16.0);
            fixes.push(Fix {
                lines: vec![format!("tcplab lab set LAB --queue {bdp_packets:.0}")],
                ..Fix::other(
                    "shorten the emulated bottleneck queue to about one BDP",
                    "the path (emulator)",
                )
            });
        }
    }
    fixes.push(Fix::other(
        "on the bottleneck router or modem: a buffer of about one BDP, or an AQM such as fq_codel or cake (tc qdisc replace dev <DEV> root fq_codel)",
        "the path's bottleneck",
    ));
    let sender = ctx.describe_host("sender", crate::battery::Role::Client);
    if ctx.available_cc().iter().any(|c| c == "bbr") || ctx.available_cc().is_empty() {
        fixes.push(Fix::sysctl(
            "net.ipv4.tcp_congestion_control",
            "bbr",
            Scope::Namespace,
            &sender,
        ));
    }
    fixes.push(Fix::tcp_sockopt(
        "TCP_NOTSENT_LOWAT",
        "131072",
        &sender,
        Some("--notsent-lowat 131072"),
    ));
    fixes
}

/// The rule for a shallow bottleneck queue: the emulator dropped the stream's packets at its
/// full queue and the flow stayed below the path rate.
pub fn check_shallow(ctx: &Context<'_>) -> Vec<Finding> {
    let Some(stream) = &ctx.battery.stream else {
        return Vec::new();
    };
    let emulated = stream.meta.facts.emulator.as_ref();
    let Some((emulated, account)) = emulated
        .as_ref()
        .and_then(|e| e.realised.as_ref().map(|a| (e, a)))
    else {
        // Without the emulator's account, what the flow and the paced probes show.
        return crate::rules::shallow::from_estimates(ctx, stream);
    };
    let drops = account.forward_drops;
    let rate = ctx.rate_bps();
    let throughput = stream.summary.throughput_bps.unwrap_or(0.0);
    let Some(rate) = rate else {
        return Vec::new();
    };
    let rtt = ctx.rtt_s().map_or(0.0, |r| r.0);
    let bdp_packets = rate / 8.0 * rtt / 1514.0;
    let cut = window_cut(stream, bdp_packets);
    let costly = drops.queue_full >= MIN_QUEUE_DROPS || (drops.queue_full > 0 && cut.is_some());
    if !costly || drops.queue_full < drops.loss || throughput >= PATH_FULL_SHARE * rate {
        return Vec::new();
    }
    let queue = queue_limit(Some(emulated));
    if queue.is_some_and(|q| queue_packets(q) >= SHALLOW_SHARE * bdp_packets) {
        return Vec::new();
    }
    let severity = if throughput < crate::limits::COSTLY_SHARE * rate {
        Severity::Error
    } else {
        Severity::Warning
    };
    let mut f = Finding::new(
        "shallow_queue",
        severity,
        format!(
            "the bottleneck queue overflowed {} times: {:.1} Mbit/s of a {:.1} Mbit/s path",
            drops.queue_full,
            throughput / 1e6,
            rate / 1e6
        ),
    );
    f.push(
        "queue_drops",
        drops.queue_full as f64,
        "packets",
        format!(
            "dropped at the full bottleneck queue during the stream, of {} (emulator's model)",
            drops.frames
        ),
    );
    f.push(
        "random_loss_drops",
        drops.loss as f64,
        "packets",
        "dropped by the loss process in the same run",
    );
    if let Some((q, unit)) = queue {
        f.push(
            "queue_limit",
            q,
            unit,
            "the emulated bottleneck queue (configured)",
        );
    }
    f.push(
        "bdp_packets",
        bdp_packets,
        "packets",
        "path rate x RTT / 1514 bytes: what a loss-based flow needs queued to keep the link busy",
    );
    if let Some(segments) = cut {
        f.push(
            "ssthresh_segments",
            segments,
            "segments",
            "the sender's slow-start threshold after the drops (tcp_info), under half the BDP",
        );
    }
    f.push(
        "throughput_bps",
        throughput,
        "bit/s",
        "stream, after warm-up",
    );
    if let Some(r) = ctx.rate() {
        f.push("path_rate_bps", r.bps, "bit/s", r.context());
    }
    f.explanation = shallow_explanation(throughput / rate, bdp_packets);
    f.fixes = shallow_fixes(ctx, bdp_packets);
    vec![f]
}

/// Why a shallow queue costs a flow its rate, for a flow that used `used` of the path.
pub(crate) fn shallow_explanation(used: f64, bdp_packets: f64) -> String {
    format!(
        "The bottleneck's queue is too short for the bursts a flow sends at this rate and RTT: it overflows and drops packets long before the link is full, so a loss-based sender keeps halving its window ({:.0}% of the path used). A policer behaves the same way. A queue of about one BDP ({bdp_packets:.0} packets here) or pacing at the sender (BBR paces; so does SO_MAX_PACING_RATE) avoids the bursts' drops.",
        used * 100.0
    )
}

/// The fixes of a shallow queue on a path of `bdp_packets`.
pub(crate) fn shallow_fixes(ctx: &Context<'_>, bdp_packets: f64) -> Vec<Fix> {
    let mut fixes = vec![Fix {
        lines: vec![format!(
            "tcplab lab set LAB --queue {:.0}",
            bdp_packets.ceil().max(16.0)
        )],
        ..Fix::other(
            "lengthen the bottleneck queue to about one BDP (on a real path: the router's buffer, or a policer's burst size)",
            "the path's bottleneck",
        )
    }];
    let sender = ctx.describe_host("sender", crate::battery::Role::Client);
    if ctx.available_cc().iter().any(|c| c == "bbr") || ctx.available_cc().is_empty() {
        fixes.push(Fix::sysctl(
            "net.ipv4.tcp_congestion_control",
            "bbr",
            Scope::Namespace,
            &sender,
        ));
    }
    fixes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::battery::{Battery, PathInfo};
    use crate::synth::{self, StreamSim};

    fn stream(rtt_us: u32, min_rtt_us: u32, bps: f64) -> Battery {
        let mut s = StreamSim::healthy(bps, rtt_us).run();
        for i in s.intervals.iter_mut() {
            if let Some(t) = i.tcp_info.as_mut() {
                t.min_rtt_us = min_rtt_us;
            }
        }
        Battery {
            stream: Some(s),
            facts: Some(synth::facts(250)),
            path: PathInfo {
                configured_rtt_ms: Some(f64::from(min_rtt_us) / 1e3),
                rate_bps: Some(50e6),
                ..PathInfo::default()
            },
            ..Battery::default()
        }
    }

    #[test]
    fn a_second_of_queue_on_a_10_ms_path_is_an_error() {
        let f = check_bloat(&Context::new(&stream(980_000, 10_000, 48e6)));
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].severity, Severity::Error);
        assert!((f[0].figure("added_delay_ms").unwrap() - 970.0).abs() < 1e-9);
        assert_eq!(f[0].figure("base_rtt_ms"), Some(10.0));
        assert!(
            f[0].title.contains("adds 970 ms to a 10.0 ms path"),
            "{}",
            f[0].title
        );
        assert!(
            f[0].fixes
                .iter()
                .any(|x| x.lines.iter().any(|l| l.contains("bbr")))
        );
    }

    #[test]
    fn probes_under_load_show_it_when_the_bulk_flow_does_not() {
        // The bulk flow paces itself (BBR: no inflation of its own RTT) but a second flow the
        // other way fills the queue: the probes see 400 ms on a 10 ms path.
        let mut b = stream(11_000, 10_000, 48e6);
        let mut r = tcplab_results::rrul::RrulResult::default();
        r.summary.inflation.before_p50_us = Some(10_200.0);
        r.summary.inflation.during_p50_us = Some(410_200.0);
        r.summary.inflation.during_p99_us = Some(900_000.0);
        b.rrul = Some(r);
        let f = check_bloat(&Context::new(&b));
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].severity, Severity::Error);
        assert!((f[0].figure("added_delay_ms").unwrap() - 400.0).abs() < 1e-9);
        assert_eq!(f[0].figure("probe_p99_under_load_ms"), Some(900.0));
        assert!((f[0].figure("bulk_flow_added_delay_ms").unwrap() - 1.0).abs() < 1e-9);
        assert!(
            f[0].evidence[0].context.contains("probes"),
            "{:?}",
            f[0].evidence[0]
        );
    }

    /// Probes beside a load both ways on a 50 ms path that add `added_ms` under load.
    fn probed(added_ms: f64, direction: LoadDirection) -> Battery {
        let mut b = stream(50_500, 50_000, 9e6);
        let mut r = tcplab_results::rrul::RrulResult::default();
        r.config.direction = direction;
        r.summary.inflation.before_p50_us = Some(50_000.0);
        r.summary.inflation.during_p50_us = Some(50_000.0 + added_ms * 1e3);
        b.rrul = Some(r);
        b
    }

    #[test]
    fn probes_across_two_loaded_queues_allow_a_bdp_and_a_half_in_each() {
        // 1.2 BDPs each way under a load both ways: 2.4 RTTs added, the sizing rule twice.
        let both = probed(120.0, LoadDirection::Both);
        assert!(check_bloat(&Context::new(&both)).is_empty());
        // The same added delay from a load one way is one queue of 2.4 BDPs.
        let up = probed(120.0, LoadDirection::Up);
        assert_eq!(
            check_bloat(&Context::new(&up))[0].severity,
            Severity::Warning
        );
        // Four RTTs across two queues is too much, 8 is an error.
        let f = check_bloat(&Context::new(&probed(210.0, LoadDirection::Both)));
        assert_eq!(f[0].severity, Severity::Warning);
        let f = check_bloat(&Context::new(&probed(410.0, LoadDirection::Both)));
        assert_eq!(f[0].severity, Severity::Error);
    }

    #[test]
    fn a_queue_of_one_or_two_bdps_is_not_bufferbloat() {
        // 100 ms path, 180 ms under load: 1.8 x the RTT, the sizing rule for one flow.
        assert!(check_bloat(&Context::new(&stream(180_000, 100_000, 9e6))).is_empty());
        // A LAN path whose RTT grows 20-fold but only by 19 ms: nobody notices 19 ms.
        assert!(check_bloat(&Context::new(&stream(20_000, 1_000, 48e6))).is_empty());
        // Over both bounds, below the error's: a warning.
        let f = check_bloat(&Context::new(&stream(60_000, 10_000, 48e6)));
        assert_eq!(f[0].severity, Severity::Warning);
    }

    /// A 1 Gbit/s, 10 ms path whose emulated queue holds `queue` packets and dropped
    /// `queue_drops` (and `loss_drops` at random) of the stream's 200,000 packets.
    fn policed(bps: f64, queue: u32, queue_drops: u64, loss_drops: u64) -> Battery {
        let mut b = stream(10_500, 10_000, bps);
        b.path.rate_bps = Some(1e9);
        let mut link = tcplab_emu::LinkConfig::default();
        link.forward.rate_bps = Some(1_000_000_000);
        link.forward.queue = Some(tcplab_emu::QueueLimit::Packets(queue));
        let account = tcplab_results::emulator::RunAccount {
            forward_drops: tcplab_results::emulator::ModelDrops {
                frames: 200_000,
                loss: loss_drops,
                queue_full: queue_drops,
            },
            ..Default::default()
        };
        if let Some(s) = b.stream.as_mut() {
            s.meta.facts.emulator = Some(crate::synth::emulated(link, account));
        }
        b
    }

    #[test]
    fn drops_at_a_short_queue_below_the_rate_are_a_shallow_queue() {
        let f = check_shallow(&Context::new(&policed(120e6, 4, 9_000, 0)));
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].severity, Severity::Error);
        assert_eq!(f[0].figure("queue_drops"), Some(9_000.0));
        assert_eq!(f[0].figure("queue_limit"), Some(4.0));
        // 1 Gbit/s x 10 ms / 1514 bytes.
        assert!((f[0].figure("bdp_packets").unwrap() - 825.63).abs() < 0.01);
        assert!(
            f[0].fixes[0].lines[0].contains("--queue 826"),
            "{:?}",
            f[0].fixes[0]
        );
    }

    fn set_ssthresh(b: &mut Battery, ssthresh: u32) {
        for i in b.stream.as_mut().unwrap().intervals.iter_mut() {
            if let Some(t) = i.tcp_info.as_mut() {
                t.ssthresh = ssthresh;
            }
        }
    }

    #[test]
    fn a_few_drops_that_cut_the_window_far_below_the_bdp_are_a_shallow_queue() {
        // Slow start overflowed a 6-packet queue 4 times on a path of 826 packets' BDP: a
        // loss-based flow left at ssthresh 8 regains a segment per round trip.
        let mut b = policed(120e6, 6, 4, 0);
        set_ssthresh(&mut b, 8);
        let f = check_shallow(&Context::new(&b));
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].figure("ssthresh_segments"), Some(8.0));
    }

    #[test]
    fn a_full_path_random_loss_or_a_handful_of_drops_is_not_a_shallow_queue() {
        assert!(check_shallow(&Context::new(&policed(950e6, 4, 9_000, 0))).is_empty());
        assert!(check_shallow(&Context::new(&policed(120e6, 4, 300, 2_000))).is_empty());
        assert!(check_shallow(&Context::new(&policed(120e6, 4, 5, 0))).is_empty());
        // A handful with a window left near the BDP (ssthresh 700 of 826 segments).
        let mut b = policed(120e6, 4, 5, 0);
        set_ssthresh(&mut b, 700);
        assert!(check_shallow(&Context::new(&b)).is_empty());
        // Drops at a queue of a BDP or more come from something else (826 packets' BDP).
        assert!(check_shallow(&Context::new(&policed(120e6, 826, 9_000, 0))).is_empty());
        // Without the emulator's account nothing says where the drops were.
        assert!(check_shallow(&Context::new(&stream(10_500, 10_000, 120e6))).is_empty());
    }
}
