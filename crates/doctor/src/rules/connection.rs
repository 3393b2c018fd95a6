//! `connection_trouble` (seed 003): what connection-per-request workloads hit.
//! - `connection_trouble.port_exhaustion`: connects failed with EADDRNOTAVAIL.
//! - `connection_trouble.time_wait`: TIME_WAIT sockets filled most of the local port range,
//!   which caps the connection rate at ports / 60 s (seed 003's 2.2-kernel client). A warning
//!   when the run's own rate collapsed once they did (on 6.x connect() prefers even ports, so
//!   past half the range every connect searches the other half: measured 14.5k/s → 1.1k/s on a
//!   veth pair with the default range), info when the rate held.
//! - `connection_trouble.syn_retransmits`: connects that took ~1 s or ~3 s (the initial RTO
//!   and its doubling): SYNs were lost or ignored (listen queue overflow, a SYN meeting a
//!   TIME_WAIT socket as in seed 003).

use tcplab_load::crr::CrrResult;

use crate::battery::{Context, DEFAULT_PORT_RANGE, Role};
use crate::finding::{Finding, Fix, SampleRefs, Scope, Severity};
use crate::rules::fixes::{TIME_WAIT_S, port_fixes};

/// TIME_WAIT sockets above this share of the local port range are a build-up: new connects
/// must hunt for free ports (the connect() port search gets slower) and exhaustion is near.
pub const TIME_WAIT_SHARE: f64 = 0.5;

/// The rate after the build-up below this share of the rate before it is a collapse.
pub const COLLAPSE_SHARE: f64 = 0.5;

/// The connection rate before and after TIME_WAIT sockets first reached `threshold`, from the
/// sampled TIME_WAIT counts (the client closes first, so each connection adds one socket and
/// their slope is the connection rate): (seconds at the crossing, rate before, rate after).
/// None when the crossing is not sampled or less than half a second follows it.
pub fn rate_around_build_up(samples: &[(f64, u64)], threshold: f64) -> Option<(f64, f64, f64)> {
    let (first, last) = (samples.first()?, samples.last()?);
    let cross = samples.iter().find(|(_, n)| *n as f64 >= threshold)?;
    let (before_s, after_s) = (cross.0 - first.0, last.0 - cross.0);
    if before_s <= 0.0 || after_s < 0.5 {
        return None;
    }
    let before = cross.1.saturating_sub(first.1) as f64 / before_s;
    let after = last.1.saturating_sub(cross.1) as f64 / after_s;
    Some((cross.0, before, after))
}

/// A connect this slow waited for at least one SYN retransmission (initial RTO 1 s); the
/// lower bound leaves room for a slow LAN handshake. Matches tcplab-load's 0.8 s.
pub const SYN_RETRANS_CONNECT_S: f64 = 0.8;

/// SYN retransmissions on this share of connections or more are an error: every such
/// connection costs a second or more.
pub const SYN_RETRANS_ERROR_SHARE: f64 = 0.01;

/// Listen backlog suggested when SYNs are dropped: the 6.x default of somaxconn (4096).
pub const BACKLOG: u32 = 4096;

/// The rule.
pub fn check(ctx: &Context<'_>) -> Vec<Finding> {
    let Some(crr) = &ctx.battery.crr else {
        return Vec::new();
    };
    let range = port_range(ctx);
    let mut out = Vec::new();
    if crr.errors_total.addrnotavail > 0 {
        out.push(port_exhaustion(ctx, crr, range));
    } else if crr.time_wait.max as f64 >= TIME_WAIT_SHARE * ports(range) {
        out.push(time_wait(ctx, crr, range));
    }
    if let Some(f) = accept_queue(ctx, crr) {
        out.push(f);
    }
    if let Some(f) = syn_retransmits(ctx, crr) {
        out.push(f);
    }
    out
}

/// Packets the emulated link's loss process dropped during crr, (client → server, server →
/// client); `None` off an emulated lab or when it dropped none.
fn path_losses(crr: &CrrResult) -> Option<(u64, u64)> {
    let account = crate::battery::EmulatedRun::of(&crr.meta)?.account?;
    let (f, r) = (account.forward_drops, account.reverse_drops);
    let (to_server, to_client) = (f.loss + f.queue_full, r.loss + r.queue_full);
    (to_server + to_client > 0).then_some((to_server, to_client))
}

