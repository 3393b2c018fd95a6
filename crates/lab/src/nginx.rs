//! A real nginx (the distribution's package) serving a directory from inside a lab host, so web
//! workloads can be measured against the server people actually deploy rather than a toy one.
//!
//! Split like the rest of the crate: [`NginxConfig`] is pure (validate, then render the text of
//! `nginx.conf`; tested against golden text), and [`start`] / [`NginxProcess`] do the I/O.
//!
//! nginx runs as a *companion* of its lab: it is recorded in the lab's registry entry the moment
//! it is spawned, so `tcplab lab down`, the signal teardown and `tcplab lab gc` end it even when
//! the process that started it dies without running [`NginxProcess::stop`]. It runs with
//! `daemon off` in its own process group, so the PID we spawned is the master for its whole life
//! and its workers can be killed as one group without touching anything else.
//!
//! Everything nginx writes goes under the prefix directory (config, pid file, temp files,
//! `error.log`): it never touches `/etc/nginx`, `/var/lib/nginx` or `/var/log/nginx`, so it
//! coexists with a system nginx and leaves nothing behind outside the prefix.

use std::fmt::Write as _;
use std::io::{Read, Seek, SeekFrom};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::error::{KernelContext, LabError, Result};
use crate::lab::Lab;
use crate::state::{Companion, ProcessId, StateDir};

/// Where Debian's package installs the binary; `nginx` on `PATH` is the fallback.
pub const NGINX_BIN: &str = "/usr/sbin/nginx";

/// The role nginx is recorded under among a lab's companions.
pub const COMPANION_ROLE: &str = "nginx";

/// How long [`start`] waits for nginx to accept connections, and [`NginxProcess::stop`] waits for
/// a graceful exit, before giving up.
const WAIT: Duration = Duration::from_secs(5);

/// How many lines of `error.log` an error carries.
const LOG_TAIL_LINES: usize = 20;

/// Characters that would change the meaning of a path inside `nginx.conf` (separators, quotes,
/// comments, variables). Rejected rather than escaped: nginx expands `$` even inside quotes.
const UNSAFE_PATH_CHARS: &[char] = &[';', '{', '}', '"', '\'', '$', '#', '\\'];

/// What nginx serves, where, and how. Pure data: [`NginxConfig::render`] turns it into the text of
/// `nginx.conf`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NginxConfig {
    /// The address and port to listen on, normally the server host's lab address.
    pub listen: SocketAddr,
    /// The directory served as the document root.
    pub root: PathBuf,
    /// nginx's own directory: `nginx.conf`, `nginx.pid`, `error.log` and `tmp/`.
    pub prefix: PathBuf,
    /// Worker processes (`worker_processes`).
    pub workers: u32,
    /// Connections per worker (`worker_connections`).
    pub worker_connections: u32,
    /// The listen queue length (`listen ... backlog=N`); `None` keeps nginx's default (511),
    /// which the kernel caps at the host's `net.core.somaxconn`.
    pub backlog: Option<u32>,
    /// Requests served over one keep-alive connection before nginx closes it.
    pub keepalive_requests: u64,
    /// Idle seconds before nginx closes a keep-alive connection; 0 turns keep-alive off.
    pub keepalive_timeout_s: u32,
    /// One listening socket per worker (`SO_REUSEPORT`), so the kernel spreads connections
    /// instead of the workers contending for one accept queue.
    pub reuseport: bool,
}

impl NginxConfig {
    /// The defaults suited to benchmarks: one worker, 4096 connections per worker, keep-alive
    /// connections that are never closed for their request count (1 000 000) and nginx's usual
    /// 65 s idle timeout, the default backlog and no `reuseport`.
    pub fn new(
        listen: SocketAddr,
        root: impl Into<PathBuf>,
        prefix: impl Into<PathBuf>,
    ) -> NginxConfig {
        NginxConfig {
            listen,
            root: root.into(),
            prefix: prefix.into(),
            workers: 1,
            worker_connections: 4096,
            backlog: None,
            keepalive_requests: 1_000_000,
            keepalive_timeout_s: 65,
            reuseport: false,
        }
    }

