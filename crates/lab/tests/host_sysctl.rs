//! Host-global sysctls (a separate test binary: it changes a machine-wide value for a moment, so it
//! must not run beside tests that check the host's values stay put).

#![allow(clippy::unwrap_used, reason = "tests fail loudly on unexpected errors")]

mod common;

use common::{lab_name, require_root};
use tcplab_lab::{BuiltinOptions, Lab, LabSpec, Ownership, StateDir, SysctlSetting};

#[test]
fn global_sysctl_is_journaled_and_restored_on_teardown_and_by_gc() {
    require_root();
    let key = "net.core.wmem_max";
    let original = tcplab_host::sysctl::read(key).unwrap();
    let wanted: u64 = original.parse::<u64>().unwrap() + 4096;
    let state = tempfile::tempdir().unwrap();
    let spec = |tag: &str| {
        LabSpec::builtin(&BuiltinOptions {
            name: lab_name(tag),
            sysctls: vec![
                SysctlSetting::parse("--sysctl", &format!("all:{key}={wanted}")).unwrap(),
            ],
            allow_host_sysctl: true,
            ..BuiltinOptions::default()
        })
        .unwrap()
    };
    {
        let _lab = Lab::build_in(
            StateDir::at(state.path()),
            spec("glob1"),
            Ownership::Process,
        )
        .unwrap();
        assert_eq!(tcplab_host::sysctl::read(key).unwrap(), wanted.to_string());
        let journal = StateDir::at(state.path()).journal().unwrap();
        assert_eq!(
            journal[key].original, original,
            "old value journaled before the change"
        );
    }
    assert_eq!(
        tcplab_host::sysctl::read(key).unwrap(),
        original,
        "restored on teardown"
    );

    // A persistent lab whose record vanishes (as if its state were lost mid-way) is still
    // restored by gc from the journal.
    let lab = Lab::build_in(
        StateDir::at(state.path()),
        spec("glob2"),
        Ownership::Persistent,
    )
    .unwrap();
    assert_eq!(tcplab_host::sysctl::read(key).unwrap(), wanted.to_string());
    let name = lab.name().to_string();
    drop(lab);
    StateDir::at(state.path()).remove(&name).unwrap();
    let report = tcplab_lab::gc(&StateDir::at(state.path()), false).unwrap();
    assert_eq!(report.restored_sysctls, vec![key.to_string()]);
    assert_eq!(tcplab_host::sysctl::read(key).unwrap(), original);
    for ns in common::namespaces_of(&name) {
        tcplab_lab::netns::delete(&ns).unwrap();
    }
}
