//! `tcplab lab ...` as a user runs it (as root): the JSON it prints, the lifecycle under signals
//! and SIGKILL, and one-line errors with exit code 2 for bad input.

#![allow(clippy::unwrap_used, reason = "tests fail loudly on unexpected errors")]

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use tcplab_lab::StateDir;

/// Removes a lab through the library when the test ends, however it ends.
struct LabGuard<'a> {
    state: &'a Path,
    name: String,
}

impl Drop for LabGuard<'_> {
    fn drop(&mut self) {
        let _ = tcplab_lab::teardown(&StateDir::at(self.state), &self.name);
    }
}

/// Kills a child process we started (by its PID) if the test ends early.
struct ChildGuard(Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn lab_name(tag: &str) -> String {
    format!("c{}_{tag}", std::process::id() % 100_000)
}

fn tcplab(state: &Path) -> Command {
    assert!(
        rustix::process::geteuid().is_root(),
        "run the CLI tests as root"
    );
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tcplab"));
    cmd.env("TCPLAB_STATE_DIR", state);
    cmd
}

fn run(state: &Path, args: &[&str]) -> Output {
    tcplab(state).args(args).output().expect("tcplab runs")
}

fn namespaces_of(name: &str) -> Vec<String> {
    let prefix = format!("tcplab-{name}-");
    tcplab_lab::netns::list()
        .into_iter()
        .filter(|n| n.starts_with(&prefix))
        .collect()
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

#[test]
fn up_status_check_exec_down_round_trip() {
    let state = tempfile::tempdir().unwrap();
    let name = lab_name("trip");
    let _guard = LabGuard {
        state: state.path(),
        name: name.clone(),
    };
    let up = run(
        state.path(),
        &["lab", "up", "--topology", "path", "--name", &name, "--json"],
    );
    assert!(
        up.status.success(),
        "{}",
        String::from_utf8_lossy(&up.stderr)
    );
    let doc = json(&up);
    assert!(doc["build_ms"].as_f64().unwrap() > 0.0);
    assert_eq!(doc["lab"]["hosts"].as_array().unwrap().len(), 3);

    let status = run(state.path(), &["lab", "status", &name, "--json"]);
    assert!(status.status.success());
    let doc = json(&status);
    let lab = &doc["labs"][0];
    assert_eq!(lab["name"], name.as_str());
    assert_eq!(lab["topology"], "path");
    assert!(lab["owner"].is_null(), "lab up makes a persistent lab");
    let client = &lab["hosts"][0];
    assert_eq!(client["netns"], format!("tcplab-{name}-client").as_str());
    let eth0 = &client["interfaces"][0];
    assert_eq!(eth0["name"], "eth0");
    let addrs: Vec<&str> = eth0["addrs"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    assert!(
        addrs.contains(&"198.18.0.1/16") && addrs.contains(&"fd00::1/64"),
        "{addrs:?}"
    );
    // Facts ride along: kernel, HZ measured, congestion control, per-host sysctls.
    let facts = &doc["facts"];
    assert!(!facts["kernel_release"].as_str().unwrap().is_empty());
    let hz = facts["hz"]["hz"].as_u64().unwrap();
    let tick = facts["hz"]["tick_ns"].as_u64().unwrap();
    assert!(
        hz >= 100 && (1_000_000_000 / tick).abs_diff(hz) <= 1,
        "hz {hz} tick {tick}"
    );
    assert!(
        !facts["congestion_control"]["available"]
            .as_array()
            .unwrap()
            .len()
            >= 1
    );
    assert!(doc["host_facts"][&name]["server"]["sysctls"]["net.ipv4.tcp_rmem"].is_string());

    let check = run(state.path(), &["lab", "check", &name, "--json"]);
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stdout)
    );
    assert_eq!(json(&check)["failed"], 0);

    let exec = run(
        state.path(),
        &[
            "lab",
            "exec",
            "--lab",
            &name,
            "server",
            "--",
            "cat",
            "/proc/net/if_inet6",
        ],
    );
    assert!(exec.status.success());
    assert!(String::from_utf8_lossy(&exec.stdout).contains("fd000000000000000000000000000065"));
    let code = run(
        state.path(),
        &[
            "lab", "exec", "--lab", &name, "client", "--", "sh", "-c", "exit 7",
        ],
    );
    assert_eq!(
        code.status.code(),
        Some(7),
        "the command's exit code is passed through"
    );

    let set = run(
        state.path(),
        &["lab", "sysctl", &name, "client:net.ipv4.tcp_sack=0"],
    );
    assert!(
        set.status.success(),
        "{}",
        String::from_utf8_lossy(&set.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&set.stdout).trim(),
        "client: net.ipv4.tcp_sack = 0"
    );

    let down = run(state.path(), &["lab", "down", &name]);
    assert!(down.status.success());
    assert!(namespaces_of(&name).is_empty());
}

/// Starts `lab up --foreground` and waits until it has printed that the lab is built.
fn foreground(state: &Path, name: &str) -> ChildGuard {
    let mut child = tcplab(state)
        .args([
            "lab",
            "up",
            "--topology",
            "pair",
            "--name",
            name,
            "--foreground",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if line.starts_with("built in") {
                let _ = tx.send(());
            }
        }
    });
    let guard = ChildGuard(child);
    rx.recv_timeout(Duration::from_secs(20))
        .expect("the lab comes up");
    guard
}

