//! `loss_limited`: the bulk flow retransmitted, and its throughput sits at what the Mathis
//! model allows for that loss rate and RTT (Mathis, Semke, Mahdavi, Ott 1997, CCR 27(3)):
//! rate ≤ MSS/RTT · C/√p, C = √(3/2) for Reno-style halving with delayed ACKs off. A loss-based
//! congestion control (cubic, reno) running near that bound is limited by the loss itself;
//! BBR (model-based, loss-tolerant up to ~20%) is then the alternative. BBR with a high
//! retransmission rate is the reverse case (it overruns a shallow queue): cubic is suggested.

use crate::battery::{Context, Role};
use crate::finding::{Finding, Fix, Scope, Severity};
use crate::rules::stream_view::{FlowSpan, StreamView};

/// Mathis constant C = √(3/2) (periodic loss, no delayed ACKs).
pub const MATHIS_C: f64 = 1.224_744_871_391_589;

/// Fewest retransmitted segments to judge: with 10 the loss rate is known to about ±30%
/// (Poisson), ±15% on the Mathis bound; fewer are noise.
pub const MIN_RETRANS_SEGMENTS: u64 = 10;

/// Smallest loss rate worth a finding: at 1e-4 the Mathis bound for a 1448-byte MSS at
/// 10 ms RTT is already 142 Mbit/s, so lower rates rarely limit a flow.
pub const MIN_LOSS_RATE: f64 = 1e-4;

/// Throughput within this factor of the Mathis bound is "at the bound": the loss response is
/// what limits the flow (the model is good to about a factor of two in practice).
pub const MATHIS_BOUND_RATIO: f64 = 2.0;

/// BBR retransmitting this share of its bytes overruns the bottleneck queue (BBRv1's known
/// 2%+ loss against shallow buffers); a loss-based control then treats the path better.
pub const BBR_HIGH_LOSS: f64 = 0.02;

/// A flow limited by the receive window or its send buffer this share of its busy time is
/// held by that window: its loss response is not what sets its rate.
pub const WINDOW_BOUND_SHARE: f64 = 0.5;

/// Throughput at or above this share of the known path rate means loss is not limiting.
pub const PATH_FULL_SHARE: f64 = 0.9;

/// The Mathis bound for one flow, bit/s.
pub fn mathis_bps(mss_bytes: f64, rtt_s: f64, loss: f64) -> f64 {
    mss_bytes * 8.0 / rtt_s * MATHIS_C / loss.sqrt()
}

/// The rule.
pub fn check(ctx: &Context<'_>) -> Vec<Finding> {
    let Some(stream) = &ctx.battery.stream else {
        return Vec::new();
    };
    let Some(view) = StreamView::of(stream) else {
        return Vec::new();
    };
    let (mut span, mut whole) = (view.flows.clone(), false);
    let sum = |flows: &[FlowSpan], f: fn(&FlowSpan) -> u64| -> u64 { flows.iter().map(f).sum() };
    if sum(&span, FlowSpan::retrans_segments) < MIN_RETRANS_SEGMENTS {
        // A slow lossy flow retransmits little in a short measured span: judge the whole
        // connection (warm-up included) before giving up.
        span.iter_mut().for_each(|f| f.start = None);
        whole = true;
    }
    // Retransmissions the receiver reported as duplicates (D-SACK) repaired nothing: the
    // original arrived, late (reordering) or while a timer or probe fired early. They are not
    // loss, and a path that only reorders must not be blamed for losing packets.
    let spurious = spurious_share(ctx, view.sender()).unwrap_or(0.0);
    let real = |n: u64| (n as f64 * (1.0 - spurious)).round() as u64;
    let retrans = real(sum(&span, FlowSpan::retrans_segments));
    let bytes_retrans = real(sum(&span, FlowSpan::bytes_retrans));
    let bytes_acked = sum(&span, FlowSpan::bytes_acked);
    if retrans < MIN_RETRANS_SEGMENTS || bytes_acked == 0 {
        return Vec::new();
    }
    let loss = bytes_retrans as f64 / (bytes_acked + bytes_retrans) as f64;
    let rate = ctx.battery.path.rate_bps.filter(|r| *r > 0.0);
    let Some(rtt) = view.rtt_s.or(ctx.rtt_s().map(|r| r.0)) else {
        return Vec::new();
    };
    let mss = view.mss.unwrap_or(1448.0);
    let bound = mathis_bps(mss, rtt, loss) * view.flows.len() as f64;
    let full = rate.is_some_and(|r| view.throughput_bps >= PATH_FULL_SHARE * r);
    // Far above the Mathis bound, the loss is not what limits the flow (a rate-based control
    // rides through it, or the losses are a burst at start-up); only a loss rate high enough to
    // hurt a loss-based control's neighbours still deserves a word, and only where the path's
    // rate shows the flow fell short (BBR overruns a shallow queue at full rate too).
    let rides_through = view.throughput_bps > MATHIS_BOUND_RATIO * bound
        && (loss < BBR_HIGH_LOSS || rate.is_none());
    // A flow that spent most of its time waiting for a window (the receiver's or its own send
    // buffer) was held by that window, not by its loss response.
    let busy = sum(&span, FlowSpan::busy_us);
    let window_waits =
        sum(&span, FlowSpan::rwnd_limited_us) + sum(&span, FlowSpan::sndbuf_limited_us);
    let window_bound = busy > 0 && window_waits as f64 >= WINDOW_BOUND_SHARE * busy as f64;
    let limited = loss >= MIN_LOSS_RATE
        && !full
        && !rides_through
        && !window_bound
        && !queue_drops_only(stream);
    // A flow that rides through the loss (BBR) hides it from the figures above, but the path
    // still loses packets, which every loss-based flow on it pays for: on an emulated path the
    // model says so itself.
    let lossy = path_loss_share(stream).is_some_and(|p| p >= MIN_LOSS_RATE);
    if !limited && !lossy {
        return Vec::new();
    }
    vec![finding(
        ctx,
        &view,
        Figures {
            limited,
            retrans,
            loss,
            rtt,
            mss,
            bound,
            rate,
            whole,
            spurious,
        },
    )]
}

