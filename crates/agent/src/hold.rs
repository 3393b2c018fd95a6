//! Sysctls an agent holds for a client (`Ask::Sysctl`, `--allow-sysctl`): which keys may be
//! asked for, the lease that keeps them (pure: every decision takes `now`, so it is tested in
//! virtual time), and [`Holds`], the agent's table of held keys with its journal.
//!
//! The journal is why a crash cannot leave a host changed: the old values are written to it
//! and fsynced BEFORE anything changes, rewritten as holds come and go, and removed when
//! nothing is held. An agent that starts and finds one restores it first. Values are read and
//! written in the calling thread's network namespace (procfs resolves /proc/sys/net against
//! it), which is the agent's: its connection threads inherit the serve thread's namespace.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use tcplab_load::error::{LoadError, Result};

/// Most keys one ask may set (with [`MAX_VALUE`], an ask stays well inside the 64 KiB an agent
/// takes from a client in one message).
pub const MAX_KEYS: usize = 32;
/// Longest value accepted, bytes.
pub const MAX_VALUE: usize = 512;
/// Shortest lease: a client renews every third of it, so shorter would be all renewing.
pub const MIN_LEASE: Duration = Duration::from_millis(100);
/// Longest lease: a coordinator that vanished leaves the host changed at most this long.
pub const MAX_LEASE: Duration = Duration::from_secs(3600);
/// Where journals go by default (tmpfs: emptied at boot, like the values it records).
pub const JOURNAL_DIR: &str = "/run/tcplab";

/// Checks one key: dotted, under `net.` (the agent's own network namespace; nothing
/// machine-wide), plain characters only, so it cannot name a path outside /proc/sys/net.
pub fn check_key(key: &str) -> std::result::Result<(), String> {
    let plain = key
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if !plain || key.contains("..") || key.ends_with('.') || key.len() > 256 {
        return Err(format!(
            "{key:?} is not a sysctl key: write it dotted, like net.ipv4.tcp_rmem (letters, \
             digits, _ - . only)"
        ));
    }
    if !key.starts_with("net.") {
        return Err(format!(
            "sysctl key {key:?} is outside net.: an agent changes only net.* keys (those of its \
             own network namespace); set others on the host yourself"
        ));
    }
    Ok(())
}

/// Checks one value: one line of printable text, as `sysctl -w` would take it.
pub fn check_value(key: &str, value: &str) -> std::result::Result<(), String> {
    let printable = value
        .chars()
        .all(|c| c == ' ' || c == '\t' || c.is_ascii_graphic());
    if value.trim().is_empty() || !printable || value.len() > MAX_VALUE {
        return Err(format!(
            "the value for {key} must be one line of printable ASCII, 1-{MAX_VALUE} bytes \
             (like \"4096 131072 6291456\"), without newlines"
        ));
    }
    Ok(())
}

/// Checks a whole `Ask::Sysctl`; returns its lease.
pub fn check_ask(set: &[(String, String)], lease_ms: u64) -> std::result::Result<Duration, String> {
    if set.is_empty() || set.len() > MAX_KEYS {
        return Err(format!("set: give 1-{MAX_KEYS} (key, value) pairs"));
    }
    for (i, (key, value)) in set.iter().enumerate() {
        check_key(key)?;
        check_value(key, value)?;
        if set[..i].iter().any(|(k, _)| k == key) {
            return Err(format!("set: {key} is given twice; give each key once"));
        }
    }
    let lease = Duration::from_millis(lease_ms);
    if !(MIN_LEASE..=MAX_LEASE).contains(&lease) {
        return Err(format!(
            "lease_ms {lease_ms} is out of range: give {}-{} ms (the client renews every third \
             of it)",
            MIN_LEASE.as_millis(),
            MAX_LEASE.as_millis()
        ));
    }
    Ok(lease)
}

/// The lease on held values: it ends `length` after the last renewal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    length: Duration,
    deadline: Instant,
}

/// What happened on a held connection since the last look.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// Nothing arrived within the wait.
    Quiet,
    /// The client renewed.
    Renew,
    /// The client asked for the values back.
    Release,
    /// The client sent something else (named).
    Unexpected(&'static str),
    /// The connection closed or failed (why).
    Closed(String),
    /// The agent is stopping.
    Stopping,
}

/// What to do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Keep holding; look again after the wait.
    Hold,
    /// The client released: restore and answer `Released`.
    Release,
    /// Restore on the agent's own (the reason, for the log).
    Restore(String),
}

impl Lease {
    /// A lease of `length` starting `now`.
    pub fn new(now: Instant, length: Duration) -> Self {
        Self {
            length,
            deadline: now + length,
        }
    }

