//! The ssh launcher for real (as root): a `star` lab of three hosts, Debian's sshd in h2 and
//! h3 on their lab addresses, and the coordinator in h1 launching the real tcplab binary over
//! ssh. Checked: the build is copied once, an authenticated msgs test reaches each agent, stop
//! and Drop leave no agent and no per-launch directory, and an agent whose ssh process dies
//! (as with its coordinator) exits on its own.

#![allow(clippy::unwrap_used, reason = "tests fail loudly on unexpected errors")]

mod common_sshd;

use std::path::Path;
use std::time::{Duration, Instant};

use common_sshd::Sshd;
use tcplab_fleet::inventory::Inventory;
use tcplab_fleet::launch::{Fleet, LaunchOptions, launch};
use tcplab_lab::{BuiltinOptions, Lab, LabSpec, Ownership, StateDir, Topology};

/// One lab at a time: the tests install the fleet's credentials process-wide for the msgs run,
/// and share two vCPUs with the rest of the suite.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The lab and its sshds; field order is drop order, so the sshds end before the namespaces.
struct World {
    sshd: Vec<Sshd>,
    lab: Lab,
    _state: tempfile::TempDir,
    /// The remote directory of the launches (the hosts share this machine's filesystem).
    remote: tempfile::TempDir,
}

impl World {
    fn new(tag: &str) -> World {
        assert!(
            rustix::process::geteuid().is_root(),
            "the fleet tests need root (namespaces, sshd): run them as root"
        );
        common_sshd::require_sshd();
        let state = tempfile::tempdir().unwrap();
        let spec = LabSpec::builtin(&BuiltinOptions {
            name: format!("f{}_{tag}", std::process::id() % 100_000),
            topology: Topology::Star,
            hosts: 3,
            ..BuiltinOptions::default()
        })
        .unwrap();
        let lab = Lab::build_in(StateDir::at(state.path()), spec, Ownership::Process).unwrap();
        let sshd = ["h2", "h3"]
            .iter()
            .map(|h| {
                let host = lab.host(h).unwrap();
                Sshd::start(host.netns_name(), host.ipv4().unwrap().into())
            })
            .collect();
        World {
            sshd,
            lab,
            _state: state,
            remote: tempfile::tempdir().unwrap(),
        }
    }

    fn inventory(&self) -> Inventory {
        let mut text = String::from("[defaults]\nport = 0\nuser = \"root\"\n");
        for s in &self.sshd {
            let name = if s.namespace.ends_with("-h2") {
                "h2"
            } else {
                "h3"
            };
            text.push_str(&format!(
                "[[host]]\nname = \"{name}\"\naddress = \"{}\"\nssh = true\n",
                s.addr.ip()
            ));
        }
        Inventory::parse(&text, "the test's hosts").unwrap()
    }

    fn options(&self) -> LaunchOptions {
        LaunchOptions {
            binary: env!("CARGO_BIN_EXE_tcplab").into(),
            remote_dir: self.remote.path().display().to_string(),
            ssh_options: common_sshd::ssh_client_options(),
            start_timeout: Duration::from_secs(30),
            ..LaunchOptions::default()
        }
    }

    /// Runs `f` on a thread inside h1 (the coordinator's host) and waits for it.
    fn in_h1<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        self.lab.host("h1").unwrap().run(f).unwrap()
    }

    /// The per-launch directories left in the remote directory.
    fn run_dirs(&self) -> Vec<String> {
        std::fs::read_dir(self.remote.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("run-"))
            .collect()
    }

    fn logs(&self) -> String {
        self.sshd
            .iter()
            .map(|s| s.log())
            .collect::<Vec<_>>()
            .join("\n")
    }
}

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// True while process `pid` exists and is not a zombie.
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z')),
        Err(_) => false,
    }
}

