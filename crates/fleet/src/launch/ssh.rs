//! The `ssh` launcher: OpenSSH's client, nothing home-made.
//!
//! Per host, through one master connection (ControlMaster=auto, its socket in a private
//! directory of this launch, ControlPersist so the short commands reuse it):
//! 1. probe: is `REMOTE_DIR/tcplab-VERSION-HASH12` there (this exact build)?
//! 2. copy it when not: streamed on ssh's stdin into a temporary name unique to this launch
//!    and host, its size checked, then renamed into place, so hosts sharing a home directory
//!    and concurrent launches never run a half-written binary;
//! 3. a private per-launch directory `REMOTE_DIR/run-ID-HOST` (mode 700) with the launch's
//!    one-time secret key and the keys file that lists its public line;
//! 4. `tcplab serve --listen ADDR:PORT --key F --keys F --stop-on-stdin-eof`, its stdin the
//!    coordinator's pipe, its `listening on` line read from stderr.
//!
//! Stop: close the pipe (the agent sees EOF and exits), wait, kill the ssh process by PID if
//! needed, remove the per-launch directory, `ssh -O exit` the master.

use std::net::SocketAddr;
use std::os::unix::fs::DirBuilderExt;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use tcplab_auth::KeyPair;

use super::proc::{self, Input, Spawner, Tail, sh_quote};
use super::{Agent, LaunchError, LaunchOptions, build_id, parallel};
use crate::inventory::{Host, Launch};

/// How long short commands (probe, key setup, cleanup) may take.
const SHORT: Duration = Duration::from_secs(30);
/// How long a stopped agent gets to exit after its stdin closes.
const GRACE: Duration = Duration::from_secs(3);

/// The agents one launch started over ssh.
#[derive(Debug)]
pub(crate) struct SshLaunch {
    hosts: Vec<Running>,
    ctx: Ctx,
    spawner: Spawner,
}

/// What every command of the launch needs.
#[derive(Debug)]
struct Ctx {
    /// The private directory holding the master sockets.
    control_dir: PathBuf,
    /// ssh and its options up to the destination.
    program: PathBuf,
    options: Vec<String>,
    /// The remote binary path, quoted for the shell.
    remote_bin: String,
    remote_dir: String,
    /// Random, unique to this launch.
    launch_id: String,
    secret: Vec<u8>,
    accept: Vec<String>,
    opts: LaunchOptions,
}

/// One host's agent.
#[derive(Debug)]
struct Running {
    host: Host,
    destination: String,
    run_dir: String,
    child: Option<Child>,
    stdin: Option<ChildStdin>,
    tail: Tail,
    remote_pid: Option<u32>,
    agent: Option<Agent>,
    /// Whether this launch copied the binary to it.
    copied: bool,
}

