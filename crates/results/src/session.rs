//! The metadata every result carries ([`RunMeta`]). The client fills it as a run goes
//! (`tcplab_load::session`: the wall-clock start, the data threads' CPU, the server's report).

use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

use crate::facts::Facts;
use crate::run_facts::RunFacts;
use crate::sockopt::AppliedOpts;

/// Fields common to every workload's result.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunMeta {
    /// Always "tcplab".
    pub tool: String,
    /// tcplab-load's version.
    pub version: String,
    /// The server's control address.
    pub target: String,
    /// Wall-clock start, ms since the Unix epoch (for the record; never used to measure).
    pub started_unix_ms: u64,
    /// False when the run was cut short; the figures then cover what was done.
    pub complete: bool,
    /// Why the run was cut short.
    pub incomplete_reason: Option<String>,
    /// Seed of any randomness in the run (null when there was none).
    pub seed: Option<u64>,
    /// Where it ran (the machine, the lab's hosts), the emulator it crossed, how its threads
    /// were scheduled; `{}` when none was recorded.
    #[serde(default)]
    pub facts: RunFacts,
    /// Options in force on the client's first data socket.
    pub options: Option<AppliedOpts>,
    /// Options in force on the server's first data socket.
    pub server_options: Option<AppliedOpts>,
    /// CPU time of the client's data threads, s.
    pub client_cpu_s: f64,
    /// CPU time of the server's data threads, s.
    pub server_cpu_s: f64,
    /// Time the client's data threads were runnable but waited for a CPU (schedstat run
    /// delay), s: latency figures include it, so a large value means the host's scheduler, not
    /// the network, added to them. None where the kernel does not count it.
    #[serde(default)]
    pub client_cpu_wait_s: Option<f64>,
    /// The same for the server's data threads, s.
    #[serde(default)]
    pub server_cpu_wait_s: Option<f64>,
    /// What the server saw of the run on its own side (its counters, its end of the data
    /// connection); `None` from a server that predates it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_view: Option<crate::peer::PeerView>,
    /// The client's kernel counters that rose during the run, when the client ran on behalf of
    /// someone else (an agent asked to be the client, `Ask::Run`): the caller cannot read that
    /// host's counters itself, so they travel with the result. `None` when the caller ran the
    /// client and read them where it stands.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_counters: Option<std::collections::BTreeMap<String, u64>>,
}

impl RunMeta {
    /// A complete-so-far record for a run against `target` that started at `started_unix_ms`
    /// (ms since the Unix epoch; the caller reads the wall clock, this crate reads no clock).
    pub fn new(target: SocketAddr, machine: Option<Facts>, started_unix_ms: u64) -> Self {
        Self {
            tool: "tcplab".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            target: target.to_string(),
            started_unix_ms,
            complete: true,
            incomplete_reason: None,
            seed: None,
            facts: RunFacts::of(machine),
            ..Default::default()
        }
    }

    /// Marks the run incomplete; the first reason wins because it is the cause.
    pub fn cut(&mut self, reason: impl Into<String>) {
        if self.complete {
            self.complete = false;
            self.incomplete_reason = Some(reason.into());
        }
    }

    /// Adds what one client data thread took (one thread, or one run of a sweep): its CPU
    /// time and, where the kernel counts it, its CPU wait, both ns.
    pub fn add_client_times(&mut self, cpu_ns: u64, wait_ns: Option<u64>) {
        self.client_cpu_s += cpu_ns as f64 / 1e9;
        if let Some(w) = wait_ns {
            *self.client_cpu_wait_s.get_or_insert(0.0) += w as f64 / 1e9;
        }
    }
}
