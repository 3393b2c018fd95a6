//! The battery as a user meets a real path, as root: `tcplab serve` (the agent) in a lab's
//! server host, the battery from its client host against the agent's address, nothing of the
//! lab given to the doctor. The far end's own view (its counters, its host) arrives with every
//! report, the path is estimated rather than configured, and an agent of an older protocol is
//! named as such.

#![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]

use std::io::{Read, Write};
use std::time::Duration;

use tcplab_battery::corpus::runner::remote;
use tcplab_doctor::plan::Request;
use tcplab_doctor::{PartKind, PathInfo, Role, diagnose};
use tcplab_emu::{DirectionConfig, LinkConfig, QueueLimit};
use tcplab_lab::{BuiltinOptions, Lab, LabSpec, Ownership, StateDir, SysctlSetting, Topology};

/// The lab needs root; CI runs the suite as root, so a test without it fails, never passes.
fn require_root() {
    // Safety: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    assert!(
        root,
        "this test builds an emulated lab and needs root (run the suite as root)"
    );
}

const RATE: u64 = 100_000_000;

/// A 100 Mbit/s, 10 ms path whose server accepts on one thread with a listen backlog of 2.
fn lab(state: &tempfile::TempDir) -> Lab {
    let dir = DirectionConfig {
        delay_ns: 5_000_000,
        rate_bps: Some(RATE),
        queue: Some(QueueLimit::Packets(128)),
        ..DirectionConfig::default()
    };
    let spec = LabSpec::builtin(&BuiltinOptions {
        name: format!("rm{}", std::process::id() % 10_000),
        topology: Topology::Path,
        link: Some(LinkConfig {
            forward: dir.clone(),
            reverse: dir,
            seed: Some(7),
        }),
        sysctls: vec![SysctlSetting::parse("--sysctl", "server:net.core.somaxconn=2").unwrap()],
        offloads: tcplab_lab::Offloads::parse("on").unwrap(),
        ..BuiltinOptions::default()
    })
    .unwrap();
    Lab::build_in(StateDir::at(state.path()), spec, Ownership::Process).unwrap()
}

#[test]
fn a_remote_battery_sees_the_far_end_and_estimates_the_path() {
    require_root();
    let state = tempfile::tempdir().unwrap();
    let lab = lab(&state);
    let mut req = Request::new(Duration::from_secs(10));
    req.knobs.crr_concurrency = Some(8);
    req.knobs.crr_server_threads = Some(1);
    let (b, truth) = remote(&lab, &req).unwrap();
    // Nothing of the lab reached the battery.
    assert_eq!(
        b.path,
        PathInfo {
            measured_rtt_ms: b.path.measured_rtt_ms,
            ..PathInfo::default()
        }
    );
    assert!(b.fidelity.is_none() && b.facts.as_ref().unwrap().hosts.is_empty());
    let stream = b.stream.as_ref().unwrap();
    assert!(
        stream.meta.facts.emulator.is_none(),
        "{:?}",
        stream.meta.facts
    );
    // The far end said what it is and what its host is.
    let ends = b.ends.as_ref().unwrap();
    assert_eq!(
        ends.agent_version.as_deref(),
        Some(env!("CARGO_PKG_VERSION"))
    );
    let server = ends.server.as_ref().unwrap();
    assert_eq!(
        server.sysctls.get("net.core.somaxconn").map(String::as_str),
        Some("2")
    );
    // Its counters came with its reports: the accept queue overflowed during crr.
    let overflows = b.counters[&PartKind::Crr][&Role::Server]
        .get("TcpExt.ListenOverflows")
        .copied()
        .unwrap_or(0);
    assert!(overflows > 0, "{:?}", b.counters[&PartKind::Crr]);
    let view = stream.meta.server_view.as_ref().unwrap();
    assert!(
        view.tcp_info.is_some_and(|t| t.bytes_received > 0),
        "{view:?}"
    );
    assert!(
        b.crr
            .as_ref()
            .unwrap()
            .meta
            .server_view
            .as_ref()
            .unwrap()
            .listen_backlog
            == Some(2)
    );
    // The path, estimated: the train's dispersion finds the bottleneck's payload rate (1448 of
    // every 1514 bytes on the wire).
    let ctx = tcplab_doctor::Context::new(&b);
    let rate = ctx.estimate.rate.clone().unwrap();
    let payload = RATE as f64 * 1448.0 / 1514.0;
    assert!(
        (rate.value - payload).abs() < 0.15 * payload && rate.bounded(),
        "{rate:?}"
    );
    let rtt = ctx.estimate.base_rtt.clone().unwrap();
    assert!((0.0095..0.0125).contains(&rtt.value), "{rtt:?}");
    // And the doctor, which could not see the server's accept queue from the client alone,
    // names it first.
    let findings = diagnose(&b);
    let top = findings
        .iter()
        .find(|f| f.severity >= tcplab_doctor::Severity::Warning);
    assert_eq!(
        top.map(|f| f.id.as_str()),
        Some("connection_trouble.accept_queue"),
        "{findings:#?}"
    );
    assert!(truth.fidelity.is_some());
    drop(lab);
}

#[test]
fn an_agent_of_an_older_protocol_is_named_as_such() {
    // What an agent of protocol 4 answers a client of this version: a refusal in clear.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let old = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut len = [0u8; 4];
        s.read_exact(&mut len).unwrap();
        let mut first = vec![0u8; u32::from_be_bytes(len) as usize];
        s.read_exact(&mut first).unwrap();
        let body = format!(
            "{{\"type\":\"error\",\"message\":\"protocol version {} not supported (server speaks 4); run the same tcplab version on both ends\"}}",
            tcplab_load::proto::VERSION
        );
        let mut frame = (body.len() as u32).to_be_bytes().to_vec();
        frame.extend_from_slice(body.as_bytes());
        s.write_all(&frame).unwrap();
    });
    let e = tcplab_battery::run(
        &tcplab_battery::Target::Remote(addr),
        &Request::new(Duration::from_secs(10)),
        PathInfo::default(),
        &|_| {},
    )
    .expect_err("refused")
    .to_string();
    old.join().unwrap();
    assert!(
        e.contains("server speaks 4") && e.contains(&addr.to_string()),
        "{e}"
    );
    assert!(!e.contains('\n'), "one line: {e}");
}
