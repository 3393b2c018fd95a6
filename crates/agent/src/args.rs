//! What makes `tcplab serve` an agent (keys, scope, limits: the values of its flags, which
//! crates/cli parses), and the lines it prints at start, so whoever starts it sees at once who
//! may use it and how much.

use std::io::Read;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tcplab_auth::client::{KEY_ENV, load_secret};
use tcplab_auth::scope::LAB_RANGES;
use tcplab_auth::{KeyList, KeyPair};
use tcplab_load::error::{LoadError, Result};

use crate::{AgentConfig, Limits};

/// Authentication, scope and limits of `tcplab serve`; each field is the flag of its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentOptions {
    /// Clients allowed to start tests: a file of their public keys, one per line, with a
    /// comment. `None`: unauthenticated, serving only loopback and lab addresses.
    pub keys: Option<PathBuf>,
    /// The server's own secret key file (default: TCPLAB_KEY; without `keys`, a key made for
    /// this run).
    pub key: Option<PathBuf>,
    /// Without `keys`, serve any address, not only loopback and lab ones.
    pub insecure: bool,
    /// Tests running at once.
    pub max_concurrent: u32,
    /// Longest test, ms (0: no limit).
    pub max_duration: u64,
    /// Data bytes per test, both ways (0: no limit).
    pub max_bytes: u64,
    /// Control connections a client address may open per second.
    pub max_conn_rate: u32,
    /// Connections in their handshake at once.
    pub max_handshakes: u32,
    /// Workload threads of all running tests together.
    pub max_threads: u32,
    /// Longest any single wait of a test may last, ms.
    pub idle_timeout: u64,
    /// The whole handshake, from connect to the test's parameters, ms.
    pub handshake_timeout: u64,
    /// Stop (restoring every held sysctl) when stdin reaches EOF.
    pub stop_on_stdin_eof: bool,
    /// Authenticated clients may hold changes to `net.` sysctls under a lease. Needs `keys`.
    pub allow_sysctl: bool,
    /// Where held sysctls' old values are journaled before they change (default
    /// `/run/tcplab/sysctl-net<namespace inode>.journal`).
    pub journal: Option<PathBuf>,
}

impl Default for AgentOptions {
    /// What `tcplab serve` with no agent flags means.
    fn default() -> Self {
        let l = Limits::default();
        let ms = |d: Option<Duration>| d.map_or(0, |d| d.as_millis() as u64);
        Self {
            keys: None,
            key: None,
            insecure: false,
            max_concurrent: l.max_tests,
            max_duration: ms(l.max_duration),
            max_bytes: l.max_bytes.unwrap_or(0),
            max_conn_rate: l.conn_rate,
            max_handshakes: l.max_handshakes,
            max_threads: l.max_threads,
            idle_timeout: l.idle_timeout.as_millis() as u64,
            handshake_timeout: l.handshake_timeout.as_millis() as u64,
            stop_on_stdin_eof: false,
            allow_sysctl: false,
            journal: None,
        }
    }
}

impl AgentOptions {
    /// The limits these options set.
    pub fn limits(&self) -> Result<Limits> {
        for (flag, v) in [
            ("idle-timeout", self.idle_timeout),
            ("handshake-timeout", self.handshake_timeout),
        ] {
            if v == 0 {
                return Err(LoadError::config(flag, "must be above 0 s"));
            }
        }
        Ok(Limits {
            max_tests: self.max_concurrent,
            max_duration: (self.max_duration > 0).then(|| Duration::from_millis(self.max_duration)),
            max_bytes: (self.max_bytes > 0).then_some(self.max_bytes),
            conn_rate: self.max_conn_rate,
            max_handshakes: self.max_handshakes,
            idle_timeout: Duration::from_millis(self.idle_timeout),
            handshake_timeout: Duration::from_millis(self.handshake_timeout),
            max_threads: self.max_threads,
        })
    }

