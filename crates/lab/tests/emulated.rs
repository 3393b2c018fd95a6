//! Labs whose middle host runs tcplab's emulator instead of the kernel bridge (as root).

#![allow(clippy::unwrap_used, reason = "tests fail loudly on unexpected errors")]

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use common::{lab_name, namespaces_of, require_root};
use tcplab_emu::{DirectionConfig, LinkConfig};
use tcplab_lab::{
    BridgeMode, BuiltinOptions, Lab, LabError, LabSpec, Offloads, Ownership, StateDir, Topology,
};

fn delay_link(one_way_ms: u64) -> LinkConfig {
    let dir = DirectionConfig {
        delay_ns: one_way_ms * 1_000_000,
        ..DirectionConfig::default()
    };
    LinkConfig {
        forward: dir.clone(),
        reverse: dir,
        seed: Some(1),
    }
}

fn emulated(
    state: &tempfile::TempDir,
    tag: &str,
    topology: Topology,
    link: Option<LinkConfig>,
    bridge: BridgeMode,
) -> Lab {
    emulated_with(state, tag, topology, link, bridge, Offloads::default())
}

fn emulated_with(
    state: &tempfile::TempDir,
    tag: &str,
    topology: Topology,
    link: Option<LinkConfig>,
    bridge: BridgeMode,
    offloads: Offloads,
) -> Lab {
    require_root();
    let spec = LabSpec::builtin(&BuiltinOptions {
        name: lab_name(tag),
        topology,
        bridge,
        link,
        offloads,
        ..BuiltinOptions::default()
    })
    .unwrap();
    Lab::build_in(StateDir::at(state.path()), spec, Ownership::Process).unwrap()
}

/// A server thread in `server` that echoes 64-byte messages until the peer closes.
fn echo_server(lab: &Lab) -> (SocketAddr, std::thread::JoinHandle<()>) {
    let listener = lab
        .host("server")
        .unwrap()
        .run(|| TcpListener::bind("198.18.0.101:0").unwrap())
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let handle = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut buf = [0u8; 64];
        while s.read_exact(&mut buf).is_ok() {
            if s.write_all(&buf).is_err() {
                break;
            }
        }
    });
    (addr, handle)
}

/// Median round-trip time of `n` 64-byte exchanges on an open connection.
fn median_rtt(stream: &mut TcpStream, n: usize) -> Duration {
    let mut rtts: Vec<Duration> = (0..n)
        .map(|_| {
            let t = Instant::now();
            stream.write_all(&[7u8; 64]).unwrap();
            let mut buf = [0u8; 64];
            stream.read_exact(&mut buf).unwrap();
            t.elapsed()
        })
        .collect();
    rtts.sort();
    rtts[n / 2]
}

#[test]
fn path_with_delay_gives_the_configured_rtt_and_changes_live() {
    let state = tempfile::tempdir().unwrap();
    let lab = emulated(
        &state,
        "emudelay",
        Topology::Path,
        Some(delay_link(10)),
        BridgeMode::Auto,
    );
    assert!(
        lab.spec().emulation.is_some(),
        "impairments put the emulator in the middle"
    );
    assert!(lab.emulator().is_some());
    let (addr, server) = echo_server(&lab);
    let mut stream = lab
        .host("client")
        .unwrap()
        .run(move || TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap())
        .unwrap();
    stream.set_nodelay(true).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let rtt = median_rtt(&mut stream, 15);
    assert!(
        rtt >= Duration::from_millis(20) && rtt < Duration::from_millis(24),
        "10 ms each way: median RTT {rtt:?}"
    );
    // Change the delay while the connection is open: it survives and sees the new RTT.
    lab.set_link(&delay_link(2)).unwrap();
    let rtt = median_rtt(&mut stream, 15);
    assert!(
        rtt >= Duration::from_millis(4) && rtt < Duration::from_millis(8),
        "2 ms each way after `set`: median RTT {rtt:?}"
    );
    let status = lab.emulator_status().unwrap();
    assert!(status.running);
    assert_eq!(status.link.forward.delay_ns, 2_000_000);
    assert_eq!(status.seed, 1, "the configured seed is used and reported");
    // The same status through the control socket, as another process would see it.
    let remote = tcplab_lab::emulation::query_status(lab.state(), lab.name()).unwrap();
    assert_eq!(remote.link.forward.delay_ns, 2_000_000);
    drop(stream);
    server.join().unwrap();
}

