//! The pure half of the lab: topology expansion, validation and the TOML format. No root needed.

#![allow(clippy::unwrap_used, reason = "tests fail loudly on unexpected errors")]

use tcplab_lab::spec::{IfAddr, in_lab_range};
use tcplab_lab::{BuiltinOptions, LabError, LabSpec, Offloads, SysctlSetting, Topology};

fn field_of(err: LabError) -> (String, String) {
    match err {
        LabError::Invalid { field, problem } => (field, problem),
        LabError::File { message, .. } => ("<file>".into(), message),
        other => panic!("unexpected error {other:?}"),
    }
}

#[test]
fn builtins_expand_to_documented_hosts_and_addresses() {
    let spec = LabSpec::builtin(&BuiltinOptions {
        name: "x".into(),
        topology: Topology::Dumbbell,
        hosts: 3,
        ..BuiltinOptions::default()
    })
    .unwrap();
    let names: Vec<_> = spec.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["c1", "c2", "c3", "middle", "s1", "s2", "s3"]);
    assert_eq!(spec.links.len(), 6);
    assert_eq!(spec.bridges[0].ports, ["c1", "c2", "c3", "s1", "s2", "s3"]);
    let s2 = spec.links.iter().find(|l| l.a.host == "s2").unwrap();
    assert_eq!(s2.a.addrs[0].to_string(), "198.18.0.102/16");
    assert_eq!(s2.a.addrs[1].to_string(), "fd00::66/64");
    assert_eq!(spec.netns_name("s2"), "tcplab-x-s2");

    let star = LabSpec::builtin(&BuiltinOptions {
        name: "m".into(),
        topology: Topology::Star,
        hosts: 16,
        ..BuiltinOptions::default()
    })
    .unwrap();
    assert_eq!(star.nodes.len(), 17);
    assert_eq!(star.nodes.last().unwrap().name, "switch");
}

#[test]
fn bad_names_and_sizes_name_their_flag() {
    let base = BuiltinOptions::default();
    let cases: Vec<(BuiltinOptions, &str)> = vec![
        (
            BuiltinOptions {
                name: "Bad-Name".into(),
                ..base.clone()
            },
            "--name",
        ),
        (
            BuiltinOptions {
                name: String::new(),
                ..base.clone()
            },
            "--name",
        ),
        (
            BuiltinOptions {
                name: "x".repeat(25),
                ..base.clone()
            },
            "--name",
        ),
        (
            BuiltinOptions {
                topology: Topology::Star,
                hosts: 0,
                ..base.clone()
            },
            "--hosts",
        ),
        (
            BuiltinOptions {
                topology: Topology::Star,
                hosts: 65,
                ..base.clone()
            },
            "--hosts",
        ),
        (
            BuiltinOptions {
                mtu: 67,
                ..base.clone()
            },
            "--mtu",
        ),
        (
            BuiltinOptions {
                topology: Topology::Custom,
                ..base.clone()
            },
            "--topology",
        ),
    ];
    for (opts, flag) in cases {
        let (field, problem) = field_of(LabSpec::builtin(&opts).unwrap_err());
        assert_eq!(field, flag, "{problem}");
    }
    let (field, problem) = field_of("ring".parse::<Topology>().unwrap_err());
    assert_eq!(field, "--topology");
    assert!(problem.contains("pair, path, dumbbell, star"), "{problem}");
}

#[test]
fn addresses_must_stay_in_the_lab_ranges() {
    assert!(in_lab_range("198.19.255.1".parse().unwrap()));
    assert!(in_lab_range("fd12::1".parse().unwrap()));
    assert!(!in_lab_range("198.20.0.1".parse().unwrap()));
    assert!(!in_lab_range("10.0.0.1".parse().unwrap()));
    assert!(!in_lab_range("fe80::1".parse().unwrap()));
    let (_, p) = field_of(IfAddr::parse("addr", "192.168.1.1/24").unwrap_err().into());
    assert!(p.contains("outside the lab ranges"), "{p}");
    assert!(
        IfAddr::parse("addr", "198.18.0.1").is_err(),
        "prefix required"
    );
    assert!(IfAddr::parse("addr", "198.18.0.1/33").is_err());
}

#[test]
fn toml_errors_point_at_the_field() {
    let dup = r#"
        topology = "custom"
        [[host]]
        name = "a"
        [[host]]
        name = "a"
    "#;
    let (field, problem) = field_of(tcplab_lab::file::parse(dup, Some("x")).unwrap_err());
    assert_eq!(field, "host[1].name");
    assert!(problem.contains("duplicate host name 'a'"), "{problem}");

    let outside = r#"
        topology = "custom"
        [[host]]
        name = "a"
        [[host]]
        name = "b"
        [[link]]
        a = { host = "a", ifname = "eth0", addrs = ["10.1.1.1/24"] }
        b = { host = "b", ifname = "eth0" }
    "#;
    let (_, problem) = field_of(tcplab_lab::file::parse(outside, Some("x")).unwrap_err());
    assert!(problem.contains("outside the lab ranges"), "{problem}");
    assert!(
        problem.contains("line 8"),
        "the TOML error carries the line: {problem}"
    );

    let unknown = "topology = \"pair\"\nmtuu = 1500\n";
    let (_, problem) = field_of(tcplab_lab::file::parse(unknown, Some("x")).unwrap_err());
    assert!(problem.contains("mtuu"), "{problem}");

    let dangling = r#"
        topology = "custom"
        [[host]]
        name = "a"
        [[link]]
        a = { host = "a", ifname = "eth0" }
        b = { host = "nope", ifname = "eth0" }
    "#;
    let (field, _) = field_of(tcplab_lab::file::parse(dangling, Some("x")).unwrap_err());
    assert_eq!(field, "link[0].b.host");

    let sysctl_host = "topology = \"pair\"\n[sysctl.nobody]\n\"net.ipv4.tcp_sack\" = 0\n";
    let (field, problem) = field_of(tcplab_lab::file::parse(sysctl_host, Some("x")).unwrap_err());
    assert_eq!(field, "sysctl[0]");
    assert!(problem.contains("all, client, server"), "{problem}");
}

