//! One rootless session per user and state directory: a holder process owns a user namespace
//! (the user's UID mapped to 0) and a mount namespace with a tmpfs at `<state>/netns` for the
//! labs' namespace handles. Commands join it at start and leave it at the end; the last one to
//! leave with no lab registered ends the holder, so nothing of the session outlives its labs.
//!
//! Files in the state directory (created 0700, refused if another user owns it):
//! - `session.json`: the holder's PID and start time (as the registry records owners);
//! - `session.lock`: exclusive flock around starting, joining and ending the holder;
//! - `session.users`: a shared flock held by every process in the session, so the holder is
//!   only ended when no command is using it;
//! - `session.log`: the holder's stderr, quoted when it fails to start.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use rustix::fs::FlockOperation;
use rustix::thread::{LinkNameSpaceType, UnshareFlags};
use serde::{Deserialize, Serialize};

use crate::error::{KernelContext, LabError, Result};
use crate::privileges::{NETNS_DIR_ENV, in_user_namespace, user_state_dir};
use crate::state::{ProcessId, StateDir};

/// What a command may do about the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Join {
    /// Start one if none is running (commands that build labs).
    Create,
    /// Join a running one only (commands that use or remove labs): with none running there is
    /// no rootless lab to reach.
    Existing,
}

/// The hidden subcommand the holder runs as (`tcplab lab hold-session`).
pub const HOLD_ARGS: [&str; 2] = ["lab", "hold-session"];
/// How long a new holder may take to report its namespaces ready.
const HOLDER_START: Duration = Duration::from_secs(10);
/// The line a holder prints once its namespaces are ready.
const READY: &[u8] = b"ready\n";

/// A process's membership of a session; [`Session::leave`] ends it.
#[derive(Debug)]
struct Session {
    state: StateDir,
    holder: ProcessId,
    users: File,
    /// The holder, when this process started it: reaped once ended, so no zombie is left.
    started: Option<std::process::Child>,
}

/// `session.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Record {
    holder: ProcessId,
}

/// This process's membership, for [`leave`] (at the end of `main`, or from the signal
/// handler that tears labs down before exiting).
static CURRENT: Mutex<Option<Session>> = Mutex::new(None);

/// Joins this user's session (starting one with [`Join::Create`]) for the rest of the process;
/// [`leave`] ends the membership. False when this process already runs in a session (a lab's
/// companion inherits it) or, with [`Join::Existing`], when none is running. Must be called
/// while the process is single-threaded.
pub fn enter(join: Join) -> Result<bool> {
    let session = join_session(join)?;
    let joined = session.is_some();
    if let Some(session) = session {
        *CURRENT.lock().unwrap_or_else(|e| e.into_inner()) = Some(session);
    }
    Ok(joined)
}

/// Leaves the session this process joined, if any ([`Session::leave`]).
pub fn leave() -> Result<()> {
    let session = CURRENT.lock().unwrap_or_else(|e| e.into_inner()).take();
    match session {
        Some(session) => session.leave(),
        None => Ok(()),
    }
}

fn join_session(join: Join) -> Result<Option<Session>> {
    if in_user_namespace() {
        return Ok(None);
    }
    let root = user_state_dir();
    make_private_dir(&root)?;
    let state = StateDir::at(&root);
    let _lock = lock_file(&root.join("session.lock"), FlockOperation::LockExclusive)?;
    // A holder found alive may be killed before it is joined: then look again, once.
    match join_once(join, &state)? {
        Joined::Ended => match join_once(join, &state)? {
            Joined::Ended => Err(LabError::Rootless {
                problem: "the session holder ended twice while this process joined it; run \
                          the command again"
                    .into(),
            }),
            Joined::Session(session) => Ok(session),
        },
        Joined::Session(session) => Ok(session),
    }
}

/// One attempt at joining.
enum Joined {
    /// Joined (`None`: none running, and not to be started).
    Session(Option<Session>),
    /// The holder found ended before it could be joined; its record is gone.
    Ended,
}