    /// The flag the serve loop stops on: set when stdin closes (`--stop-on-stdin-eof`) and,
    /// with `--allow-sysctl`, on SIGTERM and SIGINT too, so held sysctls go back then as well.
    pub fn stop_flag(&self) -> Result<Arc<AtomicBool>> {
        let stop = Arc::new(AtomicBool::new(false));
        if self.stop_on_stdin_eof {
            stop_on_stdin_eof(stop.clone())?;
        }
        if self.allow_sysctl {
            stop_on_signals(stop.clone())?;
        }
        Ok(stop)
    }

    /// The agent these options describe; every problem names its flag (exit code 2).
    pub fn config(&self) -> Result<AgentConfig> {
        let key_err = |flag| move |source| LoadError::Key { flag, source };
        let env_key = std::env::var(KEY_ENV).ok().filter(|v| !v.trim().is_empty());
        let key = match (&self.key, env_key) {
            (Some(path), _) => Some(KeyPair::load(path).map_err(key_err("key"))?),
            (None, Some(v)) => Some(load_secret(&v, KEY_ENV).map_err(key_err("key"))?),
            (None, None) => None,
        };
        let authorized = match &self.keys {
            Some(path) => {
                let list = KeyList::load(path).map_err(key_err("keys"))?;
                if list.is_empty() {
                    return Err(LoadError::config(
                        "keys",
                        format!(
                            "{} holds no key: add each client's public key line (`tcplab key \
                             gen` on the client prints it)",
                            path.display()
                        ),
                    ));
                }
                Some(list)
            }
            None => None,
        };
        if self.allow_sysctl && authorized.is_none() {
            return Err(LoadError::config(
                "allow-sysctl",
                "needs --keys FILE: only clients whose key is listed may change this host's \
                 sysctls",
            ));
        }
        if self.journal.is_some() && !self.allow_sysctl {
            return Err(LoadError::config(
                "journal",
                "journals held sysctls, which only --allow-sysctl allows: add --allow-sysctl or \
                 drop --journal",
            ));
        }
        let key = match (key, &authorized) {
            (Some(k), _) => k,
            (None, Some(_)) => {
                return Err(LoadError::config(
                    "key",
                    "--keys needs the server's own key, so that clients can pin it: give --key \
                     FILE or TCPLAB_KEY (make one with `tcplab key gen --out FILE`)",
                ));
            }
            (None, None) => KeyPair::generate("made for this run").map_err(key_err("key"))?,
        };
        Ok(AgentConfig {
            key,
            authorized,
            keys_source: self
                .keys
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            insecure: self.insecure,
            limits: self.limits()?,
            log: true,
            allow_sysctl: self.allow_sysctl,
            journal: self.journal.clone(),
            machine: tcplab_host::facts::machine,
        })
    }
}

/// The lines `tcplab serve` prints at start: who may use it, its key, its limits.
pub fn banner(config: &AgentConfig) -> Vec<String> {
    let mut lines = Vec::new();
    match &config.authorized {
        Some(list) => lines.push(format!(
            "authenticated: clients whose key is in {} ({} key{})",
            config.keys_source,
            list.len(),
            if list.len() == 1 { "" } else { "s" }
        )),
        None if config.insecure => lines.push(
            "INSECURE: no --keys and --insecure: anyone who can reach this port can run tests"
                .into(),
        ),
        None => lines.push(format!(
            "no --keys: unauthenticated, so serving only loopback and lab addresses \
             ({LAB_RANGES}); give --keys FILE to serve others"
        )),
    }
    lines.push(format!(
        "server key {} (clients pin it with --server-key)",
        config.key.public()
    ));
    lines.push(format!("limits: {}", config.limits.summary()));
    if config.allow_sysctl {
        let journal = config
            .journal
            .clone()
            .unwrap_or_else(crate::hold::default_journal);
        lines.push(format!(
            "--allow-sysctl: authenticated clients may hold net.* sysctls of this network \
             namespace under a lease; old values journaled in {}",
            journal.display()
        ));
    }
    lines
}

/// The start-up lines that say what a leftover journal held and is now restored.
pub fn restored_lines(restored: &[(String, String)]) -> Vec<String> {
    restored
        .iter()
        .map(|(key, value)| {
            format!("restored {key}={value} from the journal a previous agent left")
        })
        .collect()
}

