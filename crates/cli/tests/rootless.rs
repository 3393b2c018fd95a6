//! Labs without root: the suite runs as root and starts `tcplab` as two unprivileged users
//! (`tcplab-ci1` and `tcplab-ci2`, which `.ci/run` creates; without them, UIDs 64101 and
//! 64102, which no account and no process may use). Each user builds, uses and removes labs
//! with the emulator, runs a workload and a sweep, does not see the other's labs, and leaves
//! nothing behind: no process of the user, no lab, no session, and root's `ip netns` as it was.
//! The tests share the two users, so they run one at a time.

#![allow(clippy::unwrap_used, reason = "tests fail loudly on unexpected errors")]

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// An unprivileged user and a private state directory it owns.
struct User {
    uid: u32,
    gid: u32,
    dir: tempfile::TempDir,
}

impl User {
    fn new(name: &str, fallback_uid: u32) -> User {
        assert!(
            rustix::process::geteuid().is_root(),
            "the rootless tests start tcplab as other users: run the suite as root"
        );
        let (uid, gid) = account(name).unwrap_or((fallback_uid, fallback_uid));
        assert!(uid != 0, "{name} must not be root");
        if account(name).is_none() {
            assert!(
                !passwd_has_uid(uid),
                "UID {uid} belongs to an account: create {name} (`useradd --system {name}`)"
            );
        }
        let dir = tempfile::Builder::new()
            .prefix("tcplab-rootless-")
            .tempdir()
            .unwrap();
        std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid)).unwrap();
        let user = User { uid, gid, dir };
        assert!(
            user.processes().is_empty(),
            "processes of UID {uid} were running before the test: {:?}",
            user.processes()
        );
        user
    }

    fn state(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(binary());
        cmd.args(args)
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin")
            .env("HOME", self.dir.path())
            .env("NO_COLOR", "1")
            .env("TCPLAB_STATE_DIR", self.state())
            .current_dir(self.dir.path())
            .uid(self.uid)
            .gid(self.gid);
        cmd
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    /// Runs and asserts success, returning stdout.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "tcplab {args:?} as UID {}: {}\n{}",
            self.uid,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Every process whose real UID is this user's, as (PID, command name).
    fn processes(&self) -> Vec<(u32, String)> {
        let mut found = Vec::new();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<u32>().ok())
            else {
                continue;
            };
            let Ok(status) = std::fs::read_to_string(entry.path().join("status")) else {
                continue;
            };
            let field = |name: &str| {
                status
                    .lines()
                    .find_map(|l| l.strip_prefix(name))
                    .map(|v| v.split_whitespace().next().unwrap_or("").to_string())
            };
            let zombie = field("State:").is_some_and(|s| s == "Z");
            if !zombie && field("Uid:").and_then(|u| u.parse().ok()) == Some(self.uid) {
                found.push((pid, field("Name:").unwrap_or_default()));
            }
        }
        found
    }

    /// Asserts that the user has nothing left: no process (a holder may take a moment to
    /// end), no registered lab, no session record.
    fn assert_nothing_left(&self) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !self.processes().is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(
            self.processes().is_empty(),
            "processes of UID {} left: {:?}",
            self.uid,
            self.processes()
        );
        let labs: Vec<_> = std::fs::read_dir(self.state().join("labs"))
            .map(|d| d.flatten().map(|e| e.file_name()).collect())
            .unwrap_or_default();
        assert!(labs.is_empty(), "labs left registered: {labs:?}");
        assert!(
            !self.state().join("session.json").exists(),
            "the session record is left"
        );
    }
}

impl Drop for User {
    /// However the test ends: the user's labs go (`lab gc --all` as the user), then any
    /// process still running as this dedicated UID (all of them started by this test).
    fn drop(&mut self) {
        let _ = self.run(&["lab", "gc", "--all"]);
        for (pid, _) in self.processes() {
            if let Some(pid) = rustix::process::Pid::from_raw(pid as i32) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
        }
    }
}

/// The binary under test, or a copy anyone may run when a checkout under a private directory
/// (e.g. /root) keeps other users from reaching it.
fn binary() -> PathBuf {
    static BINARY: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BINARY
        .get_or_init(|| {
            let built = PathBuf::from(env!("CARGO_BIN_EXE_tcplab"));
            if reachable_by_anyone(&built) {
                return built;
            }
            // Kept for the test process's life (the tests share it), removed at its exit.
            let dir = tempfile::Builder::new()
                .prefix("tcplab-rootless-bin-")
                .tempdir()
                .unwrap()
                .keep();
            let copy = dir.join("tcplab");
            std::fs::copy(&built, &copy).unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
            let _ = COPY_DIR.set(dir);
            // Safety: registers a plain function without arguments, run once by exit(3).
            unsafe { libc::atexit(remove_copy) };
            copy
        })
        .clone()
}

static COPY_DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

