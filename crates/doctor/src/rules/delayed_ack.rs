//! `delayed_ack_stall`: small-message latencies clustered at the delayed-ACK timer.
//!
//! Nagle's algorithm holds a sub-MSS write while earlier data is unacknowledged; the receiver,
//! having nothing to send, delays its ACK until its timer fires. The write then waits for that
//! timer: TCP_ATO_MIN = HZ/25 jiffies, 40 ms on every HZ (10 jiffies at HZ=250), and the timer
//! wheel rounds the expiry up, so stalls last 40 ms to 40 ms + 2 jiffies (44 ms measured on
//! this HZ=250 kernel over loopback). The rule counts how many samples exceed the path's own
//! latency by that much, ± [`CLUSTER_SLACK_S`] (`tcplab_stats::cluster_fraction`, with a
//! Wilson interval) and fires when that share is
//! clearly above zero. Random stalls rarely land in that narrow window, a long-RTT path does not
//! either (the RTT is subtracted first).
//!
//! The held write leaves when the delayed ACK arrives, a round trip after the segment it
//! acknowledges left plus the timer, so the stall's excess over the path is the timer plus one
//! RTT: the window is centred there. A wait of one or two RTTs alone is Nagle waiting for an
//! ordinary ACK (or a window-limited flow), not the timer; where the window would contain such
//! a multiple of the RTT, the two cannot be told apart and the rule stays silent.

use tcplab_stats::{cluster_fraction, in_ticks, quantile};

use crate::battery::Context;
use crate::finding::{Finding, SampleRefs, Severity};
use crate::rules::fixes::delack_fixes;
use crate::series::{Series, small_message_series};

/// The delayed-ACK timer: TCP_ATO_MIN = HZ/25 jiffies = 40 ms whatever the HZ.
pub const DELACK_TIMER_S: f64 = 0.040;

/// Largest message that counts as small: one MSS on Ethernet with timestamps (1448 bytes).
/// Nagle only holds segments smaller than the MSS.
pub const SMALL_MESSAGE_MAX: u32 = 1448;

/// Allowance beyond the window [timer, timer + 2 jiffies], for scheduling and wake-up latency.
pub const CLUSTER_SLACK_S: f64 = 0.001;

/// Fewest samples in the window to fire: fewer could be chance coincidences with the timer.
pub const MIN_CLUSTER_COUNT: usize = 5;

/// The 95% Wilson lower bound of the share in the window must exceed this: 0.5% of messages
/// is already a 0.2 ms mean cost per message for 40 ms stalls, more than a LAN's RTT.
pub const MIN_CLUSTER_SHARE: f64 = 0.005;

/// A share at or above this (most messages wait for the timer) is an error: the workload runs
/// at one message per 40 ms.
pub const MAJORITY_SHARE: f64 = 0.5;

/// What one series shows.
struct Cluster<'s> {
    series: &'s Series,
    baseline: f64,
    /// Centre of the excess window: the timer, a jiffy of rounding and one RTT.
    centre: f64,
    inside: Vec<usize>,
    share: f64,
    lower: f64,
}

/// The rule.
pub fn check(ctx: &Context<'_>) -> Vec<Finding> {
    // A stream of messages with Nagle off waits for ACKs only when its congestion window is
    // full (slow start on a fresh connection, a window of tiny segments): waits of the window's
    // making, at multiples of the RTT, which a paced stream's timer stalls are the periodic
    // rule's to find. The delayed-ACK stall needs a write held for an ACK: Nagle on, or a
    // request waiting for its response.
    let series: Vec<Series> = small_message_series(ctx.battery, SMALL_MESSAGE_MAX)
        .into_iter()
        .filter(|s| s.measure == "rr latency" || s.sender_nodelay != Some(true))
        .collect();
    let rtt = ctx.rtt_s();
    let best = series
        .iter()
        .filter_map(|s| cluster(ctx, s, rtt.map(|r| r.0)))
        .filter(|c| c.inside.len() >= MIN_CLUSTER_COUNT && c.lower > MIN_CLUSTER_SHARE)
        .max_by(|a, b| a.share.total_cmp(&b.share));
    best.map(|c| vec![finding(ctx, &c)]).unwrap_or_default()
}

