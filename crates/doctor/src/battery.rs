//! The doctor's input: the results of one battery of workloads on one path ([`Battery`]), and
//! the derived view every rule reads ([`Context`]: facts, HZ, RTT, per-host sysctls), built once.

use serde::{Deserialize, Serialize};
use tcplab_results::Facts;
use tcplab_results::crr::CrrResult;
use tcplab_results::facts::HostFacts;
use tcplab_results::http::result::HttpResult;
use tcplab_results::msgs::MsgsResult;
use tcplab_results::rr::RrResult;
use tcplab_results::rrul::RrulResult;
use tcplab_results::session::RunMeta;
use tcplab_results::stream::StreamResult;

use crate::estimate::{Estimate, PathEstimate};
use crate::plan::PartKind;

/// What is known about the path, from the lab's configuration or an earlier measurement.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PathInfo {
    /// Round-trip time the emulator was configured for, ms (both directions' delay).
    pub configured_rtt_ms: Option<f64>,
    /// Round-trip time measured on the idle path (e.g. ping or rr p50), ms.
    pub measured_rtt_ms: Option<f64>,
    /// Bottleneck rate, bit/s (configured or measured).
    pub rate_bps: Option<f64>,
    /// Configured random loss probability per packet (0..1), when the emulator drops on purpose.
    pub loss: Option<f64>,
    /// The rate the path is sold as (`tcplab doctor --to HOST --rate R`), bit/s: a figure to
    /// compare what the battery measured with, never a substitute for the estimate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sold_rate_bps: Option<f64>,
}

/// The emulator's fidelity verdict (crates/emu-io `Fidelity`), kept here in a serde-both form.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EmulatorFidelity {
    /// True if the emulator kept its schedule.
    pub trustworthy: bool,
    /// One line per violated limit.
    pub reasons: Vec<String>,
    /// The parts of a battery the emulator fell behind in (each judged for what the doctor
    /// reads from it). Empty when untrustworthy: not known (a verdict over a whole lab, or a
    /// battery stored before parts were judged one by one), so every part is in doubt.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub late_parts: Vec<crate::plan::PartKind>,
}

impl From<&tcplab_results::emulator::Fidelity> for EmulatorFidelity {
    fn from(f: &tcplab_results::emulator::Fidelity) -> Self {
        Self {
            trustworthy: f.trustworthy,
            reasons: f.reasons.clone(),
            late_parts: Vec::new(),
        }
    }
}

/// The results of one doctor run. Every part is optional: each rule judges what is there.
///
/// Per-message and per-connection raw samples (`MsgsRun::send_ns/recv_ns`, `RrPoint::samples`,
/// `CrrResult::samples`) are not serialised by tcplab-load, so the rules that need them
/// (periodic and delayed-ACK stalls) work on results held in memory, not on results read back
/// from JSON.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Battery {
    /// Bulk throughput run.
    pub stream: Option<StreamResult>,
    /// The packet train: full segments back to back from a sender that does not pace, the
    /// far end stamping each one's arrival (the bottleneck's rate, `crate::estimate`). Absent
    /// from batteries before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub train: Option<MsgsResult>,
    /// Small-message run (sfperf style, e.g. 1-byte or 16-byte messages).
    pub msgs: Option<MsgsResult>,
    /// Message-size sweep (`--sizes`), for seed 004's size threshold K.
    pub msgs_sweep: Option<MsgsResult>,
    /// Request/response run.
    pub rr: Option<RrResult>,
    /// Connect/request/response/close run.
    pub crr: Option<CrrResult>,
    /// Latency under load: request/response probes before, during and after bulk flows.
    #[serde(default)]
    pub rrul: Option<RrulResult>,
    /// HTTP with a connection per request (`tcplab doctor --http`, SPECweb96's mix against
    /// the built-in server in the lab's server host): the connection rules read it as they read
    /// crr, with the server host's TIME_WAIT and counters the run records itself. Absent in
    /// batteries from before it existed and in those run without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpResult>,
    /// Facts of the machine and lab hosts; when absent, the first result's `meta.facts` is used.
    pub facts: Option<Facts>,
    /// The emulator's verdict, when an emulator carried the traffic.
    pub fidelity: Option<EmulatorFidelity>,
    /// The path as configured or measured.
    pub path: PathInfo,
    /// Run against a real host: what the agent there said of its host, and this host's own
    /// namespace (a lab's facts list its hosts instead).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ends: Option<Ends>,
    /// Lab host that ran the client side (the sender of stream up and msgs).
    pub client_host: Option<String>,
    /// Lab host that ran the server side.
    pub server_host: Option<String>,
    /// The kernel's TCP counters (`/proc/net/netstat`, `/proc/net/snmp`) that moved during
    /// each workload: workload (`stream`, `crr`, ...) → side (`client`, `server`) →
    /// `Section.Name` → increase. Only the client side against a remote server.
    #[serde(default)]
    pub counters: Counters,
}

