//! A study that changes a real host's sysctl, its coordinator gone mid-run (root): an
//! authenticated agent with `--allow-sysctl` runs in a pair lab's server host, and `tcplab run
//! --hosts FILE --to srv --allow-host-sysctl` runs from the client host a scenario whose baseline
//! sets `[lab.sysctl.server] net.ipv4.tcp_rmem`. The test waits until the server host shows the
//! held value, then either kills the coordinator by PID with SIGKILL (its connection closes) or
//! freezes it with SIGSTOP (its connection stays open and silent, as behind a network partition,
//! so only the lease can end the hold), and asserts the agent put the old value back within its
//! lease (10 s) and a margin, and left no journal behind. Guards stop the agent and the
//! coordinator and remove the lab, whatever happens.

#![allow(clippy::unwrap_used, reason = "tests fail loudly on unexpected errors")]

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tcplab_lab::{BuiltinOptions, Lab, LabSpec, Ownership, StateDir, Topology};

const HELD: &str = "4096 65536 1048576";

/// Kills a child process (ours) when dropped.
struct Kill(Option<Child>);

impl Drop for Kill {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn tcplab() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tcplab"))
}

fn read_rmem(lab: &Lab) -> String {
    let out = lab
        .host("server")
        .unwrap()
        .command("cat")
        .arg("/proc/sys/net/ipv4/tcp_rmem")
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

fn wait_for(what: &str, bound: Duration, mut ok: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !ok() {
        assert!(start.elapsed() < bound, "{what}: not within {bound:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    start.elapsed()
}

fn keygen(path: &Path, comment: &str) -> String {
    let out = tcplab()
        .args(["key", "gen", "-o"])
        .arg(path)
        .args(["-C", comment])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// How the coordinator goes away.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Gone {
    /// Killed: the kernel closes its sockets.
    Killed,
    /// Frozen: its sockets stay open, nothing is renewed.
    Frozen,
}

#[test]
fn a_coordinator_killed_by_sigkill_leaves_the_hosts_sysctl_as_it_was() {
    coordinator_gone(Gone::Killed, "fsysk");
}

#[test]
fn a_silent_coordinator_loses_its_hold_when_the_lease_runs_out() {
    coordinator_gone(Gone::Frozen, "fsysf");
}

fn coordinator_gone(how: Gone, tag: &str) {
    assert!(
        rustix::process::geteuid().is_root(),
        "this test builds a lab and changes a lab host's sysctl: run it as root"
    );
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let spec = LabSpec::builtin(&BuiltinOptions {
        name: format!("t{}_{tag}", std::process::id() % 100_000),
        topology: Topology::Pair,
        ..BuiltinOptions::default()
    })
    .unwrap();
    let lab = Lab::build_in(StateDir::at(&state), spec, Ownership::Process).unwrap();
    let server = lab.host("server").unwrap();
    let addr = server.ipv4().unwrap();
    let before = read_rmem(&lab);
    assert_ne!(
        before, HELD,
        "pick a held value the host does not already have"
    );

    let agent_pub = keygen(&dir.path().join("agent"), "agent");
    let coord_pub = keygen(&dir.path().join("coord"), "coordinator");
    std::fs::write(dir.path().join("clients"), format!("{coord_pub}\n")).unwrap();
    let journal = dir.path().join("journal");
    let agent_log = std::fs::File::create(dir.path().join("agent.log")).unwrap();
    let _agent = Kill(Some(
        server
            .command(env!("CARGO_BIN_EXE_tcplab"))
            .args([
                "serve",
                "--listen",
                &format!("{addr}:5301"),
                "--allow-sysctl",
            ])
            .arg("--keys")
            .arg(dir.path().join("clients"))
            .arg("--key")
            .arg(dir.path().join("agent"))
            .arg("--journal")
            .arg(&journal)
            .stdin(Stdio::null())
            .stderr(agent_log)
            .spawn()
            .unwrap(),
    ));
    wait_for("the agent listens", Duration::from_secs(10), || {
        std::fs::read_to_string(dir.path().join("agent.log"))
            .is_ok_and(|l| l.contains("listening on"))
    });

    let hosts = dir.path().join("hosts.toml");
    std::fs::write(
        &hosts,
        format!("[[host]]\nname = \"srv\"\naddress = \"{addr}\"\nserver_key = \"{agent_pub}\"\n"),
    )
    .unwrap();
    let scenario = dir.path().join("hold.toml");
    std::fs::write(
        &scenario,
        format!(
            "name = \"hold\"\nrepetitions = 1\nobjective = {{ metric = \"throughput_bps\", goal = \"maximise\" }}\n\n[lab.sysctl.server]\n\"net.ipv4.tcp_rmem\" = \"{HELD}\"\n\n\
             [[workload]]\nkind = \"stream\"\nduration = \"60s\"\n"
        ),
    )
    .unwrap();
    let coordinator = lab
        .host("client")
        .unwrap()
        .command(env!("CARGO_BIN_EXE_tcplab"))
        .arg("run")
        .arg(&scenario)
        .args(["--to", "srv", "--allow-host-sysctl"])
        .arg("--hosts")
        .arg(&hosts)
        .arg("--db")
        .arg(dir.path().join("hold.db"))
        .env("TCPLAB_KEY", dir.path().join("coord"))
        .env("TCPLAB_STATE_DIR", &state)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("run.log")).unwrap())
        .spawn()
        .unwrap();
    let mut coordinator = Kill(Some(coordinator));
    let run_log = || std::fs::read_to_string(dir.path().join("run.log")).unwrap_or_default();
    wait_for(
        "the server host shows the held value",
        Duration::from_secs(30),
        || {
            if let Some(Ok(Some(status))) = coordinator.0.as_mut().map(Child::try_wait) {
                panic!("the coordinator ended early ({status}): {}", run_log());
            }
            read_rmem(&lab) == HELD
        },
    );

    let pid = coordinator.0.as_ref().unwrap().id() as i32;
    let signal = match how {
        // No handler runs, no Release is sent; the kernel closes the connection.
        Gone::Killed => rustix::process::Signal::KILL,
        // The process and its renewing thread stop; the connection stays open.
        Gone::Frozen => rustix::process::Signal::STOP,
    };
    rustix::process::kill_process(rustix::process::Pid::from_raw(pid).unwrap(), signal).unwrap();
    let took = wait_for(
        "the agent restores the old value",
        Duration::from_secs(13),
        || read_rmem(&lab) == before,
    );
    eprintln!("{how:?}: restored {took:?} after the coordinator went");
    if how == Gone::Frozen {
        // Not before the lease could have run out: the restore was the lease's doing.
        assert!(took > Duration::from_secs(3), "restored after {took:?}");
    }
    // The guard kills the (stopped) coordinator; SIGKILL ends a stopped process too.
    let journal_left = std::fs::read_to_string(&journal).unwrap_or_default();
    assert!(
        journal_left.trim().is_empty() || journal_left.trim() == "[]",
        "the agent's journal still holds: {journal_left}"
    );
}
