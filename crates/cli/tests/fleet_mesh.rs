//! The mesh for real (as root): a `star` lab of 16 hosts, each running Debian's sshd on its lab
//! address (key-only, throwaway host key), and `tcplab mesh` in h1 launching its 16 agents over
//! ssh and running the 240-pair msgs mesh. Mid-mesh the test kills one host's agent by its PID:
//! that host's remaining pairs are recorded as failed with the reason and the rest complete;
//! `--resume` (which launches the agents again) runs only the missing pairs. Before it, `fleet
//! check` reaches all 16 agents (version, keys, facts, clock offset within its uncertainty).
//! Guards stop the coordinator, the sshds and the lab, whatever happens.

#![allow(clippy::unwrap_used, reason = "tests fail loudly on unexpected errors")]

mod common_sshd;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common_sshd::Sshd;
use tcplab_fleet::mesh::store::MeshStore;
use tcplab_lab::{BuiltinOptions, Lab, LabSpec, Ownership, StateDir, Topology};

const HOSTS: usize = 16;
/// The host whose agent dies mid-mesh.
const VICTIM: &str = "h7";

/// Field order is drop order: the coordinator, then the sshds, then the namespaces.
struct World {
    coordinator: Option<Child>,
    sshd: Vec<Sshd>,
    lab: Lab,
    dir: tempfile::TempDir,
}

