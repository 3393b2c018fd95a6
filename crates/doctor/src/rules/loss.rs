//! `loss_limited`: the bulk flow retransmitted, and its throughput sits at what the Mathis
//! model allows for that loss rate and RTT (Mathis, Semke, Mahdavi, Ott 1997, CCR 27(3)):
//! rate ≤ MSS/RTT · C/√p, C = √(3/2) for Reno-style halving with delayed ACKs off. A loss-based
//! congestion control (cubic, reno) running near that bound is limited by the loss itself;
//! BBR (model-based, loss-tolerant up to ~20%) is then the alternative. BBR with a high
//! retransmission rate is the reverse case (it overruns a shallow queue): cubic is suggested.

use crate::battery::{Context, Role};
use crate::finding::{Finding, Fix, Scope, Severity};
use crate::plan::PartKind;
use crate::rules::probes::ProbeLoss;
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
/// what limits the flow (the model is good to about a factor of two in practice); the
/// congestion control to suggest is judged by it.
pub const MATHIS_BOUND_RATIO: f64 = 2.0;

/// A flow at or above its Mathis bound is not held by its loss: a loss-based flow at its
/// loss rate could go no faster than the bound, so one that does rides through the loss.
pub const MATHIS_AT_BOUND: f64 = 1.0;

/// BBR retransmitting this share of its bytes overruns the bottleneck queue (BBRv1's known
/// 2%+ loss against shallow buffers); a loss-based control then treats the path better.
pub const BBR_HIGH_LOSS: f64 = 0.02;

/// A flow limited by the receive window or its send buffer this share of its busy time is
/// held by that window: its loss response is not what sets its rate.
pub const WINDOW_BOUND_SHARE: f64 = 0.5;

use crate::limits::{COSTLY_SHARE, PATH_FULL_SHARE};

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
    if bytes_acked == 0 {
        return Vec::new();
    }
    // The path's own loss, on the evidence of something other than the flow: on an emulated
    // path the model's loss process, elsewhere the paced messages, which never queue.
    let probes = ProbeLoss::of(ctx);
    let account = stream
        .meta
        .facts
        .emulator
        .as_ref()
        .and_then(|e| e.realised.as_ref());
    let path_loss = match &account {
        Some(_) => path_loss_share(stream).filter(|p| *p >= MIN_LOSS_RATE),
        None => probes.filter(|p| p.lossy(MIN_LOSS_RATE)).map(|p| p.rate()),
    };
    // The flow's own loss rate when it retransmitted enough to measure one; a slow flow on a
    // lossy path may not have, and is then judged at the path's.
    let loss = if retrans >= MIN_RETRANS_SEGMENTS {
        bytes_retrans as f64 / (bytes_acked + bytes_retrans) as f64
    } else if let Some(p) = path_loss {
        p
    } else {
        return Vec::new();
    };
    let rate = ctx.rate();
    let rate_bps = rate.as_ref().map(|r| r.bps);
    let Some(rtt) = view.rtt_s.or(ctx.rtt_s().map(|r| r.0)) else {
        return Vec::new();
    };
    let mss = view.mss.unwrap_or(1448.0);
    // A loss-based flow halves once per loss event, however many packets the event lost: the
    // bound follows the events' rate, which bursts of loss hold below the packets'.
    let events = loss_events(ctx, &view).filter(|e| *e > 0.0 && *e < loss);
    let bound = mathis_bps(mss, rtt, events.unwrap_or(loss)) * view.flows.len() as f64;
    let full = rate_bps.is_some_and(|r| view.throughput_bps >= PATH_FULL_SHARE * r);
    // At or above the Mathis bound, the loss is not what limits the flow (a rate-based control
    // rides through it, or the losses are a burst at start-up); only a loss rate high enough to
    // hurt a loss-based control's neighbours still deserves a word, and only where the path's
    // rate shows the flow fell short (BBR overruns a shallow queue at full rate too).
    let rides_through = view.throughput_bps >= MATHIS_AT_BOUND * bound
        && (loss < BBR_HIGH_LOSS || rate_bps.is_none());
    // A flow that spent most of its time waiting for a window (the receiver's or its own send
    // buffer) was held by that window, not by its loss response.
    let busy = sum(&span, FlowSpan::busy_us);
    let window_waits =
        sum(&span, FlowSpan::rwnd_limited_us) + sum(&span, FlowSpan::sndbuf_limited_us);
    let window_bound = busy > 0 && window_waits as f64 >= WINDOW_BOUND_SHARE * busy as f64;
    // The flow's own overrun of the bottleneck is not path loss: on an emulated path the model
    // says which drops were its full queue; elsewhere the paced parts of the battery, which
    // never queue, lost (almost) nothing where at the flow's loss rate they should have.
    let self_overrun = match &account {
        Some(_) => queue_drops_only(stream),
        None => probes.is_some_and(|p| p.clean_at(loss)),
    };
    let limited =
        loss >= MIN_LOSS_RATE && !full && !rides_through && !window_bound && !self_overrun;
    // A flow that rides through the loss (BBR) hides it from the figures above, but the path
    // still loses packets, which every loss-based flow on it pays for.
    let lossy = path_loss.is_some();
    if !limited && !lossy {
        return Vec::new();
    }
    let mut f = finding(
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
            own: retrans >= MIN_RETRANS_SEGMENTS,
        },
    );
    if let Some(e) = events {
        f.push(
            "loss_event_rate",
            e,
            "fraction",
            "loss recoveries (TcpExt TCPSackRecovery + TCPRenoRecovery + TCPTimeouts) per data segment sent: what the Mathis bound takes, a flow halving once per event",
        );
    }
    if let (None, Some(p)) = (&account, probes) {
        f.push(
            "paced_loss_rate",
            p.rate(),
            "fraction",
            format!(
                "segments the battery's paced messages (never queued at the bottleneck) lost: {} of {} (Tcp RetransSegs less D-SACKed, the client's counters)",
                p.lost, p.sent
            ),
        );
    }
    vec![f]
}