/// Fewest accept-queue overflows for a finding (one can be a burst at the start).
pub const MIN_LISTEN_OVERFLOWS: u64 = 3;

/// `connection_trouble.accept_queue`: the server's kernel dropped handshakes because its
/// accept queue was full (TcpExt ListenOverflows, ListenDrops of the server's namespace during
/// crr): the application accepts connections slower than they arrive, or its backlog is
/// small. Each dropped handshake costs the client a retransmission timer (1 s for a SYN).
fn accept_queue(ctx: &Context<'_>, crr: &CrrResult) -> Option<Finding> {
    let overflows = ctx.counter("crr", Role::Server, "TcpExt.ListenOverflows")?;
    let drops = ctx
        .counter("crr", Role::Server, "TcpExt.ListenDrops")
        .unwrap_or(0);
    if overflows.max(drops) < MIN_LISTEN_OVERFLOWS {
        return None;
    }
    let somaxconn = ctx
        .host_sysctl(Role::Server, "net.core.somaxconn")
        .and_then(|v| v.trim().parse::<u64>().ok());
    let mut f = Finding::new(
        "connection_trouble.accept_queue",
        Severity::Error,
        format!("the server's accept queue overflowed {overflows} times: handshakes were dropped"),
    );
    f.push(
        "listen_overflows",
        overflows as f64,
        "times",
        "TcpExt ListenOverflows of the server's namespace during crr",
    );
    f.push(
        "listen_drops",
        drops as f64,
        "handshakes",
        "TcpExt ListenDrops of the server's namespace during crr",
    );
    if let Some(m) = somaxconn {
        f.push(
            "somaxconn",
            m as f64,
            "connections",
            "net.core.somaxconn of the server host: the most any listen backlog gets",
        );
    }
    f.push(
        "client_loops",
        f64::from(crr.config.concurrency),
        "loops",
        format!(
            "concurrent connecting loops; the server served with {}",
            crr.config
                .server_threads
                .map_or("a thread per loop".to_string(), |t| format!(
                    "{t} thread(s)"
                ))
        ),
    );
    if let Some(p) = crr.summary.connect_us.p99 {
        f.push("connect_p99_ms", p / 1e3, "ms", "connect time p99");
    }
    f.explanation = "Completed handshakes wait in the listening socket's accept queue until the application calls accept(); when it is full, the kernel drops new handshakes and the client waits for its retransmission timer (1 s for a SYN). The application accepts slower than connections arrive, or its backlog (the smaller of listen()'s argument and net.core.somaxconn) is too short for the bursts.".into();
    let server = ctx.describe_host("server", Role::Server);
    f.fixes = vec![
        Fix::sysctl(
            "net.core.somaxconn",
            BACKLOG.to_string(),
            Scope::Namespace,
            &server,
        ),
        Fix::other(
            &format!(
                "listen(fd, {BACKLOG}) in the server, and accept on more threads (or an event loop that accepts until EAGAIN)"
            ),
            &server,
        ),
    ];
    Some(f)
}

/// The client's ip_local_port_range (facts), else the Linux default; the bool says which.
fn port_range(ctx: &Context<'_>) -> ((u32, u32), bool) {
    let parsed = ctx
        .host_sysctl(Role::Client, "net.ipv4.ip_local_port_range")
        .and_then(|v| {
            let mut it = v.split_whitespace().filter_map(|x| x.parse::<u32>().ok());
            Some((it.next()?, it.next()?))
        });
    parsed.map_or((DEFAULT_PORT_RANGE, false), |r| (r, true))
}

fn ports(range: ((u32, u32), bool)) -> f64 {
    f64::from(range.0.1.saturating_sub(range.0.0) + 1)
}

