//! The srun launcher for real (as root): a one-node Slurm cluster started by the test (munged
//! with a generated key, slurmctld and slurmd as plain processes on 127.0.0.1 only, in a UTS
//! namespace whose host name is `localhost` so that every Slurm address resolves to loopback),
//! then the coordinator inside `salloc` (this test binary, run again) launches an agent with
//! srun, tests it, stops it, and checks that an agent whose srun dies exits. Everything the test
//! starts is stopped by its PID.

#![allow(clippy::unwrap_used, reason = "tests fail loudly on unexpected errors")]

use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tcplab_fleet::inventory::Inventory;
use tcplab_fleet::launch::{LaunchOptions, launch, srun::allocation_nodes};

/// Set (to the shared directory) in the coordinator that runs inside `salloc`.
const INNER: &str = "TCPLAB_TEST_SRUN_SHARED";
/// The cluster must be up within this (the bound is a minute for the whole start).
const UP: Duration = Duration::from_secs(40);

const DAEMONS: [&str; 3] = [
    "/usr/sbin/munged",
    "/usr/sbin/slurmctld",
    "/usr/sbin/slurmd",
];

/// Runs the command in a UTS namespace of its own named `localhost`.
fn as_localhost(cmd: &mut Command) -> &mut Command {
    // Safety: the closure runs in the forked child before exec and makes only the unshare(2)
    // and sethostname(2) system calls, which are async-signal-safe; it allocates nothing.
    // Unsharing the UTS namespace changes the host name seen by this child only, no file
    // descriptor or memory the Rust runtime relies on.
    unsafe {
        cmd.pre_exec(|| {
            rustix::thread::unshare_unsafe(rustix::thread::UnshareFlags::NEWUTS)?;
            rustix::system::sethostname(b"localhost")?;
            Ok(())
        })
    }
}

/// A free TCP port on loopback (closed again: Slurm binds it a moment later).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A Slurm client command for the cluster of `conf`, in a UTS namespace named `localhost`.
fn slurm_command(conf: &Path, program: &str) -> Command {
    let mut c = Command::new(program);
    c.env("SLURM_CONF", conf);
    as_localhost(&mut c);
    c
}

