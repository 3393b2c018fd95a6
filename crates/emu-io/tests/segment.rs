//! Root integration test of GSO mode's user-space segmentation: offloads ON on every veth
//! end, and a link with elements that act on single packets (loss, duplicate, reorder,
//! corrupt). The model acts on each wire segment of a TSO (or USO) super-packet; the emulator
//! cuts those it changed, a TCP flow still delivers every byte intact, and USO datagrams each
//! take their own chance of loss.

mod common;

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use common::{PathLab, SERVER_IP, assert_balanced};
use tcplab_emu::ImpairmentFlags;
use tcplab_emu_io::{DirSnapshot, EmuBridge, IoOptions, Report};

/// Byte `i` of the test stream: a pattern whose corruption or misordering shows.
fn pattern(i: u64) -> u8 {
    (i % 251) as u8
}

/// Sends `total` pattern bytes client → server through `port` (bounded by 60 s) and returns
/// the bytes the server received intact, or panics at the first wrong byte.
fn transfer(lab: &PathLab, port: u16, total: u64) -> u64 {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let sink = lab.server.spawn_in(move || {
        let l = std::net::TcpListener::bind((SERVER_IP, port)).expect("bind sink");
        ready_tx.send(()).expect("ready");
        let (mut s, _) = l.accept().expect("accept");
        s.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        let (mut buf, mut got) = (vec![0_u8; 1 << 16], 0_u64);
        while let Ok(n) = s.read(&mut buf) {
            if n == 0 {
                break;
            }
            for (k, &b) in buf[..n].iter().enumerate() {
                assert_eq!(b, pattern(got + k as u64), "byte {}", got + k as u64);
            }
            got += n as u64;
        }
        got
    });
    ready_rx
        .recv_timeout(Duration::from_secs(5))
        .expect("sink ready");
    lab.client.run_in(move || {
        let mut s = std::net::TcpStream::connect((SERVER_IP, port)).expect("connect");
        let (mut sent, end) = (0_u64, Instant::now() + Duration::from_secs(60));
        let mut chunk = vec![0_u8; 1 << 16];
        while sent < total && Instant::now() < end {
            let n = chunk.len().min((total - sent) as usize);
            for (k, b) in chunk[..n].iter_mut().enumerate() {
                *b = pattern(sent + k as u64);
            }
            s.write_all(&chunk[..n]).expect("write");
            sent += n as u64;
        }
    });
    let got = sink.join().expect("sink");
    // Let the last ACKs and FINs leave the delay line so the counters balance.
    std::thread::sleep(Duration::from_millis(200));
    got
}

fn gso_bridge(lab: &PathLab, flags: ImpairmentFlags) -> EmuBridge {
    let cfg = flags.to_link_config().expect("flags");
    let opts = IoOptions {
        vnet: tcplab_emu_io::Vnet::Gso,
        ..Default::default()
    };
    lab.middle
        .run_in(move || EmuBridge::start("m0", "m1", &cfg, &opts))
        .expect("GSO bridge starts with per-packet elements")
}

/// Super-packets were cut, none crossed whole, and every segment left as its own frame.
fn assert_cut(d: &DirSnapshot) {
    assert!(d.segmented > 0, "super-packets were cut: {d:?}");
    assert_eq!(d.unsegmented, 0, "every TCP super-packet was cut: {d:?}");
    assert!(
        d.segments_made > 2 * d.segmented,
        "TSO super-packets stand for several segments: {d:?}"
    );
    assert!(
        d.frames_out > d.frames_in,
        "segments leave one by one: {d:?}"
    );
}

/// `k` of `n` within the 99 % binomial interval (normal approximation) around `p`.
fn assert_binomial(k: u64, n: u64, p: f64, what: &str) {
    let (mean, sd) = (n as f64 * p, (n as f64 * p * (1.0 - p)).sqrt());
    assert!(n >= 2000, "{what}: too few segments ({n}) for the check");
    assert!(
        (k as f64 - mean).abs() <= 2.576 * sd,
        "{what}: {k} of {n} ({:.3} %), expected {mean:.0} ± {:.0}",
        k as f64 * 100.0 / n as f64,
        2.576 * sd
    );
}

