//! The doctor's battery: stream, msgs (plain, the write-write-read trap, a size sweep), rr and
//! crr against one path, and on a lab optionally HTTP with a connection per request, sized to a
//! time budget, with the emulator's fidelity over the whole battery and the kernel's TCP
//! counters that moved during each workload. The path is a lab (client and server threads
//! entered into its hosts) or a remote `tcplab serve`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tcplab_doctor::{Battery, EmulatorFidelity, PathInfo};
use tcplab_lab::Lab;
use tcplab_load::http::run::{LabServer, ServerKind};
use tcplab_load::{Report, crr, msgs, rr, rrul, stream};
use tcplab_results::emulator::RunFidelity;
use tcplab_results::http::config::HttpConfig;
use tcplab_results::http::mix::Mix;
use tcplab_results::sockopt::SockOpts;

use crate::error::{Result, TuneError};

/// Pulls one workload's result out of the report enum.
macro_rules! expect {
    ($report:expr, $variant:ident) => {
        match $report {
            Report::$variant(r) => r,
            _ => {
                return Err(TuneError::Battery(
                    "a workload returned another workload's result".into(),
                ))
            }
        }
    };
}

/// Where the battery runs.
#[derive(Debug)]
pub enum Target<'a> {
    /// Inside a lab, between two of its hosts.
    Lab {
        /// The lab.
        lab: &'a Lab,
        /// Client host.
        client: String,
        /// Server host.
        server: String,
    },
    /// Against a host running `tcplab serve`.
    Remote(SocketAddr),
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
    /// Concurrent connection loops of crr (default 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crr_concurrency: Option<u32>,
    /// Threads the crr server serves with (default one more than the loops).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crr_server_threads: Option<u32>,
    /// The bulk stream's receiver reads no faster than this, bit/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_read_rate_bps: Option<u64>,
}

/// Seconds of each workload for a budget: stream takes the largest share because throughput needs
/// time to settle; the rest are short by nature.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Stream duration.
    pub stream: Duration,
    /// rr duration.
    pub rr: Duration,
    /// Latency under load: the load phase (the idle phases before and after are a quarter of
    /// it each, at least a second).
    pub rrul_load: Duration,
    /// crr duration.
    pub crr: Duration,
    /// HTTP duration (`tcplab doctor --http`, on a lab only); `None` leaves the part out, so a
    /// battery without it is the one the corpus was scored with.
    pub http: Option<Duration>,
    /// Time for the plain msgs run (its count follows from its pacing, at most
    /// [`MSGS_MAX_COUNT`]).
    pub msgs: Duration,
    /// Time for the message-size sweep.
    pub msgs_sweep: Duration,
    /// Messages of the write-write-read run (each stall can cost 40 ms); 0 leaves it out. It
    /// provokes the Nagle + delayed-ACK stall on purpose (seed 004), so it is off by default:
    /// the battery otherwise reports what limits the path, not what an application could do
    /// wrong on it.
    pub trap_count: u64,
    /// What the application does.
    pub knobs: Knobs,
    /// Interval of the stream's reports and tcp_info samples, ms: what the rules read. The
    /// labelled corpus was scored at 1 s (benches/doctor.sh, docs/BENCHMARKS.md); at 100 ms a
    /// slow lossy flow's retransmissions fell under the loss rule's minimum where at 1 s they
    /// did not, so the rules keep the sampling they were validated with.
    pub interval_ms: u64,
    /// Interval of the latency-under-load flows' reports, ms: the time resolution of that
    /// run's throughput in the report's plot (at 1 s a 2 s load phase is two points). The rules
    /// read that run's probes and totals, not these intervals.
    pub rrul_interval_ms: u64,
}

/// The battery stream's sampling interval, ms (see [`Plan::interval_ms`]).
pub const STREAM_INTERVAL_MS: u64 = 1_000;

