//! What a package installs beside the binary, asked of the built binary: the version with the
//! commit it was built from, shell completions and manual pages generated from the same clap
//! definitions that parse the command line. Nothing here needs root or a lab.

#![allow(clippy::unwrap_used, reason = "tests fail loudly on unexpected errors")]

use std::path::Path;
use std::process::{Command, Output};

fn tcplab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tcplab"))
        .args(args)
        .output()
        .unwrap()
}

fn stdout_of(args: &[&str]) -> String {
    let out = tcplab(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `git ARGS` in the source tree; `None` outside a checkout.
fn git(args: &[&str]) -> Option<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(args)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

#[test]
fn version_names_the_commit_it_was_built_from() {
    let text = stdout_of(&["--version"]);
    assert!(
        text.starts_with(&format!("tcplab {}", env!("CARGO_PKG_VERSION"))),
        "{text}"
    );
    // Built from a checkout (CI's clean clone is one), the stamp carries its commit; a source
    // tarball has none to carry.
    if let Some(head) = git(&["rev-parse", "--short=12", "HEAD"]) {
        assert!(text.contains(&format!("({head}")), "{text}");
    }
    // Every command says the same.
    assert_eq!(
        stdout_of(&["doctor", "--version"]),
        text.replace("tcplab ", "tcplab-doctor ")
    );
    // And the facts every result carries name the same build.
    let facts: serde_json::Value = serde_json::from_str(&stdout_of(&["facts", "--json"])).unwrap();
    let version = text.trim().trim_start_matches("tcplab ");
    assert_eq!(facts["tcplab_version"], version, "{facts}");
}

#[test]
fn completions_for_each_shell_know_the_commands_and_their_flags() {
    let bash = stdout_of(&["completions", "bash"]);
    assert!(bash.contains("complete -F _tcplab"), "{bash}");
    for word in ["doctor", "corpus", "--budget", "--to"] {
        assert!(bash.contains(word), "bash: {word} missing");
    }
    assert!(stdout_of(&["completions", "zsh"]).starts_with("#compdef tcplab"));
    let fish = stdout_of(&["completions", "fish"]);
    assert!(fish.contains("complete -c tcplab") && fish.contains("doctor"));
    let out = tcplab(&["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("bash"));
}

#[test]
fn man_writes_a_page_per_command() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("man1");
    let out = tcplab(&["man", "--out", out_dir.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for page in [
        "tcplab.1",
        "tcplab-doctor.1",
        "tcplab-lab-up.1",
        "tcplab-corpus-draw.1",
    ] {
        assert!(out_dir.join(page).is_file(), "{page} missing");
    }
    let doctor = std::fs::read_to_string(out_dir.join("tcplab-doctor.1")).unwrap();
    assert!(
        doctor.starts_with(".ie") || doctor.contains(".TH tcplab-doctor"),
        "{doctor}"
    );
    assert!(doctor.contains("budget"), "{doctor}");
    // A file where the directory should be: exit 2, one line naming the flag.
    let file = dir.path().join("file");
    std::fs::write(&file, "x").unwrap();
    let out = tcplab(&["man", "--out", file.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.starts_with("tcplab: error: --out "), "{stderr}");
}
