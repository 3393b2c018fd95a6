//! The agent: `tcplab serve` made safe to run on a real network. [`crate::server::Server`] runs
//! it; this module holds what it decides with.
//!
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
//! - [`limits`]: the limits, their defaults, what a test needs, every refusal's message (pure).
//! - [`admit`]: per-address connection rate and handshake slots; tests and threads (sans-IO).
//! - [`handshake`]: the server's side of the handshake within one deadline.
//! - [`bpf`]: socket filters so the kernel drops what the agent would refuse (pure builder and
//!   interpreter, one attach call).
//! - [`watch`]: running tests, stopped past their duration or bytes.
//! - [`args`]: the flags of `tcplab serve` that configure all this, and its start-up lines.
//! - [`ask`]: requests other than a test, in place of Hello: facts, clock probes, a test run
//!   from here toward another agent (counted like a test), sysctls held under a lease.
//! - [`hold`]: which sysctls may be held, the lease (pure), the table and its journal
//!   (fsynced before any change; restored on release, close, lease end, exit, next start).
//!
//! Threads are bounded by construction: one accept loop, at most `--max-handshakes`
//! connection threads before a test starts, at most `--max-concurrent` after, and the workloads'
//! own threads within `--max-threads`. docs/fleet.md has the threat model.

pub mod admit;
pub mod args;
pub mod ask;
pub mod bpf;
pub mod handshake;
pub mod hold;
pub mod limits;
pub mod watch;

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::auth::{KeyList, KeyPair};
use crate::error::{LoadError, Result};
pub use admit::Counts;
pub use limits::{Limits, Refusal};

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
        })
    }

    /// True when clients need no key and only loopback and lab addresses are served.
    pub fn lab_only(&self) -> bool {
        self.authorized.is_none() && !self.insecure
    }
}

/// Lets at most 20 log lines a second through and says how many it held back.
#[derive(Debug, Default)]
pub(crate) struct LogGate {
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