/// Waits at most `bound` for `pid` to end.
fn ended_within(pid: u32, bound: Duration) -> bool {
    let deadline = Instant::now() + bound;
    while Instant::now() < deadline {
        if !alive(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    !alive(pid)
}

/// A short authenticated msgs test from the coordinator to every agent of `fleet`.
fn msgs_to_each(fleet: &Fleet) {
    fleet.auth.clone().install();
    for a in &fleet.agents {
        let cfg = tcplab_load::msgs::MsgsConfig {
            count: 2_000,
            timeout_ms: 10_000,
            ..Default::default()
        };
        let r = tcplab_load::msgs::run_client(&cfg, a.addr, None)
            .unwrap_or_else(|e| panic!("msgs to {} at {}: {e}", a.name, a.addr));
        assert!(
            r.meta.complete,
            "msgs to {}: {:?}",
            a.name, r.meta.incomplete_reason
        );
        assert_eq!(r.runs[0].received, 2_000, "msgs to {}", a.name);
    }
}

/// Remote PIDs of every agent of `fleet`.
fn pids(fleet: &Fleet) -> Vec<u32> {
    fleet
        .agents
        .iter()
        .map(|a| {
            fleet
                .remote_pid(&a.name)
                .expect("the launcher learned the remote PID")
        })
        .collect()
}

#[test]
fn ssh_launch_copies_once_runs_authenticated_tests_and_stops_clean() {
    let _serial = serial();
    let world = World::new("ssh");
    let inv = world.inventory();
    let opts = world.options();
    let (first_pids, copied) = world.in_h1(|| {
        let fleet =
            launch(&inv, &opts).unwrap_or_else(|e| panic!("{e}\nsshd logs:\n{}", world.logs()));
        assert_eq!(fleet.agents.len(), 2);
        for a in &fleet.agents {
            assert!(a.server_key.is_some(), "{a:?}");
            assert_ne!(a.addr.port(), 0, "{a:?}");
        }
        msgs_to_each(&fleet);
        let before = pids(&fleet);
        assert!(before.iter().all(|p| alive(*p)), "{before:?}");
        assert_eq!(world.run_dirs().len(), 2, "{:?}", world.run_dirs());
        // Restarting one host's agent (what `mesh --resume` does) ends the old one.
        let mut fleet = fleet;
        let old = fleet.remote_pid("h2").unwrap();
        fleet.restart("h2").unwrap();
        let new = fleet.remote_pid("h2").unwrap();
        assert_ne!(old, new);
        assert!(
            ended_within(old, Duration::from_secs(5)),
            "agent {old} outlived restart"
        );
        msgs_to_each(&fleet);
        let pids = pids(&fleet);
        let copied = fleet.copied();
        let problems = fleet.stop();
        assert!(problems.is_empty(), "{problems:?}");
        (pids, copied)
    });
    assert!(!copied.is_empty(), "the first launch copies the build");
    for pid in &first_pids {
        assert!(
            ended_within(*pid, Duration::from_secs(5)),
            "agent {pid} still runs after stop"
        );
    }
    assert!(world.run_dirs().is_empty(), "{:?}", world.run_dirs());
    let builds: Vec<_> = std::fs::read_dir(world.remote.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        builds.iter().filter(|n| n.starts_with("tcplab-")).count(),
        1,
        "one build, no temporary files: {builds:?}"
    );

    // The second launch finds the build; dropping its fleet without stop ends its agents.
    let second = world.in_h1(|| {
        let fleet = launch(&inv, &opts).unwrap();
        assert!(
            fleet.copied().is_empty(),
            "copied again: {:?}",
            fleet.copied()
        );
        msgs_to_each(&fleet);
        let pids = pids(&fleet);
        drop(fleet);
        pids
    });
    for pid in &second {
        assert!(
            ended_within(*pid, Duration::from_secs(5)),
            "agent {pid} still runs after the fleet was dropped"
        );
    }
    assert!(world.run_dirs().is_empty(), "{:?}", world.run_dirs());
}

#[test]
fn an_agent_whose_ssh_process_dies_exits_on_its_own() {
    let _serial = serial();
    let world = World::new("die");
    let inv = world.inventory();
    let opts = world.options();
    world.in_h1(|| {
        let fleet =
            launch(&inv, &opts).unwrap_or_else(|e| panic!("{e}\nsshd logs:\n{}", world.logs()));
        let remote = fleet.remote_pid("h2").unwrap();
        let local = fleet.launcher_pid("h2").unwrap();
        assert!(alive(remote));
        // SIGKILL, as the coordinator's death (or the kernel's PR_SET_PDEATHSIG) would end it.
        let pid = rustix::process::Pid::from_raw(i32::try_from(local).unwrap()).unwrap();
        rustix::process::kill_process(pid, rustix::process::Signal::KILL).unwrap();
        assert!(
            ended_within(remote, Duration::from_secs(10)),
            "the agent outlived its ssh session"
        );
        // h3's agent is untouched.
        assert!(alive(fleet.remote_pid("h3").unwrap()));
        let _ = fleet.stop();
    });
    assert!(world.run_dirs().is_empty(), "{:?}", world.run_dirs());
}

/// The fixture itself: the sshd answers on its lab address only and goes with its guard.
#[test]
fn sshd_listens_on_the_lab_address_and_ends_with_its_guard() {
    let _serial = serial();
    let world = World::new("fix");
    let sshd_pid = world.sshd[0].pid();
    assert!(alive(sshd_pid));
    let dest = world.sshd[0].destination();
    let out = world.in_h1(|| {
        std::process::Command::new("ssh")
            .args(common_sshd::ssh_client_options())
            .args(["-o", "BatchMode=yes", &dest, "echo", "ok"])
            .output()
            .unwrap()
    });
    assert!(
        String::from_utf8_lossy(&out.stdout).trim() == "ok",
        "{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        world.logs()
    );
    assert!(Path::new("/run/sshd").is_dir());
    drop(world);
    assert!(ended_within(sshd_pid, Duration::from_secs(5)));
}

/// Set (to the hosts file's text) in the coordinator process of the SIGKILL test.
const COORDINATOR_HOSTS: &str = "TCPLAB_TEST_SSH_HOSTS";

/// The coordinator itself killed by SIGKILL (this test binary again, inside h1): its ssh
/// children get SIGTERM from the kernel (PR_SET_PDEATHSIG), the sessions close, the agents see
/// EOF on stdin and exit.
#[test]
fn a_coordinator_killed_by_sigkill_takes_its_agents_with_it() {
    use std::io::BufRead;
    let _serial = serial();
    let world = World::new("kil");
    let opts = world.options();
    let hosts = {
        let mut text = String::from("[defaults]\nport = 0\nuser = \"root\"\n");
        for (i, s) in world.sshd.iter().enumerate() {
            text.push_str(&format!(
                "[[host]]\nname = \"h{}\"\naddress = \"{}\"\nssh = true\n",
                i + 2,
                s.addr.ip()
            ));
        }
        text
    };
    let child = world
        .lab
        .host("h1")
        .unwrap()
        .command(std::env::current_exe().unwrap())
        .args(["--exact", "ssh_coordinator", "--ignored", "--nocapture"])
        .env(COORDINATOR_HOSTS, hosts)
        .env("TCPLAB_TEST_SSH_REMOTE", &opts.remote_dir)
        .env("TCPLAB_TEST_SSH_OPTIONS", opts.ssh_options.join("\n"))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .unwrap();
    /// Kills the coordinator if the test fails before it does.
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut coordinator = Kill(child);
    let stdout = coordinator.0.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    let pids: Vec<u32> = loop {
        let line = rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .expect("the coordinator prints its agents' PIDs");
        if let Some(p) = line.strip_prefix("agents: ") {
            break p.split_whitespace().map(|p| p.parse().unwrap()).collect();
        }
    };
    assert_eq!(pids.len(), 2);
    assert!(pids.iter().all(|p| alive(*p)), "{pids:?}");
    let coordinator_pid = coordinator.0.id();
    let pid = rustix::process::Pid::from_raw(i32::try_from(coordinator_pid).unwrap()).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::KILL).unwrap();
    let _ = coordinator.0.wait();
    for p in &pids {
        assert!(
            ended_within(*p, Duration::from_secs(10)),
            "agent {p} outlived its coordinator"
        );
    }
    // Nobody was left to clean up: end the ssh masters the dead coordinator left (they would
    // go on their own after ControlPersist) and their private directory.
    let prefix = format!("tcplab-ssh-{coordinator_pid}-");
    for dir in std::fs::read_dir(std::env::temp_dir()).unwrap().flatten() {
        if !dir.file_name().to_string_lossy().starts_with(&prefix) {
            continue;
        }
        for sock in std::fs::read_dir(dir.path()).unwrap().flatten() {
            let _ = std::process::Command::new("ssh")
                .arg("-o")
                .arg(format!("ControlPath={}", sock.path().display()))
                .args(["-O", "exit", "unused"])
                .output();
        }
        let _ = std::fs::remove_dir_all(dir.path());
    }
}

/// The coordinator of the SIGKILL test (ignored on its own): launches, prints its agents'
/// PIDs, and waits to be killed.
#[test]
#[ignore = "run by a_coordinator_killed_by_sigkill_takes_its_agents_with_it"]
fn ssh_coordinator() {
    use std::io::Write;
    let Ok(hosts) = std::env::var(COORDINATOR_HOSTS) else {
        return;
    };
    let inv = Inventory::parse(&hosts, COORDINATOR_HOSTS).unwrap();
    let opts = LaunchOptions {
        binary: env!("CARGO_BIN_EXE_tcplab").into(),
        remote_dir: std::env::var("TCPLAB_TEST_SSH_REMOTE").unwrap(),
        ssh_options: std::env::var("TCPLAB_TEST_SSH_OPTIONS")
            .unwrap()
            .lines()
            .map(String::from)
            .collect(),
        ..LaunchOptions::default()
    };
    let fleet = launch(&inv, &opts).unwrap();
    let pids: Vec<String> = pids(&fleet).iter().map(|p| p.to_string()).collect();
    println!("agents: {}", pids.join(" "));
    std::io::stdout().flush().unwrap();
    // Killed long before this ends.
    std::thread::sleep(Duration::from_secs(60));
    drop(fleet);
}

/// A host ssh cannot reach: the error names the host, the exact command and ssh's own words,
/// and the launch leaves nothing behind.
#[test]
fn an_unreachable_host_is_named_with_the_command_and_what_ssh_said() {
    // Serial: the other tests' control directories would be counted as left.
    let _serial = serial();
    common_sshd::require_sshd();
    let inv = Inventory::parse(
        "[[host]]\nname = \"far\"\naddress = \"127.0.0.1\"\nssh = \"root@127.0.0.1\"\n",
        "the test's hosts",
    )
    .unwrap();
    let remote = tempfile::tempdir().unwrap();
    let opts = LaunchOptions {
        binary: env!("CARGO_BIN_EXE_tcplab").into(),
        remote_dir: remote.path().display().to_string(),
        // Port 1 on loopback: nothing listens, the connection is refused at once.
        ssh_options: ["-F", "/dev/null", "-o", "Port=1"]
            .map(String::from)
            .to_vec(),
        ..LaunchOptions::default()
    };
    let e = launch(&inv, &opts).expect_err("unreachable").to_string();
    eprintln!("{e}");
    assert!(e.starts_with("host far: reaching the host failed"), "{e}");
    assert!(e.contains("`ssh root@127.0.0.1 true`"), "{e}");
    assert!(
        e.contains("-o Port=1") && e.contains("root@127.0.0.1"),
        "{e}"
    );
    assert!(e.to_lowercase().contains("refused"), "{e}");
    let prefix = format!("tcplab-ssh-{}-", std::process::id());
    let left: Vec<_> = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .filter(|d| d.file_name().to_string_lossy().starts_with(&prefix))
        .map(|d| d.path())
        .collect();
    assert!(left.is_empty(), "control directories left: {left:?}");
}