/// The share of the sender's retransmitted segments the receiver reported as duplicates
/// (TcpExt TCPDSACKRecvSegs / Tcp RetransSegs, the stream's whole run); `None` without
/// retransmissions or counters.
fn spurious_share(ctx: &Context<'_>, sender: Role) -> Option<f64> {
    let retrans = ctx.counter("stream", sender, "Tcp.RetransSegs")?;
    let duplicates = ctx.counter("stream", sender, "TcpExt.TCPDSACKRecvSegs")?;
    (retrans > 0).then(|| (duplicates as f64 / retrans as f64).min(1.0))
}

/// The figures the finding reports.
/// Fewest packets the emulated link's loss process must drop during the stream before the
/// path counts as lossy on its own evidence.
pub const MIN_PATH_LOSS_DROPS: u64 = 10;

/// The share of the stream's client → server packets the emulated link's loss process dropped
/// (not its queue, not the emulator's own faults); `None` off an emulated path or with fewer
/// than [`MIN_PATH_LOSS_DROPS`].
fn path_loss_share(stream: &tcplab_results::stream::StreamResult) -> Option<f64> {
    let account = crate::battery::EmulatedRun::of(&stream.meta)?.account?;
    let d = account.forward_drops;
    (d.loss >= MIN_PATH_LOSS_DROPS && d.frames > 0).then(|| d.loss as f64 / d.frames as f64)
}

/// Whether the emulated link's account says the stream's packets were dropped only by its
/// full queue, none by its loss process: the flow's retransmissions are then the congestion it
/// causes itself at the bottleneck (the queue rules judge whether that queue is too short), not
/// a path that loses packets.
fn queue_drops_only(stream: &tcplab_results::stream::StreamResult) -> bool {
    crate::battery::EmulatedRun::of(&stream.meta)
        .and_then(|e| e.account)
        .is_some_and(|a| a.forward_drops.loss == 0 && a.forward_drops.queue_full > 0)
}

struct Figures {
    /// The loss held the flow below the path (false: the path loses packets, the flow coped).
    limited: bool,
    retrans: u64,
    loss: f64,
    rtt: f64,
    mss: f64,
    bound: f64,
    rate: Option<f64>,
    /// Counted over the whole connection, the measured span having too few retransmissions.
    whole: bool,
    /// Share of retransmissions the receiver reported as duplicates, left out of the figures.
    spurious: f64,
}

/// A stream endpoint busier than this share of the run saturated its CPU: the drops then come
/// from the host's own backlog (the receiver cannot keep up), not from the network.
pub const CPU_BOUND_SHARE: f64 = 0.9;

