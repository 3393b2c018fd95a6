//! `connection_trouble` (seed 003): what connection-per-request workloads hit, in every
//! workload of the battery that opens connections (crr; an HTTP run of a connection per
//! request, `tcplab doctor --http`). Each rule reads one [`ConnectionEvidence`] and runs over
//! every workload that has one, so the logic is written once and the findings name the
//! workload.
//! - `connection_trouble.port_exhaustion`: connects failed with EADDRNOTAVAIL.
//! - `connection_trouble.time_wait`: TIME_WAIT sockets filled most of the local port range,
//!   which caps the connection rate at ports / 60 s (seed 003's 2.2-kernel client). A warning
//!   when the run's own rate collapsed once they did (on 6.x connect() prefers even ports, so
//!   past half the range every connect searches the other half: measured 14.5k/s → 1.1k/s on a
//!   veth pair with the default range), info when the rate held. The same id for a server
//!   that closes first and so holds the TIME_WAIT sockets (an HTTP server answering
//!   `Connection: close`): as many as most of the client's port range means a recycled client
//!   port meets one; a warning when connects waited for the SYN timer, info otherwise. Which
//!   host holds them decides the fix (tcp_tw_reuse only helps the connecting side).
//!   Either finding, and port exhaustion, is info when most of the TIME_WAIT peak was already
//!   there when the run began (the battery's crr leaves its sockets for the HTTP run after it).
//! - `connection_trouble.accept_queue`: the server's kernel dropped handshakes at a full
//!   accept queue (its ListenOverflows during the workload).
//! - `connection_trouble.syn_retransmits`: connects that took ~1 s or ~3 s (the initial RTO
//!   and its doubling): SYNs were lost or ignored (listen queue overflow, a SYN meeting a
//!   TIME_WAIT socket as in seed 003).

pub mod evidence;
#[cfg(test)]
mod http_tests;

pub use evidence::{ConnectionEvidence, SYN_RETRANS_CONNECT_S, ServerCounters};

use evidence::{at_start, mostly_inherited};

use tcplab_results::crr::TimeWait;

use crate::battery::{Context, DEFAULT_PORT_RANGE, Role};
use crate::finding::{Finding, Fix, SampleRefs, Scope, Severity};
use crate::rules::fixes::{TIME_WAIT_S, port_fixes, server_time_wait_fixes};
use crate::rules::probes::ProbeLoss;

/// TIME_WAIT sockets above this share of the local port range are a build-up: new connects
/// must hunt for free ports (the connect() port search gets slower) and exhaustion is near.
/// On the server, this share of the client's ports held in TIME_WAIT makes it likely that a
/// recycled client port meets one of them.
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

/// SYN retransmissions on this share of connections or more are an error: every such
/// connection costs a second or more.
pub const SYN_RETRANS_ERROR_SHARE: f64 = 0.01;

/// SYN waits at least this likely (Poisson, P(X ≥ waits)) at what the path's own loss predicts
/// are the path's loss, not connection trouble: with 1 % the path would show that many only
/// once in a hundred batteries, so more than that is something else dropping handshakes.
pub const PATH_LOSS_EXPLAINS_P: f64 = 0.01;

/// Confidence of the upper bound on the path's loss rate that SYN waits are weighed against.
pub const PATH_LOSS_CONFIDENCE: f64 = 0.95;

/// Listen backlog suggested when SYNs are dropped: the 6.x default of somaxconn (4096).
pub const BACKLOG: u32 = 4096;

/// The rule: every check over every workload that opened connections.
pub fn check(ctx: &Context<'_>) -> Vec<Finding> {
    let range = port_range(ctx);
    ConnectionEvidence::all(ctx)
        .iter()
        .flat_map(|e| check_one(ctx, e, range))
        .collect()
}

