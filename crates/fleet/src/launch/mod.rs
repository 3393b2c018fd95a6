//! Launchers: how the agents of an inventory are started, reached and stopped
//! (docs/fleet.md, "Launchers").
//!
//! ```text
//! launch(inventory, options) ──► Fleet { agents, auth }     stop() / Drop: everything launched ends
//!   ssh   OpenSSH: one master connection per host, the build copied when missing, a one-time key
//!   srun  Slurm: one step, one agent per node of the allocation
//!   none  agents already running: pinned keys, the coordinator's own key
//! ```
//! Launched agents (ssh, srun) share ONE key pair made for the launch: it is every agent's own
//! key, the only client key they accept and the key the coordinator connects with, so the
//! coordinator and the agents (for agent-to-agent tests) authenticate each other, and nothing
//! the launch leaves behind (a copied key) grants anything after it ends. Agents run with
//! `--stop-on-stdin-eof`, their stdin held by the coordinator: when the coordinator ends, even
//! by SIGKILL, their ssh or srun child gets SIGTERM (PR_SET_PDEATHSIG), the session closes and
//! the agents exit.

mod none;
mod proc;
pub mod srun;
pub mod ssh;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use tcplab_auth::{ClientAuth, KeyList, KeyPair, PublicKey};

use crate::inventory::{Inventory, Launch};

/// Hosts started at once (ssh masters, copies): enough for a rack, few enough for one
/// coordinator's file descriptors and the hosts' sshd `MaxStartups`.
pub const PARALLEL: usize = 16;

/// One agent the coordinator can reach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Agent {
    /// The host's name in the inventory.
    pub name: String,
    /// Its control address (the port it actually listens on).
    pub addr: SocketAddr,
    /// Its public key, pinned by the coordinator (None: an unpinned loopback or lab agent).
    pub server_key: Option<PublicKey>,
}

/// How to launch.
#[derive(Debug, Clone)]
pub struct LaunchOptions {
    /// The tcplab binary copied to ssh hosts and run by srun (default: this executable).
    pub binary: PathBuf,
    /// Start agents with `--allow-sysctl` (studies that change host sysctls).
    pub allow_sysctl: bool,
    /// How long an agent may take to say it listens.
    pub start_timeout: Duration,
    /// How long copying the binary to one host may take.
    pub copy_timeout: Duration,
    /// Where ssh hosts keep copied builds and per-launch directories: relative to the remote
    /// user's home, or absolute (not `~`; the path is quoted).
    pub remote_dir: String,
    /// Extra ssh options, before the destination (e.g. `-i KEY`, `-F CONFIG`, `-o X=Y`).
    pub ssh_options: Vec<String>,
    /// The ssh client to run.
    pub ssh_program: PathBuf,
    /// The coordinator's own key for `none` agents (default: `TCPLAB_KEY`, then the default
    /// key file, as `--key` does).
    pub key: Option<PathBuf>,
    /// For srun: a directory every node sees at the same path (default: `$HOME/.cache/tcplab`).
    pub shared_dir: Option<PathBuf>,
    /// For srun: the address agents listen on (default 0.0.0.0: every node's own address).
    pub srun_listen: std::net::IpAddr,
    /// The srun, scontrol programs.
    pub srun_program: PathBuf,
    /// The scontrol program.
    pub scontrol_program: PathBuf,
}

impl Default for LaunchOptions {
    fn default() -> Self {
        Self {
            binary: std::env::current_exe().unwrap_or_else(|_| PathBuf::from("tcplab")),
            allow_sysctl: false,
            start_timeout: Duration::from_secs(30),
            copy_timeout: Duration::from_secs(300),
            remote_dir: ".cache/tcplab".into(),
            ssh_options: Vec::new(),
            ssh_program: "ssh".into(),
            key: None,
            shared_dir: None,
            srun_listen: std::net::IpAddr::from([0, 0, 0, 0]),
            srun_program: "srun".into(),
            scontrol_program: "scontrol".into(),
        }
    }
}

