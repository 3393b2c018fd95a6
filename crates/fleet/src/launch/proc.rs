//! The child processes a launcher runs (ssh, srun): short commands with a deadline, long-lived
//! ones that die with the coordinator, their stderr read to the end, and stopping them by PID.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStderr, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Lines of a child's stderr kept for error messages.
const TAIL_LINES: usize = 20;
/// How often a deadline wait looks at a child.
const POLL: Duration = Duration::from_millis(20);

/// The last lines a child wrote to stderr, kept while a thread reads the rest.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tail(Arc<Mutex<VecDeque<String>>>);

impl Tail {
    fn push(&self, line: String) {
        let mut q = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if q.len() == TAIL_LINES {
            q.pop_front();
        }
        q.push_back(line);
    }

    /// The lines kept, oldest first, joined for a message (`(nothing)` when none).
    pub(crate) fn text(&self) -> String {
        let q = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if q.is_empty() {
            "(nothing)".into()
        } else {
            q.iter().cloned().collect::<Vec<_>>().join("\n    ")
        }
    }
}

/// Reads `stderr` on a thread to its end: every line goes into the tail and, while anyone
/// listens, down the channel (a pipe nobody reads would stop the child once it fills).
pub(crate) fn drain(stderr: ChildStderr, name: &str) -> (mpsc::Receiver<String>, Tail) {
    let (tx, rx) = mpsc::channel();
    let tail = Tail::default();
    let keep = tail.clone();
    let spawned = std::thread::Builder::new()
        .name(format!("tcplab-stderr-{name}"))
        .spawn(move || {
            let mut r = BufReader::new(stderr);
            let mut buf = Vec::new();
            // Bounded by the child: each read returns at its EOF at the latest.
            loop {
                buf.clear();
                match r.by_ref().take(64 << 10).read_until(b'\n', &mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        let line = String::from_utf8_lossy(&buf).trim_end().to_string();
                        keep.push(line.clone());
                        let _ = tx.send(line);
                    }
                }
            }
        });
    if let Err(e) = spawned {
        tail.push(format!("(could not read this stderr: {e})"));
    }
    (rx, tail)
}

/// The address and protocol version in an agent's `tcplab serve: listening on ADDR:PORT
/// (protocol N)` line, wherever it starts in `line` (srun puts `N: ` before it).
pub(crate) fn parse_listening(line: &str) -> Option<(SocketAddr, u32)> {
    let rest = line.split_once("tcplab serve: listening on ")?.1;
    let (addr, proto) = rest.split_once(" (protocol ")?;
    let proto = proto.trim_end().strip_suffix(')')?.parse().ok()?;
    Some((addr.trim().parse().ok()?, proto))
}

/// Asks the kernel to send SIGTERM to the child when the thread that spawned it ends (the
/// coordinator's death, even by SIGKILL, ends its ssh and srun children, and with them the
/// sessions that keep remote agents alive).
pub(crate) fn die_with_parent(cmd: &mut Command) {
    let parent = std::process::id();
    // Safety: the closure runs in the forked child before exec and calls only prctl(2),
    // getppid(2) and _exit(2), which are async-signal-safe; it touches no memory the parent
    // shares and allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent may have died between fork and prctl: then no signal would come.
            if libc::getppid() as u32 != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
}

/// A thread that spawns the long-lived children. PR_SET_PDEATHSIG fires when the spawning
/// *thread* ends, not the process, so children that must outlive a launch's worker threads are
/// spawned here, on a thread that lives as long as the fleet. It is created by the thread that
/// launches, so it shares that thread's network namespace.
#[derive(Debug)]
pub(crate) struct Spawner {
    tx: Option<mpsc::Sender<(Command, mpsc::Sender<std::io::Result<Child>>)>>,
    thread: Option<JoinHandle<()>>,
}

impl Spawner {
    pub(crate) fn new() -> std::io::Result<Self> {
        let (tx, rx) = mpsc::channel::<(Command, mpsc::Sender<std::io::Result<Child>>)>();
        let thread = std::thread::Builder::new()
            .name("tcplab-spawner".into())
            .spawn(move || {
                // Ends when the fleet drops the sender.
                while let Ok((mut cmd, reply)) = rx.recv() {
                    die_with_parent(&mut cmd);
                    let _ = reply.send(cmd.spawn());
                }
            })?;
        Ok(Self {
            tx: Some(tx),
            thread: Some(thread),
        })
    }

    /// Spawns `cmd` on the spawner thread, with PR_SET_PDEATHSIG set.
    pub(crate) fn spawn(&self, cmd: Command) -> std::io::Result<Child> {
        let gone = || std::io::Error::other("the spawner thread has ended");
        let (reply, answer) = mpsc::channel();
        self.tx
            .as_ref()
            .ok_or_else(gone)?
            .send((cmd, reply))
            .map_err(|_| gone())?;
        answer.recv().map_err(|_| gone())?
    }
}