fn check_one(ctx: &Context<'_>, e: &ConnectionEvidence<'_>, range: PortRange) -> Vec<Finding> {
    let mut out = Vec::new();
    if e.addrnotavail > 0 {
        out.push(port_exhaustion(ctx, e, range));
    } else if e.time_wait.max as f64 >= TIME_WAIT_SHARE * ports(range) {
        out.push(time_wait(ctx, e, range));
    }
    if let Some(f) = server_time_wait(ctx, e, range) {
        out.push(f);
    }
    if let Some(f) = accept_queue(ctx, e) {
        out.push(f);
    }
    if let Some(f) = syn_retransmits(ctx, e, range) {
        out.push(f);
    }
    out
}

/// Fewest accept-queue overflows for a finding (one can be a burst at the start).
pub const MIN_LISTEN_OVERFLOWS: u64 = 3;

/// `connection_trouble.accept_queue`: the server's kernel dropped handshakes because its
/// accept queue was full (TcpExt ListenOverflows, ListenDrops of the server's namespace during
/// the workload): the application accepts connections slower than they arrive, or its backlog
/// is small. Each dropped handshake costs the client a retransmission timer (1 s for a SYN).
fn accept_queue(ctx: &Context<'_>, e: &ConnectionEvidence<'_>) -> Option<Finding> {
    let s = e.server?;
    let (overflows, drops, w) = (s.listen_overflows, s.listen_drops, e.workload);
    if overflows.max(drops) < MIN_LISTEN_OVERFLOWS {
        return None;
    }
    let somaxconn = ctx
        .host_sysctl(Role::Server, "net.core.somaxconn")
        .and_then(|v| v.trim().parse::<u64>().ok());
    let mut f = Finding::new(
        "connection_trouble.accept_queue",
        Severity::Error,
        format!(
            "the server's accept queue overflowed {overflows} times during {w}: handshakes were dropped"
        ),
    );
    f.push(
        "listen_overflows",
        overflows as f64,
        "times",
        format!("TcpExt ListenOverflows of the server's namespace during {w}"),
    );
    f.push(
        "listen_drops",
        drops as f64,
        "handshakes",
        format!("TcpExt ListenDrops of the server's namespace during {w}"),
    );
    if s.syncookies_sent > 0 {
        f.push(
            "syncookies_sent",
            s.syncookies_sent as f64,
            "SYNs",
            format!(
                "TcpExt SyncookiesSent of the server's namespace during {w}: its SYN queue was full too"
            ),
        );
    }
    if let Some(m) = somaxconn {
        f.push(
            "somaxconn",
            m as f64,
            "connections",
            "net.core.somaxconn of the server host: the most any listen backlog gets",
        );
    }
    let c = &e.concurrency;
    f.push(c.figure, f64::from(c.value), c.unit, c.context.clone());
    if e.refused > 0 {
        f.push(
            "connects_refused",
            e.refused as f64,
            "connects",
            "ECONNREFUSED: a full queue refuses when tcp_abort_on_overflow is set",
        );
    }
    if let Some(p) = e.connect_us.p99 {
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

/// The client's ip_local_port_range and whether the facts gave it (else the Linux default).
type PortRange = ((u32, u32), bool);

/// The client's ip_local_port_range (facts), else the Linux default; the bool says which.
fn port_range(ctx: &Context<'_>) -> PortRange {
    let parsed = ctx
        .host_sysctl(Role::Client, "net.ipv4.ip_local_port_range")
        .and_then(|v| {
            let mut it = v.split_whitespace().filter_map(|x| x.parse::<u32>().ok());
            Some((it.next()?, it.next()?))
        });
    parsed.map_or((DEFAULT_PORT_RANGE, false), |r| (r, true))
}

fn ports(range: PortRange) -> f64 {
    f64::from(range.0.1.saturating_sub(range.0.0) + 1)
}

fn push_ports(f: &mut Finding, e: &ConnectionEvidence<'_>, range: PortRange) {
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
        e.time_wait.max as f64,
        "sockets",
        format!(
            "TIME_WAIT on the client, {:.0}% of the ports",
            e.time_wait.max as f64 / n * 100.0
        ),
    );
    f.push("port_limited_rate", n / TIME_WAIT_S, "connections/s", "ports / 60 s TIME_WAIT: the sustained rate one client address can reach to one server port");
    if let Some(r) = e.connections_per_s {
        f.push("connections_per_s", r, "connections/s", "measured");
    }
    push_server_time_wait(f, e, range);
}

/// The server's TIME_WAIT count, when recorded and above zero.
fn push_server_time_wait(f: &mut Finding, e: &ConnectionEvidence<'_>, range: PortRange) {
    if let Some(tw) = e.server_time_wait.filter(|tw| tw.max > 0) {
        f.push(
            "server_time_wait_max",
            tw.max as f64,
            "sockets",
            format!(
                "TIME_WAIT on the server host (connections it closed first), {:.0}% of the client's ports; they do not use the client's ports",
                tw.max as f64 / ports(range) * 100.0
            ),
        );
    }
}

/// When most of `tw`'s peak on `host` was there before `e`'s run began: the finding becomes
/// info and says so. The sockets hold ports (or 4-tuples) all the same, but the run did not
/// make them, and the part that did has its own finding; acting on this one would be acting
/// twice on one cause.
fn note_inherited(f: &mut Finding, e: &ConnectionEvidence<'_>, tw: &TimeWait, host: &str) {
    if !mostly_inherited(tw) {
        return;
    }
    let n = at_start(tw);
    f.severity = Severity::Info;
    f.push(
        if host == "server" {
            "server_time_wait_at_start"
        } else {
            "time_wait_at_start"
        },
        n as f64,
        "sockets",
        format!("TIME_WAIT on the {host} when {} began", e.workload),
    );
    f.explanation.push_str(&format!(
        " Most of them were there before {} began ({n} of its peak of {}): earlier connections of the {host} host left them (in the doctor's battery, its crr part, run just before in the same hosts), so look at the finding of the part that made them.",
        e.workload, tw.max
    ));
}

/// The server's TIME_WAIT record when it holds a build-up: [`TIME_WAIT_SHARE`] of the
/// client's port range or more.
fn server_build_up<'e>(e: &ConnectionEvidence<'e>, range: PortRange) -> Option<&'e TimeWait> {
    e.server_time_wait
        .filter(|tw| tw.max as f64 >= TIME_WAIT_SHARE * ports(range))
}