    /// `PREFIX/nginx.conf`.
    pub fn conf_path(&self) -> PathBuf {
        self.prefix.join("nginx.conf")
    }

    /// `PREFIX/error.log`: nginx's stderr, where it reports everything (`error_log stderr`).
    pub fn error_log_path(&self) -> PathBuf {
        self.prefix.join("error.log")
    }

    /// `PREFIX/tmp`: the parent of nginx's five temp directories.
    pub fn tmp_dir(&self) -> PathBuf {
        self.prefix.join("tmp")
    }

    /// Checks every field nginx would otherwise reject (or misread) at startup, so a mistake is
    /// reported with the field's name and the fix rather than as nginx's `[emerg]` line.
    pub fn validate(&self) -> Result<()> {
        if self.listen.port() == 0 {
            return Err(LabError::invalid(
                "nginx.listen",
                format!(
                    "port 0 in {} would make nginx pick a port nobody knows; give a port, e.g. {}",
                    self.listen,
                    SocketAddr::new(self.listen.ip(), 8080)
                ),
            ));
        }
        if let SocketAddr::V6(v6) = self.listen {
            if v6.scope_id() != 0 {
                return Err(LabError::invalid(
                    "nginx.listen",
                    format!(
                        "{} has a scope id, which nginx's listen directive cannot express; \
                         use a lab address (fd00::/8) instead of a link-local one",
                        self.listen
                    ),
                ));
            }
        }
        check_path("nginx.root", &self.root)?;
        check_path("nginx.prefix", &self.prefix)?;
        if !(1..=1024).contains(&self.workers) {
            return Err(LabError::invalid(
                "nginx.workers",
                format!(
                    "{} worker processes; give 1 to 1024 (one per CPU the server host should use)",
                    self.workers
                ),
            ));
        }
        if !(16..=1 << 20).contains(&self.worker_connections) {
            return Err(LabError::invalid(
                "nginx.worker_connections",
                format!(
                    "{} connections per worker; give 16 to 1048576 (nginx counts its listening \
                     socket and internal channels against this limit too)",
                    self.worker_connections
                ),
            ));
        }
        if let Some(backlog) = self.backlog {
            if backlog == 0 || backlog > i32::MAX as u32 {
                return Err(LabError::invalid(
                    "nginx.backlog",
                    format!(
                        "backlog {backlog}; give 1 to {} or leave it unset for nginx's default \
                         (511)",
                        i32::MAX
                    ),
                ));
            }
        }
        if self.keepalive_requests == 0 {
            return Err(LabError::invalid(
                "nginx.keepalive_requests",
                "0 requests per connection; give at least 1 (to turn keep-alive off, set \
                 keepalive_timeout_s to 0 instead)",
            ));
        }
        Ok(())
    }

