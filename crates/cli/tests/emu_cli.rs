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
    let status = json(&run(s, &["lab", "status", &name, "--json"]));
    assert_eq!(
        status["emulators"][&name]["link"]["reverse"]["delay_ns"],
        2_000_000
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
    let out = run(
        s,
        &["emu", "--iface", "lo", "--iface", "lo", "--loss", "101%"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--loss"));
    let out = run(s, &["lab", "up", "--topology", "pair", "--delay", "10ms"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no middle host"));
}
