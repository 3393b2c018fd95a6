//! Fixes shared by several rules: the delayed-ACK/Nagle remedies, buffer maxima from a BDP,
//! and the local-port remedies. Values are computed from the measured figures and the facts.

use crate::battery::{Context, DEFAULT_TCP_RMEM, DEFAULT_TCP_WMEM, Role};
use crate::finding::{Fix, Scope};

/// Buffers are sized at this multiple of the BDP: Linux advertises only part of the receive
/// buffer as window (the rest holds skb overhead; `tcp_adv_win_scale`/scaling ratio, about
/// half for small segments), and the send buffer must hold in-flight data plus what is not
/// yet sent. 2 x BDP is the long-standing rule (ESnet fasterdata host tuning).
pub const BUFFER_BDP_MULTIPLE: f64 = 2.0;

/// Buffer sizes are rounded up to a whole page.
const PAGE: u64 = 4096;

/// The delayed-ACK/Nagle remedies, most direct first: TCP_NODELAY when Nagle was on (or not
/// recorded), TCP_QUICKACK, TCP_DELACK_MAX_US when the kernel has it, tcp_rto_min_us (which
/// also caps the delayed-ACK timer at rto_min − 1 jiffy), and the route's `quickack 1`.
pub fn delack_fixes(
    ctx: &Context<'_>,
    nodelay: Option<bool>,
    delack_max: Option<bool>,
) -> Vec<Fix> {
    let mut fixes = Vec::new();
    let sender = ctx.describe_host("sender", Role::Client);
    let receiver = ctx.describe_host("receiver", Role::Server);
    if nodelay != Some(true) {
        fixes.push(Fix::tcp_sockopt(
            "TCP_NODELAY",
            "1",
            &sender,
            Some("--nodelay"),
        ));
    }
    fixes.push(Fix::tcp_sockopt(
        "TCP_QUICKACK",
        "1",
        &format!("{receiver}, re-armed after every read (the kernel clears it)"),
        Some("--quickack"),
    ));
    let tick_us = (ctx.tick_s() * 1e6).round();
    if delack_max != Some(false) {
        // The kernel refuses values of one jiffy or less (EINVAL; measured on 6.18 at HZ=250:
        // 4000 is refused, 4001..8000 read back as 8000), so two jiffies is the smallest cap.
        let delack_us = 2.0 * tick_us;
        fixes.push(Fix::tcp_sockopt(
            "TCP_DELACK_MAX_US",
            &format!("{delack_us:.0}"),
            &format!("{receiver}; Linux 6.15+; caps the delayed-ACK timer at two jiffies, the smallest value the kernel takes"),
            Some(&format!("--delack-max-us {delack_us:.0}")),
        ));
    }
    if ctx.host_has_sysctl(Role::Server, "net.ipv4.tcp_rto_min_us") != Some(false) {
        // rto_min of 2 jiffies caps the delayed ACK at 1 jiffy; RTO stays >= srtt + rto_min.
        let rto_min_us = 2.0 * tick_us;
        fixes.push(Fix::sysctl(
            "net.ipv4.tcp_rto_min_us",
            format!("{rto_min_us:.0}"),
            Scope::Namespace,
            &format!(
                "{receiver}; caps delayed ACKs at rto_min - 1 jiffy; RTO stays >= srtt + rto_min"
            ),
        ));
    }
    let dev = ctx.single_interface(Role::Server);
    fixes.push(Fix::route(
        "quickack",
        "1",
        "<sender address>",
        dev.as_deref(),
        &format!("{receiver}: its route back to the sender ACKs every segment at once"),
    ));
    fixes
}

/// `bytes` rounded up to a whole page.
pub fn page_round(bytes: f64) -> u64 {
    let b = bytes.max(PAGE as f64).ceil() as u64;
    b.div_ceil(PAGE) * PAGE
}

/// Which buffer a fix is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Buffer {
    /// Receive buffer (tcp_rmem on the receiver, net.core.rmem_max).
    Receive,
    /// Send buffer (tcp_wmem on the sender, net.core.wmem_max).
    Send,
}

impl Buffer {
    /// The per-namespace sysctl of this buffer (`net.ipv4.tcp_rmem` / `tcp_wmem`).
    pub fn sysctl_key(self) -> &'static str {
        self.keys().0
    }

    fn keys(self) -> (&'static str, &'static str, [u64; 3]) {
        match self {
            Self::Receive => ("net.ipv4.tcp_rmem", "net.core.rmem_max", DEFAULT_TCP_RMEM),
            Self::Send => ("net.ipv4.tcp_wmem", "net.core.wmem_max", DEFAULT_TCP_WMEM),
        }
    }
}