/// The daemons, stopped by PID (SIGTERM, then SIGKILL) in reverse order when dropped.
struct Cluster {
    dir: tempfile::TempDir,
    daemons: Vec<(&'static str, Child)>,
}

impl Cluster {
    fn start() -> Cluster {
        assert!(
            rustix::process::geteuid().is_root(),
            "the Slurm test runs daemons as root: run it as root"
        );
        for d in DAEMONS {
            assert!(
                Path::new(d).exists(),
                "{d} is missing: apt-get install --no-install-recommends slurmctld slurmd \
                 slurm-client munge (.ci/run does)"
            );
        }
        let started = Instant::now();
        let dir = tempfile::Builder::new()
            .prefix("tcplab-slurm-")
            .tempdir()
            .unwrap();
        let d = dir.path();
        for sub in ["munge", "state", "spool", "shared"] {
            std::fs::create_dir(d.join(sub)).unwrap();
        }
        let key: Vec<u8> = (0..1024).map(|_| rand_byte()).collect();
        write_private(&d.join("munge/munge.key"), &key);
        let mut cluster = Cluster {
            dir,
            daemons: Vec::new(),
        };
        let d = cluster.dir.path().to_path_buf();
        let munged = Command::new(DAEMONS[0])
            .args(["--foreground", "--force"])
            .arg(format!("--socket={}", d.join("munge/sock").display()))
            .arg(format!(
                "--key-file={}",
                d.join("munge/munge.key").display()
            ))
            .arg(format!("--pid-file={}", d.join("munge/pid").display()))
            .arg(format!("--log-file={}", d.join("munged.log").display()))
            .arg(format!("--seed-file={}", d.join("munge/seed").display()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        cluster.daemons.push(("munged", munged));
        let sock = d.join("munge/sock");
        cluster.wait_until("munged's socket", || sock.exists());
        std::fs::write(d.join("slurm.conf"), slurm_conf(&d)).unwrap();
        for (name, program, extra) in [
            ("slurmctld", DAEMONS[1], &["-i"][..]),
            ("slurmd", DAEMONS[2], &[][..]),
        ] {
            let log = std::fs::File::create(d.join(format!("{name}.out"))).unwrap();
            let child = as_localhost(
                Command::new(program)
                    .arg("-D")
                    .args(extra)
                    .arg("-f")
                    .arg(d.join("slurm.conf"))
                    .env("SLURM_CONF", d.join("slurm.conf"))
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(log),
            )
            .spawn()
            .unwrap();
            cluster.daemons.push((name, child));
        }
        let conf = d.join("slurm.conf");
        cluster.wait_until("the node to be idle", || {
            slurm_command(&conf, "sinfo")
                .args(["-h", "-o", "%T"])
                .output()
                .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("idle"))
        });
        eprintln!("Slurm cluster up in {:?}", started.elapsed());
        cluster
    }

    /// A Slurm client command for this cluster.
    fn slurm(&self, program: &str) -> Command {
        slurm_command(&self.dir.path().join("slurm.conf"), program)
    }

    /// Polls `ready` every 100 ms for at most [`UP`]; fails with the daemons' logs.
    fn wait_until(&mut self, what: &str, mut ready: impl FnMut() -> bool) {
        let deadline = Instant::now() + UP;
        while Instant::now() < deadline {
            if ready() {
                return;
            }
            let exited = self
                .daemons
                .iter_mut()
                .find_map(|(name, c)| c.try_wait().ok().flatten().map(|s| (*name, s)));
            if let Some((name, status)) = exited {
                panic!(
                    "{name} exited ({status}) waiting for {what}:\n{}",
                    self.logs()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("waited {UP:?} for {what}:\n{}", self.logs());
    }

    fn logs(&self) -> String {
        [
            "munged.log",
            "slurmctld.out",
            "slurmctld.log",
            "slurmd.out",
            "slurmd.log",
        ]
        .iter()
        .map(|f| {
            let text = std::fs::read_to_string(self.dir.path().join(f)).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(15).collect();
            format!(
                "--- {f}\n{}",
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        while let Some((_, mut child)) = self.daemons.pop() {
            if let Some(pid) = i32::try_from(child.id())
                .ok()
                .and_then(rustix::process::Pid::from_raw)
            {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
            }
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline && matches!(child.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A byte from the kernel's random source (the munge key).
fn rand_byte() -> u8 {
    let mut b = [0u8; 1];
    rustix::rand::getrandom(&mut b, rustix::rand::GetRandomFlags::empty()).unwrap();
    b[0]
}

fn write_private(path: &Path, bytes: &[u8]) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, bytes).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o400)).unwrap();
}

/// One node, `localhost` at 127.0.0.1; every daemon binds that address only.
fn slurm_conf(d: &Path) -> String {
    let d = d.display();
    let ports = two_ports();
    format!(
        "ClusterName=tcplabtest\n\
         SlurmctldHost=localhost(127.0.0.1)\n\
         SlurmctldPort={ctld}\n\
         SlurmdPort={slurmd}\n\
         SlurmUser=root\n\
         SlurmdUser=root\n\
         AuthType=auth/munge\n\
         AuthInfo=socket={d}/munge/sock\n\
         CredType=cred/munge\n\
         StateSaveLocation={d}/state\n\
         SlurmdSpoolDir={d}/spool\n\
         SlurmctldPidFile={d}/slurmctld.pid\n\
         SlurmdPidFile={d}/slurmd.pid\n\
         SlurmctldLogFile={d}/slurmctld.log\n\
         SlurmdLogFile={d}/slurmd.log\n\
         ProctrackType=proctrack/linuxproc\n\
         TaskPlugin=task/none\n\
         JobAcctGatherType=jobacct_gather/none\n\
         AccountingStorageType=accounting_storage/none\n\
         SchedulerType=sched/builtin\n\
         SelectType=select/linear\n\
         MpiDefault=none\n\
         ReturnToService=2\n\
         CommunicationParameters=NoInAddrAny,NoCtldInAddrAny\n\
         NodeName=localhost NodeAddr=127.0.0.1 CPUs=1 State=UNKNOWN\n\
         PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP\n",
        ctld = ports.0,
        slurmd = ports.1,
    )
}

/// Two different free ports.
fn two_ports() -> (u16, u16) {
    let a = free_port();
    let b = (0..100).map(|_| free_port()).find(|b| *b != a).unwrap();
    (a, b)
}

#[test]
fn srun_launches_one_agent_per_node_of_a_real_allocation() {
    let cluster = Cluster::start();
    let shared = cluster.dir.path().join("shared");
    // The coordinator: this test binary again, inside an allocation of the one node.
    let out = cluster
        .slurm("salloc")
        .args(["-N1", "--job-name=tcplab-coordinator", "--"])
        .arg(std::env::current_exe().unwrap())
        .args(["--exact", "srun_coordinator", "--ignored", "--nocapture"])
        .env(INNER, &shared)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && text.contains("srun coordinator: ok"),
        "salloc: {}\n{text}\n{}",
        out.status,
        cluster.logs()
    );
    let left: Vec<PathBuf> = std::fs::read_dir(&shared)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("run-"))
        })
        .collect();
    assert!(left.is_empty(), "per-launch directories left: {left:?}");
}

/// True while process `pid` exists and is not a zombie.
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z'))
    })
}

fn ended_within(pid: u32, bound: Duration) -> bool {
    let deadline = Instant::now() + bound;
    while Instant::now() < deadline && alive(pid) {
        std::thread::sleep(Duration::from_millis(50));
    }
    !alive(pid)
}

/// The coordinator's side, run by `salloc` from the test above (ignored on its own).
#[test]
#[ignore = "run by srun_launches_one_agent_per_node_of_a_real_allocation inside salloc"]
fn srun_coordinator() {
    let Some(shared) = std::env::var_os(INNER) else {
        return;
    };
    let nodes = allocation_nodes(Path::new("scontrol")).unwrap();
    assert_eq!(nodes, ["localhost"]);
    // The node is listed with its loopback address, as a hosts file would list it.
    let inv = Inventory::parse(
        "[[host]]\nname = \"localhost\"\naddress = \"127.0.0.1\"\nport = 0\nsrun = true\n",
        "the test's hosts",
    )
    .unwrap();
    let opts = LaunchOptions {
        binary: env!("CARGO_BIN_EXE_tcplab").into(),
        shared_dir: Some(PathBuf::from(shared)),
        srun_listen: "127.0.0.1".parse().unwrap(),
        start_timeout: Duration::from_secs(30),
        ..LaunchOptions::default()
    };
    let fleet = launch(&inv, &opts).unwrap();
    let agent = fleet.agent("localhost").unwrap().clone();
    assert!(
        agent.addr.ip().is_loopback() && agent.addr.port() != 0,
        "{agent:?}"
    );
    fleet.auth.clone().install();
    let cfg = tcplab_load::msgs::MsgsConfig {
        count: 2_000,
        timeout_ms: 10_000,
        ..Default::default()
    };
    let r = tcplab_load::msgs::run_client(&cfg, agent.addr, None).unwrap();
    assert_eq!(r.runs[0].received, 2_000);
    let pid = fleet.remote_pid("localhost").unwrap();
    assert!(alive(pid));
    let problems = fleet.stop();
    assert!(problems.is_empty(), "{problems:?}");
    assert!(
        ended_within(pid, Duration::from_secs(10)),
        "agent {pid} outlived stop"
    );

    // srun killed (as with its coordinator): the agent goes too.
    let fleet = launch(&inv, &opts).unwrap();
    let pid = fleet.remote_pid("localhost").unwrap();
    let srun = fleet.launcher_pid("localhost").unwrap();
    let srun = rustix::process::Pid::from_raw(i32::try_from(srun).unwrap()).unwrap();
    rustix::process::kill_process(srun, rustix::process::Signal::KILL).unwrap();
    assert!(
        ended_within(pid, Duration::from_secs(20)),
        "agent {pid} outlived its srun"
    );
    drop(fleet);
    println!("srun coordinator: ok");
}