impl SshLaunch {
    /// Starts the agents of `hosts` (all `Launch::Ssh`) with `key`; `accept` are the public
    /// lines of the agents' keys file. On failure every agent already started is stopped.
    pub(crate) fn start(
        hosts: Vec<Host>,
        key: &KeyPair,
        accept: &[String],
        opts: &LaunchOptions,
    ) -> Result<(SshLaunch, Vec<Agent>), LaunchError> {
        let build = build_id(&opts.binary)?;
        let launch_id: String = key.public().as_bytes()[..6]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let spawner = Spawner::new().map_err(|source| LaunchError::Io {
            path: "a thread for the ssh processes".into(),
            source,
        })?;
        let control_dir =
            std::env::temp_dir().join(format!("tcplab-ssh-{}-{launch_id}", std::process::id()));
        // Mode 700 and created here (not found), so no other user can plant or reach a socket.
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&control_dir)
            .map_err(|source| LaunchError::Io {
                path: control_dir.display().to_string(),
                source,
            })?;
        let remote_dir = opts.remote_dir.trim_end_matches('/').to_string();
        let ctx = Ctx {
            options: base_options(&control_dir, &opts.ssh_options),
            control_dir,
            program: opts.ssh_program.clone(),
            remote_bin: sh_quote(&format!("{remote_dir}/tcplab-{build}")),
            remote_dir,
            launch_id,
            secret: key.secret_text().as_bytes().to_vec(),
            accept: accept.to_vec(),
            opts: opts.clone(),
        };
        let mut launch = SshLaunch {
            hosts: hosts
                .into_iter()
                .filter_map(|host| {
                    let Launch::Ssh { destination } = &host.launch else {
                        return None;
                    };
                    Some(Running {
                        destination: destination.clone(),
                        run_dir: String::new(),
                        child: None,
                        stdin: None,
                        tail: Tail::default(),
                        remote_pid: None,
                        agent: None,
                        copied: false,
                        host,
                    })
                })
                .collect(),
            ctx,
            spawner,
        };
        // Masters, copies and key files in parallel; the agents' ssh processes are spawned
        // on the spawner thread so that they outlive these worker threads.
        let (ctx, spawner) = (&launch.ctx, &launch.spawner);
        let results = parallel(&launch.hosts, |r| ctx.prepare(r));
        let mut errors = Vec::new();
        for (r, res) in launch.hosts.iter_mut().zip(results) {
            match res {
                Ok((run_dir, copied)) => {
                    r.run_dir = run_dir;
                    r.copied = copied;
                }
                Err(e) => errors.push(e),
            }
        }
        if errors.is_empty() {
            let mut waiting = Vec::new();
            for r in &mut launch.hosts {
                match ctx.spawn_agent(spawner, r) {
                    Ok(lines) => waiting.push((r, lines)),
                    Err(e) => errors.push(e),
                }
            }
            // Every agent starts at once; the waits for their lines overlap, PARALLEL at a
            // time (the lines of the later ones wait in their channels meanwhile).
            for chunk in waiting.chunks_mut(super::PARALLEL) {
                std::thread::scope(|s| {
                    let hs: Vec<_> = chunk
                        .iter_mut()
                        .map(|(r, lines)| s.spawn(move || ctx.await_listening(r, lines)))
                        .collect();
                    for h in hs {
                        if let Ok(Err(e)) = h.join() {
                            errors.push(e);
                        }
                    }
                });
            }
        }
        if let Some(e) = LaunchError::from_all(errors) {
            launch.stop();
            return Err(e);
        }
        let agents = launch
            .hosts
            .iter()
            .filter_map(|r| r.agent.clone())
            .collect();
        Ok((launch, agents))
    }

    pub(crate) fn has(&self, name: &str) -> bool {
        self.hosts.iter().any(|r| r.host.name == name)
    }

    pub(crate) fn remote_pid(&self, name: &str) -> Option<u32> {
        self.hosts.iter().find(|r| r.host.name == name)?.remote_pid
    }

    pub(crate) fn local_pid(&self, name: &str) -> Option<u32> {
        Some(
            self.hosts
                .iter()
                .find(|r| r.host.name == name)?
                .child
                .as_ref()?
                .id(),
        )
    }

    pub(crate) fn copied(&self) -> Vec<String> {
        self.hosts
            .iter()
            .filter(|r| r.copied)
            .map(|r| r.host.name.clone())
            .collect()
    }

    /// Stops host `name`'s agent and starts it again in the same per-launch directory.
    pub(crate) fn restart(&mut self, name: &str) -> Result<Agent, LaunchError> {
        let r = self
            .hosts
            .iter_mut()
            .find(|r| r.host.name == name)
            .ok_or_else(|| LaunchError::NoSuchHost(name.to_string()))?;
        let _ = stop_agent(r);
        if r.run_dir.is_empty() {
            r.run_dir = self.ctx.prepare(r)?.0;
        }
        let lines = self.ctx.spawn_agent(&self.spawner, r)?;
        self.ctx.await_listening(r, &lines)?;
        r.agent
            .clone()
            .ok_or_else(|| LaunchError::NoSuchHost(name.to_string()))
    }

    /// Stops every agent, removes the per-launch directories, ends the masters.
    pub(crate) fn stop(mut self) -> Vec<String> {
        let ctx = &self.ctx;
        let problems: Vec<Vec<String>> = {
            let hosts = &mut self.hosts;
            let mut out = Vec::new();
            for chunk in hosts.chunks_mut(super::PARALLEL) {
                std::thread::scope(|s| {
                    let hs: Vec<_> = chunk
                        .iter_mut()
                        .map(|r| s.spawn(move || ctx.stop_host(r)))
                        .collect();
                    for h in hs {
                        out.push(
                            h.join()
                                .unwrap_or_else(|_| vec!["a stop thread panicked".into()]),
                        );
                    }
                });
            }
            out
        };
        let _ = std::fs::remove_dir_all(&self.ctx.control_dir);
        problems.into_iter().flatten().collect()
    }
}