/// Shortest idle phase of the latency-under-load run, ms: enough probes (one per 10 ms) for a
/// median that one late probe does not move.
pub const RRUL_IDLE_MIN_MS: u64 = 1_000;

/// Unsent bytes the latency-under-load flows may hold in their socket.
pub const RRUL_NOTSENT_LOWAT: u32 = 128 << 10;

/// Least time the probes run past the load's end for a queue to drain, ms.
pub const RRUL_DRAIN_MIN_MS: u64 = 2_000;

/// Default concurrency of the battery's crr: two loops keep a connection always opening while
/// another closes, without loading two vCPUs.
pub const CRR_CONCURRENCY: u32 = 2;

/// Most messages of the plain msgs run (sfperf's 100,000).
pub const MSGS_MAX_COUNT: u64 = 100_000;

/// Fewest messages per size of the sweep: the periodic-stall rule needs 200 to see a period.
pub const SWEEP_MIN_COUNT: u64 = 200;

/// Most messages per size of the sweep.
pub const SWEEP_MAX_COUNT: u64 = 2_000;

/// Message sizes of the sweep: sub-MSS sizes, where timers and small-segment effects live,
/// and one full segment.
pub const SWEEP_SIZES: [u32; 6] = [1, 16, 64, 256, 1024, 1448];

/// The messages of the msgs runs are sent at most at this share of the path's rate, so they
/// never queue: a stall then stands out against a flat baseline (seed 004), where back-to-back
/// tiny segments would be held by the congestion window and the peer's delayed ACKs, a stall
/// of the workload's own making.
pub const MSGS_PATH_SHARE: f64 = 0.5;

/// Smallest message spacing, µs: 20,000 messages a second. Each message with Nagle off is a
/// frame of its own, and an emulated path holds every frame in flight for its one-way delay:
/// at 50 ms that is 1,000 frames, well inside the emulator's slots in its GSO mode (4,096), and
/// a frame rate it keeps its schedule at.
pub const MSGS_MIN_GAP_US: u64 = 50;

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

impl Plan {
    /// Splits `budget`: stream 28%, latency under load 22% (its load 13%), rr 10%, crr 10%,
    /// msgs 10%, the size sweep 15%. Budgets under 10 s are raised to 10 s (below that no
    /// workload says anything).
    pub fn for_budget(budget: Duration) -> Plan {
        let secs = budget.as_secs_f64().max(10.0);
        Plan {
            stream: Duration::from_secs_f64(secs * 0.28),
            rrul_load: Duration::from_secs_f64(secs * 0.13),
            rr: Duration::from_secs_f64(secs * 0.1),
            crr: Duration::from_secs_f64(secs * 0.1),
            http: None,
            msgs: Duration::from_secs_f64(secs * 0.1),
            msgs_sweep: Duration::from_secs_f64(secs * 0.15),
            trap_count: 0,
            knobs: Knobs::default(),
            interval_ms: STREAM_INTERVAL_MS,
            rrul_interval_ms: tcplab_study::workload::DEFAULT_INTERVAL_MS,
        }
    }
}

impl Plan {
    /// Adds the HTTP part with crr's slice of the budget (10 %), on top of the rest: the
    /// other parts keep the lengths the corpus was scored with.
    pub fn with_http(mut self) -> Plan {
        self.http = Some(self.crr);
        self
    }
}

/// Concurrent connections of the battery's HTTP run: as crr's loops, a connection always
/// opening while another closes, without loading two vCPUs; the doctor looks for what the
/// path and the kernels do to connections, not for the server's limit.
pub const HTTP_CONNECTIONS: u32 = CRR_CONCURRENCY;

/// Directories of the SPECweb96 file set the battery's HTTP server serves: one (36 files,
/// about 5 MB) is the mix's shape without a file set to write for long.
pub const HTTP_DIRS: u32 = 1;

/// Interval of the HTTP run's live reports, ms (nobody listens to them in the battery; the
/// rules read the run's totals).
pub const HTTP_INTERVAL_MS: u64 = 1_000;

