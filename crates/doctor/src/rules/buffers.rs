//! `rwnd_limited` and `sndbuf_limited`: the bulk flow spent a large share of its busy time
//! limited by the peer's receive window or by its own send buffer (tcp_info
//! `tcpi_rwnd_limited` / `tcpi_sndbuf_limited` against `tcpi_busy_time`, over the measured
//! span). The throughput is compared with window/RTT, and the fix is the buffer maxima sized
//! from the path's BDP (seed 002's four lines, with values computed for this path).

use crate::battery::{Context, Role};
use crate::finding::{Finding, Fix, FixKind, Severity};
use crate::rules::fixes::{BUFFER_BDP_MULTIPLE, Buffer, buffer_fixes, page_round};
use crate::rules::stream_view::{FlowSpan, StreamView, peer};
use crate::rules::untrustworthy::CPU_SATURATED;

/// A flow limited this share of its busy time fires the rule: a fifth of the time spent
/// waiting on a buffer is a bottleneck in its own right, while a few per cent happen in
/// healthy runs (autotuning grows the buffers in steps during slow start).
pub const LIMITED_FRACTION_MIN: f64 = 0.2;

/// Above this share the buffer is the bottleneck most of the time.
pub const LIMITED_FRACTION_ERROR: f64 = 0.5;

use crate::limits::COSTLY_SHARE;
pub use crate::limits::PATH_FULL_SHARE;

/// Throughput at or above this share of (advertised window / RTT) means the flow sent a full
/// window every round trip: the window, not the network, set the rate.
pub const WINDOW_BOUND_SHARE: f64 = 0.7;

/// Without a known path rate, buffers are sized for this multiple of what the flow carried
/// (the larger of throughput x RTT and the advertised window): the window is known to be the
/// limit, and quadrupling it is the smallest step that shows whether the path has more.
pub const UNKNOWN_RATE_HEADROOM: f64 = 4.0;

/// `rwnd_limited`.
pub fn check_rwnd(ctx: &Context<'_>) -> Vec<Finding> {
    check(ctx, Buffer::Receive)
}

/// `sndbuf_limited`.
pub fn check_sndbuf(ctx: &Context<'_>) -> Vec<Finding> {
    check(ctx, Buffer::Send)
}

fn check(ctx: &Context<'_>, which: Buffer) -> Vec<Finding> {
    let Some(stream) = &ctx.battery.stream else {
        return Vec::new();
    };
    let Some(view) = StreamView::of(stream) else {
        return Vec::new();
    };
    let limited = |f: &FlowSpan| match which {
        Buffer::Receive => f.rwnd_limited_us(),
        Buffer::Send => f.sndbuf_limited_us(),
    };
    let Some(fraction) = view.limited_fraction(limited) else {
        return Vec::new();
    };
    let rate = ctx.rate_bps();
    let path_full = rate.is_some_and(|r| view.throughput_bps >= PATH_FULL_SHARE * r);
    let bound = which == Buffer::Receive && window_bound(&view, rate);
    if (fraction < LIMITED_FRACTION_MIN && !bound) || path_full {
        return Vec::new();
    }
    vec![finding(ctx, which, &view, fraction, rate)]
}

/// The flow ran at its advertised window per RTT, and that is well below the path rate: the
/// receive window is the limit even when tcp_info's rwnd-limited clock (which only runs while
/// a send is blocked on the window) shows less. Needs the path rate.
fn window_bound(view: &StreamView, rate: Option<f64>) -> bool {
    let (Some(rate), Some(bps)) = (rate, view.window_over_rtt_bps()) else {
        return false;
    };
    bps < PATH_FULL_SHARE * rate && view.throughput_bps >= WINDOW_BOUND_SHARE * bps
}

