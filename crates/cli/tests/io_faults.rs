//! I/O faults (root: each test mounts a small tmpfs of its own): a study database whose file
//! system fills up or is read-only, and output paths that cannot be written. The promises: a
//! one-line error that says what to do and exits 2; every run stored before the fault intact;
//! the study resumable once space (or write access) is back, each run exactly once; and an
//! output path that cannot be written named before the study or the workload starts, not after.

#![allow(clippy::unwrap_used, reason = "tests fail loudly on unexpected errors")]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use tcplab_study::Store;

mod common_sweep;
use common_sweep::{
    Guard, SCENARIO, assert_complete, lab_prefix, namespaces, planned_runs, stored, sweep_into,
    wait_bounded,
};

/// A tmpfs mounted at a fresh directory, unmounted (lazily, so an open file cannot stop it) when
/// the test ends.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    fn new(options: &str) -> Self {
        assert!(
            rustix::process::geteuid().is_root(),
            "run the I/O-fault tests as root (they mount a tmpfs)"
        );
        let dir = tempfile::tempdir().unwrap();
        mount(&["-t", "tmpfs", "-o", options, "tcplab-test"], dir.path());
        Self { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Changes the mount's options (size, ro/rw) in place.
    fn remount(&self, options: &str) {
        mount(&["-o", &format!("remount,{options}")], self.path());
    }

    /// Bytes in use on the mount.
    fn used(&self) -> u64 {
        let st = rustix::fs::statvfs(self.path()).unwrap();
        (st.f_blocks - st.f_bfree) * st.f_frsize
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(self.path()).status();
    }
}

fn mount(args: &[&str], at: &Path) {
    let out = Command::new("mount").args(args).arg(at).output().unwrap();
    assert!(out.status.success(), "mount {args:?}: {out:?}");
}

/// A scratch directory with the scenario, and the sweep's state directory inside it.
struct Study {
    tmp: tempfile::TempDir,
}

impl Study {
    fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("killme.toml"), SCENARIO).unwrap();
        Self { tmp }
    }

    fn dir(&self) -> &Path {
        self.tmp.path()
    }

    fn state(&self) -> PathBuf {
        self.tmp.path().join("state")
    }

    fn guard(&self) -> Guard {
        Guard {
            child: None,
            state: self.state(),
            prefixes: Vec::new(),
        }
    }

    /// Runs a sweep into `db` to its end (bounded), noting its lab prefix in `guard`.
    fn sweep(&self, guard: &mut Guard, db: &Path, extra: &[&str]) -> Output {
        let child = sweep_into(self.dir(), &self.state(), db, extra)
            .spawn()
            .unwrap();
        guard.prefixes.push(lab_prefix(child.id()));
        let child = guard.child.insert(child);
        wait_bounded(child, Duration::from_secs(60));
        guard.child.take().unwrap().wait_with_output().unwrap()
    }
}

/// Asserts a one-line error on stderr that contains each of `needles`, and exit code 2.
fn assert_one_line_error(out: &Output, needles: &[&str]) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr);
    let error = stderr
        .lines()
        .find(|l| l.starts_with("tcplab: error: "))
        .unwrap_or_else(|| panic!("no error line: {stderr}"))
        .to_owned();
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(
        stderr.lines().filter(|l| l.contains("error")).count(),
        1,
        "one line: {stderr}"
    );
    for n in needles {
        assert!(error.contains(n), "{n:?} not in: {error}");
    }
    error
}

