//! The battery as the doctor's own plan: which workloads run on a path, in which order, each
//! sized so the rules that read it can judge it ([`crate::limits`]), for a time budget.
//!
//! Pure. [`plan`] gives the parts from what is known before anything runs (the budget, what the
//! application does, the path's rate when a lab or `--rate` says it); [`refine`] sizes a part
//! again from the battery so far, just before it runs (the messages are paced from the rate
//! the stream and the train found, rr and crr last long enough for their transactions at the
//! path's RTT). A runner (tcplab-battery) carries the parts out against a lab or an agent, one
//! generic step for every part.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use tcplab_results::crr::CrrConfig;
use tcplab_results::http::config::{HttpConfig, LabServer, ServerKind};
use tcplab_results::http::mix::Mix;
use tcplab_results::msgs::{MsgsConfig, Pattern};
use tcplab_results::rr::RrConfig;
use tcplab_results::rrul::{LoadDirection, RrulConfig};
use tcplab_results::sockopt::SockOpts;
use tcplab_results::spec::{HttpSpec, WorkloadSpec};
use tcplab_results::stream::StreamConfig;

use crate::battery::Battery;
use crate::estimate;
use crate::limits::*;

/// Which part of the battery. Its serde name is the part's key in a battery's counters (the
/// names batteries were stored with before parts were typed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum PartKind {
    /// One bulk flow up.
    #[serde(rename = "stream")]
    Stream,
    /// A packet train: back-to-back full segments from a sender that does not pace, whose
    /// arrival spacing at the far end measures the bottleneck's rate.
    #[serde(rename = "train")]
    Train,
    /// 1-byte messages paced at half the path's rate.
    #[serde(rename = "msgs")]
    Msgs,
    /// Write-write-read messages with Nagle on (`--provoke-stalls`).
    #[serde(rename = "msgs trap")]
    MsgsTrap,
    /// The message-size sweep.
    #[serde(rename = "msgs sweep")]
    MsgsSweep,
    /// Latency under load.
    #[serde(rename = "rrul")]
    Rrul,
    /// Request/response.
    #[serde(rename = "rr")]
    Rr,
    /// Connect/request/response/close.
    #[serde(rename = "crr")]
    Crr,
    /// HTTP with a connection per request (a lab's built-in server).
    #[serde(rename = "http")]
    Http,
}

impl PartKind {
    /// The part's name in progress lines and evidence.
    pub fn name(self) -> &'static str {
        match self {
            Self::Stream => "stream",
            Self::Train => "train",
            Self::Msgs => "msgs",
            Self::MsgsTrap => "msgs trap",
            Self::MsgsSweep => "msgs sweep",
            Self::Rrul => "rrul",
            Self::Rr => "rr",
            Self::Crr => "crr",
            Self::Http => "http",
        }
    }

    /// What a user reads while the part runs.
    pub fn progress(self) -> &'static str {
        match self {
            Self::Stream => "stream",
            Self::Train => "packet train",
            Self::Msgs => "msgs",
            Self::MsgsTrap => "msgs write-write-read",
            Self::MsgsSweep => "msgs size sweep",
            Self::Rrul => "latency under load",
            Self::Rr => "rr",
            Self::Crr => "crr",
            Self::Http => "http",
        }
    }
}

impl std::fmt::Display for PartKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One part of the battery: its role and the workload it runs, as any other run of tcplab
/// describes one ([`WorkloadSpec`]). Built only here, so the workload is always the one its
/// role runs (a train is msgs, the HTTP part http on the lab's built-in server).
#[derive(Debug, Clone, PartialEq)]
pub struct Part {
    kind: PartKind,
    spec: WorkloadSpec,
}

impl Part {
    fn new(kind: PartKind, spec: WorkloadSpec) -> Self {
        Self { kind, spec }
    }

    /// Which part this is.
    pub fn kind(&self) -> PartKind {
        self.kind
    }

    /// The workload it runs.
    pub fn spec(&self) -> &WorkloadSpec {
        &self.spec
    }
}