fn finding(
    ctx: &Context<'_>,
    which: Buffer,
    view: &StreamView,
    fraction: f64,
    rate: Option<f64>,
) -> Finding {
    let (id, what) = match which {
        Buffer::Receive => ("rwnd_limited", "the receiver's window"),
        Buffer::Send => ("sndbuf_limited", "the sender's send buffer"),
    };
    // The severity follows the cost: a limit that leaves the flow under half the path's rate
    // is an error; without a rate, one that held the flow most of its busy time.
    let severity = match rate {
        Some(r) if view.throughput_bps < COSTLY_SHARE * r => Severity::Error,
        Some(_) => Severity::Warning,
        None if fraction >= LIMITED_FRACTION_ERROR => Severity::Error,
        None => Severity::Warning,
    };
    let mut f = Finding::new(
        id,
        severity,
        format!(
            "bulk transfer limited by {what} {:.0}% of its busy time at {:.1} Mbit/s",
            fraction * 100.0,
            view.throughput_bps / 1e6
        ),
    );
    f.push(
        &format!("{id}_fraction"),
        fraction,
        "fraction",
        "limited time / busy time (tcp_info), sending flows, measured span",
    );
    f.push(
        "throughput_bps",
        view.throughput_bps,
        "bit/s",
        "stream, after warm-up",
    );
    if let Some(r) = ctx.rate() {
        f.push("path_rate_bps", r.bps, "bit/s", r.context());
    }
    let rtt = ctx.rtt_s().map(|r| r.0).or(view.rtt_s);
    if let Some(srtt) = view.rtt_s {
        f.push(
            "srtt_ms",
            srtt * 1e3,
            "ms",
            "median smoothed RTT of the sending flows",
        );
    }
    if let (Some(w), Some(bound)) = (view.snd_wnd, view.window_over_rtt_bps()) {
        f.push(
            "peer_window_bytes",
            w,
            "bytes",
            "median window the receiver advertised",
        );
        f.push(
            "window_over_rtt_bps",
            bound,
            "bit/s",
            format!(
                "window/RTT x {} flows; throughput is {:.0}% of it",
                view.flows.len(),
                view.throughput_bps / bound * 100.0
            ),
        );
    }
    let sender = view.sender();
    let receiver = peer(sender);
    if let Some(bdp) = rtt.map(|rtt| bdp(&mut f, view, rate, rtt)) {
        let needed = page_round(BUFFER_BDP_MULTIPLE * bdp);
        f.push(
            "buffer_max_needed_bytes",
            needed as f64,
            "bytes",
            "2 x BDP, page-rounded",
        );
        let (main, main_role, other, other_role) = match which {
            Buffer::Receive => (Buffer::Receive, receiver, Buffer::Send, sender),
            Buffer::Send => (Buffer::Send, sender, Buffer::Receive, receiver),
        };
        f.fixes = buffer_fixes(ctx, main, main_role, needed, false);
        if !f
            .fixes
            .iter()
            .any(|x| matches!(&x.kind, FixKind::Sysctl { key, .. } if key == main.sysctl_key()))
        {
            f.fixes.insert(0, Fix::other(
                &format!("{} already allows {needed} bytes: the limit is elsewhere (an explicit socket buffer, tcp_mem pressure, or a reader slower than the path)", main.sysctl_key()),
                &ctx.describe_host("host", main_role),
            ));
        }
        // The other buffer must hold the BDP too, or it becomes the next limit (seed 002's
        // four lines change both).
        f.fixes
            .extend(buffer_fixes(ctx, other, other_role, needed, false));
    }
    push_explicit_buffer_fix(ctx, &mut f, which);
    f.explanation = explanation(which);
    if which == Buffer::Receive {
        note_slow_reader(ctx, &mut f, receiver);
    }
    f
}

/// A receiver whose data threads were CPU-saturated closes the window by not reading fast
/// enough: the window is then the symptom, not the cause. The finding stays (the kernel did
/// wait on the window), downgraded to info, with the reader's CPU share as evidence.
fn note_slow_reader(ctx: &Context<'_>, f: &mut Finding, receiver: Role) {
    let Some(stream) = &ctx.battery.stream else {
        return;
    };
    let cpu = match receiver {
        Role::Client => stream.meta.client_cpu_s,
        Role::Server => stream.meta.server_cpu_s,
    };
    let wall = stream.elapsed_s * f64::from(stream.config.flows.max(1));
    if wall <= 0.0 {
        return;
    }
    let busy = cpu / wall;
    if busy < CPU_SATURATED {
        return;
    }
    f.severity = Severity::Info;
    f.push(
        "receiver_cpu_busy_fraction",
        busy,
        "fraction",
        "receiving data threads' CPU time / (wall time x flows)",
    );
    f.explanation.push_str(&format!(
        " Here the receiving application was CPU-bound ({:.0}% busy): the window closed because data was not read fast enough, so a larger buffer helps only a little; a faster reader (larger reads, more flows, a free CPU) helps more.",
        busy * 100.0
    ));
}

/// An explicit SO_RCVBUF/SO_SNDBUF turns autotuning off for that socket and caps the window;
/// when the workload set one, say so.
fn push_explicit_buffer_fix(ctx: &Context<'_>, f: &mut Finding, which: Buffer) {
    let Some(stream) = &ctx.battery.stream else {
        return;
    };
    let (set, name) = match which {
        Buffer::Receive => (stream.config.opts.rcvbuf, "SO_RCVBUF"),
        Buffer::Send => (stream.config.opts.sndbuf, "SO_SNDBUF"),
    };
    if let Some(v) = set {
        f.push(
            &format!("{}_set_bytes", name.to_lowercase()),
            f64::from(v),
            "bytes",
            "set explicitly by the workload: autotuning is off for the socket",
        );
        f.fixes.insert(0, Fix::other(&format!("drop the explicit {name} so the kernel autotunes the buffer, or set it to at least buffer_max_needed_bytes (which needs the net.core maximum as high)"), "the application"));
    }
}