fn port_exhaustion(ctx: &Context<'_>, e: &ConnectionEvidence<'_>, range: PortRange) -> Finding {
    let (n, w) = (e.addrnotavail, e.workload);
    let mut f = Finding::new(
        "connection_trouble.port_exhaustion",
        Severity::Error,
        format!(
            "{n} connects failed with EADDRNOTAVAIL during {w}: the client ran out of local ports"
        ),
    );
    f.push(
        "eaddrnotavail",
        n as f64,
        "connects",
        format!("in {} seconds of the run", e.addrnotavail_seconds.len()),
    );
    push_ports(&mut f, e, range);
    f.samples.push(SampleRefs::new(
        format!("{w} errors second"),
        e.addrnotavail_seconds.iter().map(|&s| s as usize),
    ));
    f.explanation = "Every closed connection keeps its local port in TIME_WAIT for 60 s on the side that closed first; at this connection rate the client's port range ran out and connect() failed. Widen the range, let new connections reuse the client's own TIME_WAIT ports (tcp_tw_reuse, which acts on the connecting side only), or reuse connections.".into();
    f.fixes = port_fixes(ctx, range.0);
    note_inherited(&mut f, e, e.time_wait, "client");
    f
}

fn time_wait(ctx: &Context<'_>, e: &ConnectionEvidence<'_>, range: PortRange) -> Finding {
    let tw = e.time_wait;
    let around = rate_around_build_up(&tw.samples, TIME_WAIT_SHARE * ports(range));
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
            "{} TIME_WAIT sockets fill {:.0}% of the local port range during {}",
            tw.max,
            tw.max as f64 / ports(range) * 100.0,
            e.workload
        ),
    );
    push_ports(&mut f, e, range);
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
        "TIME_WAIT sockets built up to most of the client's local ports and the connection rate collapsed: connect() must search past ports still in TIME_WAIT (on 6.x it tries even ports first, so past half the range every connect searches the other half), and the run is close to failing with EADDRNOTAVAIL. A client this fast to one server port cannot stay above ports / 60 s without tcp_tw_reuse (the client closes first and so holds them: reuse acts on the connecting side) or a wider range."
    } else {
        "TIME_WAIT sockets built up to most of the client's local ports, but the connection rate held: worth knowing for a longer run, which cannot stay above ports / 60 s without tcp_tw_reuse (the client closes first and so holds them: reuse acts on the connecting side) or a wider range."
    }
    .into();
    f.fixes = port_fixes(ctx, range.0);
    note_inherited(&mut f, e, tw, "client");
    f
}