/// The battery's HTTP run: SPECweb96's mix, a connection per request (its HTTP/1.0 clients;
/// the case the connection rules are about), closed loop, for `duration`.
pub fn http_config(duration: Duration) -> HttpConfig {
    HttpConfig {
        connections: HTTP_CONNECTIONS,
        requests_per_connection: Some(1),
        mix: Mix::Specweb96 { dirs: HTTP_DIRS },
        duration_ms: Some(duration.as_millis() as u64),
        ..HttpConfig::default()
    }
}

/// What an emulated lab's configuration says of its path: configured RTT, rate and random loss.
pub fn path_of(lab: Option<&Lab>) -> PathInfo {
    let mut info = PathInfo::default();
    let Some(emu) = lab.and_then(|l| l.spec().emulation.as_ref()) else {
        return info;
    };
    let (f, r) = (&emu.link.forward, &emu.link.reverse);
    info.configured_rtt_ms = Some((f.delay_ns + r.delay_ns) as f64 / 1e6);
    info.rate_bps = f.rate_bps.map(|b| b as f64);
    if let Some(tcplab_emu::Loss::Bernoulli { probability }) = &f.loss {
        info.loss = Some(*probability);
    }
    info
}

/// Runs the battery. `progress` is told which workload starts.
pub fn run(
    target: &Target<'_>,
    plan: &Plan,
    path: PathInfo,
    progress: &dyn Fn(&str),
) -> Result<Battery> {
    if plan.http.is_some() && matches!(target, Target::Remote(_)) {
        return Err(TuneError::Invalid {
            field: "--http".into(),
            problem: "the HTTP part runs the built-in web server in a lab's server host: use it with --lab NAME or --topology, not --to".into(),
        });
    }
    let mut battery = Battery {
        path,
        ..Battery::default()
    };
    let mut judged: Vec<(String, RunFidelity)> = Vec::new();
    let ms = |d: Duration| Some(d.as_millis() as u64);

    progress("stream");
    let mut cfg = stream::StreamConfig {
        duration_ms: ms(plan.stream),
        omit_ms: 1_000.min(plan.stream.as_millis() as u64 / 4),
        opts: plan.knobs.stream_opts.clone(),
        read_rate_bps: plan.knobs.stream_read_rate_bps,
        interval_ms: plan.interval_ms,
        ..Default::default()
    };
    if let Some(w) = plan.knobs.stream_write_size {
        cfg.write_size = w;
    }
    battery.stream = Some(expect!(
        one(target, &mut battery, &mut judged, "stream", |t, f| {
            stream::run_client(&cfg, t, f, None).map(Report::Stream)
        })?,
        Stream
    ));

    progress("msgs");
    // Nagle off and paced below the path's rate (the configured one, else what the stream
    // reached): the plain runs look for what the path and the kernel do to small messages
    // (seed 004's timer stalls); Nagle's own waits for ACKs are the trap run's business.
    let nodelay = SockOpts {
        nodelay: true,
        ..SockOpts::default()
    };
    let rate = battery.path.rate_bps.or_else(|| {
        battery
            .stream
            .as_ref()
            .and_then(|s| s.summary.throughput_bps)
    });
    let gap_us = msgs_gap_us(1, rate);
    let cfg = msgs::MsgsConfig {
        count: (plan.msgs.as_micros() as u64 / gap_us).clamp(SWEEP_MAX_COUNT, MSGS_MAX_COUNT),
        gap_us,
        link_rate_bps: battery.path.rate_bps.map(|r| r as u64),
        opts: nodelay.clone(),
        ..Default::default()
    };
    battery.msgs = Some(expect!(
        one(target, &mut battery, &mut judged, "msgs", |t, f| {
            msgs::run_client(&cfg, t, f).map(Report::Msgs)
        })?,
        Msgs
    ));

    let trap = if plan.trap_count > 0 {
        progress("msgs write-write-read");
        let cfg = msgs::MsgsConfig {
            count: plan.trap_count,
            size: 64,
            pattern: msgs::Pattern::WriteWriteRead,
            ..Default::default()
        };
        Some(expect!(
            one(target, &mut battery, &mut judged, "msgs trap", |t, f| {
                msgs::run_client(&cfg, t, f).map(Report::Msgs)
            })?,
            Msgs
        ))
    } else {
        None
    };
    progress("msgs size sweep");
    let gap_us = msgs_gap_us(SWEEP_SIZES[SWEEP_SIZES.len() - 1], rate);
    let per_size = plan.msgs_sweep.as_micros() as u64 / SWEEP_SIZES.len() as u64;
    let cfg = msgs::MsgsConfig {
        count: (per_size / gap_us).clamp(SWEEP_MIN_COUNT, SWEEP_MAX_COUNT),
        sizes: SWEEP_SIZES.to_vec(),
        gap_us,
        opts: nodelay,
        ..Default::default()
    };
    battery.msgs_sweep = Some(expect!(
        one(target, &mut battery, &mut judged, "msgs sweep", |t, f| {
            msgs::run_client(&cfg, t, f).map(Report::Msgs)
        })?,
        Msgs
    ));
    // The trap run is what the stall rules read when the plain run shows nothing: keep the one
    // with the larger receive gaps as `msgs`.
    if let Some(trap) = trap {
        if worst_gap(&trap) > battery.msgs.as_ref().map_or(0.0, worst_gap) {
            battery.msgs = Some(trap);
            if let Some(c) = battery.counters.remove("msgs trap") {
                battery.counters.insert("msgs".into(), c);
            }
        }
    }

    progress("latency under load");
    let load_ms = plan.rrul_load.as_millis() as u64;
    let idle_ms = (load_ms / 4).max(RRUL_IDLE_MIN_MS);
    // The load's unsent data is capped (TCP_NOTSENT_LOWAT) unless the application sets it:
    // what is measured is the queue on the path, and a send buffer of megabytes would only
    // take seconds to drain after the load on a slow path, leaving no idle phase after it.
    let mut opts = plan.knobs.stream_opts.clone();
    opts.notsent_lowat = opts.notsent_lowat.or(Some(RRUL_NOTSENT_LOWAT));
    let cfg = rrul::RrulConfig {
        direction: rrul::LoadDirection::Both,
        before_ms: idle_ms,
        during_ms: load_ms,
        after_ms: idle_ms,
        drain_ms: idle_ms.max(RRUL_DRAIN_MIN_MS),
        interval_ms: plan.rrul_interval_ms.min(load_ms),
        opts,
        ..Default::default()
    };
    battery.rrul = Some(expect!(
        one(target, &mut battery, &mut judged, "rrul", |t, f| {
            rrul::run_client(&cfg, t, f).map(Report::Rrul)
        })?,
        Rrul
    ));

    progress("rr");
    let cfg = rr::RrConfig {
        req: 64,
        resp: 64,
        duration_ms: ms(plan.rr),
        ..Default::default()
    };
    battery.rr = Some(expect!(
        one(target, &mut battery, &mut judged, "rr", |t, f| {
            rr::run_client(&cfg, t, f).map(Report::Rr)
        })?,
        Rr
    ));

    progress("crr");
    let cfg = crr::CrrConfig {
        concurrency: plan.knobs.crr_concurrency.unwrap_or(CRR_CONCURRENCY),
        server_threads: plan.knobs.crr_server_threads,
        duration_ms: ms(plan.crr),
        ..Default::default()
    };
    battery.crr = Some(expect!(
        one(target, &mut battery, &mut judged, "crr", |t, f| {
            crr::run_client(&cfg, t, f).map(Report::Crr)
        })?,
        Crr
    ));

    if let (
        Some(d),
        Target::Lab {
            lab,
            client,
            server,
        },
    ) = (plan.http, target)
    {
        progress("http");
        let cfg = http_config(d);
        let server_kind = LabServer {
            kind: ServerKind::Builtin,
            dirs: HTTP_DIRS,
            workers: None,
        };
        battery.http = Some(expect!(
            part(target, &mut battery, &mut judged, "http", || {
                tcplab_load::http::run::run_in_lab(
                    lab,
                    client,
                    server,
                    &server_kind,
                    &cfg,
                    HTTP_INTERVAL_MS,
                    None,
                )
            })?,
            Http
        ));
    }

    if let Target::Lab {
        lab,
        client,
        server,
    } = target
    {
        battery.facts = tcplab_lab::facts::collect(lab).ok();
        battery.client_host = Some(client.clone());
        battery.server_host = Some(server.clone());
        battery.fidelity = combine(&judged);
    } else {
        battery.facts = Some(tcplab_lab::facts::machine());
    }
    if battery.path.measured_rtt_ms.is_none() {
        battery.path.measured_rtt_ms = battery
            .rr
            .as_ref()
            .and_then(|r| r.summary.latency_us.p50)
            .map(|us| us / 1e3);
    }
    Ok(battery)
}

