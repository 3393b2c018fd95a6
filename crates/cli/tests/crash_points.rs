//! Crash points (root): `tcplab lab up` is SIGKILLed at many random moments of its build, and
//! after each kill `tcplab lab gc` must leave the machine as it was: no namespace of the lab, no
//! process it started (the persistent emulator), no new interface in the root namespace, no
//! registry record, and the host-global sysctl it changed (through the journal) back at its
//! value. Two builds are tried: a persistent path lab with an emulator and a host sysctl (its
//! companion process and the journal are the hard parts), and a 16-host star held in the
//! foreground. The delays are uniform over a little more than one build's time, so kills land
//! before, during and after each step.
//!
//! A sweep is SIGKILLed too, once at a known point and then again and again at random ones:
//! every run stored before a kill stays as it was, and `sweep --resume` completes the study with
//! each planned run exactly once. And an emulator killed in the middle of a workload's run
//! makes that run untrustworthy, with the reason, never a normal result.
//!
//! The tests run one at a time (they check machine-wide state: root links, a host sysctl).
//! `TCPLAB_CRASH_KILLS` sets the number of `lab up` kills (default 100, split 3:2 between the
//! two builds) and `TCPLAB_SWEEP_KILLS` the sweep's (default 8); `TCPLAB_CRASH_SEED` replays a
//! sequence of delays (the seed is printed). `benches/crash.sh` runs them with more kills in a
//! release build.

#![allow(clippy::unwrap_used, reason = "tests fail loudly on unexpected errors")]

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tcplab_study::Store;
use tcplab_study::store::StoredRun;

mod common_sweep;
use common_sweep::{
    Guard, SCENARIO, assert_complete, lab_prefix, namespaces, planned_runs, stored, sweep,
    wait_bounded,
};

/// Held by each test for its whole run: they check machine-wide state.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The host-global key the path lab changes (a send-buffer limit: harmless to raise briefly).
const HOST_KEY: &str = "net.core.wmem_max";

/// Kills the child (by its PID) and reaps it, whatever the test's outcome.
struct ChildGuard(Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Removes every lab of the test's state directory when the test ends, however it ends.
struct StateGuard<'a>(&'a Path);

impl Drop for StateGuard<'_> {
    fn drop(&mut self) {
        let _ = tcplab(self.0).args(["lab", "gc", "--all"]).output();
    }
}

fn tcplab(state: &Path) -> Command {
    assert!(
        rustix::process::geteuid().is_root(),
        "run the crash-point tests as root"
    );
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tcplab"));
    cmd.env("TCPLAB_STATE_DIR", state);
    cmd
}

fn run(state: &Path, args: &[&str]) -> Output {
    tcplab(state).args(args).output().expect("tcplab runs")
}

/// SplitMix64: a seeded sequence of delays that a failure's seed replays.
struct Delays(u64);

impl Delays {
    /// From `TCPLAB_CRASH_SEED`, or the clock; printed with `what` so a failure can be replayed.
    fn seeded(what: &str) -> Self {
        let seed = env_u64("TCPLAB_CRASH_SEED").unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
        eprintln!("crash points: {what}, TCPLAB_CRASH_SEED={seed}");
        Self(seed)
    }

    fn next_below(&mut self, bound: Duration) -> Duration {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        bound.mul_f64((z >> 11) as f64 / (1_u64 << 53) as f64)
    }
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| {
        v.parse()
            .unwrap_or_else(|_| panic!("{name}={v}: give a whole number"))
    })
}

/// Interface names in the root namespace.
fn root_links() -> BTreeSet<String> {
    std::fs::read_dir("/sys/class/net")
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

fn namespaces_of(name: &str) -> Vec<String> {
    let prefix = format!("tcplab-{name}-");
    tcplab_lab::netns::list()
        .into_iter()
        .filter(|n| n.starts_with(&prefix))
        .collect()
}

/// PIDs of live processes running `tcplab emu --lab NAME` (the lab's emulator companion).
fn emulators_of(name: &str) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
                return false;
            };
            let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
            args.windows(3)
                .any(|w| w == [&b"emu"[..], &b"--lab"[..], name.as_bytes()])
        })
        .collect()
}

/// What one kill found before `gc` ran.
#[derive(Debug, Default)]
struct Tally {
    kills: u32,
    /// The build had handed the lab over before the kill (not a crash; the lab is taken down).
    finished: u32,
    /// Namespaces of the lab existed at the kill.
    with_namespaces: u32,
    /// An emulator companion was running at the kill.
    with_emulator: u32,
    /// The journal held the host key at the kill.
    with_journal: u32,
}

