//! The sweep the crash-point and I/O-fault tests interrupt: a small scenario, the sweep command
//! that runs it, and the checks of what its database holds afterwards.

#![allow(dead_code, reason = "each test binary uses part of it")]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tcplab_study::store::StoredRun;
use tcplab_study::{Plan, PlanOptions, ScenarioFile, Store};

/// 2 × 2 configurations × 3 repetitions of 100,000 one-byte messages (about 0.2 s a run), in
/// one lab reset between runs.
pub const SCENARIO: &str = r#"
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
pub struct Guard {
    pub child: Option<Child>,
    pub state: PathBuf,
    pub prefixes: Vec<String>,
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
pub fn namespaces(prefixes: &[String]) -> BTreeSet<String> {
    let Ok(dir) = std::fs::read_dir("/run/netns") else {
        return BTreeSet::new();
    };
    dir.filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| prefixes.iter().any(|p| n.starts_with(p)))
        .collect()
}

pub fn lab_prefix(pid: u32) -> String {
    format!("tcplab-st{}_", pid % 100_000)
}

pub fn sweep(dir: &Path, state: &Path, extra: &[&str]) -> Command {
    sweep_into(dir, state, Path::new("killme.db"), extra)
}

/// [`sweep`] with its database at `db`.
pub fn sweep_into(dir: &Path, state: &Path, db: &Path, extra: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tcplab"));
    cmd.env("TCPLAB_STATE_DIR", state)
        .current_dir(dir)
        .args(["sweep", "killme.toml", "--db"])
        .arg(db)
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// The scenario's planned runs, as (configuration, repetition).
pub fn planned_runs() -> BTreeSet<(usize, u32)> {
    let plan = Plan::new(
        &ScenarioFile::parse("killme.toml", SCENARIO).unwrap(),
        PlanOptions::default(),
    )
    .unwrap();
    let planned: BTreeSet<(usize, u32)> = plan.runs.iter().map(|r| (r.config.id, r.rep)).collect();
    assert_eq!(planned.len(), 12);
    planned
}

/// Checks that `after` holds every planned run exactly once and every row of `before`
/// unchanged.
pub fn assert_complete(
    after: &[StoredRun],
    before: &[StoredRun],
    planned: &BTreeSet<(usize, u32)>,
) {
    let got: Vec<(usize, u32)> = after.iter().map(|r| (r.config_id, r.rep)).collect();
    let unique: BTreeSet<(usize, u32)> = got.iter().copied().collect();
    assert_eq!(got.len(), unique.len(), "a run stored twice: {got:?}");
    assert_eq!(&unique, planned, "every planned run, exactly once");
    for old in before {
        let now = after.iter().find(|r| r.id == old.id).unwrap();
        assert_eq!(now, old, "a row written before a kill changed");
    }
}

pub fn stored(db: &Path) -> Vec<StoredRun> {
    Store::open(db).and_then(|s| s.runs()).unwrap_or_default()
}

/// Waits for `child` to exit within `limit`; kills it (by PID) past that.
pub fn wait_bounded(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
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