/// The emulator's verdict over the battery: trustworthy when every part is, each reason named
/// by its part. `None` when no part crossed an emulator.
fn combine(judged: &[(String, RunFidelity)]) -> Option<EmulatorFidelity> {
    let reasons: Vec<String> = judged
        .iter()
        .flat_map(|(part, f)| f.reasons.iter().map(move |r| format!("{part}: {r}")))
        .collect();
    (!judged.is_empty()).then_some(EmulatorFidelity {
        trustworthy: reasons.is_empty(),
        reasons,
    })
}

/// The emulator's verdict over one part of the battery (`name`), judged for what the doctor
/// reads from it. Every rule reads its figures at the scale of the round trip or longer, never
/// at the 100 µs a user's own latency figures are judged by, and against thresholds at least
/// 10 % from a healthy path's value: so each part needs frames late by at most half that, 5 %
/// of its scale, on average (`tcplab_emu_io::need`, `Need::Diagnosis`): the stream's is the
/// RTT (a window per round trip), unless it ran at the link's rate (`at_rate`: a flow held by
/// the rate loses nothing to lateness while the schedule catches up, so only its RTT samples,
/// read at bufferbloat's scale, remain); latency under load's at least [`BLOAT_SCALE_NS`]
/// (queueing from 30 ms); the message and connection parts' at least [`TICK_SCALE_NS`] (stalls
/// of whole jiffies, the 40 ms delayed-ACK window). The part's own result keeps the verdict of
/// its workload's need.
fn judge_part(
    name: &str,
    at_rate: bool,
    before: &tcplab_lab::emulation::EmulatorStatus,
    after: Option<&tcplab_lab::emulation::EmulatorStatus>,
) -> RunFidelity {
    let rtt_ns = tcplab_lab::emulation::configured_rtt_ns(&before.link);
    let scale_ns = match name {
        "stream" if !at_rate => rtt_ns,
        "stream" | "rrul" => rtt_ns.max(BLOAT_SCALE_NS),
        _ => rtt_ns.max(TICK_SCALE_NS),
    };
    let need = tcplab_results::emulator::Need::Diagnosis { rtt_ns: scale_ns };
    match after {
        Some(a) => tcplab_lab::emulation::judge_for(&before.counters, &a.counters, a.running, need),
        None => RunFidelity {
            trustworthy: false,
            reasons: vec!["the emulator did not answer after the run (did it die?)".into()],
            need: Some(need),
        },
    }
}

