//! `tcplab key gen|show` and the agent's flags from the command line: files and modes, the
//! public line, and bad usage (exit code 2, naming the flag and the fix). No traffic.

#![allow(clippy::unwrap_used, reason = "tests fail loudly on unexpected errors")]

use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Output};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tcplab"))
        .env_remove("TCPLAB_KEY")
        .env_remove("TCPLAB_SERVER_KEY")
        .args(args)
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn gen_writes_a_private_key_and_show_prints_its_public_line() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("agent/key");
    let key_s = key.to_str().unwrap();
    let out = run(&["key", "gen", "--out", key_s, "--comment", "lab agent"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let line = text(&out.stdout);
    assert!(
        line.starts_with("tcplab-x25519 ") && line.trim_end().ends_with(" lab agent"),
        "{line}"
    );
    let mode = std::fs::metadata(&key).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let public = std::fs::read_to_string(dir.path().join("agent/key.pub")).unwrap();
    assert_eq!(public, line);
    let show = run(&["key", "show", key_s]);
    assert_eq!(text(&show.stdout), line);
    // A second gen does not overwrite; --force does.
    let again = run(&["key", "gen", "--out", key_s]);
    assert_eq!(again.status.code(), Some(2));
    assert!(
        text(&again.stderr).contains("--force"),
        "{}",
        text(&again.stderr)
    );
    assert!(
        run(&["key", "gen", "--out", key_s, "--force"])
            .status
            .success()
    );
    assert_ne!(text(&run(&["key", "show", key_s]).stdout), line);
}

#[test]
fn serve_refuses_bad_usage_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let clients = dir.path().join("clients");
    std::fs::write(&clients, "ssh-ed25519 AAAAC3Nza user@host\n").unwrap();
    let cases: [(&[&str], &str); 4] = [
        (&["serve", "--listen", "10.1.2.3:5301"], "--keys FILE"),
        (
            &[
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--keys",
                clients.to_str().unwrap(),
            ],
            "line 1",
        ),
        (
            &[
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--key",
                "/nonexistent/key",
            ],
            "/nonexistent/key",
        ),
        (
            &["serve", "--listen", "127.0.0.1:0", "--idle-timeout", "0"],
            "--idle-timeout",
        ),
    ];
    for (args, needle) in cases {
        let out = run(args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            text(&out.stderr)
        );
        assert!(
            text(&out.stderr).contains(needle),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
    // --keys without the server's own key.
    let key = dir.path().join("c");
    assert!(
        run(&["key", "gen", "--out", key.to_str().unwrap()])
            .status
            .success()
    );
    std::fs::copy(dir.path().join("c.pub"), &clients).unwrap();
    let out = run(&[
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--keys",
        clients.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("invalid --key"),
        "{}",
        text(&out.stderr)
    );
}