/// Loss events per data segment the sending flows sent, over the whole stream: the sender's
/// recoveries (fast recovery, SACK or Reno, and timeouts) from its counters, against tcp_info's
/// data segments. `None` without the counters or the segments.
fn loss_events(ctx: &Context<'_>, view: &StreamView) -> Option<f64> {
    let sender = view.sender();
    let get = |n: &str| ctx.counter(PartKind::Stream, sender, n);
    let recoveries = get("TcpExt.TCPSackRecovery")?
        + get("TcpExt.TCPRenoRecovery").unwrap_or(0)
        + get("TcpExt.TCPTimeouts").unwrap_or(0);
    let segments: u64 = view
        .flows
        .iter()
        .map(|f| u64::from(f.end.data_segs_out))
        .sum();
    (segments > 0).then(|| recoveries as f64 / segments as f64)
}

/// The share of the sender's retransmitted segments the receiver reported as duplicates
/// (TcpExt TCPDSACKRecvSegs / Tcp RetransSegs, the stream's whole run); `None` without
/// retransmissions or counters.
fn spurious_share(ctx: &Context<'_>, sender: Role) -> Option<f64> {
    let retrans = ctx.counter(PartKind::Stream, sender, "Tcp.RetransSegs")?;
    let duplicates = ctx.counter(PartKind::Stream, sender, "TcpExt.TCPDSACKRecvSegs")?;
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
    let account = stream.meta.facts.emulator.as_ref()?.realised.as_ref()?;
    let d = account.forward_drops;
    (d.loss >= MIN_PATH_LOSS_DROPS && d.frames > 0).then(|| d.loss as f64 / d.frames as f64)
}

/// Whether the emulated link's account says the stream's packets were dropped only by its
/// full queue, none by its loss process: the flow's retransmissions are then the congestion it
/// causes itself at the bottleneck (the queue rules judge whether that queue is too short), not
/// a path that loses packets.
fn queue_drops_only(stream: &tcplab_results::stream::StreamResult) -> bool {
    stream
        .meta
        .facts
        .emulator
        .as_ref()
        .and_then(|e| e.realised.as_ref())
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
    rate: Option<crate::battery::Rate>,
    /// Counted over the whole connection, the measured span having too few retransmissions.
    whole: bool,
    /// Share of retransmissions the receiver reported as duplicates, left out of the figures.
    spurious: f64,
    /// The loss rate is the flow's own (false: the path's, the flow having retransmitted too
    /// little to measure one).
    own: bool,
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
    } else if x.limited
        && x.rate
            .as_ref()
            .is_some_and(|r| view.throughput_bps < COSTLY_SHARE * r.bps)
    {
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
        if x.own {
            "bytes retransmitted / bytes sent (tcp_info), less the spurious share"
        } else {
            "the path's own loss (the paced messages', or the emulated loss process's): the flow retransmitted too little to measure its own"
        },
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
            "MSS/RTT x {MATHIS_C:.3}/sqrt(p) x {} flows, p the loss-event rate where the counters give it, else the loss rate",
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
    if let Some(r) = &x.rate {
        f.push("path_rate_bps", r.bps, "bit/s", r.context());
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
    let emulated = stream.meta.facts.emulator.as_ref();
    if let Some(loss) = emulated
        .as_ref()
        .map(|e| &e.link)
        .and_then(|l| l.forward.loss.as_ref())
    {
        if let Some(a) = emulated.as_ref().and_then(|e| e.realised.as_ref()) {
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
    let counter = |n: &str| ctx.counter(PartKind::Stream, sender, n).unwrap_or(0);
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
mod tests;