/// A stream at this share of the emulated link's rate or more was held by the rate (the doctor's
/// `PATH_FULL_SHARE`).
pub const AT_RATE_SHARE: f64 = 0.9;

/// Whether `report` is a stream that ran at the rate of `link`'s forward direction.
fn held_by_the_rate(report: &Report, link: &tcplab_emu::LinkConfig) -> bool {
    let (Report::Stream(s), Some(rate)) = (report, link.forward.rate_bps) else {
        return false;
    };
    s.summary
        .throughput_bps
        .is_some_and(|t| rate > 0 && t >= AT_RATE_SHARE * rate as f64)
}

/// The smallest effect the rules read from latency under load, ns: bufferbloat from 30 ms
/// added (the doctor's `BLOAT_MIN_S`).
pub const BLOAT_SCALE_NS: u64 = 30_000_000;

/// The smallest effect the rules read from message and connection timings, ns: a jiffy at
/// HZ=250 (stalls of whole ticks; the delayed-ACK window is 40 ms and a jiffy wide).
pub const TICK_SCALE_NS: u64 = 4_000_000;

/// The number of stalled receives of a msgs result (all sizes).
fn worst_gap(m: &msgs::MsgsResult) -> f64 {
    m.runs.iter().map(|r| r.stalls as f64).sum()
}