fn join_once(join: Join, state: &StateDir) -> Result<Joined> {
    let root = state.root();
    let (holder, started) = match live_holder(state)? {
        Some(holder) => (holder, None),
        None if join == Join::Existing => return Ok(Joined::Session(None)),
        None => {
            let (holder, child) = start_holder(root)?;
            (holder, Some(child))
        }
    };
    let users = lock_file(&root.join("session.users"), FlockOperation::LockShared)?;
    if let Err(e) = join_namespaces(&holder) {
        let ended = !holder.is_alive();
        if !ended {
            crate::lifecycle::end_process(&holder);
        }
        let _ = std::fs::remove_file(root.join("session.json"));
        return if ended { Ok(Joined::Ended) } else { Err(e) };
    }
    // Safety: set_var is sound while no other thread reads the environment; join_namespaces
    // has just succeeded, which the kernel allows only in a single-threaded process. The state
    // directory is pinned too: inside the session the user's UID reads as 0, so the default
    // (`/tmp/tcplab-<uid>`) would name another directory from here on.
    unsafe {
        std::env::set_var(NETNS_DIR_ENV, root.join("netns"));
        std::env::set_var("TCPLAB_STATE_DIR", root);
    }
    Ok(Joined::Session(Some(Session {
        state: state.clone(),
        holder,
        users,
        started,
    })))
}

impl Session {
    /// Leaves the session; the last process to leave ends the holder when no lab is registered
    /// (a persistent lab keeps it).
    fn leave(self) -> Result<()> {
        let root = self.state.root().to_path_buf();
        let _lock = lock_file(&root.join("session.lock"), FlockOperation::LockExclusive)?;
        drop(self.users);
        let users = open_lock_file(&root.join("session.users"))?;
        let alone = rustix::fs::flock(&users, FlockOperation::NonBlockingLockExclusive).is_ok();
        if alone && self.state.list()?.is_empty() {
            crate::lifecycle::end_process(&self.holder);
            let _ = std::fs::remove_file(root.join("session.json"));
            if let Some(mut child) = self.started {
                let _ = child.wait();
            }
        }
        Ok(())
    }
}

/// The holder's life (`tcplab lab hold-session`): make the namespaces, mount the handle tmpfs,
/// say ready, then wait to be ended. Must run single-threaded, as a fresh process.
pub fn hold() -> Result<std::convert::Infallible> {
    let root = user_state_dir();
    let netns = root.join("netns");
    std::fs::create_dir_all(&netns).kernel_context(|| format!("creating {}", netns.display()))?;
    let (uid, gid) = (rustix::process::getuid(), rustix::process::getgid());
    // Safety: the holder is single-threaded (a fresh process that has spawned nothing), and
    // unsharing the user and mount namespaces invalidates no file descriptor.
    unsafe { rustix::thread::unshare_unsafe(UnshareFlags::NEWUSER | UnshareFlags::NEWNS) }
        .map_err(io::Error::from)
        .kernel_context(|| "creating a user namespace".to_string())?;
    write_proc("/proc/self/setgroups", "deny")?;
    write_proc("/proc/self/uid_map", &format!("0 {} 1", uid.as_raw()))?;
    write_proc("/proc/self/gid_map", &format!("0 {} 1", gid.as_raw()))?;
    rustix::mount::mount(
        "tcplab-netns",
        &netns,
        "tmpfs",
        rustix::mount::MountFlags::NOSUID
            | rustix::mount::MountFlags::NODEV
            | rustix::mount::MountFlags::NOEXEC,
        c"mode=0700,size=1m",
    )
    .map_err(io::Error::from)
    .kernel_context(|| format!("mounting a tmpfs on {}", netns.display()))?;
    let _ = std::env::set_current_dir("/");
    // The holder records itself before saying ready: a starter killed at any moment leaves
    // either no holder or a recorded one, which the next command uses or ends.
    let me = ProcessId::current().ok_or_else(|| LabError::Rootless {
        problem: "the session holder cannot read its own /proc entry".into(),
    })?;
    write_record(&root, &Record { holder: me })?;
    // Safety: SIG_IGN for SIGHUP and SIGINT only: the holder outlives the terminal and Ctrl-C
    // of the command that started it; `Session::leave` and `lab gc` end it with SIGTERM.
    unsafe {
        libc::signal(libc::SIGHUP, libc::SIG_IGN);
        libc::signal(libc::SIGINT, libc::SIG_IGN);
    }
    let mut out = io::stdout().lock();
    if let Err(e) = out.write_all(READY).and_then(|()| out.flush()) {
        // The starter died before reading (EPIPE): nobody joined, so the session ends here.
        let _ = std::fs::remove_file(root.join("session.json"));
        return Err(LabError::kernel("reporting the session ready", e));
    }
    drop(out);
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

/// Drops the record of a session whose holder has ended (`lab gc` outside a session).
pub fn forget_ended(state: &StateDir) -> Result<()> {
    let root = state.root();
    let _lock = lock_file(&root.join("session.lock"), FlockOperation::LockExclusive)?;
    if live_holder(state)?.is_none() {
        match std::fs::remove_file(root.join("session.json")) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => {
                return Err(LabError::kernel("removing session.json", e));
            }
            _ => {}
        }
    }
    Ok(())
}