/// How the battery's workloads behave beyond their durations: what an application on the path
/// does. The defaults are the doctor's own (an application that uses TCP well); the corpus
/// sets them to reproduce an application's pathology (a reader slower than the path, small
/// writes, an explicit socket buffer).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Knobs {
    /// Bytes per write of the bulk stream (default: the stream's own, 128 KiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_write_size: Option<u32>,
    /// Socket options of the bulk stream's connections (both sides).
    #[serde(default)]
    pub stream_opts: SockOpts,
    /// Concurrent connection loops of crr (default [`CRR_CONCURRENCY`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crr_concurrency: Option<u32>,
    /// Threads the crr server serves with (default one more than the loops).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crr_server_threads: Option<u32>,
    /// The bulk stream's receiver reads no faster than this, bit/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_read_rate_bps: Option<u64>,
}

/// What the plan is made from.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// Time for the whole battery (raised to [`MIN_BUDGET`]).
    pub budget: Duration,
    /// What the application does.
    pub knobs: Knobs,
    /// Messages of the write-write-read run (`--provoke-stalls`); 0 leaves it out. It provokes
    /// the Nagle + delayed-ACK stall on purpose (seed 004), so it is off by default: the battery
    /// otherwise reports what limits the path, not what an application could do wrong on it.
    pub trap_count: u64,
    /// Add the HTTP part (a lab's built-in server), with crr's share, on top of the rest.
    pub http: bool,
    /// The path's rate when known before anything runs (a lab's configured rate), bit/s.
    pub rate_bps: Option<f64>,
}

impl Request {
    /// A request for `budget` with the doctor's defaults.
    pub fn new(budget: Duration) -> Self {
        Self {
            budget,
            knobs: Knobs::default(),
            trap_count: 0,
            http: false,
            rate_bps: None,
        }
    }

    fn secs(&self) -> f64 {
        self.budget.as_secs_f64().max(MIN_BUDGET.as_secs_f64())
    }

    /// Seconds of the budget for `share` of it.
    fn share(&self, share: f64) -> Duration {
        Duration::from_secs_f64(self.secs() * share)
    }
}

/// The smallest budget: below it no workload says anything.
pub const MIN_BUDGET: Duration = Duration::from_secs(10);

/// Shares of the budget: the stream takes the largest because throughput needs time to settle;
/// latency under load's load phase 13 % (its idle phases a quarter of it each, at least a
/// second); the rest are short by nature.
pub mod share {
    /// The bulk stream.
    pub const STREAM: f64 = 0.25;
    /// The packet train (its length; its count follows from the rate).
    pub const TRAIN: f64 = 0.04;
    /// The plain msgs run.
    pub const MSGS: f64 = 0.09;
    /// The size sweep, all sizes.
    pub const SWEEP: f64 = 0.15;
    /// Latency under load's load phase.
    pub const RRUL_LOAD: f64 = 0.13;
    /// rr.
    pub const RR: f64 = 0.10;
    /// crr; HTTP, when asked, the same again.
    pub const CRR: f64 = 0.10;
}

/// The parts of the battery for `req`, in the order they run. Parts whose size depends on the
/// path are sized from `req.rate_bps` here and sized again by [`refine`] just before they run.
pub fn plan(req: &Request) -> Vec<Part> {
    let empty = Battery::default();
    let sized = |kind: PartKind, spec: WorkloadSpec| {
        let mut part = Part::new(kind, spec);
        refine(&mut part, req, &empty);
        part
    };
    let msgs = || WorkloadSpec::Msgs(MsgsConfig::default());
    let mut parts = vec![
        Part::new(PartKind::Stream, WorkloadSpec::Stream(stream(req))),
        sized(PartKind::Train, msgs()),
        sized(PartKind::Msgs, msgs()),
    ];
    if req.trap_count > 0 {
        let trap = MsgsConfig {
            count: req.trap_count,
            size: 64,
            pattern: Pattern::WriteWriteRead,
            ..MsgsConfig::default()
        };
        parts.push(Part::new(PartKind::MsgsTrap, WorkloadSpec::Msgs(trap)));
    }
    parts.push(sized(PartKind::MsgsSweep, msgs()));
    parts.push(Part::new(PartKind::Rrul, WorkloadSpec::Rrul(rrul(req))));
    let rr = RrConfig {
        req: 64,
        resp: 64,
        ..RrConfig::default()
    };
    parts.push(sized(PartKind::Rr, WorkloadSpec::Rr(rr)));
    let crr = CrrConfig {
        concurrency: req.knobs.crr_concurrency.unwrap_or(CRR_CONCURRENCY),
        server_threads: req.knobs.crr_server_threads,
        ..CrrConfig::default()
    };
    parts.push(sized(PartKind::Crr, WorkloadSpec::Crr(crr)));
    if req.http {
        let http = HttpSpec {
            config: http_config(req.share(share::CRR)),
            server: LabServer {
                kind: ServerKind::Builtin,
                dirs: HTTP_DIRS,
                workers: None,
            },
        };
        parts.push(Part::new(PartKind::Http, WorkloadSpec::Http(http)));
    }
    parts
}

