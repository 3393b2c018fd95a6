//! The emulator from the command line (as root): a persistent lab's emulator process, live
//! changes with `lab set`, and bad input to `tcplab emu`.

#![allow(clippy::unwrap_used, reason = "tests fail loudly on unexpected errors")]

use std::path::Path;
use std::process::{Command, Output};

use tcplab_lab::StateDir;

struct LabGuard<'a> {
    state: &'a Path,
    name: String,
}

impl Drop for LabGuard<'_> {
    fn drop(&mut self) {
        let _ = tcplab_lab::teardown(&StateDir::at(self.state), &self.name);
    }
}

fn run(state: &Path, args: &[&str]) -> Output {
    assert!(
        rustix::process::geteuid().is_root(),
        "run the CLI tests as root"
    );
    Command::new(env!("CARGO_BIN_EXE_tcplab"))
        .env("TCPLAB_STATE_DIR", state)
        .args(args)
        .output()
        .unwrap()
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

#[test]
fn persistent_emulated_lab_runs_its_emulator_as_a_companion() {
    let state = tempfile::tempdir().unwrap();
    let s = state.path();
    let name = format!("e{}_comp", std::process::id() % 100_000);
    let _guard = LabGuard {
        state: s,
        name: name.clone(),
    };
    let up = run(
        s,
        &[
            "lab",
            "up",
            "--topology",
            "path",
            "--name",
            &name,
            "--delay",
            "5ms/1ms",
            "--seed",
            "42",
        ],
    );
    assert!(
        up.status.success(),
        "{}",
        String::from_utf8_lossy(&up.stderr)
    );
    let record = StateDir::at(s).read(&name).unwrap().unwrap();
    let companion = record
        .companions
        .first()
        .expect("an emulator process is recorded")
        .process;
    assert!(companion.is_alive());

    let status = json(&run(s, &["lab", "status", &name, "--json"]));
    let emu = &status["emulators"][&name];
    assert_eq!(emu["running"], true);
    assert_eq!(emu["seed"], 42);
    assert_eq!(emu["link"]["forward"]["delay_ns"], 5_000_000);
    assert_eq!(emu["link"]["reverse"]["delay_ns"], 1_000_000);

    let check = run(s, &["lab", "check", &name]);
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stdout)
    );

    let set = run(s, &["lab", "set", &name, "--delay", "2ms", "--loss", "1%"]);
    assert!(
        set.status.success(),
        "{}",
        String::from_utf8_lossy(&set.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&set.stdout),
        format!("lab '{name}': impairments now\n  each way: delay 2ms, loss 1%\n")
    );
    let status = json(&run(s, &["lab", "status", &name, "--json"]));
    assert_eq!(
        status["emulators"][&name]["link"]["reverse"]["delay_ns"],
        2_000_000
    );
    assert_eq!(
        status["emulators"][&name]["link"]["seed"], 42,
        "the models keep their streams, so the seed in force stays"
    );
    let human = run(s, &["lab", "status", &name]);
    let text = String::from_utf8_lossy(&human.stdout);
    for expected in [
        "  emulator  running, seed 42, up ",
        "    link           each way: delay 2ms, loss 1%\n",
        "    client→server  ",
        "    server→client  ",
    ] {
        assert!(text.contains(expected), "{expected:?} not in:\n{text}");
    }
    let reseed = run(s, &["lab", "set", &name, "--delay", "2ms", "--seed", "7"]);
    assert_eq!(reseed.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&reseed.stderr).contains("--seed: a running emulator keeps"),
        "{}",
        String::from_utf8_lossy(&reseed.stderr)
    );
    let bad = run(s, &["lab", "set", &name, "--loss", "120%"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("--loss"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );

    let down = run(s, &["lab", "down", &name]);
    assert!(down.status.success());
    assert!(!companion.is_alive(), "the emulator dies with its lab");
}

#[test]
fn emu_rejects_bad_interfaces_and_values() {
    let state = tempfile::tempdir().unwrap();
    let s = state.path();
    let out = run(
        s,
        &[
            "emu",
            "--iface",
            "tcplab-nope0",
            "--iface",
            "tcplab-nope1",
            "--delay",
            "1ms",
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("tcplab-nope0"), "{err}");
    // One line each, the cause said once, a negative value reaching the value parser.
    for (args, line) in [
        (
            &["--loss", "101%"][..],
            "tcplab: error: --loss 101%: loss must be between 0% and 100%\n",
        ),
        (
            &["--delay", "-5ms"][..],
            "tcplab: error: --delay -5ms: `-5ms` is negative: values cannot be negative (write e.g. 10ms, 250us, 1.5s or 0)\n",
        ),
    ] {
        let mut argv = vec!["emu", "--iface", "lo", "--iface", "lo"];
        argv.extend_from_slice(args);
        let out = run(s, &argv);
        assert_eq!(out.status.code(), Some(2), "{argv:?}");
        assert_eq!(String::from_utf8_lossy(&out.stderr), line, "{argv:?}");
    }
    let out = run(s, &["lab", "up", "--topology", "pair", "--delay", "10ms"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no middle host"));
}
