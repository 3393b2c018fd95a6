//! Property tests of the hosts file (`Inventory::parse`) and the mesh's workload names: a valid
//! file with one line changed, or any text, parses or fails with one line that names the file,
//! the host or the field, and says what to write instead.

#![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]

#[path = "../../../tests/props.rs"]
mod props;

use props::{bounded, check_error};
use proptest::prelude::*;
use tcplab_fleet::inventory::Inventory;
use tcplab_fleet::mesh::outcome::MeshWorkload;

const HOSTS: &str = r#"[defaults]
port = 5301
user = "root"
[[host]]
name = "h1"
address = "198.18.1.1"
ssh = "root@198.18.1.1"
labels = ["rack1", "gpu"]
[[host]]
name = "h2"
address = "198.18.1.2"
ssh = true
port = 5302
[[host]]
name = "h3"
address = "fd00::3"
srun = true
[[host]]
name = "h4"
address = "127.0.0.1"
port = 5304
"#;

fn toml_value() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<i64>().prop_map(|n| n.to_string()),
        "\"[a-z0-9_.:@/ -]{0,20}\"",
        "\"\\PC{0,12}\"",
        prop::sample::select(vec![
            "true",
            "false",
            "-1",
            "0",
            "65536",
            "1e9",
            "\"\"",
            "[]",
            "{}",
            "[1]",
            "\"h1\"",
            "\"198.18.1.1\"",
            "\"198.18.1.300\"",
            "\"::1\"",
            "\"localhost\"",
            "\"root@\"",
            "\"-oProxyCommand=x\"",
            "\"tcplab-x25519 AAAA\"",
            "\"é\"",
            "\"\\u0000\"",
            "\"a-name-far-too-long-for-a-host-a-name-far-too-long-for-a-host-x\"",
        ])
        .prop_map(str::to_owned),
    ]
}

/// The hosts file with one line changed; the text and the line's key.
fn mutated() -> impl Strategy<Value = (String, String)> {
    let n = HOSTS.lines().count();
    (0..n, 0..4u8, toml_value(), ".{0,30}").prop_map(move |(i, how, value, junk)| {
        let mut out: Vec<String> = HOSTS.lines().map(str::to_owned).collect();
        let key = out[i]
            .split_once('=')
            .map(|(k, _)| k.trim().to_owned())
            .unwrap_or_default();
        match how {
            0 if !key.is_empty() => out[i] = format!("{key} = {value}"),
            1 => out[i] = String::new(),
            2 => {
                let l = out[i].clone();
                out.insert(i, l);
            }
            _ => out[i] = junk,
        }
        (out.join("\n"), key)
    })
}

fn hosts_hold(text: String) -> Result<(), TestCaseError> {
    let result = bounded("Inventory::parse", move || {
        Inventory::parse(&text, "hosts.toml").map_err(|e| e.to_string())
    })?;
    if let Err(e) = result {
        check_error(&e, &["hosts.toml"])?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(props::config())]

    #[test]
    fn hosts_files_with_one_line_changed((text, key) in mutated()) {
        let result = bounded("Inventory::parse", move || {
            Inventory::parse(&text, "hosts.toml").map_err(|e| e.to_string())
        })?;
        if let Err(e) = result {
            check_error(&e, &["hosts.toml"])?;
            // The field, or what the change broke: the TOML, a host, a duplicate.
            let named = key.is_empty()
                || ["`", "line", "host", "TOML"].iter().any(|w| e.contains(w));
            prop_assert!(named, "`{}` not named: {}", key, e);
        }
    }

    #[test]
    fn hosts_files_of_any_text(text in any::<String>()) {
        hosts_hold(text)?;
    }

    /// Many hosts: the checks stay fast (duplicates are found by map, not by pairs).
    #[test]
    fn many_hosts(n in 1usize..2000, dup in any::<prop::sample::Index>()) {
        let mut text = String::new();
        for i in 0..n {
            text.push_str(&format!("[[host]]\nname = \"h{i}\"\naddress = \"198.18.{}.{}\"\n", i / 250, i % 250 + 1));
        }
        let d = dup.index(n);
        text.push_str(&format!("[[host]]\nname = \"h{d}\"\naddress = \"198.19.0.1\"\n"));
        hosts_hold(text)?;
    }

    #[test]
    fn mesh_workloads(name in prop_oneof![
        prop::sample::select(vec!["msgs", "rr", "stream", "crr", "MSGS", "http", ""]).prop_map(str::to_owned),
        any::<String>(),
    ]) {
        match MeshWorkload::parse(&name) {
            Ok(w) => prop_assert_eq!(MeshWorkload::parse(w.name()), Ok(w)),
            Err(e) => check_error(&e, &[])?,
        }
    }
}