#[test]
fn foreground_lab_is_removed_on_sigterm() {
    let state = tempfile::tempdir().unwrap();
    let name = lab_name("term");
    let _guard = LabGuard {
        state: state.path(),
        name: name.clone(),
    };
    let mut child = foreground(state.path(), &name);
    assert_eq!(namespaces_of(&name).len(), 2);
    let pid = rustix::process::Pid::from_raw(child.0.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let status = child.0.wait().unwrap();
    assert_eq!(status.code(), Some(128 + 15));
    assert!(
        namespaces_of(&name).is_empty(),
        "SIGTERM tears the lab down"
    );
    assert!(StateDir::at(state.path()).read(&name).unwrap().is_none());
}

#[test]
fn lab_of_a_sigkilled_owner_is_removed_by_gc() {
    let state = tempfile::tempdir().unwrap();
    let name = lab_name("kill");
    let _guard = LabGuard {
        state: state.path(),
        name: name.clone(),
    };
    let mut child = foreground(state.path(), &name);
    child.0.kill().unwrap(); // SIGKILL: no handler runs
    child.0.wait().unwrap();
    assert_eq!(
        namespaces_of(&name).len(),
        2,
        "SIGKILL leaves the lab behind"
    );
    let status = json(&run(state.path(), &["lab", "status", &name, "--json"]));
    assert_eq!(status["labs"][0]["owner_alive"], false);
    let gc = run(state.path(), &["lab", "gc", "--json"]);
    assert!(gc.status.success());
    assert_eq!(json(&gc)["labs"][0], name.as_str());
    assert!(namespaces_of(&name).is_empty(), "gc removed the namespaces");
}

/// Runs a failing command and checks: exit 2, one line on stderr containing `needle`, and no
/// namespace of `name` left.
fn assert_usage_error(state: &Path, name: &str, args: &[&str], needle: &str) {
    let out = run(state, args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert_eq!(
        stderr.trim_end().lines().count(),
        1,
        "{args:?}: one line: {stderr}"
    );
    assert!(
        stderr.contains(needle),
        "{args:?}: expected '{needle}' in: {stderr}"
    );
    assert!(
        namespaces_of(name).is_empty(),
        "{args:?}: left namespaces behind"
    );
}

#[test]
fn bad_input_gives_one_line_and_exit_2() {
    let state = tempfile::tempdir().unwrap();
    let s = state.path();
    let n = lab_name("bad");
    let _guard = LabGuard {
        state: s,
        name: n.clone(),
    };
    assert_usage_error(
        s,
        &n,
        &["lab", "up", "--topology", "ring", "--name", &n],
        "--topology: unknown topology 'ring'",
    );
    assert_usage_error(
        s,
        &n,
        &[
            "lab",
            "up",
            "--topology",
            "star",
            "--hosts",
            "0",
            "--name",
            &n,
        ],
        "--hosts",
    );
    assert_usage_error(s, &n, &["lab", "up", "--name", "Bad-Name"], "--name");
    assert_usage_error(
        s,
        &n,
        &[
            "lab",
            "up",
            "--name",
            &n,
            "--sysctl",
            "client:net.core.rmem_max=8738000",
        ],
        "--allow-host-sysctl",
    );
    assert_usage_error(
        s,
        &n,
        &[
            "lab",
            "up",
            "--name",
            &n,
            "--sysctl",
            "all:net.ipv4.tcp_nonsense=1",
        ],
        "no such key",
    );
    assert_usage_error(
        s,
        &n,
        &[
            "lab",
            "up",
            "--name",
            &n,
            "--sysctl",
            "client:net.ipv4.tcp_congestion_control=nosuch",
        ],
        "no congestion control 'nosuch'",
    );
    assert_usage_error(
        s,
        &n,
        &[
            "lab",
            "up",
            "--name",
            &n,
            "--sysctl",
            "router:net.ipv4.tcp_sack=0",
        ],
        "no host 'router'",
    );
    assert_usage_error(
        s,
        &n,
        &["lab", "up", "--name", &n, "--offloads", "lro=on"],
        "--offloads",
    );
    assert_usage_error(s, &n, &["lab", "down", &n], "no lab named");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("lab.toml");
    std::fs::write(
        &file,
        "topology = \"custom\"\n[[host]]\nname = \"a\"\n[[host]]\nname = \"a\"\n",
    )
    .unwrap();
    assert_usage_error(
        s,
        &n,
        &["lab", "up", "--name", &n, "--file", file.to_str().unwrap()],
        "duplicate host name 'a'",
    );
    std::fs::write(&file, "topology = \"custom\"\n[[host]]\nname = \"a\"\n[[host]]\nname = \"b\"\n[[link]]\na = { host = \"a\", ifname = \"e\", addrs = [\"10.0.0.1/8\"] }\nb = { host = \"b\", ifname = \"e\" }\n").unwrap();
    assert_usage_error(
        s,
        &n,
        &["lab", "up", "--name", &n, "--file", file.to_str().unwrap()],
        "outside the lab ranges",
    );

    // A name clash with a lab that exists.
    let up = run(s, &["lab", "up", "--name", &n]);
    assert!(up.status.success());
    let out = run(s, &["lab", "up", "--name", &n]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("already exists"));
    assert_eq!(namespaces_of(&n).len(), 2, "the existing lab is untouched");
}

#[test]
fn a_state_directory_another_user_owns_is_refused_with_exit_2() {
    // Root's temporary directory, as the state of an unprivileged user (rootless labs are
    // tests/rootless.rs's): refused before anything is built, naming the directory.
    let state = tempfile::tempdir().unwrap();
    let name = lab_name("user");
    let out = tcplab(state.path())
        .args(["lab", "up", "--name", &name])
        .env("TCPLAB_STATE_DIR", state.path())
        .current_dir("/")
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&state.path().display().to_string())
            && stderr.contains("owned by UID 65534"),
        "{stderr}"
    );
    assert!(namespaces_of(&name).is_empty());
}