fn push_ports(f: &mut Finding, crr: &CrrResult, range: ((u32, u32), bool)) {
    let ((lo, hi), known) = range;
    let n = ports(range);
    let src = if known {
        "client host's ip_local_port_range"
    } else {
        "Linux default range (no facts)"
    };
    f.push("local_ports", n, "ports", format!("{lo}-{hi}, {src}"));
    f.push(
        "time_wait_max",
        crr.time_wait.max as f64,
        "sockets",
        format!(
            "TIME_WAIT on the client, {:.0}% of the ports",
            crr.time_wait.max as f64 / n * 100.0
        ),
    );
    f.push("port_limited_rate", n / TIME_WAIT_S, "connections/s", "ports / 60 s TIME_WAIT: the sustained rate one client address can reach to one server port");
    if let Some(r) = crr.summary.connections_per_s {
        f.push("connections_per_s", r, "connections/s", "measured");
    }
}

fn port_exhaustion(ctx: &Context<'_>, crr: &CrrResult, range: ((u32, u32), bool)) -> Finding {
    let e = crr.errors_total.addrnotavail;
    let mut f = Finding::new(
        "connection_trouble.port_exhaustion",
        Severity::Error,
        format!("{e} connects failed with EADDRNOTAVAIL: the client ran out of local ports"),
    );
    f.push(
        "eaddrnotavail",
        e as f64,
        "connects",
        format!(
            "in {} seconds of the run",
            crr.errors.iter().filter(|s| s.addrnotavail > 0).count()
        ),
    );
    push_ports(&mut f, crr, range);
    f.samples.push(SampleRefs::new(
        "crr errors second",
        crr.errors
            .iter()
            .filter(|s| s.addrnotavail > 0)
            .map(|s| s.second as usize),
    ));
    f.explanation = "Every closed connection keeps its local port in TIME_WAIT for 60 s; at this connection rate the client's port range ran out and connect() failed. Widen the range, let new connections reuse TIME_WAIT ports (tcp_tw_reuse), or reuse connections.".into();
    f.fixes = port_fixes(ctx, range.0);
    f
}

fn time_wait(ctx: &Context<'_>, crr: &CrrResult, range: ((u32, u32), bool)) -> Finding {
    let around = rate_around_build_up(&crr.time_wait.samples, TIME_WAIT_SHARE * ports(range));
    // Unsampled (no slope to read): the build-up alone is reason enough to look.
    let collapsed = around.is_none_or(|(_, before, after)| after < COLLAPSE_SHARE * before);
    let mut f = Finding::new(
        "connection_trouble.time_wait",
        if collapsed {
            Severity::Warning
        } else {
            Severity::Info
        },
        format!(
            "{} TIME_WAIT sockets fill {:.0}% of the local port range",
            crr.time_wait.max,
            crr.time_wait.max as f64 / ports(range) * 100.0
        ),
    );
    push_ports(&mut f, crr, range);
    if let Some((at, before, after)) = around {
        let share = TIME_WAIT_SHARE * 100.0;
        f.push(
            "rate_before_build_up",
            before,
            "connections/s",
            format!("until TIME_WAIT reached {share:.0}% of the ports at {at:.2} s"),
        );
        f.push(
            "rate_after_build_up",
            after,
            "connections/s",
            "from then to the end of the run",
        );
    }
    f.explanation = if collapsed {
        "TIME_WAIT sockets built up to most of the client's local ports and the connection rate collapsed: connect() must search past ports still in TIME_WAIT (on 6.x it tries even ports first, so past half the range every connect searches the other half), and the run is close to failing with EADDRNOTAVAIL. A client this fast to one server port cannot stay above ports / 60 s without tcp_tw_reuse or a wider range."
    } else {
        "TIME_WAIT sockets built up to most of the client's local ports, but the connection rate held: worth knowing for a longer run, which cannot stay above ports / 60 s without tcp_tw_reuse or a wider range."
    }
    .into();
    f.fixes = port_fixes(ctx, range.0);
    f
}