/// Sets `stop` when this process's stdin reaches EOF (or fails), from a thread that does
/// nothing else: the serve loop looks at `stop` every 100 ms, so the agent winds down (tests
/// end, held sysctls are restored) and exits 0 soon after whoever holds its stdin goes away.
pub fn stop_on_stdin_eof(stop: Arc<AtomicBool>) -> Result<()> {
    std::thread::Builder::new()
        .name("tcplab-stdin".into())
        .spawn(move || {
            let mut stdin = std::io::stdin().lock();
            let mut buf = [0u8; 512];
            loop {
                match stdin.read(&mut buf) {
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
            eprintln!("tcplab serve: stdin closed (--stop-on-stdin-eof), stopping");
            stop.store(true, Ordering::Relaxed);
        })
        .map(drop)
        .map_err(|e| LoadError::io("starting the --stop-on-stdin-eof thread", e))
}

/// Set by the SIGTERM/SIGINT handler [`stop_on_signals`] installs (a store is all a signal
/// handler may safely do).
static SIGNALLED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    SIGNALLED.store(true, Ordering::Relaxed);
}

/// Sets `stop` on SIGTERM or SIGINT, so the agent winds down and restores what it holds
/// instead of dying with the host changed. A thread passes the handler's flag on every 100 ms.
pub fn stop_on_signals(stop: Arc<AtomicBool>) -> Result<()> {
    SIGNALLED.store(false, Ordering::Relaxed);
    for sig in [libc::SIGTERM, libc::SIGINT] {
        let handler = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
        // Safety: the handler only stores to an atomic, which is async-signal-safe.
        if unsafe { libc::signal(sig, handler) } == libc::SIG_ERR {
            return Err(LoadError::io(
                "installing a signal handler",
                std::io::Error::last_os_error(),
            ));
        }
    }
    std::thread::Builder::new()
        .name("tcplab-signals".into())
        .spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                if SIGNALLED.load(Ordering::Relaxed) {
                    eprintln!("tcplab serve: signalled, restoring held sysctls and stopping");
                    stop.store(true, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        })
        .map(drop)
        .map_err(|e| LoadError::io("starting the signal thread", e))
}

/// Raises this process's soft limit on open files to its hard limit: an agent holds a socket per
/// connection (crr's up to 1,024 per test), and the usual soft limit of 1,024 would make it
/// refuse connections long before its own limits do. Only this process changes.
pub fn raise_fd_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // Safety: getrlimit writes into the live struct we pass.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 && lim.rlim_cur < lim.rlim_max
    {
        lim.rlim_cur = lim.rlim_max;
        // Safety: setrlimit reads the live struct; raising the soft limit to the hard one is
        // always allowed.
        let _ = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_the_limits_defaults() {
        assert_eq!(
            AgentOptions::default().limits().expect("limits"),
            Limits::default()
        );
    }

    #[test]
    fn keys_without_a_server_key_name_the_fix() {
        let dir = tempfile::tempdir().expect("tmp");
        let keys = dir.path().join("clients");
        let client = KeyPair::generate("c").expect("key");
        std::fs::write(&keys, client.public_line()).expect("write");
        let args = AgentOptions {
            keys: Some(keys.clone()),
            ..AgentOptions::default()
        };
        // Only when TCPLAB_KEY is unset (the test cannot unset it safely if a user set it).
        if std::env::var_os(KEY_ENV).is_none() {
            let e = args.config().expect_err("no --key").to_string();
            assert!(
                e.starts_with("invalid --key:") && e.contains("tcplab key gen"),
                "{e}"
            );
        }
        let server = dir.path().join("server");
        KeyPair::generate("s")
            .expect("key")
            .write_new(&server, false)
            .expect("write");
        let cfg = AgentOptions {
            key: Some(server),
            ..args
        }
        .config()
        .expect("config");
        assert!(
            cfg.authorized
                .expect("list")
                .find(&client.public())
                .is_some()
        );
        std::fs::write(&keys, "# nobody yet\n").expect("write");
        let e = AgentOptions {
            keys: Some(keys),
            ..AgentOptions::default()
        }
        .config()
        .expect_err("empty")
        .to_string();
        assert!(e.contains("holds no key"), "{e}");
    }
}