/// Half-width of the window [timer − slack, timer + 2 jiffies + slack].
fn half_width(ctx: &Context<'_>) -> f64 {
    ctx.tick_s() + CLUSTER_SLACK_S
}

/// Centre of that window: the timer plus one jiffy of expiry rounding.
fn centre(ctx: &Context<'_>) -> f64 {
    DELACK_TIMER_S + ctx.tick_s()
}

fn cluster<'s>(ctx: &Context<'_>, s: &'s Series, rtt: Option<f64>) -> Option<Cluster<'s>> {
    let min = s.values.iter().copied().reduce(f64::min)?;
    // The path's own share of a sample: RTT-based when known, but never above the smallest
    // sample (a message that did not stall is the best baseline there is).
    let baseline = rtt.map_or(min, |r| (r * s.rtt_multiple).min(min));
    // The round trip the held write also waits, from the same evidence: the baseline is a
    // share of it (a one-way delay is half).
    let round_trip = if s.rtt_multiple > 0.0 {
        baseline / s.rtt_multiple
    } else {
        rtt.unwrap_or(0.0)
    };
    let excess: Vec<f64> = s.values.iter().map(|v| v - baseline).collect();
    let (centre, hw) = (centre(ctx) + round_trip, half_width(ctx));
    let rtt_alike = (1..=2).any(|k| (centre - f64::from(k) * round_trip).abs() <= hw);
    if round_trip > 0.0 && rtt_alike {
        return None;
    }
    let cf = cluster_fraction(&excess, centre, hw).ok()?;
    let inside = excess
        .iter()
        .enumerate()
        .filter(|(_, e)| (*e - centre).abs() <= hw)
        .map(|(i, _)| i)
        .collect();
    Some(Cluster {
        series: s,
        baseline,
        centre,
        inside,
        share: cf.fraction,
        lower: cf.lower,
    })
}

fn finding(ctx: &Context<'_>, c: &Cluster<'_>) -> Finding {
    let s = c.series;
    let severity = if c.share >= MAJORITY_SHARE {
        Severity::Error
    } else {
        Severity::Warning
    };
    let ticks = in_ticks(DELACK_TIMER_S, ctx.hz);
    let mut f = Finding::new(
        "delayed_ack_stall",
        severity,
        format!(
            "{:.1}% of {}-byte messages wait for the 40 ms delayed-ACK timer ({ticks:.0} jiffies)",
            c.share * 100.0,
            s.size
        ),
    );
    let lo_ms = (c.centre - half_width(ctx)) * 1e3;
    let hi_ms = (c.centre + half_width(ctx)) * 1e3;
    f.push(
        "delack_cluster_share",
        c.share,
        "fraction",
        format!(
            "{} of {} samples ({}) exceed the baseline by {lo_ms:.1}-{hi_ms:.1} ms",
            c.inside.len(),
            s.values.len(),
            s.measure
        ),
    );
    f.push(
        "delack_cluster_share_ci_low",
        c.lower,
        "fraction",
        "95% Wilson lower bound of that share",
    );
    f.push(
        "delack_timer_ms",
        DELACK_TIMER_S * 1e3,
        "ms",
        "TCP_ATO_MIN = HZ/25 jiffies",
    );
    f.push("delack_timer_ticks", ticks, "jiffies", ctx.hz_note());
    let stalled: Vec<f64> = c.inside.iter().map(|&i| s.values[i] - c.baseline).collect();
    if let Ok(med) = quantile(&stalled, 0.5) {
        f.push(
            "stall_excess_median_ms",
            med * 1e3,
            "ms",
            format!(
                "median excess of the clustered samples over the baseline, {:.2} jiffies",
                in_ticks(med, ctx.hz)
            ),
        );
    }
    f.push(
        "baseline_ms",
        c.baseline * 1e3,
        "ms",
        format!(
            "the path's share of a {} (excess is measured from it)",
            s.measure
        ),
    );
    if let Ok(p50) = quantile(&s.values, 0.5) {
        f.push(
            "latency_p50_ms",
            p50 * 1e3,
            "ms",
            format!("median {}", s.measure),
        );
    }
    f.push("message_size", f64::from(s.size), "bytes", s.source.clone());
    if let Some(nd) = s.sender_nodelay {
        f.push(
            "sender_nodelay",
            f64::from(u8::from(nd)),
            "bool",
            "TCP_NODELAY on the sending socket (0 = Nagle on)",
        );
    }
    f.samples
        .push(SampleRefs::new(s.source.clone(), c.inside.iter().copied()));
    f.explanation = explanation(s.sender_nodelay);
    f.fixes = delack_fixes(ctx, s.sender_nodelay, s.delack_max_supported);
    f
}

