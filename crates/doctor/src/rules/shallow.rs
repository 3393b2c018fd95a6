//! `shallow_queue` without the emulator's account (a real path): what the flow and the paced
//! probes show. A flow that retransmitted where the battery's paced messages (which never
//! queue) lost nothing at its loss rate caused its losses itself, at the bottleneck's queue.
//! If, besides, it never stood a queue of half a BDP (its smoothed RTT never rose that far
//! above the path's) and it stayed below the path's estimated rate, that queue is far shorter
//! than the BDP: tail drop at a shallow buffer, or a policer's few packets of burst.

use tcplab_results::stream::StreamResult;

use crate::battery::Context;
use crate::finding::{Finding, Severity};
use crate::limits::{COSTLY_SHARE, PATH_FULL_SHARE};
use crate::rules::probes::ProbeLoss;
use crate::rules::queue::{SHALLOW_SHARE, shallow_explanation, shallow_fixes};
use crate::rules::stream_view::{FlowSpan, StreamView};

/// Fewest retransmitted segments for a finding on their number alone: a few are the end of slow
/// start, which every drop-tail queue overflows once (unless they cut the window far under the
/// BDP).
pub const MIN_RETRANS: u64 = 10;

/// A flow waiting on a window this share of its busy time was held by that window, not by
/// the queue's drops.
pub const WINDOW_SHARE: f64 = 0.5;

/// The rule, from the estimates.
pub fn from_estimates(ctx: &Context<'_>, stream: &StreamResult) -> Vec<Finding> {
    let Some(view) = StreamView::of(stream) else {
        return Vec::new();
    };
    let rate = ctx.rate();
    if rate
        .as_ref()
        .is_some_and(|r| view.throughput_bps >= PATH_FULL_SHARE * r.bps)
    {
        return Vec::new();
    }
    // The whole connection: a flow that halved its way down in slow start and never came back
    // lost its packets there.
    let whole: Vec<FlowSpan> = view
        .flows
        .iter()
        .map(|f| FlowSpan { start: None, ..*f })
        .collect();
    let sum = |f: fn(&FlowSpan) -> u64| -> u64 { whole.iter().map(f).sum() };
    let retrans = sum(FlowSpan::retrans_segments);
    let acked = sum(FlowSpan::bytes_acked);
    if retrans == 0 || acked == 0 {
        return Vec::new();
    }
    let loss = sum(FlowSpan::bytes_retrans) as f64 / acked as f64;
    let Some(probes) = ProbeLoss::of(ctx).filter(|p| p.clean_at(loss)) else {
        return Vec::new();
    };
    let windows = view
        .limited_fraction(|f| f.rwnd_limited_us() + f.sndbuf_limited_us())
        .unwrap_or(0.0);
    if windows >= WINDOW_SHARE {
        return Vec::new();
    }
    let Some(base) = ctx
        .estimate
        .base_rtt
        .as_ref()
        .map(|e| e.value)
        .or(view.min_rtt_s)
    else {
        return Vec::new();
    };
    let Some(queue_s) = deepest_queue(stream) else {
        return Vec::new();
    };
    if queue_s >= SHALLOW_SHARE * base {
        return Vec::new();
    }
    // What the drops cost: with the path's rate, a flow below it whose drops were many or cut
    // its window under half the BDP; without it, drops of a share no healthy flow has.
    let costly = match &rate {
        Some(r) => {
            let bdp = r.bps / 8.0 * base / 1514.0;
            retrans >= MIN_RETRANS || window_cut(&view, bdp).is_some()
        }
        None => loss >= SEVERE_LOSS && retrans >= MIN_RETRANS,
    };
    if !costly {
        return Vec::new();
    }
    let floor = ctx.estimate.rate.as_ref().map(|e| e.value);
    let path_bps = rate
        .as_ref()
        .map(|r| r.bps)
        .or(floor)
        .unwrap_or(view.throughput_bps);
    let bdp_packets = path_bps / 8.0 * base / 1514.0;
    let severity = if rate.is_none() || view.throughput_bps < COSTLY_SHARE * path_bps {
        Severity::Error
    } else {
        Severity::Warning
    };
    let title_rate = match &rate {
        Some(r) => format!(
            "{:.1} Mbit/s of a {:.1} Mbit/s path",
            view.throughput_bps / 1e6,
            r.bps / 1e6
        ),
        None => format!(
            "{:.1} Mbit/s, losing {:.1}% of its packets to its own bursts",
            view.throughput_bps / 1e6,
            loss * 100.0
        ),
    };
    let mut f = Finding::new(
        "shallow_queue",
        severity,
        format!(
            "the flow overflows a bottleneck queue of under {:.0}% of the BDP: {title_rate}",
            SHALLOW_SHARE * 100.0,
        ),
    );
    f.push(
        "retransmitted_segments",
        retrans as f64,
        "segments",
        "tcp_info total_retrans of the sending flows, whole connection",
    );
    f.push(
        "loss_rate",
        loss,
        "fraction",
        "bytes retransmitted / bytes acknowledged",
    );
    f.push(
        "paced_loss_rate",
        probes.rate(),
        "fraction",
        format!(
            "lost by the battery's paced messages, which never queue: {} of {} segments, where the flow's rate would have lost {:.0}: the flow's losses were its own, at the bottleneck",
            probes.lost,
            probes.sent,
            probes.sent as f64 * loss
        ),
    );
    f.push(
        "deepest_queue_ms",
        queue_s * 1e3,
        "ms",
        "the most the flow's smoothed RTT rose above its minimum in any measured interval: the deepest queue it stood before the drops",
    );
    f.push(
        "queue_packets_estimated",
        (queue_s * path_bps / 8.0 / 1514.0).max(1.0),
        "packets",
        "that queue at the path's rate",
    );
    f.push(
        "bdp_packets",
        bdp_packets,
        "packets",
        "path rate x base RTT / 1514 bytes: what a loss-based flow needs queued to keep the link busy",
    );
    f.push(
        "throughput_bps",
        view.throughput_bps,
        "bit/s",
        "stream, after warm-up",
    );
    match &rate {
        Some(r) => f.push("path_rate_bps", r.bps, "bit/s", r.context()),
        None => f.push(
            "path_rate_at_least_bps",
            path_bps,
            "bit/s",
            "what the battery's flows carried: nothing bounded the path's rate, and the drops alone say the queue is short",
        ),
    }
    f.explanation = shallow_explanation(view.throughput_bps / path_bps, bdp_packets);
    f.fixes = shallow_fixes(ctx, bdp_packets);
    f.fixes
        .retain(|x| !x.lines.iter().any(|l| l.starts_with("tcplab lab set")));
    vec![f]
}

