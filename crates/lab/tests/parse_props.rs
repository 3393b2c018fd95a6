//! Property tests of the lab's parsers of user-written input: lab files (built-in and custom
//! topologies), the `--offloads`, `--sysctl`, `--topology` and `--bridge` flags, addresses,
//! names, and the registry's records and sysctl journal read back from the state directory.
//! No root needed: everything here is pure or touches only a temporary directory.

#![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]

#[path = "../../../tests/props.rs"]
mod props;

use std::str::FromStr;

use props::{bounded, check_error};
use proptest::prelude::*;
use tcplab_lab::spec::{IfAddr, validate_host_name, validate_lab_name};
use tcplab_lab::state::{Phase, Record};
use tcplab_lab::{BridgeMode, Offloads, StateDir, SysctlSetting, Topology};

const BUILTIN: &str = r#"name = "wan"
topology = "dumbbell"
hosts = 3
mtu = 9000
allow_host_sysctl = false
[offloads]
gro = true
tso = false
[sysctl.all]
"net.ipv4.tcp_congestion_control" = "cubic"
[sysctl.c1]
"net.ipv4.tcp_rmem" = "4096 131072 8738000"
"#;

const CUSTOM: &str = r#"name = "tri"
topology = "custom"
mtu = 1500
[[host]]
name = "a"
[[host]]
name = "r"
role = "middle"
[[host]]
name = "b"
[[link]]
a = { host = "a", ifname = "eth0", addrs = ["198.18.0.1/24", "fd00::1/64"] }
b = { host = "r", ifname = "pa" }
[[link]]
a = { host = "b", ifname = "eth0", addrs = ["198.18.0.2/24"] }
b = { host = "r", ifname = "pb" }
[[bridge]]
host = "r"
name = "br0"
ports = ["pa", "pb"]
"#;

/// A TOML value in place of a valid one: wrong types, out of range, unicode, huge, empty.
fn toml_value() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<i64>().prop_map(|n| n.to_string()),
        (0u64..100_000).prop_map(|n| n.to_string()),
        "\"[a-z0-9_.:/ -]{0,20}\"",
        "\"\\PC{0,12}\"",
        prop::sample::select(vec![
            "true",
            "-1",
            "0",
            "65536",
            "1e999",
            "nan",
            "\"\"",
            "[]",
            "{}",
            "[\"a\", 1]",
            "\"198.18.0.1\"",
            "\"10.0.0.1/8\"",
            "\"198.18.0.1/33\"",
            "\"fd00::1/129\"",
            "\"pair\"",
            "\"star\"",
            "\"custom\"",
            "\"middle\"",
            "\"switch\"",
            "\"é\"",
            "\"a-very-long-name-that-is-longer-than-anything-a-namespace-takes\"",
            "18446744073709551616",
            "\"\\u0000\"",
            "{ host = \"a\" }",
        ])
        .prop_map(str::to_owned),
    ]
}

/// A valid lab file with one line changed (`props::one_line_changed`): the text, the line's
/// key (if it has one) and its number.
fn mutated(base: &'static str) -> impl Strategy<Value = (String, String, usize)> {
    props::one_line_changed(base, toml_value())
}

/// Names the field, its line, or (for a semantic check of a whole lab) what it checked.
fn lab_names(msg: &str, key: &str, line: usize) -> bool {
    let leaf = key.rsplit('.').next().unwrap_or(key);
    // A broken line can surface at a neighbour (a field removed, at its table's header) or
    // further on (a value that opens a string or an array ends where TOML gives up).
    msg.split("line ")
        .skip(1)
        .filter_map(|rest| rest.split(',').next()?.parse::<usize>().ok())
        .any(|l| l + 1 >= line)
        || (!leaf.is_empty() && msg.contains(leaf))
        || [
            "host", "link", "bridge", "sysctl", "topology", "name", "mtu", "offloads",
        ]
        .iter()
        .any(|w| msg.contains(w))
}

fn lab_file_holds(text: String, key: String, line: usize) -> Result<(), TestCaseError> {
    let result = bounded("lab file", move || {
        tcplab_lab::file::parse(&text, None).map_err(|e| e.to_string())
    })?;
    if let Err(e) = result {
        check_error(&e, &[])?;
        prop_assert!(
            lab_names(&e, &key, line),
            "names neither `{}` nor line {}: {}",
            key,
            line,
            e
        );
    }
    Ok(())
}