#[test]
fn a_stopped_emulator_passes_nothing() {
    let state = tempfile::tempdir().unwrap();
    let mut lab = emulated(&state, "emustop", Topology::Path, None, BridgeMode::Emu);
    assert_eq!(
        lab.check_connectivity()
            .unwrap()
            .iter()
            .filter(|c| !c.ok)
            .count(),
        0
    );
    let report = lab.stop_emulator().unwrap();
    assert!(
        report.forward.frames_in > 0 && report.forward.frames_out > 0,
        "{report:?}"
    );
    // No kernel bridge behind it: with the emulator gone, traffic stops instead of flowing
    // unimpaired.
    let addr: SocketAddr = "198.18.0.101:9".parse().unwrap();
    let result = lab
        .host("client")
        .unwrap()
        .run(move || TcpStream::connect_timeout(&addr, Duration::from_millis(500)))
        .unwrap();
    let err = result.unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::TimedOut, "{err}");
}

#[test]
fn dumbbell_through_the_emulator_reaches_every_pair() {
    let state = tempfile::tempdir().unwrap();
    let lab = emulated(
        &state,
        "emudumb",
        Topology::Dumbbell,
        Some(delay_link(1)),
        BridgeMode::Auto,
    );
    let checks = lab.check_connectivity().unwrap();
    let failed: Vec<_> = checks.iter().filter(|c| !c.ok).collect();
    assert!(failed.is_empty(), "{failed:#?}");
    assert_eq!(checks.len(), 2 * 4 * 3);
    // Client-to-server crosses the emulated link (about 2 ms), client-to-client does not.
    let rtt = |from: &str, to: &str| {
        checks
            .iter()
            .find(|c| c.from == from && c.to == to && c.addr.is_ipv4())
            .unwrap()
            .micros
            .unwrap()
    };
    assert!(
        rtt("c1", "s1") >= 2_000,
        "c1->s1 crosses the link: {} us",
        rtt("c1", "s1")
    );
}

#[test]
fn impairments_need_a_middle_host_and_the_emulator() {
    require_root();
    let state = tempfile::tempdir().unwrap();
    for (topology, bridge, field) in [
        (Topology::Pair, BridgeMode::Auto, "--delay/--loss/--rate"),
        (Topology::Star, BridgeMode::Auto, "--delay/--loss/--rate"),
        (Topology::Path, BridgeMode::Kernel, "--bridge"),
    ] {
        let name = lab_name("emubad");
        let err = LabSpec::builtin(&BuiltinOptions {
            name: name.clone(),
            topology,
            hosts: 2,
            bridge,
            link: Some(delay_link(5)),
            ..BuiltinOptions::default()
        })
        .unwrap_err();
        match err {
            LabError::Invalid { field: f, .. } => assert_eq!(f, field),
            other => panic!("{other:?}"),
        }
        assert!(namespaces_of(&name).is_empty());
    }
    drop(state);
}