/// Runs one workload's client on the target against tcplab's own server (`run_on` in a lab,
/// the agent of a remote `tcplab serve`), recorded as [`part`] does.
fn one<F>(
    target: &Target<'_>,
    battery: &mut Battery,
    judged: &mut Vec<(String, RunFidelity)>,
    name: &str,
    client: F,
) -> Result<Report>
where
    F: FnOnce(SocketAddr, serde_json::Value) -> tcplab_load::Result<Report> + Send,
{
    part(target, battery, judged, name, || match target {
        Target::Lab {
            lab,
            client: c,
            server: s,
        } => tcplab_load::lab::run_on(lab, c, s, client),
        Target::Remote(addr) => {
            let facts = serde_json::to_value(tcplab_lab::facts::machine()).unwrap_or_default();
            client(*addr, facts)
        }
    })
}

/// Runs one part of the battery (`run` does the workload, whatever serves it), recording the
/// kernel counters that moved during it under `name` in `battery.counters` and, on an emulated
/// lab, the emulator's verdict over it in `judged`: every part the same way, so a rule finds a
/// part's counters under the part's name.
fn part(
    target: &Target<'_>,
    battery: &mut Battery,
    judged: &mut Vec<(String, RunFidelity)>,
    name: &str,
    run: impl FnOnce() -> tcplab_load::Result<Report>,
) -> Result<Report> {
    let status = |t: &Target<'_>| match t {
        Target::Lab { lab, .. } => lab.emulator_status().ok(),
        Target::Remote(_) => None,
    };
    let emulator_before = status(target);
    let before = counters(target);
    let report = run();
    let after = counters(target);
    battery
        .counters
        .insert(name.to_string(), increases(&before, &after));
    if let Some(b) = emulator_before {
        let at_rate = report.as_ref().is_ok_and(|r| held_by_the_rate(r, &b.link));
        judged.push((
            name.to_string(),
            judge_part(name, at_rate, &b, status(target).as_ref()),
        ));
    }
    report.map_err(|e| TuneError::Battery(e.to_string()))
}

/// Per side, every kernel counter of its namespace (both sides of a lab; against a remote
/// server only this process's, the client's).
type Snapshot = BTreeMap<String, BTreeMap<String, u64>>;

fn counters(target: &Target<'_>) -> Snapshot {
    let mut out = Snapshot::new();
    match target {
        Target::Lab {
            lab,
            client,
            server,
        } => {
            for (side, host) in [("client", client), ("server", server)] {
                if let Ok(Ok(all)) = lab
                    .host(host)
                    .map(|h| h.run(tcplab_load::sysinfo::all_counters))
                {
                    out.insert(side.to_string(), all);
                }
            }
        }
        Target::Remote(_) => {
            out.insert("client".into(), tcplab_load::sysinfo::all_counters());
        }
    }
    out
}