fn explanation(nodelay: Option<bool>) -> String {
    let cause = match nodelay {
        Some(true) => {
            "Nagle is already off, so the sender is waiting for an ACK for another reason \
             (congestion window of small segments, or a write-write-read pattern on the peer); \
             the receiver delays that ACK until its timer fires."
        }
        _ => {
            "Nagle's algorithm holds a small write while earlier data is unacknowledged, and the \
             receiver, with nothing to send back, delays its ACK until the delayed-ACK timer \
             fires: each affected message waits 40 ms."
        }
    };
    format!(
        "{cause} Turn Nagle off on the sender (TCP_NODELAY) or batch each message into one \
         write; or make the receiver ACK at once (TCP_QUICKACK re-armed after each read, a \
         lower TCP_DELACK_MAX_US, tcp_rto_min_us, or the route's quickack attribute)."
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::battery::Battery;
    use crate::finding::FixKind;
    use crate::synth::{self, MsgSim, SplitMix};

    fn battery(hz: u32) -> Battery {
        Battery {
            facts: Some(synth::facts(hz)),
            ..Battery::default()
        }
    }

    /// Write-write-read with Nagle: after the first 10 (quick-ACK mode at start), every
    /// transaction waits 40 ms + up to one jiffy for the delayed ACK.
    fn wwr_latencies(n: usize, hz: u32) -> Vec<u64> {
        let mut rng = SplitMix::new(1);
        let tick = 1_000_000_000 / u64::from(hz);
        (0..n)
            .map(|i| {
                let base = 100_000 + rng.below(10_000);
                if i < 10 {
                    base
                } else {
                    base + 40_000_000 + rng.below(tick)
                }
            })
            .collect()
    }

    #[test]
    fn fires_on_write_write_read_with_nagle() {
        let mut b = battery(250);
        b.rr = Some(synth::rr(100, &wwr_latencies(200, 250), false));
        let f = check(&Context::new(&b));
        assert_eq!(f.len(), 1);
        let f = &f[0];
        assert_eq!(f.id, "delayed_ack_stall");
        assert_eq!(f.severity, Severity::Error);
        assert!((f.figure("delack_cluster_share").unwrap() - 190.0 / 200.0).abs() < 1e-12);
        assert_eq!(f.figure("delack_timer_ticks"), Some(10.0));
        let excess = f.figure("stall_excess_median_ms").unwrap();
        assert!((40.0..44.0).contains(&excess), "excess {excess}");
        assert_eq!(f.samples[0].total, 190);
        assert_eq!(f.samples[0].indices[0], 10);
        match &f.fixes[0].kind {
            FixKind::SetSockOpt { option, value } => {
                assert_eq!((option.as_str(), value.as_str()), ("TCP_NODELAY", "1"));
            }
            other => panic!("first fix {other:?}"),
        }
        let keys: Vec<String> = f.fixes.iter().flat_map(|x| x.lines.clone()).collect();
        assert!(
            keys.contains(&"net.ipv4.tcp_rto_min_us = 8000".to_string()),
            "{keys:?}"
        );
        assert!(
            keys.iter()
                .any(|l| l.contains("TCP_DELACK_MAX_US, &(int){8000}"))
        );
        assert!(
            keys.iter()
                .any(|l| l == "ip route replace <sender address> dev eth0 quickack 1")
        );
    }

    #[test]
    fn jiffies_follow_the_measured_hz() {
        let mut b = battery(1000);
        b.rr = Some(synth::rr(100, &wwr_latencies(200, 1000), false));
        let f = check(&Context::new(&b));
        assert_eq!(f[0].figure("delack_timer_ticks"), Some(40.0));
    }

    #[test]
    fn partial_share_with_nagle_off_is_a_warning() {
        // Request/response with Nagle off on the client: every 10th transaction waits for the
        // server's delayed ACK (its own write-write-read), 40-44 ms.
        let mut rng = SplitMix::new(9);
        let lat: Vec<u64> = (0..400)
            .map(|i| {
                let base = 100_000 + rng.below(10_000);
                if i % 10 == 5 {
                    base + 40_000_000 + rng.below(4_000_000)
                } else {
                    base
                }
            })
            .collect();
        let mut b = battery(250);
        b.rr = Some(synth::rr(100, &lat, true));
        let f = check(&Context::new(&b));
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].severity, Severity::Warning);
        assert!((f[0].figure("delack_cluster_share").unwrap() - 0.1).abs() < 1e-12);
        // Nagle was already off: no TCP_NODELAY advice, QUICKACK first.
        assert!(
            matches!(&f[0].fixes[0].kind, FixKind::SetSockOpt { option, .. } if option == "TCP_QUICKACK")
        );
    }

    #[test]
    fn a_paced_stream_with_nagle_off_is_left_to_the_periodic_rule() {
        // Messages with Nagle off that waited 40-44 ms: only a full congestion window holds
        // them, which is not the delayed-ACK trap.
        let mut sim = MsgSim::new(400, 16);
        sim.spacing_ns = 50_000_000;
        let mut b = battery(250);
        b.msgs = Some(synth::msgs(
            vec![sim.run(|i| if i % 10 == 5 { 42_000_000 } else { 0 })],
            true,
        ));
        assert!(check(&Context::new(&b)).is_empty());
    }

    #[test]
    fn the_stall_is_the_timer_plus_a_round_trip() {
        // Write-write-read on a 10 ms path: 10 ms normally, 10 + 10 + 40-44 ms when stalled.
        let lat: Vec<u64> = wwr_latencies(200, 250)
            .into_iter()
            .enumerate()
            .map(|(i, l)| l + if i < 10 { 10_000_000 } else { 20_000_000 })
            .collect();
        let mut b = battery(250);
        b.path.configured_rtt_ms = Some(10.0);
        b.rr = Some(synth::rr(100, &lat, false));
        let f = check(&Context::new(&b));
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(
            f[0].evidence[0].context.contains("49.0-59.0 ms"),
            "{:?}",
            f[0].evidence[0]
        );
    }

    #[test]
    fn nagle_waiting_one_round_trip_is_not_the_timer() {
        // Messages on a 40 ms path held by Nagle for about one RTT (ordinary ACKs).
        let mut rng = SplitMix::new(7);
        let mut sim = MsgSim::new(2000, 16);
        sim.base_ns = 20_000_000;
        sim.spacing_ns = 1_000_000;
        let extra: Vec<u64> = (0..2000)
            .map(|_| 38_000_000 + rng.below(4_000_000))
            .collect();
        let mut b = battery(250);
        b.path.configured_rtt_ms = Some(40.0);
        b.msgs = Some(synth::msgs(vec![sim.run(|i| extra[i])], false));
        assert!(check(&Context::new(&b)).is_empty());
    }

    #[test]
    fn silent_on_a_40ms_path_without_stalls() {
        // RTT 40 ms: every latency is ~40 ms, but that is the path, not the timer.
        let mut rng = SplitMix::new(3);
        let lat: Vec<u64> = (0..500).map(|_| 40_000_000 + rng.below(500_000)).collect();
        let mut b = battery(250);
        b.path.configured_rtt_ms = Some(40.0);
        b.rr = Some(synth::rr(100, &lat, false));
        assert!(check(&Context::new(&b)).is_empty());
    }

    #[test]
    fn silent_on_healthy_and_on_random_stalls() {
        let mut b = battery(250);
        b.msgs = Some(synth::msgs(vec![MsgSim::new(2000, 16).run(|_| 0)], false));
        assert!(check(&Context::new(&b)).is_empty());
        // 5% of paced messages stall 20-120 ms: a few land near 40 ms by chance, too few.
        let mut sim = MsgSim::new(2000, 16);
        sim.spacing_ns = 200_000_000;
        let mut rng = SplitMix::new(5);
        let extra: Vec<u64> = (0..2000)
            .map(|_| {
                if rng.unit() < 0.05 {
                    20_000_000 + rng.below(100_000_000)
                } else {
                    0
                }
            })
            .collect();
        b.msgs = Some(synth::msgs(vec![sim.run(|i| extra[i])], false));
        assert!(check(&Context::new(&b)).is_empty());
    }
}