    /// True once the lease has run out.
    pub fn expired(&self, now: Instant) -> bool {
        now >= self.deadline
    }

    /// How long to wait for the next frame: until the lease ends, but at most `poll` (so the
    /// stop flag is seen).
    pub fn wait(&self, now: Instant, poll: Duration) -> Duration {
        self.deadline.saturating_duration_since(now).min(poll)
    }

    /// Decides what `event`, seen at `now`, means for the hold. A renewal that arrives after
    /// the lease ran out comes too late: the values are restored anyway.
    pub fn step(&mut self, now: Instant, event: Event) -> Step {
        if self.expired(now) {
            return Step::Restore(format!(
                "no Renew within the {} ms lease",
                self.length.as_millis()
            ));
        }
        match event {
            Event::Quiet => Step::Hold,
            Event::Renew => {
                self.deadline = now + self.length;
                Step::Hold
            }
            Event::Release => Step::Release,
            Event::Unexpected(kind) => {
                Step::Restore(format!("the client sent {kind} while holding sysctls"))
            }
            Event::Closed(why) => Step::Restore(format!("the connection ended ({why})")),
            Event::Stopping => Step::Restore("the agent is stopping".into()),
        }
    }
}

/// What the journal holds: the original value of every held key.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Journal {
    /// Format version.
    tcplab_journal: u32,
    /// The agent that wrote it.
    pid: u32,
    /// (key, original value).
    held: Vec<(String, String)>,
}

/// A held key: its original value and the hold it belongs to.
#[derive(Debug, Clone)]
struct Held {
    original: String,
    owner: u64,
}

/// The agent's held sysctls and their journal.
#[derive(Debug)]
pub struct Holds {
    journal: PathBuf,
    /// The journal's lock (flock), held while the agent lives: two agents must not share it.
    _lock: File,
    table: Mutex<BTreeMap<String, Held>>,
    next: AtomicU64,
}

/// The default journal: one per network namespace (by the inode of its nsfs file), so agents
/// in different namespaces of one machine (a lab) never share one.
pub fn default_journal() -> PathBuf {
    use std::os::unix::fs::MetadataExt;
    let ns = std::fs::metadata("/proc/thread-self/ns/net").map_or(0, |m| m.ino());
    Path::new(JOURNAL_DIR).join(format!("sysctl-net{ns}.journal"))
}

impl Holds {
    /// Opens the journal at `journal` (locking it for this agent) and restores what a
    /// previous agent left in it; returns the table and what was restored.
    pub fn open(journal: &Path) -> Result<(Self, Vec<(String, String)>)> {
        let lock = lock_journal(journal)?;
        let restored = recover(journal)?;
        Ok((
            Self {
                journal: journal.to_path_buf(),
                _lock: lock,
                table: Mutex::new(BTreeMap::new()),
                next: AtomicU64::new(1),
            },
            restored,
        ))
    }

    /// The journal's path.
    pub fn journal(&self) -> &Path {
        &self.journal
    }