fn syn_retransmits(ctx: &Context<'_>, crr: &CrrResult) -> Option<Finding> {
    let s = &crr.syn_retrans;
    let slow = s.connects_near_1s + s.connects_near_3s;
    let kernel = s.kernel_syn_retrans.unwrap_or(0);
    if slow == 0 && kernel == 0 {
        return None;
    }
    let total = (crr.summary.transactions + crr.errors_total.other).max(1);
    let share = slow.max(kernel) as f64 / total as f64;
    let severity = if share >= SYN_RETRANS_ERROR_SHARE {
        Severity::Error
    } else {
        Severity::Warning
    };
    let mut f = Finding::new(
        "connection_trouble.syn_retransmits",
        severity,
        format!(
            "{} connects waited for a SYN retransmission (~1 s or ~3 s)",
            slow.max(kernel)
        ),
    );
    f.push(
        "connects_near_1s",
        s.connects_near_1s as f64,
        "connects",
        "0.8-2.5 s: one SYN lost (initial RTO 1 s)",
    );
    f.push(
        "connects_near_3s",
        s.connects_near_3s as f64,
        "connects",
        ">= 2.5 s: two SYNs lost (1 s + 2 s)",
    );
    if let Some(k) = s.kernel_syn_retrans {
        f.push(
            "kernel_syn_retrans",
            k as f64,
            "segments",
            "TcpExt TCPSynRetrans of the client namespace",
        );
    }
    f.push(
        "syn_retrans_share",
        share,
        "fraction",
        format!("of {total} connects"),
    );
    if let Some(p) = crr.summary.connect_us.p99 {
        f.push("connect_p99_ms", p / 1e3, "ms", "connect time p99");
    }
    if let Some(m) = crr.summary.connect_us.max {
        f.push("connect_max_ms", m / 1e3, "ms", "slowest connect");
    }
    let slow_ns = (SYN_RETRANS_CONNECT_S * 1e9) as u64;
    let idx = crr
        .samples
        .iter()
        .enumerate()
        .filter(|(_, c)| c.connected_ns.saturating_sub(c.start_ns) >= slow_ns)
        .map(|(i, _)| i);
    f.samples.push(SampleRefs::new("crr connection", idx));
    let server = ctx.describe_host("server", Role::Server);
    if let Some((to_server, to_client)) = path_losses(crr) {
        f.push(
            "path_drops_client_to_server",
            to_server as f64,
            "packets",
            "dropped by the emulated link's loss process during crr",
        );
        f.push(
            "path_drops_server_to_client",
            to_client as f64,
            "packets",
            "dropped by the emulated link's loss process during crr",
        );
        f.explanation = format!(
            "A SYN (or its SYN-ACK) went unanswered and the client resent it after the 1 s initial RTO (and 2 s more for a second loss). The path itself lost packets during the run ({to_server} client → server, {to_client} server → client): a lost handshake packet costs a whole second, where a lost data packet costs a round trip or two. Find where the path drops packets; a connection pool or keep-alive spares each request the handshake."
        );
        f.fixes = vec![
            Fix::other(
                "find and remove the packet loss on the path (a faulty link, an overflowing queue, a policer); the direction with the drops is where to look",
                "the path",
            ),
            Fix::other(
                "reuse connections (keep-alive, a pool) so requests do not pay for handshakes",
                "the application",
            ),
        ];
        return Some(f);
    }
    f.explanation = "A SYN (or its SYN-ACK) went unanswered and the client resent it after the 1 s initial RTO (and 2 s more for a second loss). On a clean path the usual causes are a full listen queue on the server or, as in seed 003, a SYN reaching a port still in TIME_WAIT on the server; ports recycled quickly make that likely.".into();
    f.fixes = vec![
        Fix::sysctl(
            "net.core.somaxconn",
            BACKLOG.to_string(),
            Scope::Namespace,
            &server,
        ),
        Fix::sysctl(
            "net.ipv4.tcp_max_syn_backlog",
            BACKLOG.to_string(),
            Scope::Namespace,
            &server,
        ),
        Fix::other(
            &format!(
                "listen(fd, {BACKLOG}) in the server: the backlog argument caps the accept queue below somaxconn"
            ),
            &server,
        ),
    ];
    f.fixes.extend(port_fixes(ctx, port_range(ctx).0));
    Some(f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::battery::Battery;
    use crate::synth;

    const US: u64 = 1_000;

    fn battery(crr: CrrResult) -> Battery {
        Battery {
            crr: Some(crr),
            facts: Some(synth::facts(250)),
            ..Battery::default()
        }
    }

    fn lines(f: &Finding) -> Vec<String> {
        f.fixes.iter().flat_map(|x| x.lines.clone()).collect()
    }

    #[test]
    fn port_exhaustion_names_the_range_and_the_ceiling() {
        let mut r = synth::crr(30_000, 1_000.0, |_| 100 * US);
        r.time_wait.max = 28_200;
        let r = synth::with_addrnotavail(r, &[29, 30, 31], 400);
        let f = check(&Context::new(&battery(r)));
        assert_eq!(f.len(), 1);
        let f = &f[0];
        assert_eq!(f.id, "connection_trouble.port_exhaustion");
        assert_eq!(f.severity, Severity::Error);
        assert_eq!(f.figure("eaddrnotavail"), Some(1200.0));
        assert_eq!(f.figure("local_ports"), Some(28_232.0));
        assert!((f.figure("port_limited_rate").unwrap() - 28_232.0 / 60.0).abs() < 1e-9);
        assert_eq!(f.samples[0].indices, [29, 30, 31]);
        let l = lines(f);
        assert!(
            l.contains(&"net.ipv4.ip_local_port_range = 1024 65535".to_string()),
            "{l:?}"
        );
        assert!(l.contains(&"net.ipv4.tcp_tw_reuse = 1".to_string()));
    }

    #[test]
    fn time_wait_build_up_without_samples_is_a_warning() {
        let mut r = synth::crr(20_000, 400.0, |_| 100 * US);
        r.time_wait.max = 20_000;
        let f = check(&Context::new(&battery(r)));
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].id, "connection_trouble.time_wait");
        assert_eq!(f[0].severity, Severity::Warning);
        let share = f[0].figure("time_wait_max").unwrap() / f[0].figure("local_ports").unwrap();
        assert!((share - 20_000.0 / 28_232.0).abs() < 1e-12);
    }

    /// TIME_WAIT counts every 0.1 s: `fast` connections/s until `knee` sockets, `slow` after.
    fn tw_samples(fast: f64, knee: u64, slow: f64, seconds: f64) -> Vec<(f64, u64)> {
        let mut out = Vec::new();
        let (mut t, mut n) = (0.0, 0.0_f64);
        while t <= seconds + 1e-9 {
            out.push((t, n.round() as u64));
            n += if n < knee as f64 { fast } else { slow } * 0.1;
            t += 0.1;
        }
        out
    }

    #[test]
    fn a_rate_collapse_at_the_build_up_is_a_warning_with_both_rates() {
        // The measured shape (6.18, veth pair, default range): 14.5k/s, then 1.1k/s past half.
        let mut r = synth::crr(23_000, 2_500.0, |_| 100 * US);
        r.time_wait.samples = tw_samples(14_500.0, 14_500, 1_100.0, 9.0);
        r.time_wait.max = r.time_wait.samples.last().unwrap().1;
        let f = check(&Context::new(&battery(r)));
        assert_eq!(f[0].id, "connection_trouble.time_wait");
        assert_eq!(f[0].severity, Severity::Warning);
        let before = f[0].figure("rate_before_build_up").unwrap();
        let after = f[0].figure("rate_after_build_up").unwrap();
        assert!((before - 14_500.0).abs() < 200.0, "{before}");
        assert!((after - 1_100.0).abs() < 100.0, "{after}");
    }

    #[test]
    fn a_build_up_whose_rate_held_is_info() {
        let mut r = synth::crr(20_000, 2_000.0, |_| 100 * US);
        r.time_wait.samples = tw_samples(2_000.0, 14_000, 2_000.0, 10.0);
        r.time_wait.max = r.time_wait.samples.last().unwrap().1;
        let f = check(&Context::new(&battery(r)));
        assert_eq!(f[0].id, "connection_trouble.time_wait");
        assert_eq!(f[0].severity, Severity::Info);
    }

    #[test]
    fn rates_around_the_build_up_need_time_on_both_sides() {
        assert_eq!(rate_around_build_up(&[], 10.0), None);
        let s = [(0.0, 0), (1.0, 100), (1.2, 120)];
        assert_eq!(rate_around_build_up(&s, 100.0), None, "0.2 s after");
        let s = [(0.0, 0), (1.0, 100), (2.0, 150)];
        assert_eq!(rate_around_build_up(&s, 100.0), Some((1.0, 100.0, 50.0)));
        assert_eq!(rate_around_build_up(&s, 1_000.0), None, "never reached");
    }

    #[test]
    fn syn_retransmits_from_connect_times() {
        // 1000 connects; 5 took ~1 s, 1 took ~3 s (seed 003's TIME_WAIT collision).
        let r = synth::crr(1_000, 500.0, |i| match i {
            100 | 200 | 300 | 400 | 500 => 1_003_000 * US,
            600 => 3_004_000 * US,
            _ => 90 * US,
        });
        let f = check(&Context::new(&battery(r)));
        assert_eq!(f.len(), 1);
        let f = &f[0];
        assert_eq!(f.id, "connection_trouble.syn_retransmits");
        assert_eq!(f.figure("connects_near_1s"), Some(5.0));
        assert_eq!(f.figure("connects_near_3s"), Some(1.0));
        assert_eq!(f.figure("kernel_syn_retrans"), Some(7.0));
        assert!((f.figure("syn_retrans_share").unwrap() - 0.007).abs() < 1e-12);
        assert_eq!(f.severity, Severity::Warning);
        assert_eq!(f.samples[0].indices, [100, 200, 300, 400, 500, 600]);
        assert_eq!(f.fixes[0].lines, ["net.core.somaxconn = 4096"]);
    }

    #[test]
    fn silent_on_a_healthy_run() {
        let mut r = synth::crr(10_000, 1_000.0, |i| (80 + (i % 7) as u64) * US);
        r.time_wait.max = 9_000;
        assert!(check(&Context::new(&battery(r))).is_empty());
    }

    fn server_counters(b: &mut Battery, overflows: u64, drops: u64) {
        let mut side = std::collections::BTreeMap::new();
        side.insert("TcpExt.ListenOverflows".to_string(), overflows);
        side.insert("TcpExt.ListenDrops".to_string(), drops);
        let mut sides = std::collections::BTreeMap::new();
        sides.insert("server".to_string(), side);
        sides.insert("client".to_string(), std::collections::BTreeMap::new());
        b.counters.insert("crr".into(), sides);
    }

    #[test]
    fn a_full_accept_queue_is_named_with_the_server_counters() {
        // One connect in twenty waited for the SYN timer while the server's queue overflowed.
        let mut b = battery(synth::crr(400, 50.0, |i| {
            if i % 20 == 7 {
                1_020_000 * US
            } else {
                500 * US
            }
        }));
        server_counters(&mut b, 25, 25);
        if let Some(f) = b.facts.as_mut() {
            if let Some(h) = f.hosts.get_mut("server") {
                h.sysctls.insert("net.core.somaxconn".into(), "2".into());
            }
        }
        let f = check(&Context::new(&b));
        let ids: Vec<&str> = f.iter().map(|x| x.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "connection_trouble.accept_queue",
                "connection_trouble.syn_retransmits"
            ]
        );
        assert_eq!(f[0].figure("listen_overflows"), Some(25.0));
        assert_eq!(f[0].figure("somaxconn"), Some(2.0));
        assert!(lines(&f[0]).contains(&"net.core.somaxconn = 4096".to_string()));
        // Together, the queue explains the SYN retransmissions.
        let mut all = f;
        crate::rules::explain::apply(&mut all);
        assert_eq!(
            all[1].explained_by.as_deref(),
            Some("connection_trouble.accept_queue")
        );
    }

    #[test]
    fn an_accept_queue_that_kept_up_or_was_not_counted_is_silent() {
        let mut b = battery(synth::crr(400, 50.0, |_| 500 * US));
        server_counters(&mut b, 1, 0);
        assert!(check(&Context::new(&b)).is_empty());
        b.counters.clear();
        assert!(check(&Context::new(&b)).is_empty());
    }
}