    /// The text of `nginx.conf`. Call [`NginxConfig::validate`] first: rendering does not check.
    ///
    /// Why each part: `daemon off` keeps the spawned PID as the master (what the registry
    /// records); `user root` lets the workers read any directory the caller points at (the lab
    /// runs as root anyway); `error_log stderr` sends everything to the captured `error.log`;
    /// `log_not_found off` keeps a load test's 404s from writing one `error.log` line each;
    /// every temp path under `PREFIX/tmp` keeps nginx out of `/var/lib/nginx`;
    /// `worker_rlimit_nofile` is two descriptors per connection (socket + open file) plus
    /// headroom, so a load test meets `worker_connections` and not the file limit.
    pub fn render(&self) -> String {
        let prefix = self.prefix.display();
        let tmp = self.tmp_dir();
        let tmp = tmp.display();
        let nofile = u64::from(self.worker_connections) * 2 + 64;
        let mut listen = match self.listen {
            SocketAddr::V4(v4) => format!("{}:{}", v4.ip(), v4.port()),
            SocketAddr::V6(v6) => format!("[{}]:{}", v6.ip(), v6.port()),
        };
        if let Some(backlog) = self.backlog {
            let _ = write!(listen, " backlog={backlog}");
        }
        if self.reuseport {
            listen.push_str(" reuseport");
        }
        format!(
            "# Written by tcplab; rewritten on every start.\n\
             daemon off;\n\
             master_process on;\n\
             worker_processes {workers};\n\
             worker_rlimit_nofile {nofile};\n\
             pid {prefix}/nginx.pid;\n\
             error_log stderr warn;\n\
             user root;\n\
             \n\
             events {{\n\
             \x20   worker_connections {worker_connections};\n\
             }}\n\
             \n\
             http {{\n\
             \x20   access_log off;\n\
             \x20   log_not_found off;\n\
             \x20   sendfile on;\n\
             \x20   tcp_nopush on;\n\
             \x20   tcp_nodelay on;\n\
             \x20   keepalive_timeout {keepalive_timeout}s;\n\
             \x20   keepalive_requests {keepalive_requests};\n\
             \x20   client_body_temp_path {tmp}/client_body;\n\
             \x20   proxy_temp_path {tmp}/proxy;\n\
             \x20   fastcgi_temp_path {tmp}/fastcgi;\n\
             \x20   uwsgi_temp_path {tmp}/uwsgi;\n\
             \x20   scgi_temp_path {tmp}/scgi;\n\
             \x20   types {{\n\
             \x20       text/html html htm;\n\
             \x20       text/plain txt;\n\
             \x20       text/css css;\n\
             \x20       application/javascript js;\n\
             \x20       application/json json;\n\
             \x20       image/png png;\n\
             \x20       image/jpeg jpg jpeg;\n\
             \x20   }}\n\
             \x20   default_type application/octet-stream;\n\
             \n\
             \x20   server {{\n\
             \x20       listen {listen};\n\
             \x20       root {root};\n\
             \x20   }}\n\
             }}\n",
            workers = self.workers,
            worker_connections = self.worker_connections,
            keepalive_timeout = self.keepalive_timeout_s,
            keepalive_requests = self.keepalive_requests,
            root = self.root.display(),
        )
    }
}

/// A path nginx.conf can hold verbatim: absolute, UTF-8, no whitespace or syntax characters.
fn check_path(field: &str, path: &Path) -> Result<()> {
    let Some(text) = path.to_str() else {
        return Err(LabError::invalid(
            field,
            format!(
                "{} is not valid UTF-8; nginx.conf cannot hold it: use an ASCII path",
                path.display()
            ),
        ));
    };
    if !path.is_absolute() {
        return Err(LabError::invalid(
            field,
            format!(
                "'{text}' is relative; nginx would resolve it against its prefix: give an \
                 absolute path"
            ),
        ));
    }
    if let Some(c) = text
        .chars()
        .find(|c| c.is_whitespace() || c.is_control() || UNSAFE_PATH_CHARS.contains(c))
    {
        return Err(LabError::invalid(
            field,
            format!(
                "'{text}' contains {c:?}, which nginx.conf would read as syntax; use a path \
                 without whitespace or any of {}",
                UNSAFE_PATH_CHARS.iter().collect::<String>()
            ),
        ));
    }
    if text.len() > 1 && text.ends_with('/') {
        return Err(LabError::invalid(
            field,
            format!(
                "'{text}' ends with '/'; give it without the trailing slash ('{}')",
                text.trim_end_matches('/')
            ),
        ));
    }
    Ok(())
}