impl Drop for World {
    fn drop(&mut self) {
        if let Some(mut c) = self.coordinator.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl World {
    fn new() -> World {
        assert!(
            rustix::process::geteuid().is_root(),
            "the mesh test needs root (namespaces, sshd): run it as root"
        );
        common_sshd::require_sshd();
        let dir = tempfile::tempdir().unwrap();
        let spec = LabSpec::builtin(&BuiltinOptions {
            name: format!("m{}_mesh", std::process::id() % 100_000),
            topology: Topology::Star,
            hosts: HOSTS,
            ..BuiltinOptions::default()
        })
        .unwrap();
        let lab = Lab::build_in(
            StateDir::at(dir.path().join("state")),
            spec,
            Ownership::Process,
        )
        .unwrap();
        let sshd = (1..=HOSTS)
            .map(|i| {
                let host = lab.host(&format!("h{i}")).unwrap();
                Sshd::start(host.netns_name(), host.ipv4().unwrap().into())
            })
            .collect();
        std::fs::create_dir(dir.path().join("remote")).unwrap();
        World {
            coordinator: None,
            sshd,
            lab,
            dir,
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A hosts file of the first `n` hosts, each launched over ssh as root.
    fn hosts_file(&self, name: &str, n: usize) -> PathBuf {
        let mut text = String::from("[defaults]\nport = 0\nuser = \"root\"\n");
        for i in 1..=n {
            let ip = self.lab.host(&format!("h{i}")).unwrap().ipv4().unwrap();
            text.push_str(&format!(
                "[[host]]\nname = \"h{i}\"\naddress = \"{ip}\"\nssh = true\nlabels = [\"star\"]\n"
            ));
        }
        let path = self.path(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    /// `tcplab ARGS --ssh-option ... --remote-dir ...` as a command inside h1.
    fn tcplab_in_h1(&self, args: &[&str]) -> Command {
        let mut cmd = self
            .lab
            .host("h1")
            .unwrap()
            .command(env!("CARGO_BIN_EXE_tcplab"));
        cmd.args(args);
        for o in common_sshd::ssh_client_options() {
            cmd.arg(format!("--ssh-option={o}"));
        }
        cmd.arg("--remote-dir").arg(self.path("remote"));
        cmd
    }

    fn run(&self, args: &[&str]) -> Output {
        self.tcplab_in_h1(args).output().unwrap()
    }

    fn logs(&self) -> String {
        self.sshd
            .iter()
            .map(Sshd::log)
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// The agents (`tcplab serve`) running in a namespace, by PID.
fn agents_in(namespace: &str) -> Vec<u32> {
    let out = Command::new("ip")
        .args(["netns", "pids", namespace])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter_map(|p| p.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
                let args: Vec<&[u8]> = c.split(|b| *b == 0).collect();
                args.len() > 1 && args[1] == b"serve"
            })
        })
        .collect()
}

fn rows(db: &Path) -> usize {
    MeshStore::read(db)
        .ok()
        .and_then(|s| s.rows().ok())
        .map_or(0, |r| r.len())
}

fn text(o: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn a_sixteen_host_mesh_survives_a_dead_agent_and_resumes() {
    let t0 = Instant::now();
    let mut world = World::new();
    eprintln!("{:?}: lab and 16 sshds up", t0.elapsed());
    let one = world.hosts_file("one.toml", 1);
    let all = world.hosts_file("all.toml", HOSTS);
    let all_s = all.display().to_string();

    // One host first: the build is copied once, and the 16 launches after it find it there.
    let o = world.run(&["fleet", "check", "--hosts", &one.display().to_string()]);
    assert!(o.status.success(), "{}\n{}", text(&o), world.logs());

    eprintln!("{:?}: one host checked (the build copied)", t0.elapsed());
    let o = world.run(&["fleet", "check", "--hosts", &all_s, "--json"]);
    eprintln!("{:?}: 16 hosts checked", t0.elapsed());
    assert!(o.status.success(), "{}\n{}", text(&o), world.logs());
    let checks: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let checks = checks.as_array().unwrap();
    assert_eq!(checks.len(), HOSTS);
    for c in checks {
        assert_eq!(c["ok"], true, "{c}");
        assert_eq!(c["facts"]["authenticated"], true, "{c}");
        assert!(c["facts"]["facts"]["hz"]["hz"].as_u64().unwrap() > 0, "{c}");
        // One machine, one clock: the offset is within its uncertainty (and a margin).
        let offset = c["clock"]["offset_ns"].as_i64().unwrap().unsigned_abs();
        let uncertainty = c["clock"]["uncertainty_ns"].as_u64().unwrap();
        assert!(offset <= uncertainty + 1_000_000, "{c}");
    }

    // The mesh, with one agent killed once a fifth of the pairs are in.
    let db = world.path("mesh.db");
    let db_s = db.display().to_string();
    let mesh = [
        "mesh",
        "--hosts",
        &all_s,
        "--workload",
        "msgs",
        "--count",
        "20000",
        "--db",
        &db_s,
    ];
    let child = world
        .tcplab_in_h1(&mesh)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    world.coordinator = Some(child);
    let victim_ns = world.lab.host(VICTIM).unwrap().netns_name().to_string();
    let start = Instant::now();
    while rows(&db) < 48 {
        assert!(
            start.elapsed() < Duration::from_secs(180),
            "the mesh recorded {} pairs in 180 s",
            rows(&db)
        );
        if let Some(Ok(Some(s))) = world.coordinator.as_mut().map(Child::try_wait) {
            let o = world
                .coordinator
                .take()
                .unwrap()
                .wait_with_output()
                .unwrap();
            panic!("the mesh ended early ({s}): {}", text(&o));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    eprintln!(
        "{:?}: {} pairs in, killing {VICTIM}'s agent",
        t0.elapsed(),
        rows(&db)
    );
    let victims = agents_in(&victim_ns);
    assert_eq!(victims.len(), 1, "one agent runs in {VICTIM}: {victims:?}");
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(victims[0] as i32).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    let o = world
        .coordinator
        .take()
        .unwrap()
        .wait_with_output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "some pairs failed: {}", text(&o));

    let stored = MeshStore::read(&db).unwrap().rows().unwrap();
    assert_eq!(stored.len(), HOSTS * (HOSTS - 1), "every pair has a row");
    let failed: Vec<_> = stored.iter().filter(|r| r.failure.is_some()).collect();
    assert!(
        !failed.is_empty(),
        "the dead agent's pairs failed: {}",
        text(&o)
    );
    for r in &failed {
        assert!(
            r.src == VICTIM || r.dst == VICTIM,
            "only {VICTIM}'s pairs fail: {r:?}"
        );
        assert!(!r.failure.as_deref().unwrap().is_empty());
    }
    for r in stored.iter().filter(|r| r.failure.is_none()) {
        let f = r.figures.as_ref().unwrap();
        assert!(f.stalls.is_some_and(|s| s.messages == 20_000), "{r:?}");
    }
    let report = String::from_utf8_lossy(&o.stdout);
    assert!(
        report.contains(&format!("{} failed", failed.len())),
        "{report}"
    );

    eprintln!(
        "{:?}: the mesh ended, {} failed",
        t0.elapsed(),
        failed.len()
    );
    // --resume launches the agents again and runs only the missing pairs.
    let mut resume = mesh.to_vec();
    resume.push("--resume");
    let o = world.run(&resume);
    assert!(o.status.success(), "{}\n{}", text(&o), world.logs());
    eprintln!("{:?}: resumed", t0.elapsed());
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains(&format!("{} pairs to run", failed.len())),
        "only the failed pairs run again: {stderr}"
    );
    let stored = MeshStore::read(&db).unwrap().rows().unwrap();
    assert!(stored.iter().all(|r| r.failure.is_none()), "{}", text(&o));
    let report = String::from_utf8_lossy(&o.stdout);
    assert!(report.contains("240 pairs: 240 done"), "{report}");
    assert!(
        report.contains("one all-to-all among the 16 hosts"),
        "{report}"
    );
    let html = std::fs::read_to_string(db.with_extension("html")).unwrap();
    assert_eq!(html.matches("<tr>").count(), HOSTS + 1, "the grid's rows");

    // Every agent of every launch is gone.
    for i in 1..=HOSTS {
        let ns = world
            .lab
            .host(&format!("h{i}"))
            .unwrap()
            .netns_name()
            .to_string();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !agents_in(&ns).is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(agents_in(&ns).is_empty(), "an agent still runs in h{i}");
    }
}
