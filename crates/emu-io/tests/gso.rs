//! Root integration test of GSO mode: offloads ON on every veth end, so TSO super-packets
//! reach the emulator; it carries them whole (virtio-net headers), charges the model their
//! wire packets, and the link still shows its configured delay and rate. Links with elements
//! acting on single packets (segmentation in user space) are tested in `segment.rs`.

mod common;

use std::time::{Duration, Instant};

use common::{PathLab, SERVER_IP, median, tcp_echo_server, tcp_rr_rtts};
use tcplab_emu::ImpairmentFlags;
use tcplab_emu_io::{EmuBridge, IoOptions};

fn gso_opts() -> IoOptions {
    IoOptions {
        vnet: tcplab_emu_io::Vnet::Gso,
        ..Default::default()
    }
}

/// Bytes received per elapsed time (since the first byte) by a sink on the server.
fn tcp_sink(lab: &PathLab, port: u16) -> std::thread::JoinHandle<Vec<(f64, u64)>> {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let h = lab.server.spawn_in(move || {
        use std::io::Read;
        let l = std::net::TcpListener::bind((SERVER_IP, port)).expect("bind sink");
        ready_tx.send(()).expect("ready");
        let (mut s, _) = l.accept().expect("accept");
        s.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let mut buf = vec![0_u8; 1 << 20];
        let (mut total, mut trace, mut t0) = (0_u64, Vec::new(), None);
        while let Ok(n) = s.read(&mut buf) {
            if n == 0 {
                break;
            }
            let t0 = *t0.get_or_insert_with(Instant::now);
            total += n as u64;
            trace.push((t0.elapsed().as_secs_f64(), total));
        }
        trace
    });
    ready_rx
        .recv_timeout(Duration::from_secs(5))
        .expect("sink ready");
    h
}

/// Cumulative bytes at the first trace point at or after `t` seconds.
fn bytes_at(trace: &[(f64, u64)], t: f64) -> u64 {
    trace
        .iter()
        .find(|&&(ts, _)| ts >= t)
        .map_or(0, |&(_, b)| b)
}

#[test]
fn tso_super_packets_cross_whole_with_delay_and_rate() {
    require_root!();
    let lab = PathLab::with_offloads(true);
    let cfg = ImpairmentFlags {
        delay: Some("10ms".into()),
        rate: Some("100mbit".into()),
        seed: Some("7".into()),
        ..Default::default()
    }
    .to_link_config()
    .expect("flags");
    let bridge = lab
        .middle
        .run_in(move || EmuBridge::start("m0", "m1", &cfg, &gso_opts()))
        .expect("gso bridge starts");

    // Delay: 20 ms RTT (+ base + 2 × 1-byte-frame serialisation, ~10 µs).
    let _echo = tcp_echo_server(&lab, 5030);
    let rtts = tcp_rr_rtts(&lab, 5030, 50);
    let rr = median(&rtts);
    assert!((20.0..21.0).contains(&rr), "TCP RR median {rr} ms");

    // Rate: 4 s of bulk TCP; goodput between 1 s and 4 s after the first byte. Wire frames
    // are 1514 B carrying 1448 B of payload (timestamps on), so 100 Mbit/s of wire is
    // 95.64 Mbit/s of goodput.
    let sink = tcp_sink(&lab, 5031);
    lab.client.run_in(move || {
        use std::io::Write;
        let mut s = std::net::TcpStream::connect((SERVER_IP, 5031)).expect("connect");
        let chunk = vec![0x5a_u8; 1 << 16];
        let end = Instant::now() + Duration::from_secs_f64(4.5);
        while Instant::now() < end {
            s.write_all(&chunk).expect("write");
        }
    });
    let trace = sink.join().expect("sink");
    let goodput = (bytes_at(&trace, 4.0) - bytes_at(&trace, 1.0)) as f64 * 8.0 / 3.0;
    let expected = 100e6 * 1448.0 / 1514.0;
    let report = bridge.stop();
    let f = &report.forward;
    eprintln!(
        "goodput {:.2} Mbit/s (expected {:.2}), RR median {rr:.3} ms; a->b {} frames standing for {} segments, oversize {}, lateness {:?}",
        goodput / 1e6,
        expected / 1e6,
        f.frames_in,
        f.segments_in,
        f.drops.oversize,
        f.lateness
    );
    assert!(
        (goodput / expected - 1.0).abs() < 0.05,
        "goodput {goodput} vs {expected}"
    );
    assert_eq!(f.drops.oversize, 0, "super-packets fit the GSO ring slots");
    assert!(
        f.segments_in > 2 * f.frames_in,
        "TSO super-packets crossed whole: {} frames for {} segments",
        f.frames_in,
        f.segments_in
    );
}

#[test]
fn gso_mode_refuses_an_egress_without_tso() {
    require_root!();
    let lab = PathLab::with_offloads(true);
    lab.middle.exec(&["ethtool", "-K", "m1", "tso", "off"]);
    let e = lab
        .middle
        .run_in(|| EmuBridge::start("m0", "m1", &tcplab_emu::LinkConfig::default(), &gso_opts()))
        .expect_err("m1 has TSO off");
    assert_eq!(
        e.to_string(),
        "GSO mode needs TSO and TX checksum offload on m1: run `ethtool -K m1 tso on gso on tx on`, or run without GSO mode and with offloads off"
    );
    // With offloads off everywhere, the ordinary mode still starts there.
    let bridge = lab
        .middle
        .run_in(|| {
            EmuBridge::start(
                "m0",
                "m1",
                &tcplab_emu::LinkConfig::default(),
                &IoOptions::default(),
            )
        })
        .expect("non-GSO mode does not care");
    let _ = bridge.stop();
}