    fn table(&self) -> MutexGuard<'_, BTreeMap<String, Held>> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new hold's id.
    pub fn new_owner(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    /// How many keys are held now.
    pub fn len(&self) -> usize {
        self.table().len()
    }

    /// True when none is.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Journals the old values of `set` (fsynced), then applies `set`; returns the old values.
    /// All or nothing: a key another hold has, or one the kernel refuses, leaves everything
    /// as it was. `set` must have passed [`check_ask`].
    pub fn acquire(
        &self,
        owner: u64,
        set: &[(String, String)],
    ) -> std::result::Result<Vec<(String, String)>, String> {
        let mut table = self.table();
        let mut previous = Vec::with_capacity(set.len());
        for (key, _) in set {
            if table.contains_key(key) {
                return Err(format!(
                    "{key} is held by another client of this agent; wait for it to release, or \
                     hold other keys"
                ));
            }
            let old = tcplab_host::sysctl::read(key).map_err(|e| format!("{key}: {e}"))?;
            previous.push((key.clone(), old));
        }
        for (key, old) in &previous {
            table.insert(
                key.clone(),
                Held {
                    original: old.clone(),
                    owner,
                },
            );
        }
        if let Err(e) = write_journal(&self.journal, &table) {
            table.retain(|_, h| h.owner != owner);
            return Err(format!(
                "cannot journal the old values in {} ({e}); nothing was changed: give the \
                 agent a writable --journal FILE",
                self.journal.display()
            ));
        }
        for (i, (key, value)) in set.iter().enumerate() {
            if let Err(e) = tcplab_host::sysctl::write_verified("this agent", key, value) {
                for (k, old) in previous[..i].iter().rev() {
                    let _ = tcplab_host::sysctl::write_verified("this agent", k, old);
                }
                table.retain(|_, h| h.owner != owner);
                let _ = write_journal(&self.journal, &table);
                return Err(format!("{e}; nothing was changed"));
            }
        }
        Ok(previous)
    }

    /// Restores the keys `owner` holds (every key when `owner` is None); returns the problems.
    pub fn release(&self, owner: Option<u64>) -> Vec<String> {
        let mut table = self.table();
        let mine: Vec<(String, String)> = table
            .iter()
            .filter(|(_, h)| owner.is_none_or(|o| h.owner == o))
            .map(|(k, h)| (k.clone(), h.original.clone()))
            .collect();
        if mine.is_empty() {
            return Vec::new();
        }
        let mut problems: Vec<String> = mine
            .iter()
            .filter_map(|(k, old)| {
                tcplab_host::sysctl::write_verified("this agent", k, old)
                    .err()
                    .map(|e| format!("restoring {k}={old}: {e}"))
            })
            .collect();
        table.retain(|_, h| owner.is_some_and(|o| h.owner != o));
        if let Err(e) = write_journal(&self.journal, &table) {
            problems.push(format!("rewriting {}: {e}", self.journal.display()));
        }
        problems
    }
}

impl Drop for Holds {
    /// Whatever is still held goes back when the agent's table goes (the serve loop ended).
    fn drop(&mut self) {
        for p in self.release(None) {
            eprintln!("tcplab serve: {p}");
        }
    }
}

/// Takes the journal's lock, creating its directory (0700) if needed.
fn lock_journal(journal: &Path) -> Result<File> {
    let io_err = |what: &str, e: std::io::Error| {
        LoadError::config(
            "journal",
            format!(
                "{what} {}: {e}; give a writable --journal FILE",
                journal.display()
            ),
        )
    };
    if let Some(dir) = journal.parent().filter(|d| !d.as_os_str().is_empty()) {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| io_err("cannot create the directory of", e))?;
    }
    let path = lock_path(journal);
    let lock = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| io_err("cannot open the lock of", e))?;
    // Safety: flock on a descriptor we own; LOCK_NB makes it return at once.
    if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return Err(LoadError::config(
            "journal",
            format!(
                "{} is in use by another running agent (its lock {} is held); give each agent \
                 its own --journal FILE",
                journal.display(),
                path.display()
            ),
        ));
    }
    Ok(lock)
}

fn lock_path(journal: &Path) -> PathBuf {
    let mut p = journal.as_os_str().to_owned();
    p.push(".lock");
    PathBuf::from(p)
}

/// Restores a journal a previous agent left, then removes it.
fn recover(journal: &Path) -> Result<Vec<(String, String)>> {
    let text = match std::fs::read_to_string(journal) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(LoadError::io("reading the sysctl journal (--journal)", e)),
    };
    let bad = |why: String| {
        LoadError::config(
            "journal",
            format!(
                "{} was left by an agent that did not finish, and {why}; restore its values by \
                 hand (it is JSON) and remove it",
                journal.display()
            ),
        )
    };
    let j: Journal =
        serde_json::from_str(&text).map_err(|e| bad(format!("cannot be read ({e})")))?;
    for (key, value) in &j.held {
        check_key(key)
            .and_then(|()| check_value(key, value))
            .map_err(&bad)?;
        tcplab_host::sysctl::write_verified("this agent", key, value)
            .map_err(|e| bad(format!("restoring {key}={value} failed ({e})")))?;
    }
    std::fs::remove_file(journal)
        .map_err(|e| LoadError::io("removing the restored sysctl journal (--journal)", e))?;
    Ok(j.held)
}