impl Drop for SshLaunch {
    fn drop(&mut self) {
        // `stop` empties `hosts`' children; whatever is left (a panic) is ended here.
        for r in &mut self.hosts {
            let _ = stop_agent(r);
        }
        let _ = std::fs::remove_dir_all(&self.ctx.control_dir);
    }
}

/// The options every ssh command of the launch starts with.
fn base_options(control_dir: &std::path::Path, extra: &[String]) -> Vec<String> {
    // ssh takes the first value given for an option: the caller's come first and win.
    let mut o: Vec<String> = extra.to_vec();
    o.extend(
        [
            "ControlMaster=auto".to_string(),
            format!("ControlPath={}/%C", control_dir.display()),
            "ControlPersist=60".into(),
            "BatchMode=yes".into(),
            "ConnectTimeout=10".into(),
            "ServerAliveInterval=5".into(),
            "ServerAliveCountMax=3".into(),
        ]
        .into_iter()
        .flat_map(|opt| ["-o".to_string(), opt]),
    );
    o
}

/// Closes the agent's stdin and waits for its ssh process (then kills it by PID).
fn stop_agent(r: &mut Running) -> Option<String> {
    r.stdin = None;
    let mut child = r.child.take()?;
    proc::stop(&mut child, GRACE, &format!("host {}'s agent", r.host.name))
}

impl Ctx {
    fn ssh(&self, destination: &str) -> Command {
        let mut c = Command::new(&self.program);
        c.args(&self.options).arg("--").arg(destination);
        c
    }

    fn shown(&self, destination: &str, remote: &str) -> String {
        let mut parts = vec![self.program.display().to_string()];
        parts.extend(self.options.iter().map(|o| sh_quote(o)));
        parts.push("--".into());
        parts.push(destination.to_string());
        parts.push(sh_quote(remote));
        parts.join(" ")
    }

    /// Runs `remote` on the host through the master; an error names the host and the command.
    fn short(
        &self,
        r: &Running,
        remote: &str,
        input: Input,
        timeout: Duration,
        what: &str,
    ) -> Result<String, LaunchError> {
        let mut c = self.ssh(&r.destination);
        c.arg(remote);
        let err = |problem: String, stderr: String| LaunchError::Host {
            host: r.host.name.clone(),
            problem,
            command: self.shown(&r.destination, remote),
            stderr: last_lines(&stderr),
        };
        let ran =
            proc::run(c, input, timeout).map_err(|p| err(format!("{what}: {p}"), String::new()))?;
        if !ran.status.success() {
            let hint = if ran.status.code() == Some(255) {
                format!(
                    " (ssh could not connect or authenticate: check that `ssh {} true` works \
                     without a password, with the same ssh options)",
                    r.destination
                )
            } else {
                String::new()
            };
            return Err(err(
                format!("{what} failed ({}){hint}", ran.status),
                ran.stderr,
            ));
        }
        Ok(ran.stdout)
    }