/// The counters that rose between two snapshots, per side (a side missing from either is left
/// out; counters that did not move are left out).
fn increases(before: &Snapshot, after: &Snapshot) -> BTreeMap<String, BTreeMap<String, u64>> {
    after
        .iter()
        .filter_map(|(side, a)| {
            let b = before.get(side)?;
            let moved = a
                .iter()
                .filter_map(|(k, v)| {
                    let d = v.saturating_sub(b.get(k).copied().unwrap_or(*v));
                    (d > 0).then(|| (k.clone(), d))
                })
                .collect();
            Some((side.clone(), moved))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_at_nine_tenths_of_the_link_rate_is_held_by_it() {
        let mut link = tcplab_emu::LinkConfig::default();
        let stream = |bps: f64| {
            let mut s = tcplab_results::stream::StreamResult::default();
            s.summary.throughput_bps = Some(bps);
            Report::Stream(s)
        };
        assert!(
            !held_by_the_rate(&stream(950e6), &link),
            "no rate: nothing holds it"
        );
        link.forward.rate_bps = Some(1_000_000_000);
        assert!(held_by_the_rate(&stream(950e6), &link));
        assert!(!held_by_the_rate(&stream(600e6), &link));
        let rr = Report::Rr(Default::default());
        assert!(!held_by_the_rate(&rr, &link));
    }

    #[test]
    fn messages_are_paced_at_half_the_path_rate() {
        // A 1-byte message alone in a segment is 91 bytes on the wire: 145.6 µs at 10 Mbit/s
        // is half the link.
        assert_eq!(msgs_gap_us(1, Some(10e6)), 146);
        assert_eq!(msgs_gap_us(1448, Some(100e6)), 247);
        assert_eq!(msgs_gap_us(1448, Some(1e9)), MSGS_MIN_GAP_US);
        assert_eq!(msgs_gap_us(1, Some(1e9)), MSGS_MIN_GAP_US);
        assert_eq!(msgs_gap_us(1448, None), MSGS_MIN_GAP_US);
    }

    #[test]
    fn the_http_part_is_left_out_unless_asked_and_then_takes_crr_s_slice() {
        let plan = Plan::for_budget(Duration::from_secs(60));
        assert_eq!(plan.http, None, "the corpus's battery has no HTTP part");
        let with = plan.clone().with_http();
        assert_eq!(with.http, Some(plan.crr));
        assert_eq!(Plan { http: None, ..with }, plan, "nothing else moves");
        let cfg = http_config(Duration::from_secs(6));
        assert!(cfg.per_request());
        assert_eq!(cfg.mix, Mix::Specweb96 { dirs: HTTP_DIRS });
        assert_eq!(cfg.duration_ms, Some(6_000));
        cfg.validate().expect("the battery's HTTP run is valid");
    }

    #[test]
    fn the_http_part_is_refused_against_a_remote_host_before_anything_runs() {
        let plan = Plan::for_budget(Duration::from_secs(10)).with_http();
        let target = Target::Remote("192.0.2.1:5301".parse().unwrap());
        let e = run(&target, &plan, PathInfo::default(), &|_| {
            panic!("no part may start")
        })
        .expect_err("refused");
        assert!(e.to_string().starts_with("--http:"), "{e}");
    }

    #[test]
    fn increases_keep_what_moved_per_side() {
        let snap = |pairs: &[(&str, &str, u64)]| {
            let mut s = Snapshot::new();
            for (side, k, v) in pairs {
                s.entry(side.to_string())
                    .or_default()
                    .insert(k.to_string(), *v);
            }
            s
        };
        let before = snap(&[("client", "a", 5), ("client", "b", 7), ("server", "a", 1)]);
        let after = snap(&[
            ("client", "a", 9),
            ("client", "b", 7),
            ("client", "new", 3),
            ("server", "a", 1),
            ("gone", "a", 1),
        ]);
        let d = increases(&before, &after);
        assert_eq!(d["client"].len(), 1, "{d:?}");
        assert_eq!(d["client"]["a"], 4);
        assert!(d["server"].is_empty());
        assert!(!d.contains_key("gone"));
    }
}