/// `connection_trouble.time_wait` on the server: it closed first (an HTTP server after a
/// response with `Connection: close`) and holds a TIME_WAIT socket per recent client port,
/// most of the client's range. A SYN from a recycled port then meets one (seed 003).
fn server_time_wait(
    ctx: &Context<'_>,
    e: &ConnectionEvidence<'_>,
    range: PortRange,
) -> Option<Finding> {
    let tw = server_build_up(e, range)?;
    let slow = e.syn.connects_near_1s + e.syn.connects_near_3s;
    let mut f = Finding::new(
        "connection_trouble.time_wait",
        if slow > 0 {
            Severity::Warning
        } else {
            Severity::Info
        },
        format!(
            "the server holds {} TIME_WAIT sockets during {}, {:.0}% of the client's port range: recycled ports meet them",
            tw.max,
            e.workload,
            tw.max as f64 / ports(range) * 100.0
        ),
    );
    push_server_time_wait(&mut f, e, range);
    let ((lo, hi), known) = range;
    f.push(
        "local_ports",
        ports(range),
        "ports",
        format!(
            "{lo}-{hi}, {}",
            if known {
                "client host's ip_local_port_range"
            } else {
                "Linux default range (no facts)"
            }
        ),
    );
    f.push(
        "time_wait_max",
        e.time_wait.max as f64,
        "sockets",
        "TIME_WAIT on the client",
    );
    if let Some(r) = e.connections_per_s {
        f.push("connections_per_s", r, "connections/s", "measured");
    }
    f.push(
        "connects_near_1s_or_3s",
        slow as f64,
        "connects",
        "waited for the SYN timer: a SYN the server's TIME_WAIT socket did not let through",
    );
    let timestamps = ctx.host_sysctl(Role::Server, "net.ipv4.tcp_timestamps");
    if let Some(v) = timestamps.and_then(|v| v.trim().parse::<f64>().ok()) {
        f.push(
            "server_tcp_timestamps",
            v,
            "setting",
            "net.ipv4.tcp_timestamps of the server host: with them, a newer SYN may replace a TIME_WAIT socket",
        );
    }
    let cost = if slow > 0 {
        "Here connects waited for the SYN timer."
    } else {
        "No connect waited for the SYN timer in this run: worth knowing for a faster or longer one."
    };
    f.explanation = format!(
        "The side that closes a connection first keeps it in TIME_WAIT for 60 s; here the server closed first (as an HTTP server does after a response with Connection: close), so it holds a socket per recent client port, most of the client's range. A new connection from a recycled port then meets one of them: Linux lets its SYN through when its timestamp (or sequence number) is newer than the old connection's, and otherwise answers with an ACK of the old connection, and the client sends its SYN again after the 1 s timer (seed 003). {cost} tcp_tw_reuse does not help: it lets the connecting side reuse its own TIME_WAIT ports for outgoing connections, and these belong to the server's incoming ones. Keep connections open, let the client close first, or widen the client's port range so a port comes back less often."
    );
    f.fixes = server_time_wait_fixes(ctx, range.0);
    note_inherited(&mut f, e, tw, "server");
    Some(f)
}