/// The holder recorded in `session.json`, if that very process still runs as this user.
fn live_holder(state: &StateDir) -> Result<Option<ProcessId>> {
    let path = state.root().join("session.json");
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(LabError::kernel(format!("reading {}", path.display()), e)),
    };
    // A damaged record names no live holder: a new session replaces it.
    let Ok(record) = serde_json::from_slice::<Record>(&bytes) else {
        return Ok(None);
    };
    let mine = std::fs::metadata(format!("/proc/{}", record.holder.pid))
        .is_ok_and(|m| m.uid() == rustix::process::getuid().as_raw());
    Ok((mine && record.holder.is_alive()).then_some(record.holder))
}

fn write_record(root: &Path, record: &Record) -> Result<()> {
    let path = root.join("session.json");
    let tmp = root.join("session.json.tmp");
    let text = serde_json::to_vec(record).map_err(|e| LabError::Registry {
        path: path.clone(),
        message: e.to_string(),
    })?;
    std::fs::write(&tmp, text)
        .and_then(|()| std::fs::rename(&tmp, &path))
        .kernel_context(|| format!("writing {}", path.display()))
}

/// Starts the holder and waits (without a thread: joining needs a single-threaded process)
/// for its ready line.
fn start_holder(root: &Path) -> Result<(ProcessId, std::process::Child)> {
    use std::os::unix::process::CommandExt;
    let program = crate::emulation::companion_program().ok_or_else(|| {
        LabError::invalid(
            "rootless",
            "a rootless lab needs the tcplab binary to hold its session; build labs as root \
             from a library, or through the tcplab command",
        )
    })?;
    let log_path = root.join("session.log");
    let log =
        File::create(&log_path).kernel_context(|| format!("creating {}", log_path.display()))?;
    let mut child = std::process::Command::new(program)
        .args(HOLD_ARGS)
        .env("TCPLAB_STATE_DIR", root)
        .env_remove(NETNS_DIR_ENV)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(log)
        .process_group(0)
        .spawn()
        .kernel_context(|| format!("starting the session holder ({})", program.display()))?;
    let ready = child
        .stdout
        .take()
        .is_some_and(|out| wait_ready(out, HOLDER_START));
    let process = ready.then(|| ProcessId::of(child.id())).flatten();
    match process {
        Some(p) => Ok((p, child)),
        None => {
            let _ = child.kill();
            let _ = child.wait();
            let log = std::fs::read_to_string(&log_path).unwrap_or_default();
            let facts = crate::privileges::rootless_facts();
            let why = if facts.allowed {
                log.trim().replace('\n', "; ")
            } else {
                facts.why_not.join("; ")
            };
            Err(LabError::Rootless {
                problem: format!("the session holder did not start: {why}"),
            })
        }
    }
}

