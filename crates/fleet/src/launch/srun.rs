//! The `srun` launcher: inside a Slurm allocation, one agent per node, started as one job step
//! (`srun --nodes=N --ntasks=N --ntasks-per-node=1 ...`), node names from Slurm.
//!
//! Files: the binary and the launch's key files go to a directory every node sees at the same
//! path (`LaunchOptions::shared_dir`, default `$HOME/.cache/tcplab`), not through `sbcast`.
//! Slurm itself runs a step's program by its path on every node, so clusters share home and
//! work directories; `sbcast` would copy to node-local storage only within one job and leaves
//! the files to be cleaned per node. The key files are in a per-launch directory of mode 700
//! (only this user, on every node) removed at stop.
//!
//! Each task says which node it is before it becomes the agent, so the agents are matched to
//! nodes whatever order Slurm numbers the tasks in.

use std::collections::BTreeMap;
use std::io::Write;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use tcplab_auth::KeyPair;

use super::proc::{self, Input, Spawner, Tail, sh_quote};
use super::{Agent, LaunchError, LaunchOptions, build_id};
use crate::inventory::{Defaults, Host, Inventory, Launch};

/// How long a stopped step gets to end after its stdin closes.
const GRACE: Duration = Duration::from_secs(3);

/// The srun arguments (after the program) that start one agent on each of `nodes`: `bin`,
/// `key` and `keys` are paths every node sees. Each task first prints
/// `tcplab-fleet: node NAME pid PID` to stderr, then execs the agent; `--label` prefixes every
/// line with the task's number.
pub fn srun_args(
    nodes: &[String],
    listen: SocketAddr,
    bin: &Path,
    key: &Path,
    keys: &Path,
    allow_sysctl: bool,
) -> Vec<String> {
    let n = nodes.len();
    let q = |p: &Path| sh_quote(&p.display().to_string());
    let script = format!(
        "echo \"tcplab-fleet: node $SLURMD_NODENAME pid $$\" >&2; exec {bin} serve --listen {listen} \
         --key {key} --keys {keys} --stop-on-stdin-eof{sysctl}",
        bin = q(bin),
        listen = sh_quote(&listen.to_string()),
        key = q(key),
        keys = q(keys),
        sysctl = if allow_sysctl { " --allow-sysctl" } else { "" },
    );
    vec![
        format!("--nodes={n}"),
        format!("--ntasks={n}"),
        "--ntasks-per-node=1".into(),
        format!("--nodelist={}", nodes.join(",")),
        "--kill-on-bad-exit=1".into(),
        "--label".into(),
        "--input=all".into(),
        // The agents' step must not keep the allocation's CPUs from the steps a study runs.
        "--overlap".into(),
        "--job-name=tcplab-agents".into(),
        "/bin/sh".into(),
        "-c".into(),
        script,
    ]
}

/// The nodes of the allocation this process runs in (`scontrol show hostnames
/// $SLURM_JOB_NODELIST`).
pub fn allocation_nodes(scontrol: &Path) -> Result<Vec<String>, LaunchError> {
    let job = std::env::var("SLURM_JOB_ID").ok().filter(|v| !v.is_empty());
    let list = std::env::var("SLURM_JOB_NODELIST")
        .ok()
        .filter(|v| !v.is_empty());
    let (Some(_), Some(list)) = (job, list) else {
        return Err(LaunchError::Slurm {
            problem: "hosts with `srun = true` need a Slurm allocation, and SLURM_JOB_ID or \
                      SLURM_JOB_NODELIST is not set: run the coordinator inside `salloc` or an \
                      sbatch script"
                .into(),
        });
    };
    let mut c = Command::new(scontrol);
    c.args(["show", "hostnames", &list]);
    let ran =
        proc::run(c, Input::Null, Duration::from_secs(30)).map_err(|p| LaunchError::Slurm {
            problem: format!("`{} show hostnames {list}`: {p}", scontrol.display()),
        })?;
    if !ran.status.success() {
        return Err(LaunchError::Slurm {
            problem: format!(
                "`{} show hostnames {list}` failed ({}): {}",
                scontrol.display(),
                ran.status,
                ran.stderr.trim()
            ),
        });
    }
    Ok(ran.stdout.split_whitespace().map(String::from).collect())
}

