//! What makes labs go away when they should: the signal handler that tears down this process's
//! labs on Ctrl-C/SIGTERM/SIGHUP, ending companion processes by PID, and `gc` for labs whose owner
//! died without cleaning up (SIGKILL, power cut of the process, a bug).

use std::sync::{Mutex, Once};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::error::Result;
use crate::lab::teardown_locked;
use crate::netns;
use crate::spec::NETNS_PREFIX;
use crate::state::{ProcessId, StateDir};
use crate::sysctl_apply;

/// Labs owned by this process, for the signal handler.
static LIVE: Mutex<Vec<(StateDir, String)>> = Mutex::new(Vec::new());
static INSTALL: Once = Once::new();

pub(crate) fn register(state: &StateDir, name: &str) {
    if let Ok(mut live) = LIVE.lock() {
        live.push((state.clone(), name.to_string()));
    }
}

pub(crate) fn unregister(name: &str) {
    if let Ok(mut live) = LIVE.lock() {
        live.retain(|(_, n)| n != name);
    }
}

/// Installs (once) a handler thread for SIGINT, SIGTERM and SIGHUP that tears down every lab this
/// process owns, then exits with 128 + the signal number. Call it before building owned labs in a
/// program that may be interrupted.
pub fn teardown_on_signals() -> std::io::Result<()> {
    let mut result = Ok(());
    INSTALL.call_once(|| {
        use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
        match signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) {
            Ok(mut signals) => {
                let spawned = std::thread::Builder::new()
                    .name("tcplab-signals".into())
                    .spawn(move || {
                        if let Some(sig) = signals.forever().next() {
                            teardown_all_live();
                            if let Err(e) = crate::rootless::session::leave() {
                                eprintln!("tcplab: leaving the rootless session failed: {e}");
                            }
                            std::process::exit(128 + sig);
                        }
                    });
                if let Err(e) = spawned {
                    result = Err(e);
                }
            }
            Err(e) => result = Err(e),
        }
    });
    result
}

/// Tears down every lab registered as live in this process.
pub fn teardown_all_live() {
    let live: Vec<(StateDir, String)> = LIVE.lock().map(|l| l.clone()).unwrap_or_default();
    for (state, name) in live {
        if let Err(e) = crate::lab::teardown(&state, &name) {
            eprintln!("tcplab: tearing down lab '{name}' failed: {e}");
        }
    }
}

/// Ends a companion process: SIGTERM, then SIGKILL if it has not gone within a second. Only the
/// exact process recorded (PID and start time) is signalled: through a pidfd, which names that
/// process even if its PID is reused, and whose readiness says the moment it has exited (no
/// polling interval added to every teardown).
pub(crate) fn end_process(process: &ProcessId) {
    use rustix::process::{PidfdFlags, Signal, pidfd_open, pidfd_send_signal};
    let Some(pid) = rustix::process::Pid::from_raw(process.pid as i32) else {
        return;
    };
    let pidfd = match pidfd_open(pid, PidfdFlags::empty()) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::SRCH) => return,
        Err(_) => return end_process_by_pid(process, pid),
    };
    // Opened first, checked second: the pidfd is then known to name the recorded process.
    if !process.is_alive() {
        return;
    }
    let _ = pidfd_send_signal(&pidfd, Signal::TERM);
    if !exits_within(&pidfd, Duration::from_secs(1)) {
        let _ = pidfd_send_signal(&pidfd, Signal::KILL);
        exits_within(&pidfd, Duration::from_secs(1));
    }
}

/// Waits until the process behind `pidfd` has exited (the pidfd turns readable), at most
/// `within`; true if it did.
fn exits_within(pidfd: &std::os::fd::OwnedFd, within: Duration) -> bool {
    use rustix::event::{PollFd, PollFlags, poll};
    let deadline = Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let timeout = rustix::time::Timespec::try_from(left).ok();
        let mut fds = [PollFd::new(pidfd, PollFlags::IN)];
        match poll(&mut fds, timeout.as_ref()) {
            Ok(0) => return false,
            Ok(_) => return true,
            Err(rustix::io::Errno::INTR) if !left.is_zero() => continue,
            Err(_) => return false,
        }
    }
}

/// [`end_process`] for kernels without pidfds (before 5.3): signal by PID, poll its state.
fn end_process_by_pid(process: &ProcessId, pid: rustix::process::Pid) {
    if !process.is_alive() {
        return;
    }
    let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
    let deadline = Instant::now() + Duration::from_secs(1);
    while process.is_alive() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    if process.is_alive() {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
    }
}

/// What `gc` removed.
#[derive(Debug, Default, Serialize)]
pub struct GcReport {
    /// Labs removed because their owner died (or all, with `--all`).
    pub labs: Vec<String>,
    /// `tcplab-*` namespaces removed that no registered lab claimed (`--all` only).
    pub orphan_namespaces: Vec<String>,
    /// Host-global sysctls restored to their journaled values.
    pub restored_sysctls: Vec<String>,
}

/// Removes every lab whose owner process is dead (with `all`: every lab, and every `tcplab-*`
/// namespace no lab claims; for an unprivileged user outside a session: every lab, since
/// their namespaces ended with it), and restores journaled host sysctls no live lab holds.
pub fn gc(state: &StateDir, all: bool) -> Result<GcReport> {
    let lock = state.lock()?;
    let mut report = GcReport::default();
    // An unprivileged user outside a session has none running: every lab of theirs went with
    // the session that held its namespaces, and only records and companions remain.
    let session_ended = crate::privileges::outside_session();
    for record in state.list()? {
        let dead_owner = record.owner.is_some_and(|o| !o.is_alive());
        if all || dead_owner || session_ended {
            teardown_locked(state, &lock, &record.spec.name)?;
            report.labs.push(record.spec.name);
        }
    }
    if all {
        // Only namespaces no state directory's live record claims: another user's (or test's)
        // labs under another TCPLAB_STATE_DIR are left alone.
        for ns in netns::list() {
            if ns.starts_with(NETNS_PREFIX) && !crate::state::is_claimed(&ns) {
                netns::delete(&ns)?;
                crate::state::unclaim(&ns);
                report.orphan_namespaces.push(ns);
            }
        }
    }
    if session_ended {
        crate::rootless::session::forget_ended(state)?;
    }
    state.remove_stale_temporaries(&lock);
    report.restored_sysctls = sysctl_apply::release_orphaned(state, &lock)?;
    Ok(report)
}