/// The sysctl fixes that let one buffer grow to `needed` bytes on the host of `role`:
/// the per-namespace tcp_rmem/tcp_wmem maximum (min and default kept, as autotuning grows
/// from the default) when it is below `needed` or `always`, and the machine-wide
/// net.core.rmem_max/wmem_max (the bound on an explicit SO_RCVBUF/SO_SNDBUF) when below.
pub fn buffer_fixes(
    ctx: &Context<'_>,
    which: Buffer,
    role: Role,
    needed: u64,
    always: bool,
) -> Vec<Fix> {
    let (key, core_key, default) = which.keys();
    let (current, known) = ctx.triple(role, key, default);
    let mut fixes = Vec::new();
    if always || current[2] < needed {
        let what = match which {
            Buffer::Receive => "receiver",
            Buffer::Send => "sender",
        };
        let mut applies = ctx.describe_host(what, role);
        if !known {
            applies.push_str("; min and default are Linux defaults (no facts)");
        }
        fixes.push(Fix::sysctl(
            key,
            format!("{} {} {}", current[0], current[1], needed.max(current[2])),
            Scope::Namespace,
            &applies,
        ));
    }
    if ctx.machine_number(core_key).is_none_or(|v| v < needed) {
        fixes.push(Fix::sysctl(
            core_key,
            needed.to_string(),
            Scope::HostGlobal,
            "the machine (bounds only explicit SO_RCVBUF/SO_SNDBUF; autotuning ignores it)",
        ));
    }
    fixes
}

/// TIME_WAIT lasts TCP_TIMEWAIT_LEN, hard-coded at 60 s in Linux.
pub const TIME_WAIT_S: f64 = 60.0;

/// The widest sensible local port range: above the well-known and most registered
/// server ports of the client's own services would still collide, so 1024 is the floor.
pub const WIDE_PORT_RANGE: (u32, u32) = (1024, 65_535);

/// The remedies for running out of local ports while the client holds the TIME_WAIT sockets
/// (it closed first): a wider ip_local_port_range, tcp_tw_reuse=1 (reuse a TIME_WAIT port for
/// a new outgoing connection when timestamps make it safe; it acts on the connecting side
/// only), and connection reuse in the application (keep-alive, pooling).
pub fn port_fixes(ctx: &Context<'_>, range: (u32, u32)) -> Vec<Fix> {
    let client = ctx.describe_host("client", Role::Client);
    let mut fixes = Vec::new();
    if range.1.saturating_sub(range.0) < WIDE_PORT_RANGE.1 - WIDE_PORT_RANGE.0 {
        fixes.push(Fix::sysctl(
            "net.ipv4.ip_local_port_range",
            format!("{} {}", WIDE_PORT_RANGE.0, WIDE_PORT_RANGE.1),
            Scope::Namespace,
            &client,
        ));
    }
    if ctx.host_sysctl(Role::Client, "net.ipv4.tcp_tw_reuse") != Some("1") {
        fixes.push(Fix::sysctl(
            "net.ipv4.tcp_tw_reuse",
            "1",
            Scope::Namespace,
            &format!(
                "{client}; needs tcp_timestamps = 1 (the default); reuses the client's own TIME_WAIT ports for its outgoing connections, nothing on the server"
            ),
        ));
    }
    fixes.push(Fix::other(
        "reuse connections: HTTP keep-alive or a connection pool instead of one connection per \
         request; each closed connection holds its port in TIME_WAIT for 60 s",
        "the client application",
    ));
    fixes
}

/// The remedies for TIME_WAIT sockets the server holds (it closed first, as an HTTP server
/// does after `Connection: close`), which recycled client ports meet: connection reuse, the
/// client closing first (so TIME_WAIT lands on the connecting side, where tcp_tw_reuse can
/// recycle it), a wider client port range (a port comes back less often within the 60 s),
/// and TCP timestamps on both ends where the facts show them off (with them, Linux lets a SYN
/// with a newer timestamp replace a TIME_WAIT socket, RFC 6191). tcp_tw_reuse is not among
/// them: it only lets the connecting side reuse its own TIME_WAIT ports.
pub fn server_time_wait_fixes(ctx: &Context<'_>, range: (u32, u32)) -> Vec<Fix> {
    let client = ctx.describe_host("client", Role::Client);
    let mut fixes = vec![
        Fix::other(
            "reuse connections: HTTP keep-alive or a connection pool instead of one connection per \
             request; every connection the server closes holds a TIME_WAIT socket there for 60 s",
            "the client application (and the server's keep-alive limits)",
        ),
        Fix::other(
            "let the client close first (no Connection: close; close once the response is read), \
             so TIME_WAIT stays on the connecting side, where tcp_tw_reuse can recycle it; \
             tcp_tw_reuse on the server does nothing for incoming connections",
            "the client application",
        ),
    ];
    if range.1.saturating_sub(range.0) < WIDE_PORT_RANGE.1 - WIDE_PORT_RANGE.0 {
        fixes.push(Fix::sysctl(
            "net.ipv4.ip_local_port_range",
            format!("{} {}", WIDE_PORT_RANGE.0, WIDE_PORT_RANGE.1),
            Scope::Namespace,
            &format!(
                "{client}: more ports, so each comes back less often within the server's 60 s"
            ),
        ));
    }
    for role in [Role::Server, Role::Client] {
        let off = ctx
            .host_sysctl(role, "net.ipv4.tcp_timestamps")
            .is_some_and(|v| v.trim() == "0");
        if off {
            let what = match role {
                Role::Server => "server",
                Role::Client => "client",
            };
            fixes.push(Fix::sysctl(
                "net.ipv4.tcp_timestamps",
                "1",
                Scope::Namespace,
                &format!(
                    "{}: with timestamps on both ends a SYN with a newer one replaces a TIME_WAIT socket",
                    ctx.describe_host(what, role)
                ),
            ));
        }
    }
    fixes
}
