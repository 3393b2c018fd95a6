//! The doctor's plan carried out: each part of `tcplab_doctor::plan` sized again from what the
//! battery found so far (`plan::refine`), then run by one generic step against a lab (client
//! and server threads entered into its hosts), a remote `tcplab serve`, or between two agents
//! of a fleet (the first runs each part's client toward the second: the monitor's pairs).
//! Every part is recorded the same way: its result; the kernel counters that moved on the
//! client's side (read here, or sent back by the client agent) and on the server's (from the
//! server's own view in its report, so a real far host is seen as a lab's server host is); on
//! an emulated lab, the emulator's verdict over it.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use tcplab_auth::{ClientAuth, PublicKey};
use tcplab_doctor::plan::{self, Part, PartKind, Request};
use tcplab_doctor::{Battery, EmulatorFidelity, Ends, PathInfo, Role};
use tcplab_lab::Lab;
use tcplab_load::Report;
use tcplab_results::emulator::RunFidelity;
use tcplab_results::spec::{HttpSpec, WorkloadSpec};

use crate::error::{BatteryError, Result};

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
    /// Against a host running `tcplab serve`, from the calling thread's network namespace.
    Remote(SocketAddr),
    /// From one agent toward another: the client agent runs each part (`Ask::Run`) and sends
    /// back its result with the counters that moved on its host. Neither end is this host.
    Between {
        /// The agent that runs the clients.
        client: &'a AgentAt,
        /// The agent that serves them.
        server: &'a AgentAt,
    },
}

/// An agent of a fleet as this program reaches it.
#[derive(Debug, Clone)]
pub struct AgentAt {
    /// Its control address.
    pub addr: SocketAddr,
    /// The key it proves (None: an unauthenticated lab agent).
    pub key: Option<PublicKey>,
    /// This program's credentials toward it, pinning `key`.
    pub auth: ClientAuth,
}

/// How long a part's answer may take beyond the part's own length before the client agent is
/// given up on.
const BETWEEN_SLACK: Duration = Duration::from_secs(30);

/// How long the agent's facts may take to arrive.
const FACTS_TIMEOUT: Duration = Duration::from_secs(10);

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