#[test]
fn a_full_file_system_stops_the_study_cleanly_and_it_resumes_once_space_is_back() {
    let fs = Tmpfs::new("size=16m");
    let study = Study::new();
    let mut guard = study.guard();
    let db = fs.path().join("full.db");
    let planned = planned_runs();
    let child = sweep_into(study.dir(), &study.state(), &db, &[])
        .spawn()
        .unwrap();
    guard.prefixes.push(lab_prefix(child.id()));
    let child = guard.child.insert(child);
    // Once two runs are in, the file system shrinks to what it holds: the next runs' writes
    // find it full.
    let deadline = Instant::now() + Duration::from_secs(30);
    while stored(&db).len() < 2 {
        assert!(child.try_wait().unwrap().is_none(), "the sweep ended early");
        assert!(Instant::now() < deadline, "no two runs stored within 30 s");
        std::thread::sleep(Duration::from_millis(5));
    }
    fs.remount(&format!("size={}", fs.used() + 64 * 1024));
    wait_bounded(child, Duration::from_secs(60));
    let out = guard.child.take().unwrap().wait_with_output().unwrap();
    assert_one_line_error(&out, &[&db.display().to_string(), "full", "--resume"]);
    let before = Store::open(&db).unwrap().runs().unwrap();
    assert!(
        before.len() >= 2 && before.len() < planned.len(),
        "{} runs stored when the disk filled",
        before.len()
    );

    fs.remount("size=64m");
    let out = study.sweep(&mut guard, &db, &["--resume"]);
    assert!(out.status.success(), "{out:?}");
    let after = Store::open(&db).unwrap().runs().unwrap();
    assert_complete(&after, &before, &planned);
    assert_eq!(namespaces(&guard.prefixes), Default::default());
}

#[test]
fn a_read_only_file_system_is_refused_up_front_and_the_study_resumes_once_writable() {
    let fs = Tmpfs::new("size=64m");
    let study = Study::new();
    let mut guard = study.guard();
    let planned = planned_runs();
    // A new study on a read-only file system: refused before any run.
    fs.remount("ro");
    let db = fs.path().join("ro.db");
    let out = study.sweep(&mut guard, &db, &[]);
    assert_one_line_error(&out, &["--db", "Read-only file system"]);
    assert!(!db.exists());

    // A study begun on it, interrupted, and the file system made read-only meanwhile: the
    // resume is refused with the reason, and nothing stored is lost.
    fs.remount("rw");
    let child = sweep_into(study.dir(), &study.state(), &db, &[])
        .spawn()
        .unwrap();
    guard.prefixes.push(lab_prefix(child.id()));
    let child = guard.child.insert(child);
    let deadline = Instant::now() + Duration::from_secs(30);
    while stored(&db).len() < 2 {
        assert!(Instant::now() < deadline, "no two runs stored within 30 s");
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap(); // SIGKILL, to this PID only.
    child.wait().unwrap();
    guard.child = None;
    let before = Store::open(&db).unwrap().runs().unwrap();
    fs.remount("ro");
    let out = study.sweep(&mut guard, &db, &["--resume"]);
    assert_one_line_error(&out, &["--db", "Read-only file system", "writable"]);
    fs.remount("rw");
    assert_eq!(Store::open(&db).unwrap().runs().unwrap(), before);
    let out = study.sweep(&mut guard, &db, &["--resume"]);
    assert!(out.status.success(), "{out:?}");
    let after = Store::open(&db).unwrap().runs().unwrap();
    assert_complete(&after, &before, &planned);
    assert_eq!(namespaces(&guard.prefixes), Default::default());
}

#[test]
fn an_output_path_that_cannot_be_written_is_named_before_any_work() {
    let fs = Tmpfs::new("size=1m,ro");
    let study = Study::new();
    let mut guard = study.guard();
    let report = fs.path().join("report.html");
    let db = study.dir().join("out.db");
    let started = Instant::now();
    let html = report.display().to_string();
    let out = study.sweep(&mut guard, &db, &["--html", &html]);
    assert_one_line_error(&out, &["--html", &html, "writable directory"]);
    assert!(!db.exists(), "refused before the study's database was made");
    let missing = study.dir().join("no/such/dir/report.html");
    let out = study.sweep(&mut guard, &db, &["--html", &missing.display().to_string()]);
    assert_one_line_error(&out, &["--html", "No such file or directory"]);
    // A workload refuses an unwritable --samples before it runs (no peer is needed to fail).
    let samples = fs.path().join("samples.txt");
    let out = Command::new(env!("CARGO_BIN_EXE_tcplab"))
        .args(["msgs", "--to", "127.0.0.1:1", "--samples"])
        .arg(&samples)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_one_line_error(&out, &["--samples", "writable directory"]);
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "refused at once, not after the work: {:?}",
        started.elapsed()
    );
    assert_eq!(namespaces(&guard.prefixes), Default::default());
}