/// Per part, per side, the kernel counters that increased during it.
pub type Counters = std::collections::BTreeMap<
    PartKind,
    std::collections::BTreeMap<Role, std::collections::BTreeMap<String, u64>>,
>;

/// The two hosts of a battery run against a real host (`tcplab doctor --to`): this host's
/// namespace and what the agent on the far one said of its own.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Ends {
    /// The client's host (its per-namespace sysctls and interfaces).
    pub client: Option<HostFacts>,
    /// The agent's host, as it answered (protocol 5 and later).
    pub server: Option<HostFacts>,
    /// The agent's machine (kernel, HZ, congestion controls, machine-wide buffers).
    pub server_machine: Option<Facts>,
    /// The agent's tcplab version.
    pub agent_version: Option<String>,
    /// Why the agent's answer about itself never arrived, when it did not (its host is then
    /// unknown).
    pub unanswered: Option<String>,
}

impl Ends {
    /// The facts of `role`'s host.
    pub fn host(&self, role: Role) -> Option<&HostFacts> {
        match role {
            Role::Client => self.client.as_ref(),
            Role::Server => self.server.as_ref(),
        }
    }
}

impl Battery {
    /// Every result's common record, in battery order.
    pub fn metas(&self) -> Vec<(&'static str, &RunMeta)> {
        let mut v: Vec<(&'static str, &RunMeta)> = Vec::new();
        if let Some(r) = &self.stream {
            v.push(("stream", &r.meta));
        }
        if let Some(r) = &self.train {
            v.push(("train", &r.meta));
        }
        if let Some(r) = &self.msgs {
            v.push(("msgs", &r.meta));
        }
        if let Some(r) = &self.msgs_sweep {
            v.push(("msgs sweep", &r.meta));
        }
        if let Some(r) = &self.rr {
            v.push(("rr", &r.meta));
        }
        if let Some(r) = &self.crr {
            v.push(("crr", &r.meta));
        }
        if let Some(r) = &self.rrul {
            v.push(("rrul", &r.meta));
        }
        if let Some(r) = &self.http {
            v.push(("http", &r.meta));
        }
        v
    }
}

/// Which side of a workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The side that connects.
    Client,
    /// The side that listens.
    Server,
}

impl Role {
    /// The usual lab host name for this role.
    fn default_host(self) -> &'static str {
        match self {
            Self::Client => "client",
            Self::Server => "server",
        }
    }
}

/// Timer frequency assumed when no facts say (the most common distribution CONFIG_HZ, and
/// this lab kernel's); findings then say the HZ was assumed.
pub const ASSUMED_HZ: u32 = 250;

/// Linux defaults of `net.ipv4.tcp_rmem` (min, default, max), used when facts are missing.
pub const DEFAULT_TCP_RMEM: [u64; 3] = [4096, 131_072, 6_291_456];
/// Linux defaults of `net.ipv4.tcp_wmem`.
pub const DEFAULT_TCP_WMEM: [u64; 3] = [4096, 16_384, 4_194_304];
/// Linux default local port range (inclusive), used when facts are missing.
pub const DEFAULT_PORT_RANGE: (u32, u32) = (32_768, 60_999);

/// The view of a battery the rules share, computed once.
#[derive(Debug)]
pub struct Context<'a> {
    /// The input.
    pub battery: &'a Battery,
    /// Facts: explicit, or parsed from the first result that carries them.
    pub facts: Option<Facts>,
    /// Timer frequency (measured HZ, else CONFIG_HZ, else [`ASSUMED_HZ`]).
    pub hz: u32,
    /// False when `hz` is [`ASSUMED_HZ`] for lack of facts.
    pub hz_known: bool,
    /// The path as the battery measured it (rate, base RTT, standing queue).
    pub estimate: PathEstimate,
}

/// The path's rate a rule reads, and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Rate {
    /// bit/s.
    pub bps: f64,
    /// Configured (a lab's emulator) or estimated from the battery.
    pub from: RateFrom,
}

/// Where a rate came from.
#[derive(Debug, Clone, PartialEq)]
pub enum RateFrom {
    /// The lab's emulator was configured for it.
    Configured,
    /// Estimated from the battery (the estimate's method and how sure).
    Estimated(Estimate),
}