#[test]
fn flags_parse_or_explain() {
    assert_eq!(Offloads::parse("off").unwrap(), Offloads::default());
    assert_eq!(Offloads::parse("on").unwrap(), Offloads::ALL_ON);
    let o = Offloads::parse("tso=on,gro=on").unwrap();
    assert!(o.tso && o.gro && !o.gso);
    assert!(Offloads::parse("lro=on").is_err());
    assert!(Offloads::parse("tso=maybe").is_err());
    // A value from a file may hold a line break (benches/fuzz.sh found `offloads = "\n"` in a
    // corpus): echoed escaped, on one line.
    for text in ["\n", "tso=\n", "t\rso=on"] {
        let e = Offloads::parse(text).unwrap_err().to_string();
        assert!(!e.contains(['\n', '\r']) && e.contains('\\'), "{e:?}");
    }

    let s =
        SysctlSetting::parse("--sysctl", "client:net.ipv4.tcp_rmem=4096 87380 8738000").unwrap();
    assert_eq!(
        (s.host.as_str(), s.key.as_str(), s.value.as_str()),
        ("client", "net.ipv4.tcp_rmem", "4096 87380 8738000")
    );
    assert!(
        SysctlSetting::parse("--sysctl", "net.ipv4.tcp_sack=1").is_err(),
        "host missing"
    );
    assert!(
        SysctlSetting::parse("--sysctl", "client:net.ipv4.tcp_sack").is_err(),
        "value missing"
    );
    assert!(tcplab_host::sysctl::validate_key("net/../../etc/passwd").is_err());
    assert_eq!(
        tcplab_host::sysctl::key_path("net.ipv4.tcp_rmem").to_str(),
        Some("/proc/sys/net/ipv4/tcp_rmem")
    );
    assert_eq!(
        tcplab_host::sysctl::normalize("4096\t87380  6291456\n"),
        "4096 87380 6291456"
    );
}

#[test]
fn offloads_on_accept_every_impairment_the_emulator_segments_for() {
    // Loss, duplicate, reorder and corrupt act on single wire packets; with offloads on the
    // emulator cuts super-packets into them, so none of these is refused any more.
    let flags = tcplab_emu::ImpairmentFlags {
        delay: Some("5ms".into()),
        loss: Some("1%".into()),
        duplicate: Some("0.1%".into()),
        reorder: Some("0.1%".into()),
        corrupt: Some("0.01%".into()),
        ..Default::default()
    };
    let link = flags.to_link_config().unwrap();
    assert_eq!(link.needs_per_packet(), Some("forward.loss"));
    let spec = LabSpec::builtin(&BuiltinOptions {
        name: "gsoloss".into(),
        topology: Topology::Path,
        offloads: Offloads::ALL_ON,
        link: Some(link.clone()),
        ..BuiltinOptions::default()
    })
    .unwrap();
    assert!(spec.offloads.segments());
    assert_eq!(spec.emulation.unwrap().link, link);
}

/// A lab file describes an emulated path as the flags do: `[emulator]` with the bridge, the
/// link's impairments and the workers' tuning, each refused under its own key.
#[test]
fn a_lab_file_emulates_the_middle_link_with_its_tuning() {
    let wan = r#"
        topology = "path"
        [emulator.link]
        delay = "20ms"
        rate = "100mbit"
        [emulator.tuning]
        due_batch = 16
        flow_turns = false
    "#;
    let spec = tcplab_lab::file::parse(wan, Some("wan")).unwrap();
    let emu = spec.emulation.expect("impairments start the emulator");
    assert_eq!(emu.link.forward.delay_ns, 20_000_000);
    assert_eq!((emu.tuning.due_batch, emu.tuning.flow_turns), (16, false));

    let plain = "topology = \"path\"\n[emulator]\nbridge = \"emu\"\n";
    let emu = tcplab_lab::file::parse(plain, Some("p")).unwrap().emulation;
    assert_eq!(emu.map(|e| e.tuning), Some(Default::default()));

    let bad_delay = "topology = \"path\"\n[emulator.link]\ndelay = \"20xs\"\n";
    let (field, problem) = field_of(tcplab_lab::file::parse(bad_delay, Some("x")).unwrap_err());
    assert_eq!(field, "emulator.link.delay", "{problem}");

    let bad_knob = "topology = \"path\"\n[emulator.tuning]\ndue_batc = 16\n";
    let (_, problem) = field_of(tcplab_lab::file::parse(bad_knob, Some("x")).unwrap_err());
    assert!(
        problem.contains("due_batc") && problem.contains("line 3"),
        "{problem}"
    );

    let kernel =
        "topology = \"path\"\n[emulator]\nbridge = \"kernel\"\n[emulator.tuning]\nbatch = 32\n";
    let (field, problem) = field_of(tcplab_lab::file::parse(kernel, Some("x")).unwrap_err());
    assert_eq!(field, "emulator.tuning", "{problem}");

    let custom =
        "topology = \"custom\"\n[[host]]\nname = \"a\"\n[emulator.link]\ndelay = \"1ms\"\n";
    let (field, _) = field_of(tcplab_lab::file::parse(custom, Some("x")).unwrap_err());
    assert_eq!(field, "emulator");
}