#[test]
fn with_offloads_on_super_packets_cross_whole_at_the_configured_rate() {
    let state = tempfile::tempdir().unwrap();
    let mut link = delay_link(5);
    link.forward.rate_bps = Some(200_000_000);
    let lab = emulated_with(
        &state,
        "gso",
        Topology::Path,
        Some(link),
        BridgeMode::Auto,
        Offloads::ALL_ON,
    );
    let listener = lab
        .host("server")
        .unwrap()
        .run(|| TcpListener::bind("198.18.0.101:0").unwrap())
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let sink = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let start = Instant::now();
        let mut buf = vec![0u8; 1 << 16];
        let mut total = 0u64;
        loop {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => return (total, start.elapsed()),
                Ok(n) => total += n as u64,
            }
        }
    });
    let sent = lab
        .host("client")
        .unwrap()
        .run(move || {
            let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap();
            let chunk = vec![1u8; 1 << 16];
            let (start, mut sent) = (Instant::now(), 0u64);
            while start.elapsed() < Duration::from_secs(3) {
                s.write_all(&chunk).unwrap();
                sent += chunk.len() as u64;
            }
            sent
        })
        .unwrap();
    let (received, elapsed) = sink.join().unwrap();
    assert_eq!(received, sent);
    let status = lab.emulator_status().unwrap();
    let fwd = &status.counters["forward"];
    let (frames, segments) = (
        fwd["frames_in"].as_u64().unwrap(),
        fwd["segments_in"].as_u64().unwrap(),
    );
    assert!(
        segments > 4 * frames,
        "TSO super-packets crossed whole: {frames} frames for {segments} segments"
    );
    assert_eq!(
        fwd["csum_partial"], 0,
        "partial checksums travel in the virtio-net header: not a fidelity problem"
    );
    // Payload is 1448 of each 1514-byte wire frame: at most 191 Mbit/s of goodput, less the
    // slow start of the first round trips.
    let goodput = received as f64 * 8.0 / elapsed.as_secs_f64();
    assert!(
        goodput < 200e6 * 1448.0 / 1514.0 * 1.01 && goodput > 200e6 * 0.8,
        "the rate holds for super-packets: {goodput:.0} bit/s"
    );
}

#[test]
fn with_offloads_on_and_1pct_loss_the_lab_comes_up_and_loses_single_segments() {
    let state = tempfile::tempdir().unwrap();
    let mut link = delay_link(1);
    for dir in [&mut link.forward, &mut link.reverse] {
        dir.loss = Some(tcplab_emu::Loss::Bernoulli { probability: 0.01 });
    }
    let lab = emulated_with(
        &state,
        "gsoloss",
        Topology::Path,
        Some(link),
        BridgeMode::Auto,
        Offloads::ALL_ON,
    );
    let listener = lab
        .host("server")
        .unwrap()
        .run(|| TcpListener::bind("198.18.0.101:0").unwrap())
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let sink = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let (mut buf, mut total) = (vec![0u8; 1 << 16], 0u64);
        while let Ok(n) = s.read(&mut buf) {
            if n == 0 {
                break;
            }
            total += n as u64;
        }
        total
    });
    let total: u64 = 16 << 20;
    lab.host("client")
        .unwrap()
        .run(move || {
            let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap();
            let chunk = vec![7u8; 1 << 16];
            for _ in 0..total / chunk.len() as u64 {
                s.write_all(&chunk).unwrap();
            }
        })
        .unwrap();
    assert_eq!(
        sink.join().unwrap(),
        total,
        "the flow completes through 1 % loss"
    );
    let status = lab.emulator_status().unwrap();
    let fwd = &status.counters["forward"];
    let count = |k: &str| fwd[k].as_u64().unwrap();
    let (segmented, made, seen, lost) = (
        count("segmented"),
        count("segments_made"),
        count("segments_in"),
        fwd["drops"]["loss"].as_u64().unwrap(),
    );
    assert!(
        segmented > 0 && made > 2 * segmented,
        "super-packets were cut: {segmented} into {made} segments"
    );
    assert_eq!(count("unsegmented"), 0);
    // Each wire segment had its own 1 % chance: within the 99 % binomial interval.
    let (mean, sd) = (seen as f64 * 0.01, (seen as f64 * 0.01 * 0.99).sqrt());
    assert!(
        (lost as f64 - mean).abs() <= 2.576 * sd,
        "{lost} lost of {seen} segments, expected {mean:.0} ± {:.0}",
        2.576 * sd
    );
}