fn print(report: &Report) {
    for (name, d) in [("a->b", &report.forward), ("b->a", &report.reverse)] {
        eprintln!(
            "{name}: {} frames in, {} kept whole, {} cut into {} segments, {} uncuttable, {} out; {} segments seen, {} lost, {} dup, {} corrupted",
            d.frames_in,
            d.kept_whole,
            d.segmented,
            d.segments_made,
            d.unsegmented,
            d.frames_out,
            d.segments_in,
            d.drops.loss,
            d.duplicates,
            d.corrupted
        );
    }
}

#[test]
fn tcp_with_1pct_loss_in_gso_mode_completes_and_loses_1pct_of_the_segments() {
    require_root!();
    let lab = PathLab::with_offloads(true);
    let bridge = gso_bridge(
        &lab,
        ImpairmentFlags {
            delay: Some("1ms".into()),
            loss: Some("1%".into()),
            seed: Some("11".into()),
            ..Default::default()
        },
    );
    let total = 24 << 20;
    let got = transfer(&lab, 5040, total);
    let report = bridge.stop();
    print(&report);
    assert_eq!(got, total, "the flow completes");
    assert_balanced(&report);
    let f = &report.forward;
    assert_cut(f);
    // Every wire packet the model saw (segments of cut super-packets, and ordinary frames)
    // had its own 1 % chance.
    assert_binomial(f.drops.loss, f.segments_in, 0.01, "a->b loss");
    let r = &report.reverse;
    assert_binomial(
        f.drops.loss + r.drops.loss,
        f.segments_in + r.segments_in,
        0.01,
        "loss, both directions",
    );
}

/// A counter of a namespace's `/proc/net/snmp`, e.g. `("Tcp:", "InCsumErrors")`.
fn snmp(ns: &common::Netns, proto: &str, field: &str) -> u64 {
    let text = String::from_utf8_lossy(&ns.exec(&["cat", "/proc/net/snmp"]).stdout).into_owned();
    let mut lines = text.lines().filter(|l| l.starts_with(proto));
    let (names, values) = (lines.next().unwrap_or(""), lines.next().unwrap_or(""));
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .find(|(n, _)| *n == field)
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or_else(|| panic!("{proto} {field} in /proc/net/snmp"))
}

/// `Tcp: InCsumErrors`: segments the namespace's stack dropped for a bad checksum.
fn tcp_csum_errors(ns: &common::Netns) -> u64 {
    snmp(ns, "Tcp:", "InCsumErrors")
}

#[test]
fn duplicate_reorder_and_corrupt_act_per_segment_and_the_data_arrives_intact() {
    require_root!();
    let lab = PathLab::with_offloads(true);
    let bridge = gso_bridge(
        &lab,
        ImpairmentFlags {
            delay: Some("2ms".into()),
            duplicate: Some("1%".into()),
            reorder: Some("1%".into()),
            corrupt: Some("0.5%".into()),
            seed: Some("5".into()),
            ..Default::default()
        },
    );
    let csum_before = tcp_csum_errors(&lab.server);
    let total = 8 << 20;
    let got = transfer(&lab, 5041, total);
    let report = bridge.stop();
    print(&report);
    let csum_errors = tcp_csum_errors(&lab.server) - csum_before;
    eprintln!("server TCP InCsumErrors: {csum_errors}");
    assert_eq!(got, total, "every byte arrives, in order and intact");
    assert_balanced(&report);
    let f = &report.forward;
    assert_cut(f);
    assert_binomial(f.duplicates, f.segments_in, 0.01, "a->b duplicates");
    assert!(f.corrupted > 0, "{f:?}");
    // A corrupted segment leaves with a full checksum, so the receiver drops it: each
    // corrupted copy is a checksum error there unless the flip hit the Ethernet header
    // (14 of ~1514 bytes: the frame then never reaches TCP).
    assert!(
        csum_errors > 0 && csum_errors <= f.corrupted,
        "{csum_errors} checksum errors for {} corrupted segments",
        f.corrupted
    );
}