impl Drop for Spawner {
    fn drop(&mut self) {
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// What a short command did.
#[derive(Debug)]
pub(crate) struct Ran {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `cmd` with `input` on its stdin (a file or bytes), waits at most `timeout` (then kills
/// it by its PID), and returns its output. The error is the reason it did not finish.
pub(crate) fn run(mut cmd: Command, input: Input, timeout: Duration) -> Result<Ran, String> {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let bytes = match input {
        Input::Null => {
            cmd.stdin(Stdio::null());
            None
        }
        Input::File(f) => {
            cmd.stdin(Stdio::from(f));
            None
        }
        Input::Bytes(b) => {
            cmd.stdin(Stdio::piped());
            Some(b)
        }
    };
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("could not start it: {e}"))?;
    if let (Some(b), Some(mut stdin)) = (bytes, child.stdin.take()) {
        // Small inputs (a key): the pipe takes them without a reader thread.
        let _ = stdin.write_all(&b);
    }
    let read = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = Vec::new();
            let _ = r.by_ref().take(1 << 20).read_to_end(&mut s);
            String::from_utf8_lossy(&s).into_owned()
        })
    };
    let out = child.stdout.take().map(|o| read(Box::new(o)));
    let err = child.stderr.take().map(|e| read(Box::new(e)));
    let status = wait_for(&mut child, timeout);
    let status = match status {
        Some(s) => s,
        None => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "it did not finish within {timeout:?} and was killed"
            ));
        }
    };
    let join = |h: Option<JoinHandle<String>>| h.and_then(|h| h.join().ok()).unwrap_or_default();
    Ok(Ran {
        status,
        stdout: join(out),
        stderr: join(err),
    })
}

/// A short command's stdin.
#[derive(Debug)]
pub(crate) enum Input {
    Null,
    File(std::fs::File),
    Bytes(Vec<u8>),
}

/// Waits at most `timeout` for `child` to exit.
pub(crate) fn wait_for(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(s)) => return Some(s),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(POLL),
            _ => return None,
        }
    }
}

/// Stops a long-lived child whose stdin was just closed: waits `grace` for it to exit on its
/// own, then SIGTERM, then SIGKILL, each to its PID only. Returns a problem, if any.
pub(crate) fn stop(child: &mut Child, grace: Duration, what: &str) -> Option<String> {
    if wait_for(child, grace).is_some() {
        return None;
    }
    if let Ok(pid) = libc::pid_t::try_from(child.id()) {
        // Safety: kill(2) on the PID of our own child, which we have not reaped (try_wait saw
        // it running), so the PID cannot have been reused.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
    }
    if wait_for(child, Duration::from_secs(2)).is_some() {
        return None;
    }
    let _ = child.kill();
    let _ = child.wait();
    Some(format!(
        "{what} did not exit within {grace:?} of its stdin closing, nor on SIGTERM; killed it"
    ))
}

/// Quotes `s` for a POSIX shell.
pub(crate) fn sh_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-./:=@,+".contains(&b))
    {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listening_lines_are_read_with_or_without_a_label() {
        let (a, p) = parse_listening("tcplab serve: listening on 198.18.0.2:5301 (protocol 3)")
            .expect("line");
        assert_eq!((a.to_string().as_str(), p), ("198.18.0.2:5301", 3));
        let (a, _) = parse_listening("1: tcplab serve: listening on [fd00::2]:40000 (protocol 3)")
            .expect("labelled");
        assert_eq!(a.port(), 40000);
        assert!(parse_listening("tcplab serve: error: --keys").is_none());
        assert!(parse_listening("tcplab serve: listening on nowhere (protocol 3)").is_none());
    }

    #[test]
    fn shell_quoting_keeps_words_whole() {
        assert_eq!(sh_quote("a/b-c.d"), "a/b-c.d");
        assert_eq!(sh_quote("it's"), r"'it'\''s'");
        assert_eq!(sh_quote("a b"), "'a b'");
        assert_eq!(sh_quote(""), "''");
        // Brackets are a glob: an IPv6 listen address is quoted.
        assert_eq!(sh_quote("[fd00::2]:5301"), "'[fd00::2]:5301'");
    }

    #[test]
    fn a_short_command_past_its_deadline_is_killed() {
        let mut c = Command::new("sleep");
        c.arg("5");
        let t = Instant::now();
        let e = run(c, Input::Null, Duration::from_millis(200)).expect_err("killed");
        assert!(
            e.contains("killed") && t.elapsed() < Duration::from_secs(3),
            "{e}"
        );
        let mut c = Command::new("sh");
        c.args(["-c", "cat; echo err >&2"]);
        let r = run(c, Input::Bytes(b"in".to_vec()), Duration::from_secs(5)).expect("runs");
        assert_eq!((r.stdout.as_str(), r.stderr.trim()), ("in", "err"));
    }

    #[test]
    fn the_tail_keeps_the_last_lines() {
        let mut c = Command::new("sh");
        c.args(["-c", "for i in $(seq 1 30); do echo line$i >&2; done"]);
        c.stderr(Stdio::piped());
        let mut child = c.spawn().expect("sh");
        let (rx, tail) = drain(child.stderr.take().expect("stderr"), "t");
        let _ = child.wait();
        let lines: Vec<String> = rx.iter().collect();
        assert_eq!(lines.len(), 30);
        let text = tail.text();
        assert!(
            text.starts_with("line11") && text.ends_with("line30"),
            "{text}"
        );
    }
}
