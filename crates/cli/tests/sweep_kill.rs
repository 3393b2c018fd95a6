//! A sweep killed with SIGKILL mid-study resumes from its database (root): the built binary
//! sweeps a small scenario, the test kills it by PID once the database holds two runs, checks
//! the file is intact and the killed process's lab is still there, then `sweep --resume`
//! finishes the study: every planned run stored exactly once, the rows written before the kill
//! unchanged, and the dead sweep's lab gone. A guard removes whatever the test leaves behind
//! (the child, its labs) even when an assertion fails.

#![allow(clippy::unwrap_used, reason = "tests fail loudly on unexpected errors")]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tcplab_study::store::StoredRun;
use tcplab_study::{Plan, PlanOptions, ScenarioFile, Store};

/// 2 × 2 configurations × 3 repetitions of 100,000 one-byte messages (about 0.2 s a run), in
/// one lab reset between runs.
const SCENARIO: &str = r#"
name = "killme"
repetitions = 3
seed = 7
reset = "reset"
objective = { metric = "per_message_us.mean", goal = "minimise" }

[lab]
topology = "pair"

[[workload]]
kind = "msgs"
count = 100000
size = 1

[[factor]]
name = "socket.nodelay"
values = [false, true]

[[factor]]
name = "sysctl.all.\"net.ipv4.tcp_autocorking\""
values = [1, 0]
"#;

/// Kills the sweep if it still runs and removes every namespace of labs it named, on every exit.
struct Guard {
    child: Option<Child>,
    state: PathBuf,
    prefixes: Vec<String>,
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = Command::new(env!("CARGO_BIN_EXE_tcplab"))
            .env("TCPLAB_STATE_DIR", &self.state)
            .args(["lab", "gc"])
            .output();
        for ns in namespaces(&self.prefixes) {
            let _ = Command::new("ip").args(["netns", "delete", &ns]).output();
        }
    }
}

/// This test's namespaces: `tcplab-<lab>-<host>` for labs `st<pid>_<n>` of the given sweeps.
fn namespaces(prefixes: &[String]) -> BTreeSet<String> {
    let Ok(dir) = std::fs::read_dir("/run/netns") else {
        return BTreeSet::new();
    };
    dir.filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| prefixes.iter().any(|p| n.starts_with(p)))
        .collect()
}

fn lab_prefix(pid: u32) -> String {
    format!("tcplab-st{}_", pid % 100_000)
}

fn sweep(dir: &Path, state: &Path, extra: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tcplab"));
    cmd.env("TCPLAB_STATE_DIR", state)
        .current_dir(dir)
        .args(["sweep", "killme.toml", "--db", "killme.db"])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

fn stored(db: &Path) -> Vec<StoredRun> {
    Store::open(db).and_then(|s| s.runs()).unwrap_or_default()
}

/// Waits for `child` to exit within `limit`; kills it (by PID) past that.
fn wait_bounded(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the sweep did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_sigkilled_sweep_resumes_with_every_run_once_and_its_lab_removed() {
    assert!(
        rustix::process::geteuid().is_root(),
        "run the CLI tests as root"
    );
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let state = dir.join("state");
    let db = dir.join("killme.db");
    std::fs::write(dir.join("killme.toml"), SCENARIO).unwrap();
    let plan = Plan::new(
        &ScenarioFile::parse("killme.toml", SCENARIO).unwrap(),
        PlanOptions::default(),
    )
    .unwrap();
    let planned: BTreeSet<(usize, u32)> = plan.runs.iter().map(|r| (r.config.id, r.rep)).collect();
    assert_eq!(planned.len(), 12);

    // 1. Start the sweep and kill it once two runs are stored.
    let child = sweep(dir, &state, &[]).spawn().unwrap();
    let first_pid = child.id();
    let mut guard = Guard {
        child: Some(child),
        state: state.clone(),
        prefixes: vec![lab_prefix(first_pid)],
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while stored(&db).len() < 2 {
        let child = guard.child.as_mut().unwrap();
        assert!(
            child.try_wait().unwrap().is_none(),
            "the sweep ended before two runs were stored"
        );
        assert!(Instant::now() < deadline, "no two runs stored within 30 s");
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut child = guard.child.take().unwrap();
    child.kill().unwrap(); // SIGKILL, to this PID only.
    let status = child.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9),
        "killed by SIGKILL"
    );

    // 2. The file is intact (Store::open runs SQLite's quick_check) and holds what was
    // committed; the killed sweep's lab is still there.
    let before = Store::open(&db).unwrap().runs().unwrap();
    assert!(
        before.len() >= 2 && before.len() < planned.len(),
        "{} runs stored at the kill",
        before.len()
    );
    assert!(
        !namespaces(&guard.prefixes).is_empty(),
        "SIGKILL leaves the lab behind (nothing could tear it down)"
    );

    // 3. Resume: the rest runs, the dead sweep's lab is collected.
    let mut child = sweep(dir, &state, &["--resume"]).spawn().unwrap();
    guard.prefixes.push(lab_prefix(child.id()));
    let status = wait_bounded(&mut child, Duration::from_secs(40));
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut e, &mut stderr);
    }
    assert!(status.success(), "resume failed: {stderr}");
    let after = Store::open(&db).unwrap().runs().unwrap();
    let got: Vec<(usize, u32)> = after.iter().map(|r| (r.config_id, r.rep)).collect();
    let unique: BTreeSet<(usize, u32)> = got.iter().copied().collect();
    assert_eq!(got.len(), unique.len(), "a run stored twice: {got:?}");
    assert_eq!(unique, planned, "every planned run, exactly once");
    for old in &before {
        let now = after.iter().find(|r| r.id == old.id).unwrap();
        assert_eq!(now, old, "a row written before the kill changed");
    }
    assert!(
        after.iter().filter(|r| r.status == "ok").count() >= planned.len() - 1,
        "nearly every run ok: {:?}",
        after.iter().map(|r| &r.error).collect::<Vec<_>>()
    );
    assert_eq!(
        namespaces(&guard.prefixes),
        BTreeSet::new(),
        "the killed sweep's lab is removed by the resume, the resume's own at its end"
    );
}