extern "C" fn remove_copy() {
    if let Some(dir) = COPY_DIR.get() {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// Every directory above `path` searchable by others, and `path` executable by them.
fn reachable_by_anyone(path: &std::path::Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &std::path::Path| std::fs::metadata(p).map(|m| m.permissions().mode());
    mode(path).is_ok_and(|m| m & 0o005 == 0o005)
        && path
            .ancestors()
            .skip(1)
            .all(|dir| mode(dir).is_ok_and(|m| m & 0o001 != 0))
}

fn account(name: &str) -> Option<(u32, u32)> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|line| {
        let f: Vec<&str> = line.split(':').collect();
        (f.first() == Some(&name) && f.len() > 3)
            .then(|| Some((f[2].parse().ok()?, f[3].parse().ok()?)))
            .flatten()
    })
}

fn passwd_has_uid(uid: u32) -> bool {
    std::fs::read_to_string("/etc/passwd")
        .unwrap_or_default()
        .lines()
        .any(|l| l.split(':').nth(2) == Some(&uid.to_string()))
}

/// The two users, for one test at a time: the guard is held until the users' cleanup (they
/// drop first, being declared after it) has run.
fn alone() -> (MutexGuard<'static, ()>, User, User) {
    let one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    (
        one,
        User::new("tcplab-ci1", 64101),
        User::new("tcplab-ci2", 64102),
    )
}

fn lab_name(tag: &str) -> String {
    format!("r{}_{tag}", std::process::id() % 100_000)
}

/// Root's view: `ip netns` names of a lab (a rootless lab must have none).
fn root_namespaces_of(name: &str) -> Vec<String> {
    let prefix = format!("tcplab-{name}-");
    std::fs::read_dir("/run/netns")
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| n.starts_with(&prefix))
                .collect()
        })
        .unwrap_or_default()
}

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

#[test]
fn a_user_builds_uses_and_removes_an_emulated_lab_without_root() {
    let (_one, alice, bob) = alone();
    let name = lab_name("trip");
    let up = alice.run(&[
        "lab",
        "up",
        "--topology",
        "path",
        "--name",
        &name,
        "--delay",
        "5ms",
        "--json",
    ]);
    let stderr = String::from_utf8_lossy(&up.stderr);
    assert!(up.status.success(), "{stderr}");
    assert!(
        stderr.contains("rootless: the emulator runs without real-time priority"),
        "the fallback is announced in one line: {stderr}"
    );
    assert!(
        root_namespaces_of(&name).is_empty(),
        "root's ip netns must not see a user's lab"
    );

    let check = json(&alice.ok(&["lab", "check", &name, "--json"]));
    assert!(check.to_string().contains("true"), "{check}");
    let addrs = alice.ok(&[
        "lab", "exec", "--lab", &name, "client", "--", "ip", "-br", "addr",
    ]);
    assert!(addrs.contains("198.18."), "{addrs}");

    let rr = json(&alice.ok(&["rr", "--lab", &name, "--json", "--count", "50", "--nodelay"]));
    let p50 = rr["summary"]["latency_us"]["p50"].as_f64().unwrap();
    assert!(
        (9_000.0..60_000.0).contains(&p50),
        "5 ms each way through the emulator, p50 {p50} µs"
    );

    let mine = json(&alice.ok(&["lab", "status", "--json"]));
    assert!(mine.to_string().contains(&name), "{mine}");
    let theirs = bob.ok(&["lab", "status", "--json"]);
    assert!(
        !theirs.contains(&name),
        "another user sees the lab: {theirs}"
    );
    let refused = bob.run(&["lab", "down", &name]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        !alice.processes().is_empty(),
        "the lab's holder and emulator still run"
    );

    alice.ok(&["lab", "down", &name]);
    alice.assert_nothing_left();
    bob.assert_nothing_left();
}

#[test]
fn a_sweep_runs_rootless_and_leaves_nothing() {
    let (_one, alice, _bob) = alone();
    let scenario = alice.dir.path().join("tiny.toml");
    std::fs::write(
        &scenario,
        "name = \"tiny\"\nrepetitions = 1\nseed = 7\n\
         objective = { metric = \"throughput_bps\", goal = \"maximise\" }\n\
         [lab]\ntopology = \"pair\"\n\
         [[workload]]\nkind = \"stream\"\nduration = \"0.5s\"\n\
         [[factor]]\nname = \"socket.congestion\"\nvalues = [\"bbr\", \"reno\"]\n",
    )
    .unwrap();
    let db = alice.dir.path().join("tiny.db");
    alice.ok(&[
        "sweep",
        scenario.to_str().unwrap(),
        "--db",
        db.to_str().unwrap(),
    ]);
    let report = json(&alice.ok(&["report", db.to_str().unwrap(), "--json"]));
    let runs = report.to_string().matches("throughput_bps").count();
    assert!(runs >= 2, "two configurations measured: {report}");
    alice.assert_nothing_left();
}

