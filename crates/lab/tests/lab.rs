//! The lab end to end, as root: every topology passes real TCP traffic between the hosts that
//! should reach each other, per-host sysctls stay per host, bad specs build nothing.

#![allow(clippy::unwrap_used, reason = "tests fail loudly on unexpected errors")]

mod common;

use common::{build, lab_name, namespaces_of, require_root, snapshot_proc_sys_net};
use tcplab_lab::{
    BuiltinOptions, Lab, LabError, LabSpec, Ownership, Role, StateDir, SysctlSetting, Topology,
};

/// Asserts every ordered pair of end hosts exchanged data over TCP on IPv4 and IPv6.
fn assert_full_mesh(lab: &Lab) {
    let ends = lab
        .hosts()
        .iter()
        .filter(|h| h.role() == Role::Host)
        .count();
    let checks = lab.check_connectivity().expect("check runs");
    let failed: Vec<_> = checks.iter().filter(|c| !c.ok).collect();
    assert!(failed.is_empty(), "failed exchanges: {failed:#?}");
    // Two address families per ordered pair.
    assert_eq!(checks.len(), 2 * ends * (ends - 1), "{checks:#?}");
}

#[test]
fn pair_passes_tcp_both_ways_and_is_removed_on_drop() {
    let state = tempfile::tempdir().unwrap();
    let name = lab_name("pair");
    {
        let lab = build(&state, "pair", Topology::Pair, 2);
        assert_eq!(namespaces_of(&name).len(), 2);
        assert_full_mesh(&lab);
        let client = lab.host("client").unwrap();
        assert_eq!(client.ipv4().unwrap().to_string(), "198.18.0.1");
        assert_eq!(
            lab.host("server").unwrap().ipv4().unwrap().to_string(),
            "198.18.0.101"
        );
    }
    assert!(
        namespaces_of(&name).is_empty(),
        "drop must remove the namespaces"
    );
    assert!(StateDir::at(state.path()).read(&name).unwrap().is_none());
}

#[test]
fn path_bridges_client_and_server_through_middle() {
    let state = tempfile::tempdir().unwrap();
    let lab = build(&state, "path", Topology::Path, 2);
    assert_eq!(
        lab.hosts().iter().map(|h| h.name()).collect::<Vec<_>>(),
        ["client", "middle", "server"]
    );
    assert_full_mesh(&lab);
    // The middle host forwards at layer 2: it has a bridge and no lab address.
    let middle = lab.host("middle").unwrap();
    assert!(middle.addrs().is_empty());
    let ifaces = middle
        .run(tcplab_lab::status::read_interfaces)
        .unwrap()
        .unwrap();
    let br = ifaces.iter().find(|i| i.name == "br0").expect("bridge");
    assert_eq!(br.kind.as_deref(), Some("bridge"));
    for port in ["client", "server"] {
        let p = ifaces.iter().find(|i| i.name == port).expect("port");
        assert_eq!(p.bridge.as_deref(), Some("br0"));
        assert!(p.up && p.carrier, "{p:?}");
        assert_eq!(p.mtu, 1500);
        let off = p.offloads.expect("veth reports offloads");
        assert!(
            !off.tso && !off.gso && !off.gro,
            "offloads are off by default: {off:?}"
        );
    }
}

#[test]
fn dumbbell_connects_every_client_to_every_server() {
    let state = tempfile::tempdir().unwrap();
    let lab = build(&state, "dumbbell", Topology::Dumbbell, 2);
    let names: Vec<_> = lab.hosts().iter().map(|h| h.name()).collect();
    assert_eq!(names, ["c1", "c2", "middle", "s1", "s2"]);
    assert_full_mesh(&lab);
}

#[test]
fn star_connects_every_host_pair() {
    let state = tempfile::tempdir().unwrap();
    let lab = build(&state, "star", Topology::Star, 4);
    assert_eq!(
        lab.hosts()
            .iter()
            .filter(|h| h.role() == Role::Host)
            .count(),
        4
    );
    assert!(lab.host("switch").is_ok());
    assert_full_mesh(&lab);
}