/// A running nginx master in a lab host. Dropping it stops nginx (see [`NginxProcess::stop`]).
#[derive(Debug)]
pub struct NginxProcess {
    /// The master; `None` once reaped.
    child: Option<Child>,
    /// The master's identity (PID + start time), as recorded in the registry.
    process: ProcessId,
    listen: SocketAddr,
    prefix: PathBuf,
    state: StateDir,
    lab: String,
    host: String,
}

/// Finds the nginx binary: Debian's path first, then `PATH`.
pub fn find_binary() -> Result<PathBuf> {
    let candidates = std::iter::once(PathBuf::from(NGINX_BIN)).chain(
        std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
            .unwrap_or_default()
            .into_iter()
            .map(|dir| dir.join("nginx")),
    );
    for path in candidates {
        if is_executable(&path) {
            return Ok(path);
        }
    }
    Err(LabError::NginxMissing)
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Starts nginx in `host` of `lab` with `cfg`, and returns once it accepts TCP connections on
/// `cfg.listen` (seen from inside the host).
///
/// Steps: validate; find the binary; create the prefix and `tmp/`; write `nginx.conf`; run
/// `nginx -t` in the host (it parses the config, creates the temp directories and the pid file,
/// and binds the listen sockets, so a wrong address fails here; its complaint becomes the
/// error); spawn the master in the host in its own process group with stderr going to
/// `PREFIX/error.log`; record it as a companion of the lab; poll a connect for up to 5 s. On any
/// failure after the spawn nginx is stopped again and the error carries the tail of `error.log`.
pub fn start(lab: &Lab, host: &str, cfg: &NginxConfig) -> Result<NginxProcess> {
    cfg.validate()?;
    let lab_host = lab.host(host)?;
    let bin = find_binary()?;
    if !cfg.root.is_dir() {
        return Err(LabError::invalid(
            "nginx.root",
            format!(
                "{} is not a directory; create it and put the files to serve in it",
                cfg.root.display()
            ),
        ));
    }
    let tmp = cfg.tmp_dir();
    std::fs::create_dir_all(&tmp).kernel_context(|| format!("creating {}", tmp.display()))?;
    let conf = cfg.conf_path();
    std::fs::write(&conf, cfg.render()).kernel_context(|| format!("writing {}", conf.display()))?;

    let args = [
        "-p".as_ref(),
        cfg.prefix.as_os_str(),
        "-c".as_ref(),
        conf.as_os_str(),
    ];
    let test = lab_host
        .command(&bin)
        .arg("-t")
        .args(args)
        .args(["-e", "stderr"])
        .stdin(Stdio::null())
        .output()
        .kernel_context(|| format!("running {} -t in host {host}", bin.display()))?;
    if !test.status.success() {
        return Err(LabError::Nginx {
            host: host.to_string(),
            problem: format!(
                "`nginx -t` rejected {} ({}): {}",
                conf.display(),
                test.status,
                one_line(&String::from_utf8_lossy(&test.stderr))
            ),
        });
    }

    let log_path = cfg.error_log_path();
    let log = std::fs::File::create(&log_path)
        .kernel_context(|| format!("creating {}", log_path.display()))?;
    let child = {
        use std::os::unix::process::CommandExt;
        lab_host
            .command(&bin)
            .args(args)
            .args(["-e", "stderr"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            // Its own group: a terminal's Ctrl-C reaches tcplab (which tears the lab down in
            // order), not nginx directly, and the workers can be killed as one group.
            .process_group(0)
            .spawn()
            .kernel_context(|| format!("starting {} in host {host}", bin.display()))?
    };
    // The child is not reaped until `stop`, so /proc/PID exists (at worst as a zombie).
    let Some(process) = ProcessId::of(child.id()) else {
        let mut child = child;
        let _ = child.kill();
        let _ = child.wait();
        return Err(LabError::Nginx {
            host: host.to_string(),
            problem: format!("nginx vanished right after starting (PID {})", child.id()),
        });
    };
    let mut nginx = NginxProcess {
        child: Some(child),
        process,
        listen: cfg.listen,
        prefix: cfg.prefix.clone(),
        state: lab.state().clone(),
        lab: lab.name().to_string(),
        host: host.to_string(),
    };
    // From here on, dropping `nginx` stops it again, so every `?` cleans up.
    nginx.record()?;

    let listen = cfg.listen;
    let outcome = lab_host.run(move || wait_accepting(listen, process, Instant::now() + WAIT))?;
    match outcome {
        Ready::Accepting => Ok(nginx),
        Ready::Exited => {
            // End (and reap) it first so the exit status is known.
            let status = nginx.end();
            Err(nginx.failure(format!(
                "nginx exited before accepting on {listen} ({status})"
            )))
        }
        Ready::TimedOut => Err(nginx.failure(format!(
            "nginx did not accept connections on {listen} within {} s",
            WAIT.as_secs()
        ))),
    }
}

/// What the readiness poll saw.
enum Ready {
    Accepting,
    Exited,
    TimedOut,
}

/// Polls a TCP connect to `listen` (run inside the host) until it succeeds, nginx dies, or the
/// deadline passes. A connect is what clients will do, so success means the listening socket
/// exists in the host's namespace.
fn wait_accepting(listen: SocketAddr, process: ProcessId, deadline: Instant) -> Ready {
    loop {
        if TcpStream::connect_timeout(&listen, Duration::from_millis(200)).is_ok() {
            return Ready::Accepting;
        }
        if !process.is_alive() {
            return Ready::Exited;
        }
        if Instant::now() >= deadline {
            return Ready::TimedOut;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

impl NginxProcess {
    /// The master's PID (also its process group ID).
    pub fn pid(&self) -> u32 {
        self.process.pid
    }

    /// The address nginx listens on.
    pub fn listen(&self) -> SocketAddr {
        self.listen
    }

    /// The prefix directory (config, pid file, `error.log`, `tmp/`).
    pub fn prefix(&self) -> &Path {
        &self.prefix
    }

    /// The lab host it runs in.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// True while the master runs (it may have been ended by a lab teardown).
    pub fn is_running(&self) -> bool {
        self.child.is_some() && self.process.is_alive()
    }

    /// The last lines nginx wrote to `PREFIX/error.log`, for diagnosing a failed run.
    pub fn error_log_tail(&self) -> String {
        log_tail(&self.prefix.join("error.log"))
    }

    /// Stops nginx: QUIT to the master (graceful: finish in-flight requests), up to 5 s; then
    /// TERM (fast shutdown), up to 1 s; then KILL to its whole process group, which catches
    /// workers orphaned by a master killed elsewhere. Reaps the master and removes its registry
    /// record. Safe after a lab teardown has already ended it.
    pub fn stop(mut self) -> Result<()> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> Result<()> {
        self.end();
        self.unrecord()
    }

    /// Ends the master and its group, reaps the master, and describes how it ended.
    fn end(&mut self) -> String {
        let Some(mut child) = self.child.take() else {
            return "already reaped".into();
        };
        if let Some(pid) = rustix::process::Pid::from_raw(self.process.pid as i32) {
            // Signal only while the master is ours and unreaped: its PID (and so its group ID)
            // cannot have been reused by another process.
            for (signal, wait) in [
                (rustix::process::Signal::QUIT, WAIT),
                (rustix::process::Signal::TERM, Duration::from_secs(1)),
            ] {
                if !self.process.is_alive() {
                    break;
                }
                let _ = rustix::process::kill_process(pid, signal);
                let deadline = Instant::now() + wait;
                while self.process.is_alive() && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
            // The group is nginx's alone (process_group(0) at spawn) and the unreaped master
            // keeps its ID from being reused, so this reaches only nginx's processes: the master
            // if it ignored TERM, and workers a master killed elsewhere left behind.
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
        match child.wait() {
            Ok(status) => status.to_string(),
            Err(e) => format!("waiting for it failed: {e}"),
        }
    }

    /// Adds this process to the lab's companions, so every teardown path ends it.
    fn record(&mut self) -> Result<()> {
        let _lock = self.state.lock()?;
        let mut record = self.state.read(&self.lab)?.ok_or_else(|| LabError::Nginx {
            host: self.host.clone(),
            problem: format!(
                "lab '{}' is no longer registered in {}, so nginx could not be recorded with it; \
                 build the lab again",
                self.lab,
                self.state.root().display()
            ),
        })?;
        record.companions.push(Companion {
            role: COMPANION_ROLE.into(),
            host: self.host.clone(),
            process: self.process,
        });
        self.state.write(&record)
    }

    /// Removes this process from the lab's companions; nothing to do if the lab is gone.
    fn unrecord(&mut self) -> Result<()> {
        // Look before locking: locking creates the state directory, which must not reappear
        // after the lab (and perhaps its directory) went away.
        if self.state.read(&self.lab)?.is_none() {
            return Ok(());
        }
        let _lock = self.state.lock()?;
        let Some(mut record) = self.state.read(&self.lab)? else {
            return Ok(());
        };
        let before = record.companions.len();
        record.companions.retain(|c| c.process != self.process);
        if record.companions.len() != before {
            self.state.write(&record)?;
        }
        Ok(())
    }

    /// Stops nginx and builds the error for a failed start, with `error.log`'s tail.
    fn failure(&mut self, what: String) -> LabError {
        let stopped = self.shutdown();
        let mut problem = format!("{what}; error.log: {}", self.error_log_tail());
        if let Err(e) = stopped {
            let _ = write!(problem, "; stopping it also failed: {e}");
        }
        LabError::Nginx {
            host: self.host.clone(),
            problem,
        }
    }
}

impl Drop for NginxProcess {
    fn drop(&mut self) {
        if let Err(e) = self.shutdown() {
            eprintln!(
                "tcplab: stopping nginx (PID {}) in host {} of lab '{}' failed: {e}",
                self.process.pid, self.host, self.lab
            );
        }
    }
}

/// The last [`LOG_TAIL_LINES`] lines of a log on one line, or a note that it is empty/unreadable.
fn log_tail(path: &Path) -> String {
    let mut text = String::new();
    let read = std::fs::File::open(path).and_then(|mut f| {
        // The tail is all we show: skip most of a large log.
        let len = f.metadata()?.len();
        f.seek(SeekFrom::Start(len.saturating_sub(16 * 1024)))?;
        let mut bytes = Vec::new();
        f.read_to_end(&mut bytes)?;
        text = String::from_utf8_lossy(&bytes).into_owned();
        Ok(())
    });
    if let Err(e) = read {
        return format!("({} unreadable: {e})", path.display());
    }
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.is_empty() {
        return format!("({} is empty)", path.display());
    }
    one_line(&lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n"))
}

/// Multi-line tool output as one line, for one-line CLI errors.
fn one_line(text: &str) -> String {
    let joined = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ");
    if joined.is_empty() {
        "(no output)".into()
    } else {
        joined
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests fail loudly on unexpected errors")]

    use super::*;

    #[test]
    fn log_tail_keeps_the_last_lines_on_one_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("error.log");
        let text: String = (1..=30).map(|i| format!("line {i}\n\n")).collect();
        std::fs::write(&path, text).unwrap();
        let tail = log_tail(&path);
        assert!(tail.starts_with("line 11; line 12; "), "{tail}");
        assert!(tail.ends_with("; line 30"), "{tail}");

        std::fs::write(&path, "\n  \n").unwrap();
        assert!(log_tail(&path).ends_with("error.log is empty)"));
        assert!(log_tail(&dir.path().join("missing.log")).contains("unreadable"));
        assert_eq!(one_line(""), "(no output)");
    }
}