/// Runs the battery `req` plans. `progress` is told which part starts.
pub fn run(
    target: &Target<'_>,
    req: &Request,
    path: PathInfo,
    progress: &dyn Fn(&str),
) -> Result<Battery> {
    let remote = !matches!(target, Target::Lab { .. });
    if req.http && remote {
        return Err(BatteryError::Invalid {
            field: "--http".into(),
            problem: "the HTTP part runs the built-in web server in a lab's server host: use it with --lab NAME or --topology, not --to".into(),
        });
    }
    let req = Request {
        rate_bps: req.rate_bps.or(path.rate_bps),
        ..req.clone()
    };
    let mut battery = Battery {
        path,
        ..Battery::default()
    };
    match target {
        Target::Remote(addr) => battery.ends = Some(ends(*addr)?),
        Target::Between { client, server } => battery.ends = Some(ends_between(client, server)?),
        Target::Lab { .. } => {}
    }
    let mut judged: Vec<(PartKind, RunFidelity)> = Vec::new();
    let mut trap = None;
    for mut part in plan::plan(&req) {
        plan::refine(&mut part, &req, &battery);
        let kind = part.kind();
        progress(kind.progress());
        match (kind, step(target, &mut battery, &mut judged, &part)?) {
            (PartKind::MsgsTrap, Report::Msgs(r)) => trap = Some(r),
            (kind, report) => keep(&mut battery, kind, report)?,
        }
    }
    // The trap run is what the stall rules read when the plain run shows nothing: keep the one
    // with the larger receive gaps as `msgs`.
    if let Some(trap) = trap {
        if worst_gap(&trap) > battery.msgs.as_ref().map_or(0.0, worst_gap) {
            battery.msgs = Some(trap);
            if let Some(c) = battery.counters.remove(&PartKind::MsgsTrap) {
                battery.counters.insert(PartKind::Msgs, c);
            }
        }
    }
    match target {
        Target::Lab {
            lab,
            client,
            server,
        } => {
            battery.facts = tcplab_lab::facts::collect(lab).ok();
            battery.client_host = Some(client.clone());
            battery.server_host = Some(server.clone());
            battery.fidelity = combine(&judged);
        }
        Target::Remote(_) => battery.facts = Some(tcplab_lab::facts::machine()),
        Target::Between { client, .. } => {
            battery.facts = tcplab_agent::remote::facts(client.addr, &client.auth, FACTS_TIMEOUT)
                .ok()
                .and_then(|f| f.facts);
        }
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

/// The two hosts of a run against a real host: this one's namespace, and the agent's answer
/// about its own (its version, machine and host). No agent there, or one of another protocol
/// version (refused by the handshake, which names both versions), or one that refuses this
/// client's key: the battery stops there. An answer that never arrives (a path that loses its frames: the answer
/// is the battery's largest control frame) leaves the far host unknown, says why, and the
/// battery goes on: the parts themselves are what show the path's trouble.
fn ends(addr: SocketAddr) -> Result<Ends> {
    let auth = tcplab_auth::ClientAuth::current().map_err(|e| BatteryError::Part {
        part: "facts".into(),
        problem: e.to_string(),
    })?;
    Ok(Ends {
        client: tcplab_lab::facts::this_host(&[]).ok(),
        ..ends_of(addr, &auth)?
    })
}

/// The far host as its agent answers about itself (the client's side left unknown).
fn ends_of(addr: SocketAddr, auth: &ClientAuth) -> Result<Ends> {
    match tcplab_agent::remote::facts(addr, auth, FACTS_TIMEOUT) {
        Ok(facts) => Ok(Ends {
            client: None,
            server: facts.host,
            server_machine: facts.facts,
            agent_version: Some(facts.tcplab),
            unanswered: None,
        }),
        Err(
            e @ (tcplab_load::LoadError::Refused { .. }
            | tcplab_load::LoadError::Auth(_)
            | tcplab_load::LoadError::Key { .. }
            | tcplab_load::LoadError::Connect { .. }),
        ) => Err(BatteryError::Part {
            part: "facts".into(),
            problem: format!("asking the agent at {addr} what it is: {e}"),
        }),
        Err(e) => Ok(Ends {
            unanswered: Some(format!("the agent at {addr} did not say what it is: {e}")),
            ..Ends::default()
        }),
    }
}

/// The two hosts of a run between two agents, each as it answers about itself. The server's
/// answer is what [`ends`] asks of a remote host; the client's is its host (its sysctls).
fn ends_between(client: &AgentAt, server: &AgentAt) -> Result<Ends> {
    let mut ends = ends_of(server.addr, &server.auth)?;
    ends.client = tcplab_agent::remote::facts(client.addr, &client.auth, FACTS_TIMEOUT)
        .map_err(|e| BatteryError::Part {
            part: "facts".into(),
            problem: format!("asking the client agent at {} what it is: {e}", client.addr),
        })?
        .host;
    Ok(ends)
}

/// Puts one part's result where the doctor reads it.
fn keep(battery: &mut Battery, kind: PartKind, report: Report) -> Result<()> {
    let wrong = || BatteryError::Part {
        part: kind.name().into(),
        problem: "a workload returned another workload's result".into(),
    };
    match (kind, report) {
        (PartKind::Stream, Report::Stream(r)) => battery.stream = Some(r),
        (PartKind::Train, Report::Msgs(r)) => battery.train = Some(r),
        (PartKind::Msgs, Report::Msgs(r)) => battery.msgs = Some(r),
        (PartKind::MsgsSweep, Report::Msgs(r)) => battery.msgs_sweep = Some(r),
        (PartKind::Rrul, Report::Rrul(r)) => battery.rrul = Some(r),
        (PartKind::Rr, Report::Rr(r)) => battery.rr = Some(r),
        (PartKind::Crr, Report::Crr(r)) => battery.crr = Some(r),
        (PartKind::Http, Report::Http(r)) => battery.http = Some(r),
        _ => return Err(wrong()),
    }
    Ok(())
}

/// One part, whatever it is and wherever it runs: the client counters before and after, the
/// workload against tcplab's own server (`run_on` in a lab, the agent of a remote host; the
/// HTTP part against a lab's built-in web server), the server's counters from its own report,
/// and on an emulated lab the emulator's verdict over the part.
fn step(
    target: &Target<'_>,
    battery: &mut Battery,
    judged: &mut Vec<(PartKind, RunFidelity)>,
    part: &Part,
) -> Result<Report> {
    let kind = part.kind();
    let status = |t: &Target<'_>| match t {
        Target::Lab { lab, .. } => lab.emulator_status().ok(),
        Target::Remote(_) | Target::Between { .. } => None,
    };
    let emulator_before = status(target);
    let before = client_counters(target);
    let report = match part.spec() {
        WorkloadSpec::Http(spec) => http(target, spec),
        spec => workload(target, spec),
    };
    let after = client_counters(target);
    let mut sides = BTreeMap::new();
    if let (Some(b), Some(a)) = (before, after) {
        sides.insert(Role::Client, tcplab_results::peer::moved(&b, &a));
    }
    if let Some(sent) = report
        .as_ref()
        .ok()
        .and_then(|r| r.meta().client_counters.as_ref())
    {
        sides.insert(Role::Client, sent.clone());
    }
    if let Some(view) = report
        .as_ref()
        .ok()
        .and_then(|r| r.meta().server_view.as_ref())
    {
        sides.insert(Role::Server, view.counters.clone());
    }
    battery.counters.insert(kind, sides);
    if let Some(b) = emulator_before {
        let at_rate = report.as_ref().is_ok_and(|r| held_by_the_rate(r, &b.link));
        judged.push((kind, judge_part(kind, at_rate, &b, status(target).as_ref())));
    }
    report.map_err(|e| BatteryError::Part {
        part: kind.name().into(),
        problem: e.to_string(),
    })
}

/// A workload's client against tcplab's own server: in a lab, a server entered into its
/// server host; else the remote agent.
fn workload(target: &Target<'_>, spec: &WorkloadSpec) -> tcplab_load::Result<Report> {
    let client = |addr: SocketAddr, facts: Option<tcplab_lab::facts::Facts>| {
        tcplab_load::client::run(spec, addr, facts)
    };
    match target {
        Target::Lab {
            lab,
            client: c,
            server: s,
        } => tcplab_front::lab::run_on(lab, c, s, client),
        Target::Remote(addr) => client(*addr, Some(tcplab_lab::facts::machine())),
        Target::Between { client, server } => tcplab_agent::remote::run_from(
            client.addr,
            &client.auth,
            server.addr,
            server.key,
            spec.clone(),
            BETWEEN_SLACK,
        ),
    }
}

/// The HTTP part: the plan's web server in the lab's server host (it records the server's side
/// itself).
fn http(target: &Target<'_>, spec: &HttpSpec) -> tcplab_load::Result<Report> {
    let Target::Lab {
        lab,
        client,
        server,
    } = target
    else {
        return Err(tcplab_load::LoadError::Lab(
            "the HTTP part needs a lab: give --lab NAME or --topology".into(),
        ));
    };
    tcplab_front::http::run_in_lab(
        lab,
        client,
        server,
        &spec.server,
        &spec.config,
        tcplab_doctor::limits::HTTP_INTERVAL_MS,
        None,
    )
}

/// The client's kernel counters: the lab's client host, else this thread's namespace.
fn client_counters(target: &Target<'_>) -> Option<BTreeMap<String, u64>> {
    match target {
        Target::Lab { lab, client, .. } => lab
            .host(client)
            .ok()?
            .run(tcplab_load::sysinfo::all_counters)
            .ok(),
        Target::Remote(_) => Some(tcplab_load::sysinfo::all_counters()),
        // The client agent sends its own with each result.
        Target::Between { .. } => None,
    }
}

/// The emulator's verdict over the battery: trustworthy when every part is, each reason named
/// by its part. `None` when no part crossed an emulator.
fn combine(judged: &[(PartKind, RunFidelity)]) -> Option<EmulatorFidelity> {
    let reasons: Vec<String> = judged
        .iter()
        .flat_map(|(part, f)| f.reasons.iter().map(move |r| format!("{part}: {r}")))
        .collect();
    let late_parts = judged
        .iter()
        .filter(|(_, f)| !f.trustworthy)
        .map(|(part, _)| *part)
        .collect();
    (!judged.is_empty()).then_some(EmulatorFidelity {
        trustworthy: reasons.is_empty(),
        reasons,
        late_parts,
    })
}

/// The emulator's verdict over one part of the battery, judged for what the doctor reads from
/// it. Every rule reads its figures at the scale of the round trip or longer, never at the
/// 100 µs a user's own latency figures are judged by, and against thresholds at least 10 %
/// from a healthy path's value: so each part needs frames late by at most half that, 5 % of
/// its scale, on average (`tcplab_emu_io::need`, `Need::Diagnosis`): the stream's is the RTT
/// (a window per round trip), unless it ran at the link's rate (`at_rate`: a flow held by the
/// rate loses nothing to lateness while the schedule catches up, so only its RTT samples,
/// read at bufferbloat's scale, remain); the train's and latency under load's at least
/// [`BLOAT_SCALE_NS`](tcplab_doctor::limits::BLOAT_SCALE_NS) (the train's bursts span at
/// least a queue's worth; queueing from 30 ms); the message and connection parts' at least
/// [`TICK_SCALE_NS`](tcplab_doctor::limits::TICK_SCALE_NS) (stalls of whole jiffies, the 40 ms
/// delayed-ACK window); the connection parts' at least
/// [`CONNECT_SCALE_NS`](tcplab_doctor::limits::CONNECT_SCALE_NS) (SYN-timer waits, counts and
/// rates). The part's own result keeps the verdict of its workload's need.
fn judge_part(
    kind: PartKind,
    at_rate: bool,
    before: &tcplab_lab::emulation::EmulatorStatus,
    after: Option<&tcplab_lab::emulation::EmulatorStatus>,
) -> RunFidelity {
    use tcplab_doctor::limits::{BLOAT_SCALE_NS, CONNECT_SCALE_NS, TICK_SCALE_NS};
    let rtt_ns = tcplab_lab::emulation::configured_rtt_ns(&before.link);
    let scale_ns = match kind {
        PartKind::Stream if !at_rate => rtt_ns,
        PartKind::Stream | PartKind::Rrul | PartKind::Train => rtt_ns.max(BLOAT_SCALE_NS),
        PartKind::Crr | PartKind::Http => rtt_ns.max(CONNECT_SCALE_NS),
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

/// Whether `report` is a stream that ran at the rate of `link`'s forward direction (the
/// doctor's full-path share of it).
fn held_by_the_rate(report: &Report, link: &tcplab_emu::LinkConfig) -> bool {
    let (Report::Stream(s), Some(rate)) = (report, link.forward.rate_bps) else {
        return false;
    };
    s.summary
        .throughput_bps
        .is_some_and(|t| rate > 0 && t >= tcplab_doctor::limits::PATH_FULL_SHARE * rate as f64)
}

/// The number of stalled receives of a msgs result (all sizes).
fn worst_gap(m: &tcplab_load::msgs::MsgsResult) -> f64 {
    m.runs.iter().map(|r| r.stalls as f64).sum()
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
    fn the_http_part_is_refused_against_a_remote_host_before_anything_runs() {
        let mut req = Request::new(Duration::from_secs(10));
        req.http = true;
        let target = Target::Remote("192.0.2.1:5301".parse().expect("address"));
        let e = run(&target, &req, PathInfo::default(), &|_| {
            panic!("no part may start")
        })
        .expect_err("refused");
        assert!(e.to_string().starts_with("--http:"), "{e}");
    }

    #[test]
    fn a_part_is_kept_under_its_kind_and_a_mismatch_is_an_error() {
        let mut b = Battery::default();
        keep(&mut b, PartKind::Train, Report::Msgs(Default::default())).expect("kept");
        assert!(b.train.is_some() && b.msgs.is_none());
        let e = keep(&mut b, PartKind::Rr, Report::Msgs(Default::default())).expect_err("wrong");
        assert!(e.to_string().contains("rr"), "{e}");
    }
}