#[test]
fn json_errors_are_json() {
    let state = tempfile::tempdir().unwrap();
    let out = run(state.path(), &["lab", "up", "--topology", "ring", "--json"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(json(&out)["error"].as_str().unwrap().contains("--topology"));
}

#[test]
fn gc_all_removes_orphans_but_not_labs_of_other_state_directories() {
    let mine = tempfile::tempdir().unwrap();
    let other = tempfile::tempdir().unwrap();
    let name = lab_name("keep");
    let _guard = LabGuard {
        state: other.path(),
        name: name.clone(),
    };
    let up = run(other.path(), &["lab", "up", "--name", &name]);
    assert!(up.status.success());
    // An orphan: a tcplab namespace no registry knows (as after a lost state directory).
    let orphan = format!("tcplab-{}-orphan", lab_name("gc"));
    drop(tcplab_lab::netns::create(&orphan).unwrap());
    struct NsGuard(String);
    impl Drop for NsGuard {
        fn drop(&mut self) {
            let _ = tcplab_lab::netns::delete(&self.0);
        }
    }
    let _ns = NsGuard(orphan.clone());
    let gc = run(mine.path(), &["lab", "gc", "--all", "--json"]);
    assert!(
        gc.status.success(),
        "{}",
        String::from_utf8_lossy(&gc.stderr)
    );
    let removed = json(&gc)["orphan_namespaces"].clone();
    assert!(
        removed
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n == orphan.as_str()),
        "{removed}"
    );
    assert!(!tcplab_lab::netns::list().contains(&orphan));
    assert_eq!(
        namespaces_of(&name).len(),
        2,
        "another state directory's lab is not an orphan"
    );
}