/// Reads the holder's stdout until the ready line, EOF or the deadline.
fn wait_ready(mut out: std::process::ChildStdout, within: Duration) -> bool {
    let deadline = std::time::Instant::now() + within;
    let mut got = Vec::new();
    while got.len() < READY.len() {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return false;
        }
        let timeout = rustix::time::Timespec::try_from(left).ok();
        let mut fds = [rustix::event::PollFd::new(
            &out,
            rustix::event::PollFlags::IN,
        )];
        match rustix::event::poll(&mut fds, timeout.as_ref()) {
            Ok(0) | Err(rustix::io::Errno::INTR) => continue,
            Ok(_) => {}
            Err(_) => return false,
        }
        let mut buf = [0u8; 16];
        match out.read(&mut buf) {
            Ok(0) | Err(_) => return false,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    got.starts_with(READY)
}

/// setns(2) into the holder's user namespace, then its mount namespace; the working directory
/// is restored (joining a mount namespace moves it to the root).
fn join_namespaces(holder: &ProcessId) -> Result<()> {
    let cwd = std::env::current_dir().ok();
    let open = |kind: &str| {
        let path = format!("/proc/{}/ns/{kind}", holder.pid);
        File::open(&path).kernel_context(|| format!("opening {path}"))
    };
    let (user, mnt) = (open("user")?, open("mnt")?);
    if !holder.is_alive() {
        return Err(LabError::Rootless {
            problem: "the session holder ended while this process joined it; run the command again"
                .into(),
        });
    }
    rustix::thread::move_into_link_name_space(user.as_fd(), Some(LinkNameSpaceType::User))
        .map_err(io::Error::from)
        .kernel_context(|| "joining the session's user namespace".to_string())?;
    rustix::thread::move_into_link_name_space(mnt.as_fd(), Some(LinkNameSpaceType::Mount))
        .map_err(io::Error::from)
        .kernel_context(|| "joining the session's mount namespace".to_string())?;
    if let Some(cwd) = cwd {
        std::env::set_current_dir(&cwd)
            .kernel_context(|| format!("returning to {}", cwd.display()))?;
    }
    Ok(())
}

/// Creates the state directory 0700 if needed and refuses one this user does not own (another
/// user could otherwise plant records or a holder there).
fn make_private_dir(root: &Path) -> Result<()> {
    match std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(root)
    {
        Ok(()) => {}
        Err(e) => return Err(LabError::kernel(format!("creating {}", root.display()), e)),
    }
    let meta =
        std::fs::symlink_metadata(root).kernel_context(|| format!("reading {}", root.display()))?;
    let me = rustix::process::getuid().as_raw();
    if !meta.is_dir() || meta.uid() != me || meta.mode() & 0o022 != 0 {
        return Err(LabError::Rootless {
            problem: format!(
                "{} must be a directory owned by UID {me} and writable by it alone; remove it \
                 or set TCPLAB_STATE_DIR to one",
                root.display()
            ),
        });
    }
    Ok(())
}

fn open_lock_file(path: &Path) -> Result<File> {
    File::options()
        .create(true)
        .append(true)
        .open(path)
        .kernel_context(|| format!("opening {}", path.display()))
}

fn lock_file(path: &Path, how: FlockOperation) -> Result<File> {
    let file = open_lock_file(path)?;
    rustix::fs::flock(&file, how)
        .map_err(io::Error::from)
        .kernel_context(|| format!("locking {}", path.display()))?;
    Ok(file)
}

fn write_proc(path: &str, text: &str) -> Result<()> {
    std::fs::write(path, text).kernel_context(|| format!("writing '{text}' to {path}"))
}