impl Rate {
    /// What the evidence says of the rate's origin.
    pub fn context(&self) -> String {
        match &self.from {
            RateFrom::Configured => "the bottleneck rate the emulator was configured for".into(),
            RateFrom::Estimated(e) => format!(
                "the bottleneck rate as estimated ({}, {:.1}-{:.1} Mbit/s) from {}",
                e.sure.word(),
                e.low / 1e6,
                e.high / 1e6,
                e.how
            ),
        }
    }
}

impl<'a> Context<'a> {
    /// Builds the shared view.
    pub fn new(battery: &'a Battery) -> Self {
        let facts = battery.facts.clone().or_else(|| {
            battery
                .metas()
                .into_iter()
                .find_map(|(_, m)| m.facts.machine.clone())
        });
        let measured = facts.as_ref().and_then(|f| {
            [Some(f.hz.hz), f.hz.configured]
                .into_iter()
                .flatten()
                .find(|&hz| hz > 0)
        });
        Self {
            battery,
            facts,
            hz: measured.unwrap_or(ASSUMED_HZ),
            hz_known: measured.is_some(),
            estimate: crate::estimate::of(battery),
        }
    }

    /// The path's bottleneck rate: the lab's configured one, else the battery's estimate when
    /// it bounds the rate (not a mere floor). What the rules that compare a flow with its path
    /// read.
    pub fn rate(&self) -> Option<Rate> {
        if let Some(bps) = self.battery.path.rate_bps.filter(|r| *r > 0.0) {
            return Some(Rate {
                bps,
                from: RateFrom::Configured,
            });
        }
        let e = self.estimate.rate.as_ref().filter(|e| e.bounded())?;
        Some(Rate {
            bps: e.value,
            from: RateFrom::Estimated(e.clone()),
        })
    }

    /// [`Context::rate`] in bit/s.
    pub fn rate_bps(&self) -> Option<f64> {
        self.rate().map(|r| r.bps)
    }

    /// One jiffy, seconds.
    pub fn tick_s(&self) -> f64 {
        1.0 / f64::from(self.hz)
    }

    /// A phrase naming the HZ and where it came from, for evidence contexts.
    pub fn hz_note(&self) -> String {
        if self.hz_known {
            format!("HZ={} (measured)", self.hz)
        } else {
            format!("HZ={} (assumed: no facts)", self.hz)
        }
    }

    /// Whether both ends run on this machine with nothing shaping the path between them: a lab
    /// (the facts list its hosts) whose stream crossed no emulator and no known rate. The path
    /// is then a memory copy, and the CPUs both ends share are its only bottleneck.
    pub fn unshaped_lab(&self) -> bool {
        let lab =
            self.facts.as_ref().is_some_and(|f| !f.hosts.is_empty()) && self.battery.ends.is_none();
        let emulated = self
            .battery
            .stream
            .as_ref()
            .is_some_and(|s| s.meta.facts.emulator.is_some());
        lab && !emulated && self.battery.path.rate_bps.is_none()
    }

    /// The lab host name of `role`, if the facts know that host.
    pub fn host_name(&self, role: Role) -> Option<&str> {
        let facts = self.facts.as_ref()?;
        let named = match role {
            Role::Client => self.battery.client_host.as_deref(),
            Role::Server => self.battery.server_host.as_deref(),
        };
        let candidate = named.unwrap_or(role.default_host());
        if let Some((name, _)) = facts.hosts.get_key_value(candidate) {
            return Some(name.as_str());
        }
        // A lab of one host (or unnamed roles on a two-host lab) cannot be told apart.
        match facts.hosts.keys().collect::<Vec<_>>().as_slice() {
            [only] => Some(only.as_str()),
            _ => None,
        }
    }

    /// The facts of the host running `role`: a lab's host, else (against a real host) what
    /// the battery recorded of either end.
    pub fn host_facts(&self, role: Role) -> Option<&HostFacts> {
        if let Some(host) = self
            .host_name(role)
            .and_then(|name| self.facts.as_ref()?.hosts.get(name))
        {
            return Some(host);
        }
        self.battery.ends.as_ref()?.host(role)
    }

    /// A per-namespace sysctl of the host running `role`, as recorded in the facts.
    pub fn host_sysctl(&self, role: Role, key: &str) -> Option<&str> {
        self.host_facts(role)?.sysctls.get(key).map(String::as_str)
    }

