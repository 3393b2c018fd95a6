//! doctor and tune from the command line (as root): a pathology is found with its fix and a
//! healthy path is not blamed; doctor and tune against `tcplab serve` on another "machine" (a
//! process in another namespace, reached by address); tune races candidates and verifies the
//! winner.

#![allow(clippy::unwrap_used, reason = "tests fail loudly on unexpected errors")]

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// These tests measure: one at a time, so one's emulator does not starve another's workloads.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn tcplab(state: &Path) -> Command {
    assert!(
        rustix::process::geteuid().is_root(),
        "run the CLI tests as root"
    );
    let mut c = Command::new(env!("CARGO_BIN_EXE_tcplab"));
    c.env("TCPLAB_STATE_DIR", state);
    c
}

fn run(state: &Path, args: &[&str]) -> Output {
    tcplab(state).args(args).output().unwrap()
}

/// The command's JSON document, after checking it succeeded (its stderr is the message if not).
fn success_json(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

fn findings(out: &Output) -> Vec<String> {
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)));
    doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn doctor_names_small_buffers_on_a_wan_path_and_fails_on_them() {
    let _serial = serial();
    let state = tempfile::tempdir().unwrap();
    let out = run(
        state.path(),
        &[
            "doctor",
            "--topology",
            "path",
            "--delay",
            "10ms",
            "--rate",
            "1gbit",
            "--sysctl",
            "all:net.ipv4.tcp_rmem=4096 87380 174760",
            "--sysctl",
            "all:net.ipv4.tcp_wmem=4096 16384 131072",
            "--budget",
            "12s",
            "--json",
            "--fail-on",
            "warning",
        ],
    );
    let ids = findings(&out);
    assert!(
        ids.iter()
            .any(|i| i == "rwnd_limited" || i == "sndbuf_limited"),
        "a 170 KB window on a 20 ms, 1 Gbit/s path is the limit: {ids:?}"
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "--fail-on warning with a warning present"
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let f = doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "rwnd_limited" || f["id"] == "sndbuf_limited")
        .unwrap();
    let lines = f["fix"].to_string();
    assert!(
        lines.contains("net.ipv4.tcp_rmem") || lines.contains("net.ipv4.tcp_wmem"),
        "{lines}"
    );
    assert!(!f["evidence"].as_array().unwrap().is_empty());
}