#[test]
fn custom_topology_from_toml_with_mtu_and_offloads() {
    require_root();
    let state = tempfile::tempdir().unwrap();
    let text = r#"
        topology = "custom"
        mtu = 9000
        [offloads]
        gro = true
        [[host]]
        name = "a"
        [[host]]
        name = "b"
        [[link]]
        a = { host = "a", ifname = "eth0", addrs = ["198.19.1.1/24", "fd00:1::1/64"] }
        b = { host = "b", ifname = "eth0", addrs = ["198.19.1.2/24", "fd00:1::2/64"] }
    "#;
    let spec = tcplab_lab::file::parse(text, Some(&lab_name("custom"))).unwrap();
    let lab = Lab::build_in(StateDir::at(state.path()), spec, Ownership::Process).unwrap();
    assert_full_mesh(&lab);
    let ifaces = lab
        .host("a")
        .unwrap()
        .run(tcplab_lab::status::read_interfaces)
        .unwrap()
        .unwrap();
    let eth0 = ifaces.iter().find(|i| i.name == "eth0").unwrap();
    assert_eq!(eth0.mtu, 9000);
    let off = eth0.offloads.unwrap();
    assert!(off.gro && !off.tso && !off.gso, "{off:?}");
}

#[test]
fn per_host_sysctls_stay_in_their_host() {
    require_root();
    let before = snapshot_proc_sys_net();
    let state = tempfile::tempdir().unwrap();
    let rmem = "4096 131072 8738000";
    let spec = LabSpec::builtin(&BuiltinOptions {
        name: lab_name("sysctl"),
        topology: Topology::Pair,
        sysctls: vec![
            SysctlSetting::parse("--sysctl", "all:net.ipv4.tcp_congestion_control=reno").unwrap(),
            SysctlSetting::parse("--sysctl", &format!("client:net.ipv4.tcp_rmem={rmem}")).unwrap(),
        ],
        ..BuiltinOptions::default()
    })
    .unwrap();
    {
        let lab = Lab::build_in(StateDir::at(state.path()), spec, Ownership::Process).unwrap();
        assert_eq!(
            lab.read_sysctl("client", "net.ipv4.tcp_rmem").unwrap(),
            rmem
        );
        let host_rmem = tcplab_host::sysctl::read("net.ipv4.tcp_rmem").unwrap();
        assert_eq!(
            lab.read_sysctl("server", "net.ipv4.tcp_rmem").unwrap(),
            host_rmem
        );
        for h in ["client", "server"] {
            assert_eq!(
                lab.read_sysctl(h, "net.ipv4.tcp_congestion_control")
                    .unwrap(),
                "reno"
            );
        }
        // Changed later, on the running lab, verified by reading back.
        let later = SysctlSetting::parse("x", "server:net.ipv4.tcp_autocorking=0").unwrap();
        lab.set_sysctls(&[later], false).unwrap();
        assert_eq!(
            lab.read_sysctl("server", "net.ipv4.tcp_autocorking")
                .unwrap(),
            "0"
        );
        assert_eq!(
            lab.read_sysctl("client", "net.ipv4.tcp_autocorking")
                .unwrap(),
            "1"
        );
        // The host machine's own values never moved.
        assert_ne!(
            tcplab_host::sysctl::read("net.ipv4.tcp_congestion_control").unwrap(),
            "reno"
        );
    }
    let after = snapshot_proc_sys_net();
    let changed: Vec<_> = before
        .iter()
        .filter(|(k, v)| after.get(*k) != Some(v))
        .map(|(k, _)| k.clone())
        .collect();
    assert!(
        changed.is_empty(),
        "host /proc/sys/net changed: {changed:?}"
    );
}

