//! The on-disk state that outlives a process: one registry file per lab (its spec, owner and
//! namespaces) and the journal of host-global sysctls changed on a lab's behalf.
//!
//! Every change happens under an exclusive flock on `<state>/lock`, and files are replaced
//! atomically (write to a temporary file, then rename), so a process killed at any point leaves
//! either the old or the new record, and `gc` can always finish the job.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{KernelContext, LabError, Result};
use crate::spec::LabSpec;

/// Default state directory; `TCPLAB_STATE_DIR` overrides it (rootless mode and tests).
pub const DEFAULT_STATE_DIR: &str = "/run/tcplab";

/// The state directory and its files.
#[derive(Debug, Clone)]
pub struct StateDir {
    root: PathBuf,
}

/// Identifies a live process: PID plus its start time, so a reused PID is not mistaken for the
/// original owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessId {
    /// The PID.
    pub pid: u32,
    /// `starttime` from /proc/PID/stat (clock ticks since boot).
    pub start_time: u64,
}

impl ProcessId {
    /// This process.
    pub fn current() -> Option<ProcessId> {
        let pid = std::process::id();
        Some(ProcessId {
            pid,
            start_time: start_time(pid)?,
        })
    }

    /// Another process, if it exists now.
    pub fn of(pid: u32) -> Option<ProcessId> {
        Some(ProcessId {
            pid,
            start_time: start_time(pid)?,
        })
    }

    /// True while the very process this names is running (a zombie waiting to be reaped is
    /// not running: its parent may be gone and nobody may reap it soon).
    pub fn is_alive(&self) -> bool {
        stat_fields(self.pid)
            .is_some_and(|(state, start)| start == self.start_time && state != 'Z' && state != 'X')
    }
}

/// The process's state letter and start time from /proc/PID/stat.
fn stat_fields(pid: u32) -> Option<(char, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_comm = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_comm.split_whitespace();
    // After ")" come fields 3.. : the state is field 3, starttime field 22 (the 20th here).
    let state = fields.next()?.chars().next()?;
    let start = fields.nth(18)?.parse().ok()?;
    Some((state, start))
}

/// Field 22 of /proc/PID/stat, parsed after the command name (which may contain spaces).
fn start_time(pid: u32) -> Option<u64> {
    stat_fields(pid).map(|(_, start)| start)
}

/// Where a lab is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Being built; if its owner dies now, `gc` removes the remains.
    Building,
    /// Built and usable.
    Ready,
}

/// A helper process that lives and dies with a lab (the emulator).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Companion {
    /// What it is, e.g. `emulator`.
    pub role: String,
    /// The host it runs in.
    pub host: String,
    /// Its identity, for killing exactly it and nothing else.
    pub process: ProcessId,
}

/// One lab's registry entry.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Record {
    /// The full description.
    pub spec: LabSpec,
    /// The process the lab belongs to; `None` for persistent labs (`tcplab lab up`).
    pub owner: Option<ProcessId>,
    /// Building or ready.
    pub phase: Phase,
    /// Creation time, Unix milliseconds.
    pub created_unix_ms: u64,
    /// Namespaces created so far (all of them once ready).
    pub namespaces: Vec<String>,
    /// Processes to end, by PID, when the lab goes.
    #[serde(default)]
    pub companions: Vec<Companion>,
}

/// One journaled host-global sysctl: its value before any lab touched it, and the labs that still
/// rely on the changed value. Restored when the last holder goes.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct JournalEntry {
    /// The value before the first change.
    pub original: String,
    /// The value the labs set.
    pub value: String,
    /// Labs holding the change.
    pub holders: Vec<String>,
}

/// key → entry.
pub type Journal = BTreeMap<String, JournalEntry>;

/// An exclusive lock on the state directory, released on drop.
#[derive(Debug)]
pub struct StateLock {
    _file: File,
}

impl StateDir {
    /// The state directory from `TCPLAB_STATE_DIR`, else [`DEFAULT_STATE_DIR`] for root and
    /// the user's own for anyone else (`privileges::user_state_dir`).
    pub fn from_env() -> StateDir {
        let root = match std::env::var_os("TCPLAB_STATE_DIR") {
            Some(dir) => PathBuf::from(dir),
            None if crate::privileges::machine_root() => PathBuf::from(DEFAULT_STATE_DIR),
            None => crate::privileges::user_state_dir(),
        };
        StateDir { root }
    }

    /// A state directory at an explicit path.
    pub fn at(root: impl Into<PathBuf>) -> StateDir {
        StateDir { root: root.into() }
    }