/// The busier side's CPU time over the stream's wall time.
fn cpu_share(ctx: &Context<'_>) -> f64 {
    ctx.battery.stream.as_ref().map_or(0.0, |s| {
        let flows = f64::from(s.config.flows.max(1));
        let wall = s.elapsed_s * flows;
        if wall <= 0.0 {
            0.0
        } else {
            s.meta.client_cpu_s.max(s.meta.server_cpu_s) / wall
        }
    })
}

fn finding(ctx: &Context<'_>, view: &StreamView, x: Figures) -> Finding {
    let ratio = view.throughput_bps / x.bound;
    let cpu = cpu_share(ctx);
    let severity = if cpu >= CPU_BOUND_SHARE {
        Severity::Info
    } else if x.rate.is_some_and(|r| view.throughput_bps < 0.5 * r) {
        Severity::Error
    } else {
        Severity::Warning
    };
    let mut f = Finding::new(
        "loss_limited",
        severity,
        format!(
            "bulk transfer retransmits {:.2}% of its bytes; {:.1} Mbit/s against a Mathis bound of {:.1} Mbit/s",
            x.loss * 100.0,
            view.throughput_bps / 1e6,
            x.bound / 1e6
        ),
    );
    if cpu >= CPU_BOUND_SHARE {
        f.push(
            "endpoint_cpu_share",
            cpu,
            "fraction",
            "the busier endpoint's CPU time / wall time: its own backlog drops segments, so this is \
             reported as info, not as a network loss problem",
        );
    }
    f.push(
        "retransmitted_segments",
        x.retrans as f64,
        "segments",
        if x.whole {
            "tcp_info total_retrans less the spurious share, sending flows, whole connection (too few after warm-up)"
        } else {
            "tcp_info total_retrans less the spurious share, sending flows, measured span"
        },
    );
    f.push(
        "loss_rate",
        x.loss,
        "fraction",
        "bytes retransmitted / bytes sent (tcp_info), less the spurious share",
    );
    if x.spurious > 0.0 {
        f.push(
            "spurious_retransmit_share",
            x.spurious,
            "fraction",
            "retransmissions the receiver reported as duplicates (TcpExt TCPDSACKRecvSegs / Tcp RetransSegs), left out of the loss",
        );
    }
    if let Some(p) = ctx.battery.path.loss {
        f.push(
            "configured_loss",
            p,
            "fraction",
            "loss the emulator was set to drop",
        );
    }
    f.push(
        "srtt_ms",
        x.rtt * 1e3,
        "ms",
        "median smoothed RTT under load",
    );
    f.push("mss_bytes", x.mss, "bytes", "sender MSS");
    f.push(
        "mathis_bound_bps",
        x.bound,
        "bit/s",
        format!(
            "MSS/RTT x {MATHIS_C:.3}/sqrt(p) x {} flows",
            view.flows.len()
        ),
    );
    f.push(
        "throughput_bps",
        view.throughput_bps,
        "bit/s",
        "stream, after warm-up",
    );
    f.push(
        "throughput_over_mathis",
        ratio,
        "ratio",
        "near 1: the loss response limits the flow; well above: the control ignores loss",
    );
    if let Some(r) = x.rate {
        f.push(
            "path_rate_bps",
            r,
            "bit/s",
            "configured or measured bottleneck",
        );
    }
    f.push(
        "loss_state_samples",
        view.loss_state_samples as f64,
        "intervals",
        format!(
            "of {} measured intervals in the Loss state (an RTO fired)",
            view.samples
        ),
    );
    let pattern = loss_pattern(ctx, &mut f);
    let cc = congestion_control(ctx, view.sender());
    f.fixes = cc_fixes(ctx, cc.as_deref(), x.loss, ratio, view.sender());
    f.fixes.push(Fix::other(
        "find where packets are dropped (a shallow or overflowing bottleneck queue, a bad link); with an emulator, the loss may be the one configured",
        "the path",
    ));
    f.explanation = format!(
        "The flow lost {:.3}% of its data{}{}; a loss-based congestion control halves or cuts its window on every loss, which caps it near MSS/RTT x C/sqrt(p). Removing the loss is the real fix; a congestion control that does not treat loss as congestion (BBR) keeps the rate when the loss is random{}.",
        x.loss * 100.0,
        pattern.map_or(String::new(), |p| format!(", {p}")),
        cc.as_deref()
            .map_or(String::new(), |c| format!(" under {c}")),
        if pattern.is_some_and(|p| p.contains("burst")) {
            ", and loses less to bursts, which cost a loss-based sender one window cut per burst but many retransmissions"
        } else {
            ""
        }
    );
    if let Some(p) = pattern {
        f.title = format!("{} ({p})", f.title);
    }
    if !x.limited {
        f.title = format!("the path loses packets: {}", f.title);
        f.explanation = format!(
            "This flow kept its rate through the loss (its congestion control does not take loss for congestion), but the path itself drops packets, and every loss-based flow on it (cubic, reno: most of the Internet's) pays for each drop with a window cut. {}",
            f.explanation
        );
    }
    f
}