/// Why a launch (or a restart) failed; each names the host, the command run and what it said.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// A command run for a host failed.
    #[error("host {host}: {problem}\n  command: {command}\n  its last lines:\n    {stderr}")]
    Host {
        /// The host.
        host: String,
        /// What went wrong and the fix.
        problem: String,
        /// The command, as it could be typed.
        command: String,
        /// The last lines of its stderr.
        stderr: String,
    },
    /// A running agent has no pin and is not on loopback or a lab address.
    #[error(
        "host {host}: its agent at {address} is already running (no `ssh` or `srun`) and has no \
         `server_key`; add the key it printed at start as `server_key = \"tcplab-x25519 ...\"` \
         (`tcplab key show` on its --key file prints it)"
    )]
    Unpinned {
        /// The host.
        host: String,
        /// Its address.
        address: SocketAddr,
    },
    /// srun hosts outside a Slurm allocation, or Slurm refused.
    #[error("srun: {problem}")]
    Slurm {
        /// What went wrong and the fix.
        problem: String,
    },
    /// A key could not be made or read.
    #[error("{what}: {source}")]
    Key {
        /// Which key.
        what: String,
        /// The error.
        source: tcplab_auth::KeyError,
    },
    /// The coordinator's credentials (TCPLAB_KEY) could not be read.
    #[error("the coordinator's key: {0}")]
    Auth(String),
    /// A local file (the binary, the shared directory) could not be used.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The errno.
        source: std::io::Error,
    },
    /// `restart` of a host that is not in the fleet.
    #[error("no host {0:?} in this fleet; the names are those of the hosts file")]
    NoSuchHost(String),
    /// More than one host failed.
    #[error("{} hosts failed:\n{}", .0.len(), .0.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("\n"))]
    Several(Vec<LaunchError>),
}

impl LaunchError {
    /// One error for a list of them.
    fn from_all(mut errors: Vec<LaunchError>) -> Option<LaunchError> {
        match errors.len() {
            0 => None,
            1 => errors.pop(),
            _ => Some(LaunchError::Several(errors)),
        }
    }
}

/// The running agents of a launch and the credentials to reach them. Dropping it stops every
/// agent it launched (as [`Fleet::stop`] does, its problems ignored).
#[derive(Debug)]
pub struct Fleet {
    /// Every host's agent, in inventory order.
    pub agents: Vec<Agent>,
    /// What the coordinator connects with: the launch's key (or the coordinator's own key when
    /// the fleet has running agents too), pinning every agent's key.
    pub auth: ClientAuth,
    ssh: Option<ssh::SshLaunch>,
    srun: Option<srun::SrunLaunch>,
}

/// Starts (or finds) the agent of every host of `inv`.
pub fn launch(inv: &Inventory, opts: &LaunchOptions) -> Result<Fleet, LaunchError> {
    let launched_any = inv.hosts.iter().any(|h| h.launch != Launch::None);
    let running_any = inv.hosts.iter().any(|h| h.launch == Launch::None);
    let launch_key = if launched_any {
        Some(
            KeyPair::generate("tcplab-fleet-launch").map_err(|source| LaunchError::Key {
                what: "the launch's one-time key".into(),
                source,
            })?,
        )
    } else {
        None
    };
    // The client key: the launch's own, unless some agents were started by someone else and
    // only know the coordinator's key; then launched agents accept that key too.
    let client = match (&launch_key, running_any) {
        (Some(k), false) => ClientAuth::new(k.clone(), "the launch's one-time key"),
        _ => none::coordinator_auth(opts)?,
    };
    let mut accept = Vec::new();
    if let Some(k) = &launch_key {
        accept.push(k.public_line());
        if running_any {
            accept.push(client.key().public_line());
        }
    }
    let mut agents: Vec<Agent> = none::agents(inv)?;
    let mut fleet = Fleet {
        agents: Vec::new(),
        auth: client.clone(),
        ssh: None,
        srun: None,
    };
    if let Some(key) = &launch_key {
        let ssh_hosts: Vec<_> = inv
            .hosts
            .iter()
            .filter(|h| matches!(h.launch, Launch::Ssh { .. }))
            .cloned()
            .collect();
        if !ssh_hosts.is_empty() {
            let (launch, started) = ssh::SshLaunch::start(ssh_hosts, key, &accept, opts)?;
            fleet.ssh = Some(launch);
            agents.extend(started);
        }
        let srun_hosts: Vec<_> = inv
            .hosts
            .iter()
            .filter(|h| h.launch == Launch::Srun)
            .cloned()
            .collect();
        if !srun_hosts.is_empty() {
            // On failure `fleet` drops here and stops the ssh agents already started.
            let (launch, started) = srun::SrunLaunch::start(srun_hosts, key, &accept, opts)?;
            fleet.srun = Some(launch);
            agents.extend(started);
        }
    }
    // Inventory order, whatever order the launchers finished in.
    agents.sort_by_key(|a| inv.hosts.iter().position(|h| h.name == a.name));
    let pins: Vec<PublicKey> = agents.iter().filter_map(|a| a.server_key).collect();
    if !pins.is_empty() {
        fleet.auth = client.with_pins(KeyList::of(pins), "the fleet's agents");
    }
    fleet.agents = agents;
    Ok(fleet)
}

impl Fleet {
    /// The agent of host `name`.
    pub fn agent(&self, name: &str) -> Option<&Agent> {
        self.agents.iter().find(|a| a.name == name)
    }