impl Inventory {
    /// An inventory of these Slurm nodes, each `srun = true` at its resolved address.
    pub fn from_slurm(nodes: &[String], port: u16) -> Result<Inventory, LaunchError> {
        let hosts = nodes
            .iter()
            .map(|n| {
                Ok(Host {
                    name: n.clone(),
                    address: resolve(n)?,
                    port,
                    launch: Launch::Srun,
                    server_key: None,
                    labels: Vec::new(),
                })
            })
            .collect::<Result<Vec<_>, LaunchError>>()?;
        Inventory::new("the Slurm allocation", Defaults { port, user: None }, hosts).map_err(|e| {
            LaunchError::Slurm {
                problem: e.to_string(),
            }
        })
    }
}

/// A node name's address (the first the resolver gives).
fn resolve(node: &str) -> Result<IpAddr, LaunchError> {
    (node, 0)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .map(|a| a.ip())
        .ok_or_else(|| LaunchError::Slurm {
            problem: format!(
                "node {node}'s name does not resolve: list it in the hosts file with its address"
            ),
        })
}

/// The steps one launch started.
#[derive(Debug)]
pub(crate) struct SrunLaunch {
    steps: Vec<Step>,
    hosts: Vec<Host>,
    run_dir: PathBuf,
    bin: PathBuf,
    opts: LaunchOptions,
    /// Each host's agent's PID on its node, as its task said.
    pids: BTreeMap<String, u32>,
    spawner: Spawner,
}

/// One srun process (a job step) and the hosts it serves.
#[derive(Debug)]
struct Step {
    names: Vec<String>,
    child: Option<Child>,
    stdin: Option<ChildStdin>,
    tail: Tail,
}

impl SrunLaunch {
    /// Starts one step with an agent on each of `hosts` (all `Launch::Srun`).
    pub(crate) fn start(
        hosts: Vec<Host>,
        key: &KeyPair,
        accept: &[String],
        opts: &LaunchOptions,
    ) -> Result<(SrunLaunch, Vec<Agent>), LaunchError> {
        let nodes = allocation_nodes(&opts.scontrol_program)?;
        for h in &hosts {
            if !nodes.contains(&h.name) {
                return Err(LaunchError::Slurm {
                    problem: format!(
                        "host {} is not a node of this allocation ({}): name srun hosts after \
                         their Slurm nodes",
                        h.name,
                        nodes.join(", ")
                    ),
                });
            }
        }
        let shared = match &opts.shared_dir {
            Some(d) => d.clone(),
            None => std::env::var_os("HOME")
                .map(|h| PathBuf::from(h).join(".cache/tcplab"))
                .ok_or_else(|| LaunchError::Slurm {
                    problem: "HOME is not set: give a shared directory for the binary and keys"
                        .into(),
                })?,
        };
        let bin = copy_binary(&opts.binary, &shared)?;
        let run_dir = shared.join(format!(
            "run-{}",
            key.public().as_bytes()[..6]
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        ));
        write_keys(&run_dir, key, accept)?;
        let spawner = Spawner::new().map_err(|source| LaunchError::Io {
            path: "a thread for srun".into(),
            source,
        })?;
        let mut launch = SrunLaunch {
            steps: Vec::new(),
            hosts,
            run_dir,
            bin,
            opts: opts.clone(),
            pids: BTreeMap::new(),
            spawner,
        };
        let names: Vec<String> = launch.hosts.iter().map(|h| h.name.clone()).collect();
        match launch.start_step(&names) {
            Ok(agents) => Ok((launch, agents)),
            Err(e) => {
                launch.stop();
                Err(e)
            }
        }
    }

