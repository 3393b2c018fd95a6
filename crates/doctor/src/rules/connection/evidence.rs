//! The facts the connection rules read, from whichever workload opened connections: crr's
//! connect/request/response/close loops, or an HTTP run (a connection per request, as
//! SPECweb96's HTTP/1.0 clients). One struct, so each rule is written once and runs over every
//! workload that has evidence, its findings naming the workload; the results themselves differ
//! (crr counts failures per second by errno, HTTP by error kind; only HTTP records the server
//! host's TIME_WAIT and counters in its own result).

use tcplab_results::crr::{CrrResult, SynRetrans, TimeWait};
use tcplab_results::http::result::HttpResult;
use tcplab_results::stats::Percentiles;

use crate::battery::{Context, Role};
use crate::plan::PartKind;

/// The server namespace's accept-queue counters (TcpExt) during a workload, where recorded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServerCounters {
    /// `TcpExt.ListenOverflows`: handshakes that found the accept queue full.
    pub listen_overflows: u64,
    /// `TcpExt.ListenDrops`: SYNs and handshakes dropped at a listening socket, for any reason.
    pub listen_drops: u64,
    /// `TcpExt.SyncookiesSent`: SYNs answered with a cookie because the SYN queue was full.
    pub syncookies_sent: u64,
}

/// How many connections the client kept opening at once, and what served them: the accept
/// queue's finding weighs the arrivals against the server's accepting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Concurrency {
    /// Figure name (`client_loops` for crr, `client_connections` for HTTP).
    pub figure: &'static str,
    /// How many.
    pub value: u32,
    /// Unit of the figure.
    pub unit: &'static str,
    /// What they are and what served them.
    pub context: String,
}

/// What one connection-opening workload shows about connections, borrowed from its result.
#[derive(Debug, Clone, PartialEq)]
pub struct ConnectionEvidence<'a> {
    /// The workload's name: its key in the battery's counters and the word the findings use.
    pub workload: &'static str,
    /// Connections opened per second (crr: completed transactions; HTTP: connects started).
    pub connections_per_s: Option<f64>,
    /// Connects the SYN-retransmission share is taken of.
    pub connects: u64,
    /// connect() times of new connections, µs.
    pub connect_us: &'a Percentiles,
    /// SYN retransmissions, inferred from connect times and counted by the client's kernel.
    pub syn: SynRetrans,
    /// Indices of the raw samples whose connect waited for the SYN timer (empty when the raw
    /// samples are not held: a result read back from JSON).
    pub slow_connects: Vec<usize>,
    /// Name of the raw-sample series those indices refer to.
    pub sample_source: &'static str,
    /// TIME_WAIT sockets on the client host, sampled.
    pub time_wait: &'a TimeWait,
    /// TIME_WAIT sockets on the server host, when recorded (HTTP in a lab): a server that
    /// closes first holds them, and a SYN from a recycled client port can meet one (seed 003).
    pub server_time_wait: Option<&'a TimeWait>,
    /// Connects that failed with EADDRNOTAVAIL (the client's local ports ran out).
    pub addrnotavail: u64,
    /// The seconds of the run in which they failed.
    pub addrnotavail_seconds: Vec<u64>,
    /// Connects refused (ECONNREFUSED: no listener, or a full accept queue with
    /// tcp_abort_on_overflow).
    pub refused: u64,
    /// The server namespace's counters, when recorded: the battery's per-part counters under
    /// the workload's name, else (HTTP) the run's own `server_counters`.
    pub server: Option<ServerCounters>,
    /// The client's concurrency.
    pub concurrency: Concurrency,
    /// Packets the emulated link dropped during the run (client → server, server → client);
    /// `None` off an emulated lab or when it dropped none.
    pub path_drops: Option<(u64, u64)>,
}

/// A connect this slow waited for at least one SYN retransmission (initial RTO 1 s); the lower
/// bound leaves room for a slow LAN handshake. Matches tcplab-load's 0.8 s.
pub const SYN_RETRANS_CONNECT_S: f64 = 0.8;

const SLOW_CONNECT_NS: u64 = (SYN_RETRANS_CONNECT_S * 1e9) as u64;

/// A TIME_WAIT peak of which this share or more was already there when the run began is
/// mostly not the run's own: the host's earlier connections left it (in the doctor's battery,
/// crr's, which run just before HTTP in the same namespaces, and hold their ports for 60 s).
pub const INHERITED_SHARE: f64 = 0.5;

/// TIME_WAIT sockets already there when the run began: its first sample (0 unsampled).
pub fn at_start(tw: &TimeWait) -> u64 {
    tw.samples.first().map_or(0, |s| s.1)
}