    /// The directory itself.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn labs_dir(&self) -> PathBuf {
        self.root.join("labs")
    }

    fn record_path(&self, name: &str) -> PathBuf {
        self.labs_dir().join(format!("{name}.json"))
    }

    fn journal_path(&self) -> PathBuf {
        self.root.join("host-sysctl-journal.json")
    }

    /// Takes the exclusive lock, creating the directory if needed.
    pub fn lock(&self) -> Result<StateLock> {
        std::fs::create_dir_all(self.labs_dir())
            .kernel_context(|| format!("creating {}", self.labs_dir().display()))?;
        let path = self.root.join("lock");
        let file = File::options()
            .create(true)
            .append(true)
            .open(&path)
            .kernel_context(|| format!("opening {}", path.display()))?;
        rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)
            .map_err(std::io::Error::from)
            .kernel_context(|| format!("locking {}", path.display()))?;
        Ok(StateLock { _file: file })
    }

    /// Reads one record; `None` if the lab is not registered.
    pub fn read(&self, name: &str) -> Result<Option<Record>> {
        let path = self.record_path(name);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(LabError::kernel(format!("reading {}", path.display()), e)),
        };
        // From bytes: a damaged record that is not UTF-8 is a registry problem with the
        // registry's fix, not a failed read.
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| LabError::Registry {
                path,
                message: e.to_string(),
            })
    }

    /// Every registered lab, by name. Unreadable records are reported, not skipped silently.
    pub fn list(&self) -> Result<Vec<Record>> {
        let dir = match std::fs::read_dir(self.labs_dir()) {
            Ok(d) => d,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => {
                return Err(LabError::kernel(
                    format!("listing {}", self.labs_dir().display()),
                    e,
                ));
            }
        };
        let mut names: Vec<String> = dir
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().into_string().ok())
            .filter_map(|f| f.strip_suffix(".json").map(str::to_string))
            .collect();
        names.sort();
        let mut out = Vec::new();
        for name in names {
            if let Some(r) = self.read(&name)? {
                out.push(r);
            }
        }
        Ok(out)
    }

    /// Writes a record atomically.
    pub fn write(&self, record: &Record) -> Result<()> {
        let text = serde_json::to_string_pretty(record).map_err(|e| LabError::Registry {
            path: self.record_path(&record.spec.name),
            message: e.to_string(),
        })?;
        write_atomic(&self.record_path(&record.spec.name), text.as_bytes())
    }

    /// Removes a record; missing is fine.
    pub fn remove(&self, name: &str) -> Result<()> {
        let path = self.record_path(name);
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(LabError::kernel(format!("removing {}", path.display()), e)),
        }
    }

    /// Removes half-written records (`labs/*.tmp`) left by a writer that was killed between
    /// writing and renaming. Call it holding the lock: every writer does, so any found then is
    /// stale. Returns how many went.
    pub fn remove_stale_temporaries(&self, _lock: &StateLock) -> usize {
        let Ok(dir) = std::fs::read_dir(self.labs_dir()) else {
            return 0;
        };
        dir.filter_map(|e| e.ok())
            .filter(|e| e.path().extension().is_some_and(|x| x == "tmp"))
            .filter(|e| std::fs::remove_file(e.path()).is_ok())
            .count()
    }

    /// Reads the host-sysctl journal (empty if none).
    pub fn journal(&self) -> Result<Journal> {
        let path = self.journal_path();
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| LabError::Registry {
                path,
                message: e.to_string(),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Journal::new()),
            Err(e) => Err(LabError::kernel(format!("reading {}", path.display()), e)),
        }
    }

    /// Replaces the journal atomically and durably (it must hit the disk before the sysctl does).
    pub fn write_journal(&self, journal: &Journal) -> Result<()> {
        let path = self.journal_path();
        if journal.is_empty() {
            return match std::fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    Err(LabError::kernel(format!("removing {}", path.display()), e))
                }
                _ => Ok(()),
            };
        }
        let text = serde_json::to_string_pretty(journal).map_err(|e| LabError::Registry {
            path: path.clone(),
            message: e.to_string(),
        })?;
        write_atomic(&path, text.as_bytes())
    }
}

/// Writes to `path.tmp`, fsyncs, renames over `path`.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension("tmp");
    let mut file = File::create(&tmp).kernel_context(|| format!("creating {}", tmp.display()))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .kernel_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).kernel_context(|| format!("renaming {} into place", tmp.display()))
}

/// Where each lab namespace records which state directory owns it. Namespaces are global to the
/// machine while state directories are not (tests and users may each have their own), so
/// `gc --all` must not take another state directory's live lab for an orphan.
pub const CLAIMS_DIR: &str = "/run/tcplab/netns-claims";

/// [`CLAIMS_DIR`], or in a rootless session a directory beside its namespace handles (which
/// are the session's own, but `gc --all` reads claims the same way everywhere).
fn claims_dir() -> PathBuf {
    match crate::privileges::session_netns_dir() {
        Some(netns) => netns.with_file_name("netns-claims"),
        None => PathBuf::from(CLAIMS_DIR),
    }
}

/// Records that `state` owns namespace `ns`.
pub fn claim(ns: &str, state: &StateDir) -> Result<()> {
    let dir = claims_dir();
    std::fs::create_dir_all(&dir).kernel_context(|| format!("creating {}", dir.display()))?;
    let root = std::fs::canonicalize(state.root()).unwrap_or_else(|_| state.root().to_path_buf());
    write_atomic(&dir.join(ns), root.as_os_str().as_encoded_bytes())
}

/// Forgets the claim on `ns` (missing is fine).
pub fn unclaim(ns: &str) {
    let _ = std::fs::remove_file(claims_dir().join(ns));
}

/// True when a registered lab in the claiming state directory still lists `ns`.
pub fn is_claimed(ns: &str) -> bool {
    let Ok(root) = std::fs::read_to_string(claims_dir().join(ns)) else {
        return false;
    };
    StateDir::at(root)
        .list()
        .map(|records| records.iter().any(|r| r.namespaces.iter().any(|n| n == ns)))
        .unwrap_or(false)
}

/// Milliseconds since the Unix epoch (for records only; never used for measurement).
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
