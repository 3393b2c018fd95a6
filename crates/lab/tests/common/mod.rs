//! Shared test fixtures: an isolated state directory per test and unique lab names, so tests can
//! run in parallel with each other and with labs a user has up.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::Path;

use tcplab_lab::{BuiltinOptions, Lab, LabSpec, Ownership, StateDir, Topology};

/// A lab name unique to this test process and tag.
pub fn lab_name(tag: &str) -> String {
    format!("t{}_{tag}", std::process::id() % 100_000)
}

/// Fails loudly (not silently) when the suite is not run as root: CI runs it as root.
pub fn require_root() {
    assert!(
        rustix::process::geteuid().is_root(),
        "the lab tests need root (namespaces, veth): run `sudo cargo test`"
    );
}

/// Builds a process-owned lab in `state`; dropping it tears it down, even on panic.
pub fn build(state: &tempfile::TempDir, tag: &str, topology: Topology, hosts: usize) -> Lab {
    require_root();
    let spec = LabSpec::builtin(&BuiltinOptions {
        name: lab_name(tag),
        topology,
        hosts,
        ..BuiltinOptions::default()
    })
    .expect("valid spec");
    Lab::build_in(StateDir::at(state.path()), spec, Ownership::Process).expect("lab builds")
}

/// Names of the namespaces of lab `name` that exist now.
pub fn namespaces_of(name: &str) -> Vec<String> {
    let prefix = format!("tcplab-{name}-");
    tcplab_lab::netns::list()
        .into_iter()
        .filter(|n| n.starts_with(&prefix))
        .collect()
}

/// Every readable value under /proc/sys/net of the calling thread's namespace.
pub fn snapshot_proc_sys_net() -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    walk(Path::new("/proc/sys/net"), &mut out);
    out
}

fn walk(dir: &Path, out: &mut BTreeMap<String, String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            walk(&path, out);
        } else if let Ok(v) = std::fs::read_to_string(&path) {
            out.insert(path.display().to_string(), v);
        }
    }
}