/// Whether most of the run's TIME_WAIT peak was there before it began ([`INHERITED_SHARE`]).
pub fn mostly_inherited(tw: &TimeWait) -> bool {
    tw.max > 0 && at_start(tw) as f64 >= INHERITED_SHARE * tw.max as f64
}

impl<'a> ConnectionEvidence<'a> {
    /// The evidence of every workload of the battery that opened connections, in battery order
    /// (crr, then HTTP).
    pub fn all(ctx: &Context<'a>) -> Vec<Self> {
        let b = ctx.battery;
        let mut v = Vec::new();
        if let Some(r) = &b.crr {
            v.push(Self::of_crr(ctx, r));
        }
        if let Some(r) = &b.http {
            v.push(Self::of_http(ctx, r));
        }
        v
    }

    /// From a crr result; the server's counters come from the battery's under `crr`.
    pub fn of_crr(ctx: &Context<'_>, r: &'a CrrResult) -> Self {
        let workload = "crr";
        Self {
            workload,
            connections_per_s: r.summary.connections_per_s,
            connects: r.summary.transactions + r.errors_total.other,
            connect_us: &r.summary.connect_us,
            syn: r.syn_retrans,
            slow_connects: slow(r.samples.iter().map(|c| (c.start_ns, c.connected_ns))),
            sample_source: "crr connection",
            time_wait: &r.time_wait,
            server_time_wait: None,
            addrnotavail: r.errors_total.addrnotavail,
            addrnotavail_seconds: r
                .errors
                .iter()
                .filter(|s| s.addrnotavail > 0)
                .map(|s| s.second)
                .collect(),
            refused: r.errors_total.connrefused,
            server: battery_counters(ctx, PartKind::Crr),
            concurrency: Concurrency {
                figure: "client_loops",
                value: r.config.concurrency,
                unit: "loops",
                context: format!(
                    "concurrent connecting loops; the server served with {}",
                    r.config
                        .server_threads
                        .map_or("a thread per loop".to_string(), |t| format!(
                            "{t} thread(s)"
                        ))
                ),
            },
            path_drops: path_drops(&r.meta),
        }
    }

    /// From an HTTP result; the server's counters come from the battery's under `http` when it
    /// recorded the server side, else from the run's own record of the server namespace.
    pub fn of_http(ctx: &Context<'_>, r: &'a HttpResult) -> Self {
        let workload = "http";
        let e = &r.errors_total;
        // A lab run records the server's counters even when none moved (then the map is
        // empty); a run against a remote server cannot see them.
        let recorded =
            !r.server_counters.is_empty() || matches!(r.server.as_str(), "builtin" | "nginx");
        let own = || {
            let get = |k: &str| r.server_counters.get(k).copied().unwrap_or(0);
            ServerCounters {
                listen_overflows: get("TcpExt.ListenOverflows"),
                listen_drops: get("TcpExt.ListenDrops"),
                syncookies_sent: get("TcpExt.SyncookiesSent"),
            }
        };
        Self {
            workload,
            connections_per_s: (r.elapsed_s > 0.0)
                .then(|| r.connections_opened as f64 / r.elapsed_s),
            connects: r.connections_opened,
            connect_us: &r.summary.connect_us,
            syn: r.syn_retrans,
            slow_connects: slow(
                r.samples
                    .iter()
                    .filter(|s| s.connected_ns > 0)
                    .map(|s| (s.start_ns, s.connected_ns)),
            ),
            sample_source: "http request",
            time_wait: &r.time_wait,
            server_time_wait: r.server_time_wait.as_ref(),
            addrnotavail: e.addrnotavail,
            addrnotavail_seconds: r
                .errors
                .iter()
                .filter(|s| s.addrnotavail > 0)
                .map(|s| s.second)
                .collect(),
            refused: e.refused,
            server: battery_counters(ctx, PartKind::Http).or_else(|| recorded.then(own)),
            concurrency: Concurrency {
                figure: "client_connections",
                value: r.config.connections,
                unit: "connections",
                context: format!(
                    "concurrent connections, {}; served by the {} server",
                    match r.config.requests_per_connection {
                        Some(1) => "a connection per request".to_string(),
                        Some(n) => format!("{n} requests per connection"),
                        None => "kept open".to_string(),
                    },
                    if r.server.is_empty() {
                        "HTTP"
                    } else {
                        &r.server
                    }
                ),
            },
            path_drops: path_drops(&r.meta),
        }
    }