/// A flow that loses this share of its packets to its own bursts (the paced messages lost none
/// at that rate) while it never stands a queue overflows a queue of a few packets, whatever the
/// path's rate: BBR's 2 % of a shallow buffer, and far more at a policer.
pub const SEVERE_LOSS: f64 = 0.02;

/// A slow-start threshold under this share of the BDP shows a loss response that cut the
/// window far below what the path holds: a loss-based flow regains a segment per round trip.
pub const WINDOW_CUT_SHARE: f64 = 0.5;

/// The sending flows' smallest slow-start threshold, segments, when a loss left it under
/// [`WINDOW_CUT_SHARE`] of `bdp_packets` (0 in tcp_info: never set, or BBR).
fn window_cut(view: &StreamView, bdp_packets: f64) -> Option<f64> {
    let ssthresh = view
        .flows
        .iter()
        .map(|f| f.end.ssthresh)
        .filter(|s| *s > 0 && *s < u32::MAX / 2)
        .min()?;
    let segments = f64::from(ssthresh);
    (segments < WINDOW_CUT_SHARE * bdp_packets).then_some(segments)
}

/// The deepest queue the bulk flow stood, s: the largest excess of its smoothed RTT over its
/// minimum among the measured sending intervals.
fn deepest_queue(stream: &StreamResult) -> Option<f64> {
    stream
        .intervals
        .iter()
        .chain(&stream.server_intervals)
        .filter(|i| i.sending && !i.omitted)
        .filter_map(|i| i.tcp_info)
        .filter(|t| t.min_rtt_us > 0)
        .map(|t| f64::from(t.rtt_us.saturating_sub(t.min_rtt_us)) / 1e6)
        .reduce(f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::battery::{Battery, Role};
    use crate::plan::PartKind;
    use crate::synth::{self, StreamSim};

    /// A reno flow at `bps` whose RTT rose `queue_ms` over a 20 ms path, retransmitting
    /// `loss`, beside a train that shows 100 Mbit/s and paced probes that lost `probe_lost` of
    /// 30,000.
    fn path(bps: f64, queue_ms: f64, loss: f64, probe_lost: u64) -> Battery {
        let mut sim = StreamSim::healthy(bps, 20_000 + (queue_ms * 1e3) as u32);
        sim.loss = loss;
        sim.congestion = "reno".into();
        let mut s = sim.run();
        for i in s.intervals.iter_mut() {
            if let Some(t) = i.tcp_info.as_mut() {
                t.min_rtt_us = 20_000;
            }
        }
        let mut b = Battery {
            stream: Some(s),
            train: Some(synth::train(100e6, 0.020, 1e6, 4_000, 8)),
            facts: Some(synth::facts(250)),
            ..Battery::default()
        };
        synth::counters(
            &mut b,
            PartKind::Msgs,
            Role::Client,
            &[("Tcp.OutSegs", 30_000), ("Tcp.RetransSegs", probe_lost)],
        );
        b
    }

    #[test]
    fn a_flow_that_overflows_a_short_queue_on_its_own_is_named() {
        let b = path(40e6, 1.5, 0.01, 0);
        let f = from_estimates(&Context::new(&b), b.stream.as_ref().unwrap());
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].severity, Severity::Error);
        assert!((f[0].figure("deepest_queue_ms").unwrap() - 1.5).abs() < 1e-9);
        assert!(
            f[0].evidence
                .iter()
                .any(|e| e.context.contains("dispersion"))
        );
    }

    #[test]
    fn a_few_drops_that_cut_the_window_far_under_the_bdp_count() {
        // Slow start lost 4 packets and left reno at ssthresh 8 on a 165-packet BDP.
        let mut b = path(40e6, 1.5, 0.0005, 0);
        for i in b.stream.as_mut().unwrap().intervals.iter_mut() {
            if let Some(t) = i.tcp_info.as_mut() {
                t.total_retrans = 4;
                t.ssthresh = 8;
            }
        }
        let f = from_estimates(&Context::new(&b), b.stream.as_ref().unwrap());
        assert_eq!(f.len(), 1, "{f:?}");
        // The same drops with the window left near the BDP: the end of slow start, nothing more.
        for i in b.stream.as_mut().unwrap().intervals.iter_mut() {
            if let Some(t) = i.tcp_info.as_mut() {
                t.ssthresh = 150;
            }
        }
        assert!(from_estimates(&Context::new(&b), b.stream.as_ref().unwrap()).is_empty());
    }

    #[test]
    fn without_the_path_s_rate_only_severe_self_inflicted_loss_counts() {
        // A policer: the flow crawls at 0.5 Mbit/s losing 30 % of its packets to its own
        // bursts, the train cut to pieces (no rate), the paced messages lose nothing.
        let mut b = path(0.5e6, 0.1, 0.3, 0);
        b.train = None;
        let f = from_estimates(&Context::new(&b), b.stream.as_ref().unwrap());
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].severity, Severity::Error);
        assert!(f[0].figure("path_rate_at_least_bps").is_some());
        assert!(f[0].title.contains("losing 30.0%"), "{}", f[0].title);
        // 1 % of its packets is within what a healthy BBR flow overruns.
        let mut b = path(40e6, 1.5, 0.01, 0);
        b.train = None;
        assert!(from_estimates(&Context::new(&b), b.stream.as_ref().unwrap()).is_empty());
    }

    #[test]
    fn path_loss_a_deep_queue_or_a_full_path_are_not_a_shallow_queue() {
        // The probes lost as much: the path loses packets (the loss rule's case).
        let b = path(40e6, 1.5, 0.01, 300);
        assert!(from_estimates(&Context::new(&b), b.stream.as_ref().unwrap()).is_empty());
        // A queue of a BDP (20 ms on a 20 ms path).
        let b = path(40e6, 20.0, 0.01, 0);
        assert!(from_estimates(&Context::new(&b), b.stream.as_ref().unwrap()).is_empty());
        // At the path's rate.
        let b = path(95e6, 1.5, 0.01, 0);
        assert!(from_estimates(&Context::new(&b), b.stream.as_ref().unwrap()).is_empty());
    }
}