/// `UDP_SEGMENT` (linux/udp.h): the socket's sends become USO super-packets of this size.
const UDP_SEGMENT: libc::c_int = 103;

#[test]
fn udp_gso_super_packets_are_cut_into_datagrams_and_each_has_its_own_loss() {
    require_root!();
    let lab = PathLab::with_offloads(true);
    let bridge = gso_bridge(
        &lab,
        ImpairmentFlags {
            delay: Some("1ms".into()),
            seed: Some("3".into()),
            ..Default::default()
        },
    );
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let sink = lab.server.spawn_in(move || {
        let s = std::net::UdpSocket::bind((SERVER_IP, 5042)).expect("bind");
        s.set_read_timeout(Some(Duration::from_millis(500)))
            .expect("timeout");
        ready_tx.send(()).expect("ready");
        let (mut buf, mut got) = ([0_u8; 2048], Vec::new());
        while let Ok(n) = s.recv(&mut buf) {
            got.push(n);
        }
        got
    });
    ready_rx
        .recv_timeout(Duration::from_secs(5))
        .expect("ready");
    // Neighbour resolution first, on the lossless link: the counted part has no ARP in it.
    let client = |count: u32, segs: usize| {
        lab.client.run_in(move || {
            use std::os::fd::AsRawFd;
            let s = std::net::UdpSocket::bind(("0.0.0.0", 0)).expect("bind");
            s.connect((SERVER_IP, 5042)).expect("connect");
            let size: libc::c_int = 1000;
            // Safety: a valid socket and a c_int option value of the size given.
            let rc = unsafe {
                libc::setsockopt(
                    s.as_raw_fd(),
                    libc::SOL_UDP,
                    UDP_SEGMENT,
                    (&raw const size).cast(),
                    size_of::<libc::c_int>() as libc::socklen_t,
                )
            };
            assert_eq!(rc, 0, "UDP_SEGMENT");
            let payload = vec![0x42_u8; 1000 * segs];
            for _ in 0..count {
                s.send(&payload).expect("send");
                std::thread::sleep(Duration::from_micros(200));
            }
        });
    };
    client(1, 1);
    std::thread::sleep(Duration::from_millis(50));
    let before = bridge.stats().forward;
    let udp = |field| snmp(&lab.server, "Udp:", field);
    let errors_before = [udp("RcvbufErrors"), udp("InCsumErrors"), udp("InErrors")];
    let link = ImpairmentFlags {
        delay: Some("1ms".into()),
        loss: Some("5%".into()),
        seed: Some("3".into()),
        ..Default::default()
    }
    .to_link_config()
    .expect("flags");
    bridge.reconfigure_link(&link).expect("loss on");
    client(400, 8);
    let got = sink.join().expect("sink");
    let f = bridge.stats().forward;
    let report = bridge.stop();
    print(&report);
    let (seen, lost) = (
        f.segments_in - before.segments_in,
        f.drops.loss - before.drops.loss,
    );
    assert_eq!(seen, 400 * 8, "the model saw every datagram");
    // A receive-buffer overflow at the sink (a loaded machine) is counted by its stack.
    let overflow = udp("RcvbufErrors") - errors_before[0];
    let (csum, in_errors) = (
        udp("InCsumErrors") - errors_before[1],
        udp("InErrors") - errors_before[2],
    );
    eprintln!("sink: {overflow} buffer overflows, {csum} checksum errors, {in_errors} in errors");
    assert_eq!(f.drops.tx_failed, 0, "{f:?}");
    assert_eq!(csum, 0, "cut datagrams carry valid checksums");
    assert_eq!(
        got.len() as u64 + overflow,
        1 + seen - lost,
        "all the others arrived ({overflow} overflowed the sink's buffer)"
    );
    assert!(got.iter().all(|&n| n == 1000), "datagrams of gso_size each");
    assert_eq!(f.unsegmented, 0);
    assert!(
        f.segmented > 0 && f.kept_whole > 0,
        "USO super-packets reached the emulator: {f:?}"
    );
    assert_binomial(lost, seen, 0.05, "USO datagram loss");
}