/// Checks every flag parser on `text`; the error of each names its flag.
fn flags_hold(text: String) -> Result<(), TestCaseError> {
    let errors = bounded("lab flags", move || {
        vec![
            (
                Offloads::parse(&text).err().map(|e| e.to_string()),
                "--offloads",
            ),
            (
                SysctlSetting::parse("--sysctl", &text)
                    .err()
                    .map(|e| e.to_string()),
                "--sysctl",
            ),
            (
                Topology::from_str(&text).err().map(|e| e.to_string()),
                "--topology",
            ),
            (
                BridgeMode::from_str(&text).err().map(|e| e.to_string()),
                "--bridge",
            ),
            (
                IfAddr::parse("addrs", &text).err().map(|e| e.to_string()),
                "addrs",
            ),
            (
                validate_lab_name(&text).err().map(|e| e.to_string()),
                "name",
            ),
            (
                validate_host_name("host", &text)
                    .err()
                    .map(|e| e.to_string()),
                "host",
            ),
        ]
    })?;
    for (e, name) in errors {
        if let Some(e) = e {
            check_error(&e, &[name])?;
        }
    }
    Ok(())
}

/// A flag value near a valid one.
fn flag_text() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "on",
            "off",
            "tso=on,gro=off",
            "tso=on,,gro=off",
            "tso",
            "tso=maybe",
            "lro=on",
            "=on",
            "client:net.ipv4.tcp_rmem=4096 131072 8738000",
            ":k=v",
            "h:=v",
            "h:k",
            "all:net.core.rmem_max=1",
            "pair",
            "Path",
            "auto",
            "emu",
            "kernel",
            "198.18.0.1/24",
            "198.18.0.1",
            "198.18.0.1/",
            "198.18.0.1/99",
            "10.0.0.1/8",
            "fd00::1/64",
            "fe80::1/64",
            "::ffff:198.18.0.1/96",
            "[fd00::1]/64",
            "lab_1",
            "Lab",
            "",
        ])
        .prop_map(str::to_owned),
        "[a-z0-9:=,./ _-]{0,30}",
        any::<String>(),
    ]
}

proptest! {
    #![proptest_config(props::config())]

    #[test]
    fn builtin_lab_files((text, key, line) in mutated(BUILTIN)) {
        lab_file_holds(text, key, line)?;
    }

    #[test]
    fn custom_lab_files((text, key, line) in mutated(CUSTOM)) {
        lab_file_holds(text, key, line)?;
    }

    #[test]
    fn lab_files_of_any_text(text in any::<String>()) {
        lab_file_holds(text, String::new(), 1)?;
    }

    #[test]
    fn lab_flags(text in flag_text()) {
        flags_hold(text)?;
    }

    /// A lab file read back from its registry record is the same lab.
    #[test]
    fn registry_records_round_trip_and_damage_is_one_line(
        at in any::<prop::sample::Index>(),
        byte in any::<u8>(),
        cut in any::<prop::sample::Index>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::at(dir.path());
        let spec = tcplab_lab::file::parse(CUSTOM, None).unwrap();
        let record = Record {
            spec: spec.clone(),
            owner: None,
            phase: Phase::Ready,
            created_unix_ms: 1,
            namespaces: vec!["tcplab-tri-a".into()],
            companions: Vec::new(),
        };
        let _lock = state.lock().unwrap();
        state.write(&record).unwrap();
        let back = state.read(&spec.name).unwrap().unwrap();
        prop_assert_eq!(&back.spec, &spec);
        let path = dir.path().join("labs").join(format!("{}.json", spec.name));
        let mut bytes = std::fs::read(&path).unwrap();
        let i = at.index(bytes.len());
        bytes[i] = byte;
        bytes.truncate(cut.index(bytes.len() + 1).max(1));
        std::fs::write(&path, &bytes).unwrap();
        let root = dir.path().to_owned();
        let result = bounded("registry record", move || {
            let state = StateDir::at(&root);
            state.read("tri").map(|_| ()).and(state.list().map(|_| ())).map_err(|e| e.to_string())
        })?;
        if let Err(e) = result {
            check_error(&e, &["registry"])?;
        }
    }

    #[test]
    fn sysctl_journals(text in prop_oneof![".{0,100}", r#"\{"[a-z.]{0,20}": ?("[0-9 ]{0,10}"|[0-9]{1,30}|null|\[\]|\{\})\}"#]) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("host-sysctl-journal.json"), &text).unwrap();
        let root = dir.path().to_owned();
        let result = bounded("sysctl journal", move || {
            StateDir::at(&root).journal().map(|_| ()).map_err(|e| e.to_string())
        })?;
        if let Err(e) = result {
            check_error(&e, &["registry"])?;
        }
    }
}