#[test]
fn doctor_does_not_blame_a_healthy_pair() {
    let _serial = serial();
    let state = tempfile::tempdir().unwrap();
    let out = run(
        state.path(),
        &["doctor", "--topology", "pair", "--budget", "10s", "--json"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ids = serious(&out);
    // TIME_WAIT build-up is a true consequence of crr's connection rate on any path (seed
    // 003), and a noisy machine may make a run untrustworthy; nothing else may be blamed.
    for id in &ids {
        assert!(
            id.starts_with("untrustworthy") || id == "connection_trouble.time_wait",
            "a bare veth pair with default settings has nothing to fix: {ids:?}"
        );
    }
}

/// Ends `tcplab serve` (a process we started) by its PID when the test ends.
struct ServeGuard(Child);

impl Drop for ServeGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Tears the pair down when the test ends, even on failure.
struct Down(tempfile::TempDir, String);

impl Drop for Down {
    fn drop(&mut self) {
        let _ = tcplab_lab::teardown(&tcplab_lab::StateDir::at(self.0.path()), &self.1);
    }
}

/// Two namespaces joined by a lab pair stand in for two machines: `tcplab serve` runs in the
/// server as its own process at 198.18.0.101; commands run from the client with --to, not --lab.
struct RemotePair {
    // Field order is drop order: the server ends before its namespace goes.
    serve: ServeGuard,
    down: Down,
}

impl RemotePair {
    fn start(tag: &str) -> RemotePair {
        let state = tempfile::tempdir().unwrap();
        let name = format!("d{}_{tag}", std::process::id() % 100_000);
        let up = run(state.path(), &["lab", "up", "--name", &name]);
        assert!(
            up.status.success(),
            "{}",
            String::from_utf8_lossy(&up.stderr)
        );
        let down = Down(state, name);
        let serve = tcplab(down.0.path())
            .args(["lab", "exec", "--lab", &down.1, "server", "--"])
            .args([
                env!("CARGO_BIN_EXE_tcplab"),
                "serve",
                "--listen",
                "198.18.0.101:5301",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut pair = RemotePair {
            serve: ServeGuard(serve),
            down,
        };
        pair.wait_listening();
        pair
    }

    /// Waits until the server host has a socket listening on port 5301 (read from its own
    /// /proc/net/tcp, without connecting: a probe would count against the agent's limit on
    /// control connections), rather than sleeping a fixed time that a loaded machine may
    /// exceed. Fails if `tcplab serve` exits or is not listening within 30 s.
    fn wait_listening(&mut self) {
        let lab =
            tcplab_lab::Lab::open_in(tcplab_lab::StateDir::at(self.down.0.path()), &self.down.1)
                .unwrap();
        let server = lab.host("server").unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let tcp = server
                .run(|| std::fs::read_to_string("/proc/thread-self/net/tcp"))
                .unwrap()
                .unwrap();
            // `sl local_address rem_address st ...`: port 5301 is 14B5, LISTEN is 0A.
            let listening = tcp.lines().skip(1).any(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                f.len() > 3 && f[1].ends_with(":14B5") && f[3] == "0A"
            });
            if listening {
                return;
            }
            if let Some(status) = self.serve.0.try_wait().unwrap() {
                panic!("tcplab serve in the server host exited: {status}");
            }
            assert!(
                Instant::now() < deadline,
                "tcplab serve is not listening on 198.18.0.101:5301 after 30 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `tcplab ARGS` in the client namespace.
    fn client(&self, args: &[&str]) -> Output {
        tcplab(self.down.0.path())
            .args(["lab", "exec", "--lab", &self.down.1, "client", "--"])
            .arg(env!("CARGO_BIN_EXE_tcplab"))
            .args(args)
            .output()
            .unwrap()
    }
}

/// The server host named in a hosts file as an agent already running (a lab address: no pin).
#[test]
fn doctor_against_tcplab_serve_on_another_host() {
    let _serial = serial();
    let pair = RemotePair::start("srv");
    let dir = tempfile::tempdir().unwrap();
    let hosts = dir.path().join("hosts.toml");
    std::fs::write(
        &hosts,
        "[[host]]\nname = \"srv\"\naddress = \"198.18.0.101\"\nlabels = [\"lab\"]\n",
    )
    .unwrap();
    let out = pair.client(&[
        "doctor",
        "--hosts",
        hosts.to_str().unwrap(),
        "--to",
        "srv",
        "--budget",
        "10s",
        "--rate",
        "10gbit",
        "--json",
    ]);
    let doc = success_json(&out);
    assert!(
        doc["battery"]["stream"]["summary"]["throughput_bps"]
            .as_f64()
            .unwrap()
            > 1e8
    );
    // The far end said what it is, and the path was estimated, beside what it is sold as.
    let ends = &doc["battery"]["ends"];
    // The agent names its build as `tcplab --version` does: the version, then the commit.
    let agent = ends["agent_version"].as_str().unwrap_or_default();
    assert!(agent.starts_with(env!("CARGO_PKG_VERSION")), "{ends}");
    assert!(
        ends["server"]["sysctls"]["net.ipv4.tcp_rmem"].is_string(),
        "{ends}"
    );
    assert!(doc["path"]["base_rtt"]["value"].as_f64().unwrap() > 0.0);
    assert_eq!(doc["path"]["sold_rate_bps"].as_f64(), Some(1e10));
    assert!(doc["battery"]["stream"]["server_view"]["counters"].is_object());
    // A real path's impairments are its own: only --rate is read with --to.
    let refused = pair.client(&["doctor", "--to", "198.18.0.101", "--delay", "5ms"]);
    assert_eq!(refused.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("--delay") && stderr.lines().count() == 1,
        "{stderr}"
    );
    assert!(
        doc["battery"]["crr"]["summary"]["connections_per_s"]
            .as_f64()
            .unwrap()
            > 10.0
    );
}

#[test]
fn tune_against_tcplab_serve_races_socket_options_only() {
    let _serial = serial();
    let pair = RemotePair::start("tun");
    let dir = tempfile::tempdir().unwrap();
    let out = pair.client(&[
        "tune",
        "--to",
        "198.18.0.101",
        "--workload",
        "msgs",
        "--no-doctor",
        "--budget",
        "30s",
        "--dir",
        dir.path().to_str().unwrap(),
        "--json",
    ]);
    let doc = success_json(&out);
    let scenario = doc["scenario"].as_str().unwrap();
    assert!(scenario.contains("no lab is built"), "{scenario}");
    assert!(
        !scenario.contains("sysctl.") && !scenario.contains("[lab"),
        "a remote host's sysctls are not tune's to race: {scenario}"
    );
    for name in ["socket.nodelay", "socket.quickack", "socket.delack_max_us"] {
        assert!(scenario.contains(name), "{name} raced: {scenario}");
    }
    // Every configuration ran against the server: a rejected or failed run is stored as such.
    let store = tcplab_study::store::Store::open(std::path::Path::new(doc["db"].as_str().unwrap()))
        .unwrap();
    let runs = store.runs().unwrap();
    assert!(
        runs.len() >= 24,
        "8 configurations (the baseline is one of them) x 3 repetitions at least: {}",
        runs.len()
    );
    assert!(
        runs.iter().all(|r| r.status == "ok"),
        "{:?}",
        runs.iter().map(|r| &r.status).collect::<Vec<_>>()
    );
    let apply = doc["apply"].to_string();
    assert!(!apply.contains("\"namespace\""), "{apply}");
}

#[test]
fn tune_races_buffers_and_verifies_the_winner() {
    let _serial = serial();
    let state = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = run(
        state.path(),
        &[
            "tune",
            "--workload",
            "stream",
            "--no-doctor",
            "--budget",
            "40s",
            "--topology",
            "path",
            "--delay",
            "10ms",
            "--rate",
            "1gbit",
            "--sysctl",
            "all:net.ipv4.tcp_rmem=4096 87380 174760",
            "--sysctl",
            "all:net.ipv4.tcp_wmem=4096 16384 131072",
            "--dir",
            dir.path().to_str().unwrap(),
            "--json",
        ],
    );
    let doc = success_json(&out);
    let winner = doc["winner"].to_string();
    assert!(
        winner.contains("buffers"),
        "larger buffers win on a 20 ms path: {winner}"
    );
    let v = &doc["verification"];
    assert!(
        v["speed_up"]["lower"].as_f64().unwrap() > 2.0,
        "verified gain with its CI: {v}"
    );
    let apply = doc["apply"].to_string();
    assert!(
        apply.contains("net.ipv4.tcp_rmem") && apply.contains("namespace"),
        "{apply}"
    );
}

#[test]
fn sweep_against_tcplab_serve_runs_every_configuration_there() {
    let _serial = serial();
    let pair = RemotePair::start("swp");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("remote.toml");
    std::fs::write(
        &file,
        "name = \"remote\"\nrepetitions = 2\nobjective = { metric = \"per_message_us.mean\", goal = \"minimise\" }\n\
         [[workload]]\nkind = \"msgs\"\ncount = 5000\nsize = 1\n\
         [[factor]]\nname = \"socket.nodelay\"\nvalues = [false, true]\n",
    )
    .unwrap();
    let db = dir.path().join("remote.db");
    let out = pair.client(&[
        "sweep",
        file.to_str().unwrap(),
        "--to",
        "198.18.0.101",
        "--db",
        db.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let store = tcplab_study::store::Store::open(&db).unwrap();
    let runs = store.runs().unwrap();
    assert_eq!(runs.len(), 4, "2 configurations x 2 repetitions");
    for r in &runs {
        assert_eq!(r.status, "ok");
        let per_msg = r.metrics["per_message_us.mean"];
        assert!(per_msg > 0.0 && per_msg < 1_000.0, "{per_msg}");
    }
}

/// Ids of the findings at warning severity or above.
fn serious(out: &Output) -> Vec<String> {
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["severity"] != "info")
        .map(|f| f["id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_host_not_in_the_hosts_file_is_refused_naming_the_hosts() {
    let dir = tempfile::tempdir().unwrap();
    let hosts = dir.path().join("hosts.toml");
    std::fs::write(
        &hosts,
        "[[host]]\nname = \"a\"\naddress = \"198.18.0.1\"\n[[host]]\nname = \"b\"\naddress = \"198.18.0.2\"\n",
    )
    .unwrap();
    for to in [Some("nope"), None] {
        let mut args = vec!["doctor", "--hosts", hosts.to_str().unwrap()];
        args.extend(to.map(|t| ["--to", t]).into_iter().flatten());
        let out = run(dir.path(), &args);
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("its hosts: a, b"), "{err}");
    }
}