    pub(crate) fn has(&self, name: &str) -> bool {
        self.hosts.iter().any(|h| h.name == name)
    }

    pub(crate) fn remote_pid(&self, name: &str) -> Option<u32> {
        self.pids.get(name).copied()
    }

    pub(crate) fn local_pid(&self, name: &str) -> Option<u32> {
        self.steps
            .iter()
            .rev()
            .find(|s| s.names.iter().any(|n| n == name))?
            .child
            .as_ref()
            .map(|c| c.id())
    }

    /// A new step for host `name` alone (the old one's task for it has ended, or is ended now
    /// with the step when it was its only host).
    pub(crate) fn restart(&mut self, name: &str) -> Result<Agent, LaunchError> {
        for s in self.steps.iter_mut().filter(|s| s.names == [name]) {
            s.stdin = None;
            if let Some(mut c) = s.child.take() {
                let _ = proc::stop(&mut c, GRACE, "srun");
            }
        }
        self.steps.retain(|s| s.child.is_some());
        self.start_step(&[name.to_string()])?
            .pop()
            .ok_or_else(|| LaunchError::NoSuchHost(name.to_string()))
    }

    fn start_step(&mut self, names: &[String]) -> Result<Vec<Agent>, LaunchError> {
        let listen = SocketAddr::new(self.opts.srun_listen, self.port_of(names));
        let args = srun_args(
            names,
            listen,
            &self.bin,
            &self.run_dir.join("key"),
            &self.run_dir.join("keys"),
            self.opts.allow_sysctl,
        );
        let command = std::iter::once(self.opts.srun_program.display().to_string())
            .chain(args.iter().map(|a| sh_quote(a)))
            .collect::<Vec<_>>()
            .join(" ");
        let err = |problem: String, tail: &Tail| LaunchError::Host {
            host: names.join(","),
            problem,
            command: command.clone(),
            stderr: tail.text(),
        };
        let mut c = Command::new(&self.opts.srun_program);
        c.args(&args)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = self
            .spawner
            .spawn(c)
            .map_err(|e| err(format!("could not start srun: {e}"), &Tail::default()))?;
        let stdin = child.stdin.take();
        let Some(stderr) = child.stderr.take() else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(err("srun has no stderr pipe".into(), &Tail::default()));
        };
        let (lines, tail) = proc::drain(stderr, "srun");
        self.steps.push(Step {
            names: names.to_vec(),
            child: Some(child),
            stdin,
            tail: tail.clone(),
        });
        // task number -> node name, and -> port, as the lines arrive.
        let mut node_of: BTreeMap<String, (String, Option<u32>)> = BTreeMap::new();
        let mut port_of: BTreeMap<String, u16> = BTreeMap::new();
        let deadline = Instant::now() + self.opts.start_timeout;
        let problem = loop {
            if port_of.len() == names.len() && port_of.keys().all(|t| node_of.contains_key(t)) {
                break None;
            }
            match lines.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(line) => {
                    let Some((task, rest)) = line.split_once(": ") else {
                        continue;
                    };
                    let task = task.trim().to_string();
                    if let Some(said) = rest.strip_prefix("tcplab-fleet: node ") {
                        let mut words = said.split_whitespace();
                        let node = words.next().unwrap_or_default().to_string();
                        let pid = words.nth(1).and_then(|p| p.parse().ok());
                        node_of.insert(task, (node, pid));
                    } else if let Some((addr, _)) = proc::parse_listening(rest) {
                        port_of.insert(task, addr.port());
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    break Some(format!(
                        "{} of {} agents said they listen within {:?}",
                        port_of.len(),
                        names.len(),
                        self.opts.start_timeout
                    ));
                }
                Err(RecvTimeoutError::Disconnected) => {
                    break Some("srun ended before every agent listened".into());
                }
            }
        };
        if let Some(problem) = problem {
            if let Some(s) = self.steps.last_mut() {
                s.stdin = None;
                if let Some(mut c) = s.child.take() {
                    let _ = proc::stop(&mut c, GRACE, "srun");
                }
            }
            return Err(err(problem, &tail));
        }
        let key = self.server_key()?;
        let mut agents = Vec::new();
        for (task, port) in &port_of {
            let (node, pid) = node_of.get(task).cloned().unwrap_or_default();
            let Some(h) = self.hosts.iter().find(|h| h.name == node) else {
                return Err(err(
                    format!("task {task} ran on {node:?}, not a host asked for"),
                    &tail,
                ));
            };
            match pid {
                Some(p) => self.pids.insert(h.name.clone(), p),
                None => self.pids.remove(&h.name),
            };
            agents.push(Agent {
                name: h.name.clone(),
                addr: SocketAddr::new(h.address, *port),
                server_key: Some(key),
            });
        }
        Ok(agents)
    }

    /// One port for the step: the hosts' port when they agree, else 0 (any; each task says).
    fn port_of(&self, names: &[String]) -> u16 {
        let ports: Vec<u16> = self
            .hosts
            .iter()
            .filter(|h| names.contains(&h.name))
            .map(|h| h.port)
            .collect();
        match ports.first() {
            Some(p) if ports.iter().all(|q| q == p) => *p,
            _ => 0,
        }
    }

    fn server_key(&self) -> Result<tcplab_auth::PublicKey, LaunchError> {
        KeyPair::load(&self.run_dir.join("key"))
            .map(|k| k.public())
            .map_err(|source| LaunchError::Key {
                what: "the launch's key file".into(),
                source,
            })
    }

    /// Ends every step and removes the per-launch directory.
    pub(crate) fn stop(mut self) -> Vec<String> {
        self.stop_steps()
    }

    fn stop_steps(&mut self) -> Vec<String> {
        let mut problems = Vec::new();
        for s in &mut self.steps {
            s.stdin = None;
        }
        for s in &mut self.steps {
            if let Some(mut c) = s.child.take() {
                if let Some(p) = proc::stop(&mut c, GRACE, "srun") {
                    problems.push(format!("{p}; its last lines:\n    {}", s.tail.text()));
                }
            }
        }
        if self.run_dir.exists() {
            if let Err(e) = std::fs::remove_dir_all(&self.run_dir) {
                problems.push(format!("removing {}: {e}", self.run_dir.display()));
            }
        }
        problems
    }
}