    /// True when the facts show that the host running `role` has the sysctl `key` (the facts
    /// list only keys the kernel has). Without facts about hosts, `None`.
    pub fn host_has_sysctl(&self, role: Role, key: &str) -> Option<bool> {
        Some(self.host_facts(role)?.sysctls.contains_key(key))
    }

    /// How much the kernel counter `name` (`Section.Name`, e.g. `TcpExt.ListenOverflows`) of
    /// `role`'s side rose during `workload`; `None` when it was not recorded there (a zero
    /// increase is recorded as absent, so absent on a recorded side means 0).
    pub fn counter(&self, part: PartKind, role: Role, name: &str) -> Option<u64> {
        let side = self.battery.counters.get(&part)?.get(&role)?;
        Some(side.get(name).copied().unwrap_or(0))
    }

    /// The bulk sender's MSS (median tcp_info snd_mss of the stream's sending samples).
    pub fn sender_mss(&self) -> Option<f64> {
        let s = self.battery.stream.as_ref()?;
        let mut v: Vec<f64> = s
            .intervals
            .iter()
            .chain(&s.server_intervals)
            .filter(|i| i.sending)
            .filter_map(|i| i.tcp_info)
            .map(|t| f64::from(t.snd_mss))
            .filter(|m| *m > 0.0)
            .collect();
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied()
    }

    /// A machine-wide sysctl as recorded in the facts.
    pub fn machine_sysctl(&self, key: &str) -> Option<&str> {
        self.facts
            .as_ref()?
            .machine_sysctls
            .get(key)
            .map(String::as_str)
    }

    /// A three-number sysctl (tcp_rmem, tcp_wmem) of `role`'s host, or `default`.
    pub fn triple(&self, role: Role, key: &str, default: [u64; 3]) -> ([u64; 3], bool) {
        let parsed = self.host_sysctl(role, key).and_then(|v| {
            let n: Vec<u64> = v
                .split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect();
            <[u64; 3]>::try_from(n).ok()
        });
        match parsed {
            Some(t) => (t, true),
            None => (default, false),
        }
    }

    /// A one-number machine sysctl, e.g. `net.core.rmem_max`.
    pub fn machine_number(&self, key: &str) -> Option<u64> {
        self.machine_sysctl(key)?.trim().parse().ok()
    }

    /// Name used in `applies_to` for `role`: `receiver (host server)` style.
    pub fn describe_host(&self, what: &str, role: Role) -> String {
        match self.host_name(role) {
            Some(h) => format!("{what} (host {h})"),
            None => format!("{what} ({})", role.default_host()),
        }
    }

    /// Congestion controls the machine offers (empty when unknown).
    pub fn available_cc(&self) -> Vec<String> {
        self.facts
            .as_ref()
            .map(|f| f.congestion_control.available.clone())
            .unwrap_or_default()
    }

    /// The round-trip time of the path in seconds: measured, else configured, else the
    /// stream's smallest tcp_info min_rtt, else the rr median latency.
    pub fn rtt_s(&self) -> Option<(f64, &'static str)> {
        let p = &self.battery.path;
        if let Some(ms) = p.measured_rtt_ms.filter(|v| *v > 0.0) {
            return Some((ms / 1e3, "measured path RTT"));
        }
        if let Some(ms) = p.configured_rtt_ms.filter(|v| *v > 0.0) {
            return Some((ms / 1e3, "configured path RTT"));
        }
        let stream_min = self.battery.stream.as_ref().and_then(|s| {
            s.intervals
                .iter()
                .chain(&s.server_intervals)
                .filter_map(|i| i.tcp_info)
                .map(|t| t.min_rtt_us)
                .filter(|&v| v > 0)
                .min()
        });
        if let Some(us) = stream_min {
            return Some((f64::from(us) / 1e6, "stream tcp_info min_rtt"));
        }
        self.battery
            .rr
            .as_ref()
            .and_then(|r| r.summary.latency_us.p50)
            .filter(|v| *v > 0.0)
            .map(|us| (us / 1e6, "rr median latency"))
    }

    /// The first destination address of the workloads (IP only), for route fixes.
    pub fn target_ip(&self) -> Option<String> {
        self.battery.metas().into_iter().find_map(|(_, m)| {
            m.target
                .parse::<std::net::SocketAddr>()
                .ok()
                .map(|a| a.ip().to_string())
        })
    }

    /// The only non-loopback interface of `role`'s host, when there is exactly one.
    pub fn single_interface(&self, role: Role) -> Option<String> {
        let host = self.host_facts(role)?;
        match host.interfaces.as_slice() {
            [one] => Some(one.name.clone()),
            _ => None,
        }
    }
}
