//! tcplab-agent: the server side of tcplab, `tcplab serve`, made safe to run on a real network,
//! and the coordinator's side of its asks. [`Server`] runs it; the workloads' server routines
//! are `tcplab_load`'s, which it runs behind their guard (`tcplab_load::serve_ctx::TestGuard`,
//! implemented by the [`watch`]); the keys and the sealed channel are `tcplab_auth`'s; the
//! sysctls it holds and the facts it answers are read through `tcplab_host`, so an agent links
//! no lab and no emulator.
//!
//! # Map
//! ```text
//! accept ─► scope (no keys: loopback/lab only) ─► admit (rate, handshake slots) ─► thread:
//!   handshake (deadline; version; Noise XX; client key in --keys) ─► limits::check(test)
//!   ─► admit (tests, threads) ─► data listener with bpf::only_from(client) ─► workload
//!   watch::tick (every 100 ms, from the accept loop): past --max-duration / --max-bytes ─► stop
//!   handshake ─► Ask instead of Hello ─► ask: Facts | Clock | Run (limits like a test, then
//!   the client side toward another agent) | Sysctl (--allow-sysctl: journal, apply, lease)
//! ```
//! `tcplab serve --stop-on-stdin-eof` stops when its stdin closes (a launcher's ssh session
//! ends, even because its coordinator was killed); held sysctls are restored on the way out.
//! - [`server`]: the listener, the accept loop and each connection's thread (handshake, then
//!   the test or the ask).
//! - [`limits`]: the limits, their defaults, what a test needs, every refusal's message (pure).
//! - [`admit`]: per-address connection rate and handshake slots; tests and threads (sans-IO).
//! - [`handshake`]: the server's side of the handshake within one deadline.
//! - socket filters, so the kernel drops what the agent would refuse, are `tcplab_load::bpf`'s
//!   (the built-in HTTP server filters with them too).
//! - [`watch`]: running tests, stopped past their duration or bytes.
//! - [`args`]: the flags of `tcplab serve` that configure all this, and its start-up lines.
//! - [`ask`]: requests other than a test, in place of Hello: facts, clock probes, a test run
//!   from here toward another agent (counted like a test), sysctls held under a lease.
//! - [`hold`]: which sysctls may be held, the lease (pure), the table and its journal
//!   (fsynced before any change; restored on release, close, lease end, exit, next start).
//! - [`remote`]: the coordinator's side of the asks (facts, the clock offset estimator, a run
//!   from one agent toward another, sysctl holds), which the fleet, the study and the doctor's
//!   battery call.
//!
//! Threads are bounded by construction: one accept loop, at most `--max-handshakes`
//! connection threads before a test starts, at most `--max-concurrent` after, and the workloads'
//! own threads within `--max-threads`. docs/fleet.md has the threat model.

pub mod admit;
pub mod args;
pub mod ask;
pub mod handshake;
pub mod hold;
pub mod limits;
pub mod remote;
pub mod server;
pub mod watch;

use std::sync::Mutex;
use std::time::{Duration, Instant};

use tcplab_auth::{KeyList, KeyPair};
use tcplab_load::error::{LoadError, Result};
use tcplab_results::facts::Facts;

pub use admit::Counts;
pub use limits::{Limits, Refusal};
pub use server::Server;

/// Everything an agent is configured with.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// The agent's own key pair (clients pin its public half).
    pub key: KeyPair,
    /// Clients allowed to start tests (`--keys`); None: any client, and then only on loopback
    /// and lab addresses unless `insecure`.
    pub authorized: Option<KeyList>,
    /// Where `authorized` came from, for messages.
    pub keys_source: String,
    /// Serve any address without keys (`--insecure`).
    pub insecure: bool,
    /// The limits.
    pub limits: Limits,
    /// Print one line per refused connection to stderr (at most 20 a second).
    pub log: bool,
    /// Authenticated clients may hold `net.` sysctls (`--allow-sysctl`; needs `authorized`).
    pub allow_sysctl: bool,
    /// The journal of held sysctls (`--journal`); None: [`hold::default_journal`].
    pub journal: Option<std::path::PathBuf>,
    /// How the agent reads its machine's facts for `Ask::Facts`:
    /// [`tcplab_host::facts::machine`] unless whoever starts it knows more (`tcplab serve`
    /// gives the lab's, which adds whether rootless labs are possible here).
    pub machine: fn() -> Facts,
}

impl AgentConfig {
    /// A server inside the running program (a lab run, a test): a key made on the spot, no
    /// client keys, loopback and lab addresses only, [`Limits::in_process`], silent.
    pub fn in_process() -> Result<Self> {
        let key = KeyPair::generate("in-process").map_err(|source| LoadError::Key {
            flag: "key",
            source,
        })?;
        Ok(Self {
            key,
            authorized: None,
            keys_source: String::new(),
            insecure: false,
            limits: Limits::in_process(),
            log: false,
            allow_sysctl: false,
            journal: None,
            machine: tcplab_host::facts::machine,
        })
    }

    /// True when clients need no key and only loopback and lab addresses are served.
    pub fn lab_only(&self) -> bool {
        self.authorized.is_none() && !self.insecure
    }
}

/// Lets at most 20 log lines a second through and says how many it held back.
#[derive(Debug, Default)]
pub struct LogGate {
    state: Mutex<(Option<Instant>, u32, u64)>,
}

impl LogGate {
    /// Prints `line` to stderr unless this second's budget is spent.
    pub fn say(&self, line: &str) {
        let now = Instant::now();
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let (start, shown, held) = &mut *st;
        if start.is_none_or(|s| now.duration_since(s) >= Duration::from_secs(1)) {
            if *held > 0 {
                eprintln!("tcplab serve: ({held} more refusals not shown)");
            }
            *start = Some(now);
            *shown = 0;
            *held = 0;
        }
        if *shown < 20 {
            *shown += 1;
            eprintln!("tcplab serve: {line}");
        } else {
            *held += 1;
        }
    }
}
