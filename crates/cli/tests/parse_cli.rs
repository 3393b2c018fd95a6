//! Bad files and flag values given to the built binary: each command exits with 2 and says
//! on one line of stderr what is wrong, where, and what to do, before it builds anything.
//! No namespace is created: every case fails while reading its input (the emulator's cases
//! name interfaces that do not exist, so even accepted flags stop there). Root is needed only
//! because `tcplab emu` and `lab up` check for it first.

#![allow(clippy::unwrap_used, reason = "tests fail loudly on unexpected errors")]

#[path = "../../../tests/props.rs"]
mod props;

use std::path::Path;
use std::process::{Command, Output};

use proptest::prelude::*;

fn run(state: &Path, args: &[&str]) -> Output {
    // `tcplab emu` and `lab up` check for root before they read their flags.
    assert!(
        rustix::process::geteuid().is_root(),
        "run the CLI tests as root"
    );
    Command::new(env!("CARGO_BIN_EXE_tcplab"))
        .env("TCPLAB_STATE_DIR", state)
        .env_remove("TCPLAB_EMU_IO")
        .args(args)
        .output()
        .unwrap()
}

/// Exit 2 and one line on stderr, `tcplab: error: ...`; returns that line.
fn usage_error(state: &Path, args: &[&str]) -> String {
    let out = run(state, args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "{args:?}: one line: {stderr:?}");
    assert!(stderr.starts_with("tcplab: error: "), "{args:?}: {stderr}");
    assert!(props::says_fix(&stderr), "{args:?}: no fix: {stderr}");
    stderr
}

fn write(dir: &Path, name: &str, text: impl AsRef<[u8]>) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
}

const SCENARIO: &str = "name = \"bad\"\nobjective = { metric = \"total_s\", goal = \"minimise\" }\n\
    [lab.link]\ndelay = \"10xs\"\n[[workload]]\nkind = \"msgs\"\ncount = 10\nsize = 1\n";

#[test]
fn bad_files_and_flags_exit_2_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let lab_mtu = write(d, "mtu.toml", "topology = \"pair\"\nmtu = \"big\"\n");
    let lab_addr = write(
        d,
        "addr.toml",
        "topology = \"custom\"\n[[host]]\nname = \"a\"\n[[host]]\nname = \"b\"\n[[link]]\n\
         a = { host = \"a\", ifname = \"e0\", addrs = [\"10.0.0.1/8\"] }\nb = { host = \"b\", ifname = \"e0\" }\n",
    );
    let lab_junk = write(d, "junk.toml", [0xffu8, 0xfe, 0, b'\n', b'x']);
    let scenario = write(d, "bad.toml", SCENARIO);
    let hosts = write(
        d,
        "hosts.toml",
        "[[host]]\nname = \"h1\"\naddres = \"198.18.0.1\"\n",
    );
    let study = write(
        d,
        "study.db",
        b"SQLite format 3\0 and then nothing a database holds",
    );
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["lab", "up", "--file", &lab_mtu], "mtu"),
        (vec!["lab", "up", "--file", &lab_addr], "10.0.0.1"),
        (vec!["lab", "up", "--file", &lab_junk], "junk.toml"),
        (vec!["lab", "up", "--offloads", "tso=maybe"], "--offloads"),
        (
            vec!["lab", "up", "--sysctl", "net.core.rmem_max"],
            "--sysctl",
        ),
        (vec!["lab", "up", "--delay", "10xs"], "--delay 10xs"),
        (vec!["lab", "up", "--loss", "5%/"], "--loss"),
        (
            vec!["sweep", &scenario, "--dry-run"],
            "bad.toml:4:9: lab.link.delay: --delay 10xs: unknown unit `xs`",
        ),
        (vec!["fleet", "check", "--hosts", &hosts], "addres"),
        (vec!["report", &study], "study.db"),
        (
            vec!["http", "--to", "127.0.0.1:9", "--server-kind", "nginx"],
            "--server-kind chooses the web server a lab run starts",
        ),
        (
            vec!["http", "--to", "127.0.0.1:9", "--nginx-workers", "2"],
            "--nginx-workers",
        ),
        (
            vec![
                "emu",
                "--iface",
                "tcplab-nope0",
                "--iface",
                "tcplab-nope1",
                "--delay",
                "10xs",
            ],
            "--delay 10xs: unknown unit `xs`",
        ),
        (
            vec![
                "emu",
                "--iface",
                "tcplab-nope0",
                "--iface",
                "tcplab-nope1",
                "--jitter-dist",
                "table:/nonexistent.dist",
                "--jitter",
                "1ms",
            ],
            "/nonexistent.dist",
        ),
    ];
    for (args, needle) in cases {
        let line = usage_error(d, &args);
        assert!(
            line.contains(needle),
            "{args:?}: expected `{needle}` in {line}"
        );
    }
}

/// A file named where a lab file belongs that is not one (a binary, a huge line) is refused
/// on one line, quickly.
#[test]
fn a_large_wrong_file_is_refused_on_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let big = write(dir.path(), "big.toml", "x".repeat(4 << 20));
    let line = usage_error(dir.path(), &["lab", "up", "--file", &big]);
    assert!(line.len() < 1000, "{} bytes", line.len());
}

/// The impairment flags of `tcplab emu`, each of whose values the library rejects.
const FLAGS: [&str; 8] = [
    "--delay",
    "--jitter",
    "--loss",
    "--rate",
    "--queue",
    "--duplicate",
    "--corrupt",
    "--seed",
];

fn bad_value() -> impl Strategy<Value = String> {
    prop_oneof![
        "[0-9]{1,4}(xs|min|%%|kbit/s|pkts?|é)",
        "-[0-9]{1,3}(ms|%|gbit)?",
        "[0-9]{1,3}(ms|%|gbit)?/[0-9]{1,3}(ms|%|gbit)?/[0-9]",
        "[a-z]{1,8}",
        "[0-9]{25,30}(ms|gbit|%)",
    ]
}

fn cli_config() -> ProptestConfig {
    // Each case starts the binary; an eighth of the cases of the in-process properties.
    let base = props::config();
    ProptestConfig {
        cases: (base.cases / 8).max(16),
        ..base
    }
}

proptest! {
    #![proptest_config(cli_config())]

    /// A bad value of any impairment flag: exit 2, one line naming the flag.
    #[test]
    fn bad_impairment_values_name_their_flag(i in 0..FLAGS.len(), value in bad_value()) {
        let flag = FLAGS[i];
        let mut f = tcplab_emu::ImpairmentFlags::default();
        let name = flag.trim_start_matches("--").replace('-', "_");
        *f.field_mut(&name).unwrap() = Some(value.clone());
        if flag == "--queue" {
            f.rate = Some("1gbit".into());
        }
        // Only values the library rejects: an accepted one would reach the interfaces.
        prop_assume!(f.to_link_config().is_err());
        let dir = tempfile::tempdir().unwrap();
        let mut args = vec!["emu", "--iface", "tcplab-nope0", "--iface", "tcplab-nope1", flag, &value];
        if flag == "--queue" {
            args.extend(["--rate", "1gbit"]);
        }
        let out = run(dir.path(), &args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        prop_assert_eq!(out.status.code(), Some(2), "{:?}: {}", args, stderr);
        prop_assert_eq!(stderr.lines().count(), 1, "{:?}: {:?}", args, stderr);
        props::check_error(stderr.trim_end(), &[flag])?;
    }
}