    /// Credentials that accept only the key of host `name`'s agent (`auth` accepts any of the
    /// fleet's keys at any of its addresses; this pins one host to one key). An agent without
    /// a key (loopback or lab) gets `auth` without pins.
    pub fn auth_for(&self, name: &str) -> Option<ClientAuth> {
        let agent = self.agent(name)?;
        let base = ClientAuth::new(self.auth.key().clone(), self.auth.key_source());
        Some(match agent.server_key {
            Some(k) => base.with_pins(KeyList::of([k]), format!("host {name}'s agent")),
            None => base,
        })
    }

    /// The PID of host `name`'s agent on its host, as the launcher learned it (ssh, srun).
    pub fn remote_pid(&self, name: &str) -> Option<u32> {
        if let Some(pid) = self.ssh.as_ref().and_then(|s| s.remote_pid(name)) {
            return Some(pid);
        }
        self.srun.as_ref()?.remote_pid(name)
    }

    /// The PID of the local process that holds host `name`'s agent (its ssh or srun), which
    /// ends the agent when it ends.
    pub fn launcher_pid(&self, name: &str) -> Option<u32> {
        if let Some(pid) = self.ssh.as_ref().and_then(|s| s.local_pid(name)) {
            return Some(pid);
        }
        self.srun.as_ref()?.local_pid(name)
    }

    /// The hosts this launch copied the binary to (the others had this build already).
    pub fn copied(&self) -> Vec<String> {
        self.ssh.as_ref().map(|s| s.copied()).unwrap_or_default()
    }

    /// Stops host `name`'s agent (when launched) and starts it again, as `mesh --resume`
    /// needs after an agent died. The agent's address is updated (its port may change when
    /// the hosts file asks for port 0).
    pub fn restart(&mut self, name: &str) -> Result<(), LaunchError> {
        let idx = self
            .agents
            .iter()
            .position(|a| a.name == name)
            .ok_or_else(|| LaunchError::NoSuchHost(name.to_string()))?;
        let agent = if let Some(s) = self.ssh.as_mut().filter(|s| s.has(name)) {
            s.restart(name)?
        } else if let Some(s) = self.srun.as_mut().filter(|s| s.has(name)) {
            s.restart(name)?
        } else {
            // An agent already running is not ours to start: it is as it was.
            return Ok(());
        };
        self.agents[idx] = agent;
        Ok(())
    }

    /// Stops every agent launched: closes its stdin, waits for it, kills its ssh or srun
    /// process by PID if needed, removes the per-launch files. Returns the problems met.
    pub fn stop(mut self) -> Vec<String> {
        self.stop_all()
    }

    fn stop_all(&mut self) -> Vec<String> {
        let mut problems = Vec::new();
        if let Some(s) = self.srun.take() {
            problems.extend(s.stop());
        }
        if let Some(s) = self.ssh.take() {
            problems.extend(s.stop());
        }
        problems
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        let _ = self.stop_all();
    }
}

/// The build this binary is: its version and the start of its SHA-256, so that a host holding
/// another build at the same version (a rebuilt dev tree) gets this one.
pub fn build_id(binary: &std::path::Path) -> Result<String, LaunchError> {
    use sha2::{Digest, Sha256};
    let io = |source| LaunchError::Io {
        path: binary.display().to_string(),
        source,
    };
    let mut f = std::fs::File::open(binary).map_err(io)?;
    let mut h = Sha256::new();
    std::io::copy(&mut f, &mut h).map_err(io)?;
    let hex: String = h.finalize()[..6]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Ok(format!("{}-{hex}", env!("CARGO_PKG_VERSION")))
}

/// Runs `f` on every item with at most [`PARALLEL`] threads at once; results in item order.
fn parallel<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let mut out = Vec::with_capacity(items.len());
    for chunk in items.chunks(PARALLEL) {
        std::thread::scope(|s| {
            let handles: Vec<_> = chunk.iter().map(|i| s.spawn(|| f(i))).collect();
            for h in handles {
                match h.join() {
                    Ok(r) => out.push(r),
                    Err(p) => std::panic::resume_unwind(p),
                }
            }
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_build_id_changes_with_the_binary() {
        let dir = tempfile::tempdir().expect("tmp");
        let a = dir.path().join("a");
        std::fs::write(&a, b"one").expect("write");
        let id1 = build_id(&a).expect("id");
        std::fs::write(&a, b"two").expect("write");
        let id2 = build_id(&a).expect("id");
        assert_ne!(id1, id2);
        assert!(
            id1.starts_with(env!("CARGO_PKG_VERSION")) && id1.len() > 12,
            "{id1}"
        );
        let e = build_id(&dir.path().join("missing")).expect_err("missing");
        assert!(e.to_string().contains("missing"), "{e}");
    }

    #[test]
    fn parallel_keeps_the_order() {
        let items: Vec<u32> = (0..40).collect();
        assert_eq!(
            parallel(&items, |i| i * 2),
            items.iter().map(|i| i * 2).collect::<Vec<_>>()
        );
    }
}