/// Waits up to `limit` for `done`, polling.
fn eventually(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    loop {
        if done() {
            return true;
        }
        if Instant::now() > end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Builds the lab once to time it, then `kills` times starts the build, kills it after a random
/// delay and checks that `gc` leaves nothing.
fn kill_builds(tag: &str, args: &[&str], kills: u32, delays: &mut Delays) -> Tally {
    let state = tempfile::tempdir().unwrap();
    let state = state.path();
    let _cleanup = StateGuard(state);
    let name = format!("k{}_{tag}", std::process::id() % 100_000);
    let foreground = args.contains(&"--foreground");
    let up = |name: &str| {
        let mut cmd = tcplab(state);
        cmd.args(["lab", "up", "--name", name])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        cmd
    };
    let links_before = root_links();
    let host_before = tcplab_host::sysctl::read(HOST_KEY).unwrap();
    // One build, timed, sets the range of the delays.
    let timed = Instant::now();
    let build_time = if foreground {
        let mut child = ChildGuard(up(&name).stdout(Stdio::piped()).spawn().unwrap());
        let out = std::io::BufReader::new(child.0.stdout.take().unwrap());
        let built = std::io::BufRead::lines(out)
            .map_while(Result::ok)
            .any(|line| line.starts_with("built in"));
        assert!(built, "the lab builds");
        let t = timed.elapsed();
        drop(child);
        t
    } else {
        let status = up(&name).status().unwrap();
        assert!(status.success(), "the lab builds");
        timed.elapsed()
    };
    assert!(run(state, &["lab", "gc", "--all"]).status.success());
    assert!(namespaces_of(&name).is_empty());
    let mut tally = Tally::default();
    for i in 0..kills {
        let delay = delays.next_below(build_time.mul_f64(1.2));
        let mut child = ChildGuard(up(&name).spawn().unwrap());
        std::thread::sleep(delay);
        child.0.kill().unwrap_or(());
        child.0.wait().unwrap();
        // A persistent lab is handed over (its record's owner cleared) as the build's last
        // step; killed after that, `lab up` had finished its work.
        let finished = tcplab_lab::StateDir::at(state)
            .read(&name)
            .unwrap()
            .is_some_and(|r| r.owner.is_none());
        tally.kills += 1;
        tally.finished += u32::from(finished);
        tally.with_namespaces += u32::from(!namespaces_of(&name).is_empty());
        tally.with_emulator += u32::from(!emulators_of(&name).is_empty());
        let journal = tcplab_lab::StateDir::at(state).journal().unwrap();
        tally.with_journal += u32::from(journal.contains_key(HOST_KEY));
        let what = format!("kill {i} of {tag} after {delay:?} (build {build_time:?})");
        if finished {
            // Not a crash: the lab is the user's to take down.
            let down = run(state, &["lab", "down", &name]);
            assert!(down.status.success(), "{what}: {down:?}");
        } else {
            let gc = run(state, &["lab", "gc"]);
            assert!(gc.status.success(), "{what}: gc failed: {gc:?}");
        }
        assert_eq!(namespaces_of(&name), Vec::<String>::new(), "{what}");
        assert!(
            eventually(Duration::from_secs(3), || emulators_of(&name).is_empty()),
            "{what}: the emulator {:?} outlived its lab",
            emulators_of(&name)
        );
        let records = tcplab_lab::StateDir::at(state).list().unwrap();
        assert!(records.is_empty(), "{what}: records left: {records:?}");
        let new_links: Vec<_> = root_links().difference(&links_before).cloned().collect();
        assert!(new_links.is_empty(), "{what}: links left: {new_links:?}");
        assert_eq!(
            tcplab_host::sysctl::read(HOST_KEY).unwrap(),
            host_before,
            "{what}: {HOST_KEY} not restored"
        );
    }
    tally
}

#[test]
fn killing_lab_up_anywhere_leaves_nothing_after_gc() {
    let _serial = serial();
    let kills = env_u64("TCPLAB_CRASH_KILLS").unwrap_or(100) as u32;
    let mut delays = Delays::seeded(&format!("{kills} lab up kills"));
    let raised = tcplab_host::sysctl::read(HOST_KEY)
        .unwrap()
        .parse::<u64>()
        .unwrap()
        + 4096;
    let sysctl = format!("all:{HOST_KEY}={raised}");
    let path = [
        "--topology",
        "path",
        "--delay",
        "1ms",
        "--sysctl",
        &sysctl,
        "--allow-host-sysctl",
    ];
    let path_kills = kills * 3 / 5;
    let t = kill_builds("path", &path, path_kills, &mut delays);
    eprintln!("path lab with an emulator and a host sysctl: {t:?}");
    assert!(
        t.with_namespaces > 0 && t.with_emulator > 0 && t.with_journal > 0,
        "the kills must land in the build, not only before or after it: {t:?}"
    );
    let star = ["--topology", "star", "--hosts", "16", "--foreground"];
    let t = kill_builds("star", &star, kills - path_kills, &mut delays);
    eprintln!("16-host star in the foreground: {t:?}");
    assert!(t.with_namespaces > 0, "{t:?}");
}

#[test]
fn a_sigkilled_sweep_resumes_with_every_run_once_and_its_lab_removed() {
    let _serial = serial();
    assert!(
        rustix::process::geteuid().is_root(),
        "run the CLI tests as root"
    );
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let state = dir.join("state");
    let db = dir.join("killme.db");
    std::fs::write(dir.join("killme.toml"), SCENARIO).unwrap();
    let planned = planned_runs();

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
    assert_complete(&after, &before, &planned);
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

#[test]
fn a_sweep_killed_again_and_again_resumes_with_every_run_once() {
    let _serial = serial();
    let kills = env_u64("TCPLAB_SWEEP_KILLS").unwrap_or(8);
    let mut delays = Delays::seeded(&format!("{kills} sweep kills"));
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let state = dir.join("state");
    let db = dir.join("killme.db");
    std::fs::write(dir.join("killme.toml"), SCENARIO).unwrap();
    let planned = planned_runs();
    let mut guard = Guard {
        child: None,
        state: state.clone(),
        prefixes: Vec::new(),
    };
    // Every row as first seen: a later sweep must never change or remove one.
    let mut seen: Vec<StoredRun> = Vec::new();
    let mut killed = 0;
    while killed < kills {
        let resume: &[&str] = if db.exists() { &["--resume"] } else { &[] };
        let child = sweep(dir, &state, resume).spawn().unwrap();
        guard.prefixes.push(lab_prefix(child.id()));
        let child = guard.child.insert(child);
        std::thread::sleep(delays.next_below(Duration::from_millis(1500)));
        if child.try_wait().unwrap().is_some() {
            break; // the study finished before this kill
        }
        child.kill().unwrap(); // SIGKILL, to this PID only.
        child.wait().unwrap();
        guard.child = None;
        killed += 1;
        if db.exists() {
            // Store::open runs SQLite's quick_check: the file is intact after every kill.
            let now = Store::open(&db).unwrap().runs().unwrap();
            for run in now {
                if !seen.iter().any(|r| r.id == run.id) {
                    seen.push(run);
                }
            }
        }
    }
    let resume: &[&str] = if db.exists() { &["--resume"] } else { &[] };
    let mut child = sweep(dir, &state, resume).spawn().unwrap();
    guard.prefixes.push(lab_prefix(child.id()));
    let status = wait_bounded(&mut child, Duration::from_secs(60));
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut e, &mut stderr);
    }
    assert!(status.success(), "the last resume failed: {stderr}");
    eprintln!(
        "sweep: {killed} kills, {} runs stored before the last resume",
        seen.len()
    );
    let after = Store::open(&db).unwrap().runs().unwrap();
    assert_complete(&after, &seen, &planned);
    assert_eq!(
        namespaces(&guard.prefixes),
        BTreeSet::new(),
        "every killed sweep's lab is removed"
    );
}

#[test]
fn an_emulator_killed_mid_run_makes_the_run_untrustworthy() {
    let _serial = serial();
    let state = tempfile::tempdir().unwrap();
    let state = state.path();
    let _cleanup = StateGuard(state);
    let name = format!("k{}_emu", std::process::id() % 100_000);
    let up = run(
        state,
        &[
            "lab",
            "up",
            "--topology",
            "path",
            "--delay",
            "1ms",
            "--name",
            &name,
        ],
    );
    assert!(up.status.success(), "{up:?}");
    let record = tcplab_lab::StateDir::at(state)
        .read(&name)
        .unwrap()
        .unwrap();
    let emulator = record.companions[0].process.pid;
    // One workload: every workload run in a lab is judged by the same code
    // (`tcplab_front::lab`), and each such run waits out its control connection's timeout here.
    let child = tcplab(state)
        .args(["stream", "-t", "3", "--lab", &name, "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut guard = Guard {
        child: Some(child),
        state: state.to_path_buf(),
        prefixes: Vec::new(),
    };
    std::thread::sleep(Duration::from_millis(1000));
    let pid = rustix::process::Pid::from_raw(emulator as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::KILL).unwrap();
    let out = guard.child.take().unwrap().wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let result: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no JSON result ({e}): {stderr}"));
    let fidelity = &result["facts"]["emulator"]["fidelity"];
    assert_eq!(fidelity["trustworthy"], false, "{fidelity}");
    let reasons = fidelity["reasons"].as_array().unwrap();
    assert!(
        reasons
            .iter()
            .any(|r| r.as_str().unwrap().contains("emulator")),
        "the reason names the emulator: {fidelity}"
    );
    assert!(run(state, &["lab", "down", &name]).status.success());
    assert!(namespaces_of(&name).is_empty());
}