#[test]
fn bad_sysctls_fail_and_leave_nothing_behind() {
    require_root();
    let state = tempfile::tempdir().unwrap();
    let cases = [
        ("unknown", "all:net.ipv4.tcp_no_such_knob=1"),
        ("global", "client:net.core.rmem_max=8738000"),
        (
            "rejected",
            "client:net.ipv4.tcp_congestion_control=no_such_cc",
        ),
    ];
    for (tag, text) in cases {
        let name = lab_name(tag);
        let spec = LabSpec::builtin(&BuiltinOptions {
            name: name.clone(),
            sysctls: vec![SysctlSetting::parse("--sysctl", text).unwrap()],
            ..BuiltinOptions::default()
        })
        .unwrap();
        let err = Lab::build_in(StateDir::at(state.path()), spec, Ownership::Process).unwrap_err();
        match (tag, &err) {
            ("unknown", LabError::UnknownSysctl { .. })
            | ("global", LabError::GlobalSysctl { .. })
            | ("rejected", LabError::SysctlRejected { .. }) => {}
            _ => panic!("{tag}: unexpected error {err:?}"),
        }
        assert!(
            namespaces_of(&name).is_empty(),
            "{tag}: half-built namespaces left"
        );
        assert!(StateDir::at(state.path()).read(&name).unwrap().is_none());
    }
}

#[test]
fn a_name_clash_is_refused() {
    let state = tempfile::tempdir().unwrap();
    let _lab = build(&state, "clash", Topology::Pair, 2);
    let spec = LabSpec::builtin(&BuiltinOptions {
        name: lab_name("clash"),
        ..BuiltinOptions::default()
    })
    .unwrap();
    let err =
        Lab::build_in(StateDir::at(state.path()), spec.clone(), Ownership::Process).unwrap_err();
    assert!(matches!(err, LabError::AlreadyExists(_)), "{err:?}");
    // Also when only the namespaces exist (another state directory built them).
    let other = tempfile::tempdir().unwrap();
    let err = Lab::build_in(StateDir::at(other.path()), spec, Ownership::Process).unwrap_err();
    assert!(matches!(err, LabError::AlreadyExists(_)), "{err:?}");
}

#[test]
fn threads_and_processes_run_inside_their_host() {
    let state = tempfile::tempdir().unwrap();
    let lab = build(&state, "enter", Topology::Pair, 2);
    let client = lab.host("client").unwrap();
    // A thread in the client sees the client's address, the caller does not.
    let seen = client
        .run(|| tcplab_lab::status::read_interfaces().unwrap())
        .unwrap();
    assert!(
        seen.iter()
            .any(|i| i.addrs.iter().any(|a| a.addr.to_string() == "198.18.0.1"))
    );
    let here = tcplab_lab::status::read_interfaces().unwrap();
    assert!(
        !here
            .iter()
            .any(|i| i.addrs.iter().any(|a| a.addr.to_string() == "198.18.0.1"))
    );
    // A child process too.
    let out = client.command("cat").arg("/proc/net/dev").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("eth0:"), "{text}");
    // A spawned 'static thread.
    let handle = lab
        .host("server")
        .unwrap()
        .spawn("probe", || {
            std::net::TcpListener::bind("198.18.0.101:0").is_ok()
        })
        .unwrap();
    assert!(
        handle.join().unwrap(),
        "the server thread can bind the server address"
    );
}

#[test]
fn opening_an_existing_lab_does_not_own_it() {
    let state = tempfile::tempdir().unwrap();
    let lab = build(&state, "open", Topology::Pair, 2);
    {
        let opened = Lab::open_in(StateDir::at(state.path()), lab.name()).unwrap();
        assert!(!opened.is_owned());
        assert_full_mesh(&opened);
    }
    assert_eq!(
        namespaces_of(lab.name()).len(),
        2,
        "dropping an opened lab keeps it"
    );
}