fn ms(d: Duration) -> u64 {
    d.as_millis() as u64
}

fn stream(req: &Request) -> StreamConfig {
    // Long enough for the rules' fewest measured intervals after the warm-up, whatever the
    // budget (half an interval more for the last one's edge).
    let share = ms(req.share(share::STREAM));
    let omit_ms = 1_000.min(share / 4);
    let least = omit_ms + (MIN_STREAM_INTERVALS as u64 * 2 + 1) * STREAM_INTERVAL_MS / 2;
    let mut cfg = StreamConfig {
        duration_ms: Some(share.max(least)),
        omit_ms,
        opts: req.knobs.stream_opts.clone(),
        read_rate_bps: req.knobs.stream_read_rate_bps,
        interval_ms: STREAM_INTERVAL_MS,
        ..StreamConfig::default()
    };
    if let Some(w) = req.knobs.stream_write_size {
        cfg.write_size = w;
    }
    cfg
}

fn rrul(req: &Request) -> RrulConfig {
    let load_ms = ms(req.share(share::RRUL_LOAD));
    let idle_ms = (load_ms / 4).max(RRUL_IDLE_MIN_MS);
    // The load's unsent data is capped (TCP_NOTSENT_LOWAT) unless the application sets it:
    // what is measured is the queue on the path, and a send buffer of megabytes would only
    // take seconds to drain after the load on a slow path, leaving no idle phase after it.
    let mut opts = req.knobs.stream_opts.clone();
    opts.notsent_lowat = opts.notsent_lowat.or(Some(RRUL_NOTSENT_LOWAT));
    RrulConfig {
        direction: LoadDirection::Both,
        before_ms: idle_ms,
        during_ms: load_ms,
        after_ms: idle_ms,
        drain_ms: idle_ms.max(RRUL_DRAIN_MIN_MS),
        interval_ms: RRUL_INTERVAL_MS.min(load_ms),
        opts,
        ..RrulConfig::default()
    }
}

/// The battery's HTTP run: SPECweb96's mix, a connection per request (its HTTP/1.0 clients;
/// the case the connection rules are about), closed loop, for `duration`.
pub fn http_config(duration: Duration) -> HttpConfig {
    HttpConfig {
        connections: HTTP_CONNECTIONS,
        requests_per_connection: Some(1),
        mix: Mix::Specweb96 { dirs: HTTP_DIRS },
        duration_ms: Some(ms(duration)),
        ..HttpConfig::default()
    }
}

/// Bytes a message of `size` bytes takes on the wire alone in a segment: Ethernet (14 + 24 of
/// preamble, gap and FCS), IPv4 (20) and TCP with timestamps (32).
fn wire_bytes(size: u32) -> f64 {
    f64::from(size) + 90.0
}

/// Spacing of messages of `size` bytes on a path of `rate` bit/s (unknown: the smallest).
pub fn msgs_gap_us(size: u32, rate: Option<f64>) -> u64 {
    let paced = rate.filter(|r| *r > 0.0).map_or(0.0, |r| {
        wire_bytes(size) * 8.0 / (MSGS_PATH_SHARE * r) * 1e6
    });
    (paced.ceil() as u64).max(MSGS_MIN_GAP_US)
}

/// The rate the messages are paced from: the one the request knows (a lab's configured rate),
/// else the battery's estimate so far (the stream's and the train's), else none (the smallest
/// spacing).
fn pacing_rate(req: &Request, so_far: &Battery) -> Option<f64> {
    req.rate_bps
        .or_else(|| estimate::of(so_far).rate.map(|r| r.value))
}