/// Writes the journal of `table` durably (temporary file, fsync, rename, fsync of the
/// directory), or removes it when nothing is held.
fn write_journal(path: &Path, table: &BTreeMap<String, Held>) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if table.is_empty() {
        match std::fs::remove_file(path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        }
        return File::open(dir)?.sync_all();
    }
    let journal = Journal {
        tcplab_journal: 1,
        pid: std::process::id(),
        held: table
            .iter()
            .map(|(k, h)| (k.clone(), h.original.clone()))
            .collect(),
    };
    let body = serde_json::to_vec_pretty(&journal).map_err(std::io::Error::other)?;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    {
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = File::options()
            .create(true)
            .truncate(true)
            .write(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(&body)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn only_plain_net_keys_pass() {
        assert!(check_key("net.ipv4.tcp_rmem").is_ok());
        assert!(check_key("net.core.somaxconn").is_ok());
        for bad in [
            "kernel.panic",
            "net..ipv4",
            "net/ipv4/tcp_rmem",
            "net.ipv4.tcp_rmem/../../../kernel/panic",
            "net.",
            "",
            "net.ipv4.tcp rmem",
            "vm.swappiness",
        ] {
            assert!(check_key(bad).is_err(), "{bad}");
        }
        let e = check_key("kernel.panic").expect_err("outside net.");
        assert!(e.contains("outside net."), "{e}");
    }

    #[test]
    fn values_are_one_printable_line() {
        assert!(check_value("k", "4096 131072 6291456").is_ok());
        assert!(check_value("k", "4096\t131072").is_ok());
        for bad in ["", "  ", "1\n2", "1\0", &"9".repeat(MAX_VALUE + 1)] {
            assert!(check_value("k", bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn an_ask_needs_keys_once_and_a_sane_lease() {
        assert_eq!(
            check_ask(&set(&[("net.core.somaxconn", "512")]), 300),
            Ok(Duration::from_millis(300))
        );
        assert!(check_ask(&[], 300).unwrap_err().contains("set:"));
        let twice = set(&[("net.core.somaxconn", "1"), ("net.core.somaxconn", "2")]);
        assert!(check_ask(&twice, 300).unwrap_err().contains("twice"));
        let one = set(&[("net.core.somaxconn", "512")]);
        assert!(check_ask(&one, 10).unwrap_err().contains("lease_ms"));
        assert!(check_ask(&one, 7_200_000).unwrap_err().contains("lease_ms"));
    }

    #[test]
    fn a_lease_renewed_in_time_holds_and_one_left_alone_runs_out() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut lease = Lease::new(t0, ms(300));
        assert_eq!(lease.step(t0 + ms(100), Event::Quiet), Step::Hold);
        assert_eq!(lease.step(t0 + ms(250), Event::Renew), Step::Hold);
        // Renewed at 250 ms: holds until 550 ms.
        assert_eq!(lease.step(t0 + ms(500), Event::Quiet), Step::Hold);
        assert_eq!(lease.wait(t0 + ms(500), ms(100)), ms(50));
        assert!(matches!(
            lease.step(t0 + ms(550), Event::Quiet),
            Step::Restore(why) if why.contains("300 ms lease")
        ));
        // A renewal after the end comes too late.
        assert!(matches!(
            lease.step(t0 + ms(600), Event::Renew),
            Step::Restore(_)
        ));
    }

    #[test]
    fn release_close_and_stop_each_end_the_hold() {
        let t0 = Instant::now();
        let mut lease = Lease::new(t0, Duration::from_secs(1));
        assert_eq!(lease.step(t0, Event::Release), Step::Release);
        for e in [
            Event::Closed("peer closed".into()),
            Event::Stopping,
            Event::Unexpected("Hello"),
        ] {
            assert!(matches!(lease.step(t0, e), Step::Restore(_)));
        }
    }

    #[test]
    fn the_journal_is_written_durably_and_removed_when_empty() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("j");
        let mut table = BTreeMap::new();
        table.insert(
            "net.core.somaxconn".to_string(),
            Held {
                original: "4096".into(),
                owner: 1,
            },
        );
        write_journal(&path, &table).expect("write");
        let j: Journal =
            serde_json::from_str(&std::fs::read_to_string(&path).expect("read")).expect("json");
        assert_eq!(j.held, set(&[("net.core.somaxconn", "4096")]));
        table.clear();
        write_journal(&path, &table).expect("remove");
        assert!(!path.exists());
        write_journal(&path, &table).expect("already gone");
    }

    #[test]
    fn one_journal_serves_one_agent() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("sub").join("j");
        let (first, restored) = Holds::open(&path).expect("open");
        assert!(restored.is_empty());
        let e = Holds::open(&path).expect_err("locked").to_string();
        assert!(
            e.contains("--journal") && e.contains("another running agent"),
            "{e}"
        );
        drop(first);
        assert!(Holds::open(&path).is_ok());
    }

    #[test]
    fn a_journal_with_a_bad_key_is_not_restored() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("j");
        std::fs::write(
            &path,
            r#"{"tcplab_journal":1,"pid":1,"held":[["kernel.panic","1"]]}"#,
        )
        .expect("write");
        let e = Holds::open(&path).expect_err("bad key").to_string();
        assert!(e.contains("outside net.") && e.contains("by hand"), "{e}");
    }
}