    /// Probe, copy when needed, key files: returns the per-launch directory and whether the
    /// binary was copied.
    fn prepare(&self, r: &Running) -> Result<(String, bool), LaunchError> {
        let probe = format!(
            "if test -x {bin}; then echo present; else echo absent; fi",
            bin = self.remote_bin
        );
        let found = self.short(r, &probe, Input::Null, SHORT, "reaching the host")?;
        let copy = found.trim() != "present";
        if copy {
            self.copy(r)?;
        }
        let run_dir = format!("{}/run-{}-{}", self.remote_dir, self.launch_id, r.host.name);
        let keys: String = self.accept.iter().map(|l| format!("{l}\n")).collect();
        let setup = format!(
            "umask 077 && mkdir -p {dir} && mkdir {run} && printf %s {keys} > {run}/keys && \
             cat > {run}/key",
            dir = sh_quote(&self.remote_dir),
            run = sh_quote(&run_dir),
            keys = sh_quote(&keys),
        );
        self.short(
            r,
            &setup,
            Input::Bytes(self.secret.clone()),
            SHORT,
            "writing the launch's key files",
        )?;
        Ok((run_dir, copy))
    }

    /// Streams the binary to a temporary name unique to this launch and host, checks its
    /// size, and renames it into place (rename is atomic: a reader sees the old name absent or
    /// the whole file).
    fn copy(&self, r: &Running) -> Result<(), LaunchError> {
        let bin = &self.opts.binary;
        let io = |source| LaunchError::Io {
            path: bin.display().to_string(),
            source,
        };
        let file = std::fs::File::open(bin).map_err(io)?;
        let size = file.metadata().map_err(io)?.len();
        let tmp = sh_quote(&format!(
            "{}/.tmp.{}.{}",
            self.remote_dir, self.launch_id, r.host.name
        ));
        let remote = format!(
            "umask 077 && mkdir -p {dir} && t={tmp}.$$ && cat > \"$t\" && \
             test \"$(wc -c < \"$t\")\" -eq {size} && chmod 755 \"$t\" && mv -f \"$t\" {bin} \
             || {{ rm -f \"$t\"; exit 1; }}",
            dir = sh_quote(&self.remote_dir),
            bin = self.remote_bin,
        );
        self.short(
            r,
            &remote,
            Input::File(file),
            self.opts.copy_timeout,
            "copying the tcplab binary",
        )?;
        Ok(())
    }

    /// The command line that starts host `r`'s agent.
    fn serve_command(&self, r: &Running) -> String {
        let listen = SocketAddr::new(r.host.address, r.host.port);
        let run = sh_quote(&r.run_dir);
        format!(
            "echo \"tcplab-fleet: pid $$\" >&2; exec {bin} serve --listen {listen} --key {run}/key \
             --keys {run}/keys --stop-on-stdin-eof{sysctl}",
            bin = self.remote_bin,
            listen = sh_quote(&listen.to_string()),
            sysctl = if self.opts.allow_sysctl {
                " --allow-sysctl"
            } else {
                ""
            },
        )
    }

    fn agent_error(&self, r: &Running, problem: String) -> LaunchError {
        LaunchError::Host {
            host: r.host.name.clone(),
            problem,
            command: self.shown(&r.destination, &self.serve_command(r)),
            stderr: r.tail.text(),
        }
    }