/// The path's round trip as the battery so far knows it, s (none before the stream).
fn rtt_s(so_far: &Battery) -> Option<f64> {
    estimate::of(so_far).base_rtt.map(|r| r.value)
}

/// Sizes `part` again from what the battery so far found, just before it runs: the train's
/// length from the rate, the messages' pacing, rr's and crr's durations from the RTT (so that
/// they yield [`MIN_TRANSACTIONS`], however long the round trip; the budget then stretches,
/// and the battery's parts say how long each ran). Parts that do not depend on the path are
/// left as they are.
pub fn refine(part: &mut Part, req: &Request, so_far: &Battery) {
    match (part.kind, &mut part.spec) {
        (PartKind::Train, WorkloadSpec::Msgs(cfg)) => {
            let rate = pacing_rate(req, so_far);
            let secs = req
                .share(share::TRAIN)
                .as_secs_f64()
                .max(20.0 * rtt_s(so_far).unwrap_or(0.0));
            let count = rate.map_or(TRAIN_MIN_COUNT, |r| {
                (r * secs / 8.0 / wire_bytes(TRAIN_MESSAGE)) as u64
            });
            *cfg = MsgsConfig {
                count: count.clamp(TRAIN_MIN_COUNT, TRAIN_MAX_COUNT),
                size: TRAIN_MESSAGE,
                gap_us: 0,
                opts: SockOpts {
                    nodelay: true,
                    congestion: Some(TRAIN_CONGESTION.into()),
                    ..SockOpts::default()
                },
                ..MsgsConfig::default()
            };
        }
        (PartKind::Msgs, WorkloadSpec::Msgs(cfg)) => {
            // Nagle off and paced below the path's rate: the plain runs look for what the
            // path and the kernel do to small messages (seed 004's timer stalls); Nagle's own
            // waits for ACKs are the trap run's business.
            let rate = pacing_rate(req, so_far);
            let gap_us = msgs_gap_us(1, rate);
            let count = (ms(req.share(share::MSGS)) * 1_000 / gap_us)
                .clamp(MIN_MESSAGES.max(SWEEP_MAX_COUNT), MSGS_MAX_COUNT);
            *cfg = MsgsConfig {
                count,
                gap_us,
                spaced: true,
                link_rate_bps: req.rate_bps.map(|r| r as u64),
                opts: nodelay(),
                ..MsgsConfig::default()
            };
        }
        (PartKind::MsgsSweep, WorkloadSpec::Msgs(cfg)) => {
            let rate = pacing_rate(req, so_far);
            let gap_us = msgs_gap_us(SWEEP_SIZES[SWEEP_SIZES.len() - 1], rate);
            let per_size = ms(req.share(share::SWEEP)) * 1_000 / SWEEP_SIZES.len() as u64;
            *cfg = MsgsConfig {
                count: (per_size / gap_us).clamp(MIN_SWEEP_MESSAGES, SWEEP_MAX_COUNT),
                sizes: SWEEP_SIZES.to_vec(),
                gap_us,
                spaced: true,
                opts: nodelay(),
                ..MsgsConfig::default()
            };
        }
        (PartKind::Rr, WorkloadSpec::Rr(cfg)) => {
            // One transaction in flight: a round trip each.
            let need = rtt_s(so_far).map_or(0.0, |rtt| MIN_TRANSACTIONS as f64 * rtt);
            cfg.duration_ms = Some(ms(req.share(share::RR).max(secs(RTT_SIZING_SLACK * need))));
        }
        (PartKind::Crr, WorkloadSpec::Crr(cfg)) => {
            // Each loop's connection takes a round trip to connect and one for its request.
            let loops = f64::from(cfg.concurrency.max(1));
            let need = rtt_s(so_far).map_or(0.0, |rtt| MIN_TRANSACTIONS as f64 * 2.0 * rtt / loops);
            cfg.duration_ms = Some(ms(req.share(share::CRR).max(secs(RTT_SIZING_SLACK * need))));
        }
        _ => {}
    }
}

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s.max(0.0))
}

fn nodelay() -> SockOpts {
    SockOpts {
        nodelay: true,
        ..SockOpts::default()
    }
}

#[cfg(test)]
mod tests;