impl Drop for SrunLaunch {
    fn drop(&mut self) {
        let _ = self.stop_steps();
    }
}

/// Copies the binary into `shared` as `tcplab-BUILD` unless there already (a temporary name
/// then a rename, so concurrent launches never run half a file).
fn copy_binary(binary: &Path, shared: &Path) -> Result<PathBuf, LaunchError> {
    let io = |p: &Path| {
        let path = p.display().to_string();
        move |source| LaunchError::Io { path, source }
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(shared)
        .map_err(io(shared))?;
    let dest = shared.join(format!("tcplab-{}", build_id(binary)?));
    if dest.exists() {
        return Ok(dest);
    }
    let tmp = shared.join(format!(
        ".tmp.{}.{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos())
    ));
    std::fs::copy(binary, &tmp).map_err(io(&tmp))?;
    std::fs::rename(&tmp, &dest).map_err(io(&dest))?;
    Ok(dest)
}

/// The per-launch directory (mode 700) with the secret key (600) and the keys file.
fn write_keys(run_dir: &Path, key: &KeyPair, accept: &[String]) -> Result<(), LaunchError> {
    let io = |p: &Path| {
        let path = p.display().to_string();
        move |source| LaunchError::Io { path, source }
    };
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(run_dir)
        .map_err(io(run_dir))?;
    let key_path = run_dir.join("key");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&key_path)
        .map_err(io(&key_path))?;
    f.write_all(key.secret_text().as_bytes())
        .and_then(|()| f.sync_all())
        .map_err(io(&key_path))?;
    let keys_path = run_dir.join("keys");
    let text: String = accept.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&keys_path, text).map_err(io(&keys_path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_step_runs_one_agent_per_node_that_says_which_node_it_is() {
        let nodes = vec!["n1".to_string(), "n2".to_string(), "n3".to_string()];
        let args = srun_args(
            &nodes,
            "0.0.0.0:5301".parse().expect("addr"),
            Path::new("/home/u/.cache/tcplab/tcplab-0.1.0-abc"),
            Path::new("/home/u/.cache/tcplab/run-1/key"),
            Path::new("/home/u/.cache/tcplab/run-1/keys"),
            false,
        );
        assert_eq!(
            &args[..9],
            [
                "--nodes=3",
                "--ntasks=3",
                "--ntasks-per-node=1",
                "--nodelist=n1,n2,n3",
                "--kill-on-bad-exit=1",
                "--label",
                "--input=all",
                "--overlap",
                "--job-name=tcplab-agents",
            ]
        );
        assert_eq!(&args[9..11], ["/bin/sh", "-c"]);
        let script = &args[11];
        assert!(script.starts_with("echo \"tcplab-fleet: node $SLURMD_NODENAME pid $$\" >&2; "));
        assert!(
            script.ends_with(
                "exec /home/u/.cache/tcplab/tcplab-0.1.0-abc serve --listen 0.0.0.0:5301 --key \
                 /home/u/.cache/tcplab/run-1/key --keys /home/u/.cache/tcplab/run-1/keys \
                 --stop-on-stdin-eof"
            ),
            "{script}"
        );
        let args = srun_args(
            &nodes[..1],
            "127.0.0.1:0".parse().expect("addr"),
            Path::new("/dir with space/tcplab"),
            Path::new("/k"),
            Path::new("/ks"),
            true,
        );
        assert!(args[0] == "--nodes=1" && args[3] == "--nodelist=n1");
        assert!(
            args[11].contains("exec '/dir with space/tcplab' serve"),
            "{}",
            args[11]
        );
        assert!(args[11].ends_with("--stop-on-stdin-eof --allow-sysctl"));
    }

    #[test]
    fn outside_an_allocation_the_error_says_to_use_salloc() {
        if std::env::var_os("SLURM_JOB_ID").is_some() {
            return;
        }
        let e = allocation_nodes(Path::new("scontrol"))
            .expect_err("no allocation")
            .to_string();
        assert!(e.contains("SLURM_JOB_ID") && e.contains("salloc"), "{e}");
    }

    #[test]
    fn nodes_become_srun_hosts_at_their_addresses() {
        let inv = Inventory::from_slurm(&["localhost".to_string()], 0).expect("resolves");
        assert_eq!(inv.hosts[0].launch, Launch::Srun);
        assert!(inv.hosts[0].address.is_loopback());
        let e = Inventory::from_slurm(&["no-such-node.invalid".to_string()], 0)
            .expect_err("unresolved")
            .to_string();
        assert!(
            e.contains("no-such-node.invalid") && e.contains("hosts file"),
            "{e}"
        );
    }

    #[test]
    fn the_binary_is_copied_once_per_build_and_keys_are_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tmp");
        let bin = dir.path().join("bin");
        std::fs::write(&bin, b"#!/bin/sh\n").expect("write");
        let shared = dir.path().join("shared");
        let a = copy_binary(&bin, &shared).expect("copies");
        let b = copy_binary(&bin, &shared).expect("finds it");
        assert_eq!(a, b);
        let key = KeyPair::generate("k").expect("key");
        let run = shared.join("run-x");
        write_keys(&run, &key, &[key.public_line()]).expect("writes");
        let mode = |p: &Path| std::fs::metadata(p).expect("meta").permissions().mode() & 0o777;
        assert_eq!((mode(&run), mode(&run.join("key"))), (0o700, 0o600));
        assert_eq!(
            KeyPair::load(&run.join("key")).expect("key").public(),
            key.public()
        );
    }
}