/// Retransmitted segments per loss recovery above this: losses come in bursts (random loss of
/// under a few per cent loses one segment per window, rarely more).
pub const BURST_SEGMENTS: f64 = 3.0;

/// How the path loses packets, for the title and explanation: from the emulated link's loss
/// model when the path is emulated, else from the kernel's count of retransmissions per loss
/// recovery on the sender. Pushes the figure it used.
fn loss_pattern(ctx: &Context<'_>, f: &mut Finding) -> Option<&'static str> {
    let stream = ctx.battery.stream.as_ref()?;
    let emulated = crate::battery::EmulatedRun::of(&stream.meta);
    if let Some(loss) = emulated
        .as_ref()
        .and_then(|e| e.link.as_ref())
        .and_then(|l| l.forward.loss.as_ref())
    {
        if let Some(a) = emulated.as_ref().and_then(|e| e.account.as_ref()) {
            f.push(
                "path_loss_drops",
                a.forward_drops.loss as f64,
                "packets",
                format!(
                    "dropped by the emulated link's loss process during the stream, of {}",
                    a.forward_drops.frames
                ),
            );
        }
        return Some(match loss {
            tcplab_emu::Loss::Bernoulli { .. } => "at random",
            tcplab_emu::Loss::GilbertElliott { .. } => "in bursts (Gilbert-Elliott)",
            tcplab_emu::Loss::Pattern(_) => "following a fixed pattern",
        });
    }
    let sender = crate::rules::stream_view::StreamView::of(stream)?.sender();
    let counter = |n: &str| ctx.counter("stream", sender, n).unwrap_or(0);
    let recoveries = counter("TcpExt.TCPSackRecovery") + counter("TcpExt.TCPRenoRecovery");
    let retrans = counter("Tcp.RetransSegs");
    if recoveries == 0 || retrans == 0 {
        return None;
    }
    let per = retrans as f64 / recoveries as f64;
    f.push(
        "retransmissions_per_recovery",
        per,
        "segments",
        "Tcp RetransSegs / TcpExt TCPSackRecovery + TCPRenoRecovery of the sender, during the stream",
    );
    Some(if per >= BURST_SEGMENTS {
        "in bursts"
    } else {
        "scattered"
    })
}

/// The sender's congestion control: as read back from the socket, else the host's sysctl,
/// else the machine default.
fn congestion_control(ctx: &Context<'_>, sender: Role) -> Option<String> {
    let stream = ctx.battery.stream.as_ref()?;
    let opts = match sender {
        Role::Client => stream.meta.options.as_ref(),
        Role::Server => stream.meta.server_options.as_ref(),
    };
    opts.map(|o| o.congestion.clone())
        .filter(|c| !c.is_empty())
        .or_else(|| {
            ctx.host_sysctl(sender, "net.ipv4.tcp_congestion_control")
                .map(str::to_string)
        })
        .or_else(|| {
            ctx.facts
                .as_ref()
                .map(|f| f.congestion_control.default.clone())
        })
}

fn cc_fixes(ctx: &Context<'_>, cc: Option<&str>, loss: f64, ratio: f64, sender: Role) -> Vec<Fix> {
    let available = ctx.available_cc();
    let has = |name: &str| available.is_empty() || available.iter().any(|a| a == name);
    let suggest = match cc {
        Some("cubic" | "reno") if ratio <= MATHIS_BOUND_RATIO && has("bbr") => Some("bbr"),
        Some("bbr") if loss >= BBR_HIGH_LOSS && has("cubic") => Some("cubic"),
        _ => None,
    };
    let Some(to) = suggest else { return Vec::new() };
    let applies = ctx.describe_host("sender", sender);
    vec![
        Fix {
            lines: vec![
                format!(
                    "setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, \"{to}\", {});",
                    to.len()
                ),
                format!("tcplab --cc {to}"),
            ],
            ..Fix::tcp_sockopt("TCP_CONGESTION", to, &applies, None)
        },
        Fix::sysctl(
            "net.ipv4.tcp_congestion_control",
            to,
            Scope::Namespace,
            &applies,
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::battery::{Battery, PathInfo};
    use crate::finding::FixKind;
    use crate::synth::{self, StreamSim};

    fn lossy(cc: &str, loss: f64, bps: f64) -> Battery {
        let mut sim = StreamSim::healthy(bps, 30_000);
        sim.loss = loss;
        sim.congestion = cc.into();
        Battery {
            stream: Some(sim.run()),
            facts: Some(synth::facts(250)),
            path: PathInfo {
                configured_rtt_ms: Some(30.0),
                rate_bps: Some(100e6),
                loss: Some(loss),
                ..PathInfo::default()
            },
            ..Battery::default()
        }
    }

    #[test]
    fn mathis_bound_matches_the_formula() {
        // 1448 B, 30 ms, 1%: 1448*8/0.03 * 1.22474/0.1 = 4.72915 Mbit/s.
        let b = mathis_bps(1448.0, 0.030, 0.01);
        assert!((b - 4_729_148.2).abs() < 1.0, "{b}");
    }

    #[test]
    fn cubic_at_the_mathis_bound_gets_bbr() {
        let b = lossy("cubic", 0.01, 5e6);
        let f = check(&Context::new(&b));
        assert_eq!(f.len(), 1);
        let f = &f[0];
        assert_eq!(f.severity, Severity::Error);
        let p = f.figure("loss_rate").unwrap();
        assert!((p - 0.01 / 1.01).abs() < 1e-4, "{p}");
        let bound = f.figure("mathis_bound_bps").unwrap();
        assert!((bound - mathis_bps(1448.0, 0.030, p)).abs() < 1.0);
        let ratio = f.figure("throughput_over_mathis").unwrap();
        assert!((1.0..1.2).contains(&ratio), "{ratio}");
        assert!(f.figure("loss_state_samples").unwrap() >= 2.0);
        assert!(
            matches!(&f.fixes[0].kind, FixKind::SetSockOpt { option, value } if option == "TCP_CONGESTION" && value == "bbr")
        );
        assert_eq!(f.fixes[1].lines, ["net.ipv4.tcp_congestion_control = bbr"]);
    }

    #[test]
    fn bbr_retransmitting_heavily_gets_cubic() {
        let b = lossy("bbr", 0.05, 80e6);
        let f = check(&Context::new(&b));
        assert_eq!(f[0].severity, Severity::Warning);
        assert!(f[0].figure("throughput_over_mathis").unwrap() > 10.0);
        assert!(
            matches!(&f[0].fixes[0].kind, FixKind::SetSockOpt { value, .. } if value == "cubic")
        );
    }

    #[test]
    fn bbr_far_above_the_bound_on_a_path_of_unknown_rate_is_not_limited_by_its_loss() {
        // A real host: no configured rate, so nothing shows the flow fell short; BBR overruns
        // a shallow queue at full rate as well.
        let mut b = lossy("bbr", 0.05, 80e6);
        b.path.rate_bps = None;
        assert!(check(&Context::new(&b)).is_empty());
    }

    #[test]
    fn a_flow_waiting_for_its_receiver_is_not_limited_by_its_loss() {
        // Start-up losses, then a reader that holds the window shut most of the time.
        let mut b = lossy("cubic", 0.01, 5e6);
        for i in b.stream.as_mut().unwrap().intervals.iter_mut() {
            if let Some(t) = i.tcp_info.as_mut() {
                t.rwnd_limited_us = t.busy_us * 8 / 10;
            }
        }
        assert!(check(&Context::new(&b)).is_empty());
    }

    #[test]
    fn drops_at_the_queue_alone_are_not_path_loss() {
        // At the Mathis bound (reported without the account: cubic_at_the_mathis_bound_gets_bbr).
        let mut b = lossy("cubic", 0.01, 5e6);
        let account = tcplab_results::emulator::RunAccount {
            forward_drops: tcplab_results::emulator::ModelDrops {
                frames: 500,
                loss: 0,
                queue_full: 40,
            },
            ..Default::default()
        };
        b.stream.as_mut().unwrap().meta.facts = serde_json::json!({
            "emulator": { "link": null, "realised": account, "fidelity": null }
        });
        assert!(check(&Context::new(&b)).is_empty());
    }

    #[test]
    fn loss_that_does_not_limit_the_flow_is_not_reported() {
        // Far above the Mathis bound (e.g. a burst of losses at start-up, or a veth backlog
        // dropping a few segments of an 8 Gbit/s flow): loss is not the limit, so no finding.
        let b = lossy("cubic", 0.001, 60e6);
        assert!(check(&Context::new(&b)).is_empty());
    }

    #[test]
    fn few_retransmits_after_warm_up_use_the_whole_connection() {
        // 1.0427 Mbit/s at 1%: 1,303 bytes (0.9 segments) retransmitted per 1 s interval:
        // 9 segments in the 10 measured intervals, 10 with the 2 warm-up intervals.
        let b = lossy("cubic", 0.01, 1.0427e6);
        let f = check(&Context::new(&b));
        assert_eq!(f.len(), 1, "{f:#?}");
        assert!(
            f[0].evidence[0].context.contains("whole connection"),
            "{:?}",
            f[0].evidence
        );
        assert_eq!(f[0].figure("retransmitted_segments"), Some(10.0));
    }

    /// The sender's kernel counters: `retrans` segments retransmitted, `duplicates` of them
    /// reported back by the receiver as duplicates (D-SACK).
    fn dsack(b: &mut Battery, retrans: u64, duplicates: u64) {
        let side = [
            ("Tcp.RetransSegs".to_string(), retrans),
            ("TcpExt.TCPDSACKRecvSegs".to_string(), duplicates),
        ];
        let sides = [("client".to_string(), side.into_iter().collect())];
        b.counters
            .insert("stream".into(), sides.into_iter().collect());
    }

    #[test]
    fn retransmissions_the_receiver_already_had_are_not_loss() {
        // A path that reorders: every retransmission was a duplicate, nothing was lost.
        let mut b = lossy("cubic", 0.01, 5e6);
        dsack(&mut b, 400, 400);
        assert!(check(&Context::new(&b)).is_empty());
        // Half of them duplicates: the loss is half the retransmitted share.
        dsack(&mut b, 400, 200);
        let f = check(&Context::new(&b));
        assert_eq!(f.len(), 1, "{f:?}");
        let p = f[0].figure("loss_rate").unwrap();
        assert!((p - 0.005 / 1.005).abs() < 2e-4, "{p}");
        assert_eq!(f[0].figure("spurious_retransmit_share"), Some(0.5));
    }

    #[test]
    fn silent_without_loss_or_on_a_full_path() {
        assert!(check(&Context::new(&lossy("cubic", 0.0, 95e6))).is_empty());
        assert!(check(&Context::new(&lossy("cubic", 0.01, 95e6))).is_empty());
    }

    /// The stream's facts as an emulated lab records them: Gilbert-Elliott loss on the way to
    /// the server, and `drops` of `frames` dropped by it during the run.
    fn emulated(b: &mut Battery, frames: u64, drops: u64) {
        let mut link = tcplab_emu::LinkConfig::default();
        link.forward.loss = Some(tcplab_emu::Loss::GilbertElliott {
            p: 0.003,
            r: 0.25,
            one_minus_h: 0.7,
            one_minus_k: 0.0,
        });
        let account = tcplab_results::emulator::RunAccount {
            forward_drops: tcplab_results::emulator::ModelDrops {
                frames,
                loss: drops,
                queue_full: 0,
            },
            ..Default::default()
        };
        if let Some(s) = b.stream.as_mut() {
            s.meta.facts = serde_json::json!({
                "emulator": { "link": link, "realised": account, "fidelity": null }
            });
        }
    }

    #[test]
    fn a_lossy_path_is_named_even_when_bbr_keeps_the_rate() {
        // BBR at 96 Mbit/s of 100 through 0.8% bursty loss: not limited, but the path loses.
        let mut b = lossy("bbr", 0.008, 96e6);
        emulated(&mut b, 100_000, 800);
        let f = check(&Context::new(&b));
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].severity, Severity::Warning);
        assert!(
            f[0].title.starts_with("the path loses packets"),
            "{}",
            f[0].title
        );
        assert!(
            f[0].title.contains("in bursts (Gilbert-Elliott)"),
            "{}",
            f[0].title
        );
        assert_eq!(f[0].figure("path_loss_drops"), Some(800.0));
        // The same flow without the emulator's account: nothing limits it, nothing to say.
        assert!(check(&Context::new(&lossy("bbr", 0.008, 96e6))).is_empty());
        // An emulated path that dropped only a handful: not lossy on its own evidence.
        let mut b = lossy("bbr", 0.008, 96e6);
        emulated(&mut b, 100_000, 3);
        assert!(check(&Context::new(&b)).is_empty());
    }
}