/// The BDP the buffers are sized for: path rate x RTT, or without a known rate
/// [`UNKNOWN_RATE_HEADROOM`] x the larger of throughput x RTT and the advertised window.
fn bdp(f: &mut Finding, view: &StreamView, rate: Option<f64>, rtt: f64) -> f64 {
    let (bdp, note) = match rate {
        Some(r) => (r / 8.0 * rtt, "the path rate".to_string()),
        None => {
            let carried = (view.throughput_bps / 8.0 * rtt).max(view.snd_wnd.unwrap_or(0.0));
            (
                carried * UNKNOWN_RATE_HEADROOM,
                format!(
                    "path rate unknown: {UNKNOWN_RATE_HEADROOM}x the larger of throughput and window/RTT,"
                ),
            )
        }
    };
    f.push(
        "bdp_bytes",
        bdp,
        "bytes",
        format!("{note} x RTT {:.3} ms", rtt * 1e3),
    );
    bdp
}

fn explanation(which: Buffer) -> String {
    match which {
        Buffer::Receive => "The receiver's advertised window capped the data in flight below what the path holds, so the flow sent a window per RTT and then waited. Raise the receiver's tcp_rmem maximum to about twice the path's BDP (autotuning then grows the window); net.core.rmem_max only matters for applications that set SO_RCVBUF, and it is machine-wide.".into(),
        Buffer::Send => "The send buffer filled with unacknowledged data before the congestion window did, so the application could not give TCP enough to fill the path. Raise the sender's tcp_wmem maximum to about twice the path's BDP; net.core.wmem_max only matters for applications that set SO_SNDBUF, and it is machine-wide.".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::battery::Battery;
    use crate::finding::{FixKind, Scope};
    use crate::synth::{self, StreamSim};

    /// Seed 002's lab: 1 Gbit/s, 30 ms RTT, default 128 KiB window: 35 Mbit/s.
    fn seed002(rwnd: f64, sndbuf: f64, bps: f64) -> Battery {
        let mut sim = StreamSim::healthy(bps, 30_000);
        sim.snd_wnd = 131_072;
        sim.rwnd_share = rwnd;
        sim.sndbuf_share = sndbuf;
        Battery {
            stream: Some(sim.run()),
            facts: Some(synth::facts(250)),
            path: crate::battery::PathInfo {
                configured_rtt_ms: Some(30.0),
                rate_bps: Some(1e9),
                ..Default::default()
            },
            ..Battery::default()
        }
    }

    fn lines(f: &Finding) -> Vec<String> {
        f.fixes.iter().flat_map(|x| x.lines.clone()).collect()
    }

    #[test]
    fn receive_window_limit_gives_the_four_lines() {
        let b = seed002(0.8, 0.0, 35e6);
        let f = check_rwnd(&Context::new(&b));
        assert_eq!(f.len(), 1);
        let f = &f[0];
        assert_eq!(f.severity, Severity::Error);
        assert!((f.figure("rwnd_limited_fraction").unwrap() - 0.8).abs() < 1e-9);
        // BDP = 1e9/8 x 0.030 = 3.75 MB; 2 x BDP rounded up to a page = 1832 x 4096.
        assert!((f.figure("bdp_bytes").unwrap() - 3_750_000.0).abs() < 1e-6);
        assert_eq!(f.figure("buffer_max_needed_bytes"), Some(7_503_872.0));
        let w = f.figure("window_over_rtt_bps").unwrap();
        assert!((w - 131_072.0 * 8.0 / 0.030).abs() < 1.0, "{w}");
        assert_eq!(
            lines(f),
            [
                "net.ipv4.tcp_rmem = 4096 131072 7503872",
                "net.core.rmem_max = 7503872",
                "net.ipv4.tcp_wmem = 4096 16384 7503872",
                "net.core.wmem_max = 7503872",
            ]
        );
        let scopes: Vec<Scope> = f
            .fixes
            .iter()
            .filter_map(|x| match &x.kind {
                FixKind::Sysctl { scope, .. } => Some(*scope),
                _ => None,
            })
            .collect();
        assert_eq!(
            scopes,
            [
                Scope::Namespace,
                Scope::HostGlobal,
                Scope::Namespace,
                Scope::HostGlobal
            ]
        );
        assert_eq!(f.fixes[0].applies_to, "receiver (host server)");
        assert!(sndbuf_silent(&b));
    }

    fn sndbuf_silent(b: &Battery) -> bool {
        check_sndbuf(&Context::new(b)).is_empty()
    }

    #[test]
    fn send_buffer_limit_fires_its_own_rule() {
        let mut b = seed002(0.0, 0.6, 120e6);
        // A window large enough for 120 Mbit/s: the receiver is not the limit.
        for i in b.stream.as_mut().unwrap().intervals.iter_mut() {
            if let Some(t) = i.tcp_info.as_mut() {
                t.snd_wnd = 4 << 20;
            }
        }
        assert!(check_rwnd(&Context::new(&b)).is_empty());
        let f = check_sndbuf(&Context::new(&b));
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].id, "sndbuf_limited");
        assert_eq!(f[0].severity, Severity::Error);
        assert_eq!(lines(&f[0])[0], "net.ipv4.tcp_wmem = 4096 16384 7503872");
        assert_eq!(f[0].fixes[0].applies_to, "sender (host client)");
    }

    #[test]
    fn explicit_so_rcvbuf_is_named() {
        let mut b = seed002(0.8, 0.0, 35e6);
        if let Some(s) = b.stream.as_mut() {
            s.config.opts.rcvbuf = Some(65_536);
        }
        let f = check_rwnd(&Context::new(&b));
        assert_eq!(f[0].figure("so_rcvbuf_set_bytes"), Some(65_536.0));
        assert!(
            matches!(&f[0].fixes[0].kind, FixKind::Other { text } if text.contains("SO_RCVBUF"))
        );
    }

    #[test]
    fn a_full_window_per_rtt_fires_even_with_a_small_limited_share() {
        // tcp_info's rwnd clock showed only 10%, but 35 Mbit/s is the 128 KiB window per 30 ms
        // on a 1 Gbit/s path (what the lab measured for seed 002: 29% at 98% of window/RTT).
        let f = check_rwnd(&Context::new(&seed002(0.1, 0.0, 34e6)));
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].severity, Severity::Error);
        // Without the path rate that evidence cannot be judged: silent at 10%.
        let mut b = seed002(0.1, 0.0, 34e6);
        b.path.rate_bps = None;
        assert!(check_rwnd(&Context::new(&b)).is_empty());
    }

    #[test]
    fn silent_when_healthy_or_the_path_is_full() {
        assert!(check_rwnd(&Context::new(&seed002(0.01, 0.0, 940e6))).is_empty());
        // Limited half the time yet at 95% of the path rate: costs nothing.
        assert!(check_rwnd(&Context::new(&seed002(0.5, 0.0, 950e6))).is_empty());
        assert!(check_sndbuf(&Context::new(&seed002(0.0, 0.1, 500e6))).is_empty());
    }

    #[test]
    fn cpu_bound_reader_downgrades_to_info() {
        let mut b = seed002(0.8, 0.0, 35e6);
        if let Some(s) = b.stream.as_mut() {
            s.meta.server_cpu_s = s.elapsed_s * 0.99;
        }
        let f = check_rwnd(&Context::new(&b));
        assert_eq!(f[0].severity, Severity::Info);
        assert!((f[0].figure("receiver_cpu_busy_fraction").unwrap() - 0.99).abs() < 1e-12);
        assert!(f[0].explanation.contains("CPU-bound (99% busy)"));
    }

    #[test]
    fn buffer_max_already_large_names_the_other_causes() {
        // 10 Gbit/s path at 1 ms: 2 x BDP = 2.5 MB < the 6 MiB default tcp_rmem maximum.
        let mut b = seed002(0.8, 0.0, 35e6);
        b.path.rate_bps = Some(10e9);
        b.path.configured_rtt_ms = Some(1.0);
        let f = check_rwnd(&Context::new(&b));
        assert!(
            matches!(&f[0].fixes[0].kind, FixKind::Other { text } if text.starts_with("net.ipv4.tcp_rmem already allows 2502656 bytes")),
            "{:?}",
            f[0].fixes[0]
        );
    }

    #[test]
    fn unknown_rate_sizes_for_four_times_the_throughput() {
        let mut b = seed002(0.8, 0.0, 35e6);
        b.path.rate_bps = None;
        let f = check_rwnd(&Context::new(&b));
        // 4 x max(35 Mbit/s x 30 ms / 8 = 131,250 B, window 131,072 B) = 525 kB.
        assert!((f[0].figure("bdp_bytes").unwrap() - 525_000.0).abs() < 1e-6);
        assert_eq!(f[0].figure("buffer_max_needed_bytes"), Some(1_052_672.0));
        assert_eq!(f[0].severity, Severity::Error);
    }
}