#[test]
fn gc_after_sigkill_leaves_nothing_of_the_user() {
    let (_one, alice, _bob) = alone();
    let name = lab_name("kill");
    // Kills at moments spread over a build with an emulator (about 50-300 ms here).
    for (i, delay_ms) in [0u64, 3, 6, 10, 20, 30, 60, 120, 250, 600]
        .into_iter()
        .enumerate()
    {
        let mut child = alice
            .command(&[
                "lab",
                "up",
                "--topology",
                "path",
                "--name",
                &name,
                "--delay",
                "1ms",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        let _ = child.kill();
        let _ = child.wait();
        alice.ok(&["lab", "gc"]);
        // A build that finished before the kill is a persistent lab: `down` removes it.
        let status = alice.ok(&["lab", "status", "--json"]);
        if status.contains(&name) {
            alice.ok(&["lab", "down", &name]);
        }
        alice.assert_nothing_left();
        assert!(root_namespaces_of(&name).is_empty(), "kill {i}");
    }
}

#[test]
fn a_killed_session_holder_is_cleaned_by_gc() {
    let (_one, alice, _bob) = alone();
    let name = lab_name("holder");
    alice.ok(&[
        "lab",
        "up",
        "--topology",
        "path",
        "--name",
        &name,
        "--delay",
        "1ms",
    ]);
    let session = json(&std::fs::read_to_string(alice.state().join("session.json")).unwrap());
    let holder = session["holder"]["pid"].as_u64().unwrap() as i32;
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(holder).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    let gc = alice.ok(&["lab", "gc", "--json"]);
    assert!(
        gc.contains(&name),
        "gc removes the lab of an ended session: {gc}"
    );
    alice.assert_nothing_left();
}

#[test]
fn a_machine_wide_sysctl_is_refused_by_name_before_building() {
    let (_one, alice, _bob) = alone();
    let name = lab_name("sysctl");
    for key in ["net.core.wmem_max", "net.core.rmem_default"] {
        let setting = format!("all:{key}=4194304");
        let out = alice.run(&["lab", "up", "--name", &name, "--sysctl", &setting]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
        assert!(
            stderr.contains(key) && stderr.contains("rootless"),
            "{stderr}"
        );
        alice.assert_nothing_left();
    }
    // A per-namespace key is the user's to change.
    alice.ok(&[
        "lab",
        "up",
        "--name",
        &name,
        "--sysctl",
        "all:net.ipv4.tcp_rmem=4096 131072 8388608",
    ]);
    let read = alice.ok(&["lab", "sysctl", &name, "client:net.ipv4.tcp_rmem"]);
    assert!(read.contains("8388608"), "{read}");
    alice.ok(&["lab", "down", &name]);
    alice.assert_nothing_left();
}

#[test]
fn without_a_state_directory_given_the_user_gets_their_own() {
    let (_one, alice, _bob) = alone();
    let own = PathBuf::from(format!("/tmp/tcplab-{}", alice.uid));
    // Inside the session the user's UID reads as 0: the state must not move to root's name.
    let as_root = std::path::Path::new("/tmp/tcplab-0");
    assert!(!own.exists(), "{} exists before the test", own.display());
    assert!(
        !as_root.exists(),
        "{} exists before the test",
        as_root.display()
    );
    let name = lab_name("default");
    let plain = |args: &[&str]| {
        let out = alice
            .command(args)
            .env_remove("TCPLAB_STATE_DIR")
            .output()
            .unwrap();
        assert!(
            !as_root.exists(),
            "tcplab {args:?} made {}",
            as_root.display()
        );
        out
    };
    let up = plain(&["lab", "up", "--name", &name]);
    assert!(
        up.status.success(),
        "{}",
        String::from_utf8_lossy(&up.stderr)
    );
    assert!(
        own.join("labs").join(format!("{name}.json")).exists(),
        "the lab is registered in {}",
        own.display()
    );
    let status = plain(&["lab", "status", "--json"]);
    assert!(String::from_utf8_lossy(&status.stdout).contains(&name));
    let down = plain(&["lab", "down", &name]);
    assert!(
        down.status.success(),
        "{}",
        String::from_utf8_lossy(&down.stderr)
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while !alice.processes().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let left = alice.processes();
    let _ = std::fs::remove_dir_all(&own);
    assert!(left.is_empty(), "processes left: {left:?}");
}

#[test]
fn facts_say_whether_rootless_labs_are_allowed() {
    let (_one, alice, _bob) = alone();
    let facts = json(&alice.ok(&["facts", "--json"]));
    assert_eq!(
        facts["rootless"]["allowed"], true,
        "this machine allows unprivileged user namespaces (the CI machine does): {}",
        facts["rootless"]
    );
    assert_eq!(facts["rootless"]["this_process"], false);
    let text = alice.ok(&["facts"]);
    assert!(text.contains("rootless    labs allowed"), "{text}");
    alice.assert_nothing_left();
}