fn syn_retransmits(
    ctx: &Context<'_>,
    e: &ConnectionEvidence<'_>,
    range: PortRange,
) -> Option<Finding> {
    let (s, w) = (&e.syn, e.workload);
    let waits = e.syn_waits();
    if waits == 0 {
        return None;
    }
    let total = e.connects.max(1);
    let share = waits as f64 / total as f64;
    let severity = if share >= SYN_RETRANS_ERROR_SHARE {
        Severity::Error
    } else {
        Severity::Warning
    };
    let mut f = Finding::new(
        "connection_trouble.syn_retransmits",
        severity,
        format!("{waits} connects of {w} waited for a SYN retransmission (~1 s or ~3 s)"),
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
    if let Some(p) = e.connect_us.p99 {
        f.push("connect_p99_ms", p / 1e3, "ms", "connect time p99");
    }
    if let Some(m) = e.connect_us.max {
        f.push("connect_max_ms", m / 1e3, "ms", "slowest connect");
    }
    push_server_time_wait(&mut f, e, range);
    f.samples.push(SampleRefs::new(
        e.sample_source,
        e.slow_connects.iter().copied(),
    ));
    let server = ctx.describe_host("server", Role::Server);
    if let Some((to_server, to_client)) = e.path_drops {
        let context = format!("dropped by the emulated link's loss process during {w}");
        f.push(
            "path_drops_client_to_server",
            to_server as f64,
            "packets",
            context.clone(),
        );
        f.push(
            "path_drops_server_to_client",
            to_client as f64,
            "packets",
            context,
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
    if let Some(expected) = explained_by_path_loss(ctx, &mut f, total, waits) {
        f.severity = Severity::Info;
        f.explanation = format!(
            "A SYN (or its SYN-ACK) went unanswered and the client resent it after the 1 s initial RTO. The path itself loses packets (the battery's paced traffic, which never queues, lost some too): at its rate up to {expected:.1} of {total} connects could lose a handshake packet, and {waits} did, so the handshakes met the path's loss, not a server that drops them. Each costs a second: a connection pool or keep-alive spares requests the handshake; the loss itself is the path's to fix."
        );
        f.fixes = vec![Fix::other(
            "reuse connections (keep-alive, a pool) so requests do not pay for handshakes; find where the path drops packets",
            "the application",
        )];
        return Some(f);
    }
    let held = server_build_up(e, range);
    if let Some(tw) = held {
        f.explanation.push_str(&format!(
            " Here the server held {} TIME_WAIT sockets, {:.0}% of the client's port range (connection_trouble.time_wait): the server's, so tcp_tw_reuse on the client would not help.",
            tw.max,
            tw.max as f64 / ports(range) * 100.0
        ));
    }
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
    f.fixes.extend(match held {
        Some(_) => server_time_wait_fixes(ctx, range.0),
        None => port_fixes(ctx, range.0),
    });
    Some(f)
}

/// The connects expected to wait for the SYN timer at the path's own loss rate, when they
/// explain the `waits` seen ([`PATH_LOSS_EXPLAINS_P`]); the figures go on `f` either way. The
/// rate is the paced traffic's ([`ProbeLoss`]: the client's packets, which never queue), taken
/// at its upper [`PATH_LOSS_CONFIDENCE`] bound: a few thousand paced packets may lose none on a
/// path that loses one in two thousand, and the question is whether the path's loss could
/// explain the waits. A handshake risks two packets, the SYN and the SYN-ACK, the way back
/// taken to lose as much as the way out (the client's counters cannot see the server's
/// sending).
fn explained_by_path_loss(
    ctx: &Context<'_>,
    f: &mut Finding,
    connects: u64,
    waits: u64,
) -> Option<f64> {
    let probes = ProbeLoss::of(ctx)?;
    let upper = tcplab_stats::dist::poisson_mean_upper(probes.lost, PATH_LOSS_CONFIDENCE).ok()?
        / probes.sent.max(1) as f64;
    let expected = connects as f64 * 2.0 * upper;
    f.push(
        "paced_loss_rate",
        probes.rate(),
        "fraction",
        format!(
            "the battery's paced packets lost by the path: {} of {} (at most {:.3}% at {:.0}% confidence)",
            probes.lost,
            probes.sent,
            upper * 100.0,
            PATH_LOSS_CONFIDENCE * 100.0
        ),
    );
    f.push(
        "waits_expected_from_path_loss",
        expected,
        "connects",
        "at most: connects x 2 handshake packets x the paced loss rate's upper bound",
    );
    (tcplab_stats::dist::poisson_at_least(waits, expected) >= PATH_LOSS_EXPLAINS_P)
        .then_some(expected)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::battery::Battery;
    use crate::plan::PartKind;
    use crate::synth;
    use tcplab_results::crr::CrrResult;

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

    /// 1000 connects of which `waits` took ~1 s, on a path whose paced msgs lost `lost` of
    /// 50 000 segments.
    fn waits_on_a_lossy_path(waits: u64, lost: u64) -> Vec<Finding> {
        let r = synth::crr(1_000, 500.0, |i| {
            if i < waits as usize {
                1_003_000 * US
            } else {
                90 * US
            }
        });
        let mut b = battery(r);
        synth::counters(
            &mut b,
            PartKind::Msgs,
            Role::Client,
            &[("Tcp.OutSegs", 50_000), ("Tcp.RetransSegs", lost)],
        );
        check(&Context::new(&b))
    }

    #[test]
    fn syn_waits_the_paths_own_loss_predicts_are_info() {
        // 35 of 50 000 paced packets lost: at most 46.4 (95 %), so 1000 x 2 x 46.4 / 50 000 =
        // 1.86 waits expected at most; 2 are likely.
        let f = waits_on_a_lossy_path(2, 35);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].severity, Severity::Info, "{}", f[0]);
        let expected = f[0].figure("waits_expected_from_path_loss").unwrap();
        assert!((expected - 1.856).abs() < 0.001, "{expected}");
        assert!(f[0].explanation.contains("the path's loss"));
    }

    #[test]
    fn syn_waits_far_beyond_the_paths_loss_stay_connection_trouble() {
        // 1.86 expected at most, 9 seen: P(X >= 9) ~ 2e-4.
        let f = waits_on_a_lossy_path(9, 35);
        assert_eq!(f[0].severity, Severity::Warning);
        // 50 000 paced packets lost none: at most 0.006 %, 0.12 waits; 2 are not the path's.
        let f = waits_on_a_lossy_path(2, 0);
        assert_eq!(f[0].severity, Severity::Warning);
        let expected = f[0].figure("waits_expected_from_path_loss").unwrap();
        assert!((expected - 0.12).abs() < 0.001, "{expected}");
    }

    #[test]
    fn silent_on_a_healthy_run() {
        let mut r = synth::crr(10_000, 1_000.0, |i| (80 + (i % 7) as u64) * US);
        r.time_wait.max = 9_000;
        assert!(check(&Context::new(&battery(r))).is_empty());
    }

    fn server_counters(b: &mut Battery, overflows: u64, drops: u64) {
        use crate::battery::Role;
        use crate::plan::PartKind;
        synth::counters(
            b,
            PartKind::Crr,
            Role::Server,
            &[
                ("TcpExt.ListenOverflows", overflows),
                ("TcpExt.ListenDrops", drops),
            ],
        );
        synth::counters(b, PartKind::Crr, Role::Client, &[]);
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