    /// Starts the agent's ssh process (on the spawner thread); returns its stderr's lines.
    fn spawn_agent(
        &self,
        spawner: &Spawner,
        r: &mut Running,
    ) -> Result<std::sync::mpsc::Receiver<String>, LaunchError> {
        r.tail = Tail::default();
        r.agent = None;
        r.remote_pid = None;
        let mut c = self.ssh(&r.destination);
        c.arg(self.serve_command(r))
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = spawner
            .spawn(c)
            .map_err(|e| self.agent_error(r, format!("could not start ssh: {e}")))?;
        let stdin = child.stdin.take();
        let Some(stderr) = child.stderr.take() else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(self.agent_error(r, "ssh has no stderr pipe".into()));
        };
        let (lines, tail) = proc::drain(stderr, &r.host.name);
        r.child = Some(child);
        r.stdin = stdin;
        r.tail = tail;
        Ok(lines)
    }

    /// Waits for the agent's `listening on` line (and the remote PID before it); on failure
    /// the agent is stopped.
    fn await_listening(
        &self,
        r: &mut Running,
        lines: &std::sync::mpsc::Receiver<String>,
    ) -> Result<(), LaunchError> {
        let deadline = Instant::now() + self.opts.start_timeout;
        let problem = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match lines.recv_timeout(left) {
                Ok(line) => {
                    if let Some(pid) = line.strip_prefix("tcplab-fleet: pid ") {
                        r.remote_pid = pid.trim().parse().ok();
                    } else if let Some((addr, protocol)) = proc::parse_listening(&line) {
                        if protocol != tcplab_load::proto::VERSION {
                            break format!(
                                "its agent speaks protocol {protocol}, this coordinator {}",
                                tcplab_load::proto::VERSION
                            );
                        }
                        r.agent = Some(Agent {
                            name: r.host.name.clone(),
                            addr,
                            server_key: Some(self.server_key()),
                        });
                        return Ok(());
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    break format!(
                        "its agent did not say it listens within {:?} (raise the start timeout, \
                         or see its lines below)",
                        self.opts.start_timeout
                    );
                }
                Err(RecvTimeoutError::Disconnected) => {
                    let status = r
                        .child
                        .as_mut()
                        .and_then(|c| proc::wait_for(c, Duration::from_secs(2)))
                        .map(|s| s.to_string())
                        .unwrap_or_else(|| "still running".into());
                    break format!("its agent ended before listening ({status})");
                }
            }
        };
        let _ = stop_agent(r);
        Err(self.agent_error(r, problem))
    }

    /// The launch's public key (every launched agent's own key).
    fn server_key(&self) -> tcplab_auth::PublicKey {
        // The first accepted line is the launch key's; it was made from a valid key.
        self.accept
            .first()
            .and_then(|l| tcplab_auth::PublicKey::parse(l).ok())
            .map(|(k, _)| k)
            .unwrap_or_else(|| tcplab_auth::PublicKey::from_bytes([0; 32]))
    }

    /// Stops one host: its agent, its per-launch directory, its master.
    fn stop_host(&self, r: &mut Running) -> Vec<String> {
        let mut problems: Vec<String> = stop_agent(r).into_iter().collect();
        if !r.run_dir.is_empty() {
            let rm = format!("rm -rf {}", sh_quote(&r.run_dir));
            if let Err(e) = self.short(
                r,
                &rm,
                Input::Null,
                SHORT,
                "removing the per-launch directory",
            ) {
                problems.push(e.to_string());
            } else {
                r.run_dir.clear();
            }
        }
        let mut exit = Command::new(&self.program);
        exit.args(&self.options)
            .args(["-O", "exit", "--"])
            .arg(&r.destination);
        // "No ControlPath" or "Control socket connect" when the master is gone already: fine.
        let _ = proc::run(exit, Input::Null, Duration::from_secs(10));
        problems
    }
}

/// The last lines of a command's stderr, indented for a message.
fn last_lines(stderr: &str) -> String {
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.is_empty() {
        return "(nothing)".into();
    }
    lines[lines.len().saturating_sub(20)..].join("\n    ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_reuses_one_private_master() {
        let o = base_options(std::path::Path::new("/tmp/x"), &["-i".into(), "k".into()]);
        let joined = o.join(" ");
        assert!(joined.contains("-o ControlMaster=auto"), "{joined}");
        assert!(joined.contains("-o ControlPath=/tmp/x/%C"), "{joined}");
        assert!(joined.contains("-o BatchMode=yes"), "{joined}");
        assert!(joined.starts_with("-i k"), "{joined}");
    }

    #[test]
    fn only_the_last_lines_are_kept() {
        let text: String = (0..50).map(|i| format!("l{i}\n")).collect();
        let t = last_lines(&text);
        assert!(t.starts_with("l30") && t.ends_with("l49"), "{t}");
        assert_eq!(last_lines(""), "(nothing)");
    }
}