    /// The most connects any one SYN-retransmission count says waited for the SYN timer: the
    /// slow connects seen, or the kernel's TCPSynRetrans when it counted more.
    pub fn syn_waits(&self) -> u64 {
        let slow = self.syn.connects_near_1s + self.syn.connects_near_3s;
        slow.max(self.syn.kernel_syn_retrans.unwrap_or(0))
    }
}

/// The server side's counters the battery recorded around `part`.
fn battery_counters(ctx: &Context<'_>, part: PartKind) -> Option<ServerCounters> {
    let get = |k: &str| ctx.counter(part, Role::Server, k);
    Some(ServerCounters {
        listen_overflows: get("TcpExt.ListenOverflows")?,
        listen_drops: get("TcpExt.ListenDrops").unwrap_or(0),
        syncookies_sent: get("TcpExt.SyncookiesSent").unwrap_or(0),
    })
}

/// Indices of the (start, connected) stamps whose connect took the SYN timer or longer.
fn slow(stamps: impl Iterator<Item = (u64, u64)>) -> Vec<usize> {
    stamps
        .enumerate()
        .filter(|(_, (start, connected))| connected.saturating_sub(*start) >= SLOW_CONNECT_NS)
        .map(|(i, _)| i)
        .collect()
}

/// Packets the emulated link's loss process or full queue dropped during the run described by
/// `meta`, (client → server, server → client); `None` off an emulated lab or when it dropped
/// none.
fn path_drops(meta: &tcplab_results::session::RunMeta) -> Option<(u64, u64)> {
    let account = meta.facts.emulator.as_ref()?.realised.as_ref()?;
    let (f, r) = (account.forward_drops, account.reverse_drops);
    let (to_server, to_client) = (f.loss + f.queue_full, r.loss + r.queue_full);
    (to_server + to_client > 0).then_some((to_server, to_client))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::battery::Battery;
    use crate::synth;

    #[test]
    fn crr_and_http_give_the_same_facts_from_their_own_fields() {
        let mut crr = synth::crr(100, 50.0, |i| if i == 3 { 1_010_000_000 } else { 90_000 });
        crr.errors_total.connrefused = 2;
        let mut http = synth::http(100, 50.0, |i| if i == 3 { 1_010_000_000 } else { 90_000 });
        http.errors_total.refused = 2;
        let b = Battery {
            crr: Some(crr),
            http: Some(http),
            ..Battery::default()
        };
        let ctx = Context::new(&b);
        let all = ConnectionEvidence::all(&ctx);
        let names: Vec<&str> = all.iter().map(|e| e.workload).collect();
        assert_eq!(names, ["crr", "http"]);
        for e in &all {
            assert_eq!(e.slow_connects, [3], "{}", e.workload);
            assert_eq!(e.syn.connects_near_1s, 1);
            assert_eq!(e.syn_waits(), 1);
            assert_eq!(e.connects, 100);
            assert_eq!(e.refused, 2);
            assert_eq!(e.server, None, "nothing recorded the server");
        }
        assert!((all[1].connections_per_s.unwrap() - 50.0).abs() < 1e-9);
    }

    #[test]
    fn http_server_counters_come_from_the_battery_first_then_the_run() {
        let mut http = synth::http(10, 10.0, |_| 90_000);
        http.server = "builtin".into();
        http.server_counters
            .insert("TcpExt.ListenOverflows".into(), 7);
        let mut b = Battery {
            http: Some(http),
            ..Battery::default()
        };
        let of = |b: &Battery| {
            let ctx = Context::new(b);
            ConnectionEvidence::all(&ctx)[0].server
        };
        assert_eq!(of(&b).map(|s| s.listen_overflows), Some(7));
        let mut server = std::collections::BTreeMap::new();
        server.insert("TcpExt.ListenOverflows".to_string(), 9);
        server.insert("TcpExt.SyncookiesSent".to_string(), 4);
        b.counters
            .entry(PartKind::Http)
            .or_default()
            .insert(Role::Server, server);
        let s = of(&b).unwrap();
        assert_eq!((s.listen_overflows, s.syncookies_sent), (9, 4));
        // A crr part's server counters are not the HTTP run's.
        let mut b = Battery {
            http: Some(synth::http(10, 10.0, |_| 90_000)),
            ..Battery::default()
        };
        let mut server = std::collections::BTreeMap::new();
        server.insert("TcpExt.ListenOverflows".to_string(), 9);
        b.counters
            .entry(PartKind::Crr)
            .or_default()
            .insert(Role::Server, server);
        assert_eq!(of(&b), None);
    }
}
