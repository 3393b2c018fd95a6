//! Root integration tests: the bridge in the middle namespace of a client ─ middle ─ server
//! path — traffic passes, loss, duplication, reordering, reconfiguration, checksums.
//! Each test builds its own namespaces (removed on drop, also on failure). Tests that judge
//! how well the emulator keeps time run alone, in `timing.rs`.

mod common;

use std::time::Duration;

#[allow(
    unused_imports,
    reason = "one import list for every test file; each uses a subset"
)]
use common::{
    PathLab, SERVER_IP, assert_balanced, link, median, model, start, start_emu, tcp_echo_server,
    tcp_rr_rtts, udp_burst, udp_counter, udp_rcvbuf_errors,
};
#[allow(
    unused_imports,
    reason = "one import list for every test file; each uses a subset"
)]
use tcplab_emu::{ImpairmentFlags, LinkConfig};
#[allow(
    unused_imports,
    reason = "one import list for every test file; each uses a subset"
)]
use tcplab_emu_io::{Bridge, EmuBridge, IoError, IoOptions, Thresholds};

#[test]
fn ping_and_tcp_pass_and_counters_balance() {
    require_root!();
    let lab = PathLab::new();
    let bridge = start_emu(&lab, LinkConfig::default());
    assert!(bridge.seed().is_some(), "the seed is chosen and reported");
    let rtts = lab.ping_rtts(5, "0.05");
    assert_eq!(rtts.len(), 5, "every ping answered");
    let server = tcp_echo_server(&lab, 5001);
    let rr = tcp_rr_rtts(&lab, 5001, 200);
    assert_eq!(rr.len(), 200);
    let echoed = server.join().expect("server");
    assert_eq!(echoed, 200);
    let live = bridge.stats();
    assert!(
        live.forward.frames_out >= 205 && live.reverse.frames_out >= 205,
        "{live:?}"
    );
    std::thread::sleep(Duration::from_millis(20));
    let report = bridge.stop();
    assert_balanced(&report);
    assert_eq!(report.forward.drops.after_arrival(), 0);
    assert_eq!(report.forward.lateness.count, report.forward.frames_out);
    eprintln!(
        "0 ms: ping median {:.3} ms, TCP RR median {:.3} ms",
        median(&rtts),
        median(&rr)
    );
    eprintln!("lateness a->b {:?}", report.forward.lateness);
    assert!(
        median(&rr) < 2.0,
        "unimpaired TCP RR median {} ms",
        median(&rr)
    );
}

#[test]
fn one_percent_loss_over_udp_is_binomial_and_counted_exactly() {
    require_root!();
    let lab = PathLab::new();
    let bridge = start_emu(&lab, link("0ms", "1%/0%"));
    let rcvbuf_before = udp_rcvbuf_errors(&lab.server);
    const N: u32 = 20_000;
    let receiver = lab.server.spawn_in(|| {
        let s = std::net::UdpSocket::bind((SERVER_IP, 5003)).expect("bind");
        s.set_read_timeout(Some(Duration::from_millis(500)))
            .expect("timeout");
        let mut buf = [0_u8; 2048];
        let mut got = 0_u32;
        while s.recv(&mut buf).is_ok() {
            got += 1;
        }
        got
    });
    std::thread::sleep(Duration::from_millis(50));
    lab.client.run_in(|| {
        let s = std::net::UdpSocket::bind((common::CLIENT_IP, 0)).expect("bind");
        for i in 0..N {
            s.send_to(&i.to_be_bytes(), (SERVER_IP, 5003))
                .expect("send");
            if i % 50 == 49 {
                std::thread::sleep(Duration::from_micros(500));
            }
        }
    });
    let got = receiver.join().expect("receiver");
    let report = bridge.stop();
    let rcvbuf = udp_rcvbuf_errors(&lab.server) - rcvbuf_before;
    let f = &report.forward;
    let lost = f.drops.loss;
    let n = f.frames_in as f64;
    let (mean, sd) = (n * 0.01, (n * 0.01 * 0.99).sqrt());
    eprintln!(
        "UDP: sent {N}, received {got}, model dropped {lost} of {} frames, receiver buffer overflows {rcvbuf}",
        f.frames_in
    );
    assert!(
        (lost as f64 - mean).abs() <= 2.576 * sd,
        "loss {lost} outside {mean} ± {}",
        2.576 * sd
    );
    // ARP frames also cross a->b (a handful); every UDP datagram is delivered, lost by the
    // model, or dropped by the receiving socket (counted by the kernel).
    let non_udp = f.frames_in - u64::from(N);
    assert!(non_udp <= 4, "{non_udp} non-UDP frames");
    let accounted = u64::from(got) + lost + rcvbuf;
    assert!(
        (u64::from(N)..=f.frames_in).contains(&accounted),
        "got {got} lost {lost} rcvbuf {rcvbuf}"
    );
    assert_eq!(report.reverse.drops.loss, 0);
    assert_balanced(&report);
}

#[test]
fn reconfigure_while_running_keeps_queued_frames() {
    require_root!();
    let lab = PathLab::new();
    lab.client.exec(&[
        "ip",
        "neigh",
        "replace",
        SERVER_IP,
        "lladdr",
        "02:00:00:00:00:02",
        "dev",
        "c0",
    ]);
    let bridge = start_emu(&lab, link("300ms/0ms", "0%"));
    lab.client.run_in(|| {
        let s = std::net::UdpSocket::bind((common::CLIENT_IP, 0)).expect("bind");
        for i in 0..100_u32 {
            s.send_to(&i.to_be_bytes(), (SERVER_IP, 5004))
                .expect("send");
        }
    });
    std::thread::sleep(Duration::from_millis(50));
    let queued = bridge.stats().forward.queued;
    assert_eq!(queued, 100, "all 100 held by the 300 ms delay");
    bridge
        .reconfigure_link(&link("0ms", "0%"))
        .expect("reconfigure");
    let mut bad = link("0ms", "0%");
    bad.forward.delay_ns = 3_600_000_000_000;
    let e = bridge.reconfigure_link(&bad).unwrap_err();
    eprintln!("rejected: {e}");
    assert!(e.to_string().starts_with("link configuration: "), "{e}");
    assert!(
        e.to_string().contains("forward"),
        "names the direction: {e}"
    );
    std::thread::sleep(Duration::from_millis(400));
    let report = bridge.stop();
    assert_eq!(report.forward.frames_out, 100, "{:?}", report.forward);
    assert_balanced(&report);
    assert_eq!(
        report.errors.len(),
        0,
        "rejected before reaching the workers: {:?}",
        report.errors
    );
}

/// A delay removed while frames are queued: new frames are due at once but must wait behind
/// the queued ones (slab path, FIFO), and once the queue drains they leave straight from the
/// RX ring (direct path). Nothing is reordered or lost in the emulator.
#[test]
fn removing_the_delay_mid_stream_keeps_order_into_the_direct_path() {
    require_root!();
    let lab = PathLab::new();
    let bridge = start_emu(&lab, link("0ms", "0%"));
    // Resolve ARP first: with the delay, the client's neighbour queue would drop datagrams.
    assert_eq!(lab.ping_rtts(1, "0.2").len(), 1);
    bridge
        .reconfigure_link(&link("20ms", "0%"))
        .expect("add the delay");
    let n = 3_000;
    let got = std::thread::scope(|s| {
        s.spawn(|| {
            // udp_burst sends from 50 ms on, for ~30 ms.
            std::thread::sleep(Duration::from_millis(62));
            bridge
                .reconfigure_link(&link("0ms", "0%"))
                .expect("reconfigure");
        });
        udp_burst(&lab, 5007, n)
    });
    let report = bridge.stop();
    let f = &report.forward;
    eprintln!("{f:?}");
    // The release of 20 ms of queued datagrams at once can overflow the receiving socket;
    // those are counted by the server's kernel, and nothing else may be missing.
    let rcvbuf = udp_rcvbuf_errors(&lab.server);
    assert!(got.windows(2).all(|w| w[0] < w[1]), "in order: {got:?}");
    assert_eq!(
        got.len() as u64 + rcvbuf,
        u64::from(n),
        "lost only at the receiver"
    );
    assert!(
        f.direct > 0 && f.direct < f.frames_in,
        "both the slab and the direct path were used: {f:?}"
    );
    assert_balanced(&report);
}

#[test]
fn duplicates_arrive_and_are_counted_exactly() {
    require_root!();
    let lab = PathLab::new();
    let mut cfg = link("1ms", "0%");
    cfg.forward.duplicate = 0.5;
    let bridge = start_emu(&lab, cfg);
    let before = udp_rcvbuf_errors(&lab.server);
    let got = udp_burst(&lab, 5005, 2_000).len() as u32;
    let report = bridge.stop();
    let rcvbuf = udp_rcvbuf_errors(&lab.server) - before;
    let f = &report.forward;
    eprintln!(
        "duplicates: got {got}, duplicated {}, frames in {}",
        f.duplicates, f.frames_in
    );
    assert!(
        (800..1_200).contains(&f.duplicates),
        "about half duplicated: {}",
        f.duplicates
    );
    let non_udp = f.frames_in - 2_000;
    assert!(non_udp <= 4);
    // Every datagram once, plus every duplicate of a datagram, minus socket overflows.
    let delivered = u64::from(got) + rcvbuf;
    assert!(
        (2_000 + f.duplicates - non_udp..=2_000 + f.duplicates).contains(&delivered),
        "got {got} + rcvbuf {rcvbuf} vs 2000 + {} duplicates",
        f.duplicates
    );
    assert_eq!(f.frames_out, f.frames_in + f.duplicates);
    assert_balanced(&report);
}

#[test]
fn partial_checksums_from_offloading_senders_are_completed() {
    require_root!();
    let lab = PathLab::new();
    // Checksum offload back on at both endpoints (segmentation stays off): their frames reach
    // the bridge with only the pseudo-header sum in the TCP checksum field.
    lab.client.exec(&["ethtool", "-K", "c0", "tx", "on"]);
    lab.server.exec(&["ethtool", "-K", "s0", "tx", "on"]);
    let bridge = start_emu(&lab, LinkConfig::default());
    let server = tcp_echo_server(&lab, 5020);
    let rr = tcp_rr_rtts(&lab, 5020, 50);
    assert_eq!(rr.len(), 50);
    assert_eq!(server.join().expect("server"), 50);
    let report = bridge.stop();
    eprintln!(
        "csum_partial a->b {} b->a {}",
        report.forward.csum_partial, report.reverse.csum_partial
    );
    assert!(report.forward.csum_partial >= 50, "{:?}", report.forward);
    assert!(report.reverse.csum_partial >= 50, "{:?}", report.reverse);
    assert_balanced(&report);
}

#[test]
fn with_the_virtio_net_header_partial_checksums_cross_as_they_are_and_corruption_is_caught() {
    require_root!();
    let lab = PathLab::new();
    lab.client.exec(&["ethtool", "-K", "c0", "tx", "on"]);
    lab.server.exec(&["ethtool", "-K", "s0", "tx", "on"]);
    let start_vnet = |cfg: LinkConfig| {
        let opts = IoOptions {
            vnet: tcplab_emu_io::Vnet::Header,
            ..Default::default()
        };
        lab.middle
            .run_in(move || EmuBridge::start("m0", "m1", &cfg, &opts))
            .expect("bridge starts")
    };
    // Unimpaired: every frame leaves straight from the ring, none completed in user space.
    let bridge = start_vnet(LinkConfig::default());
    let server = tcp_echo_server(&lab, 5021);
    assert_eq!(tcp_rr_rtts(&lab, 5021, 50).len(), 50);
    assert_eq!(server.join().expect("server"), 50);
    let report = bridge.stop();
    for d in [&report.forward, &report.reverse] {
        assert_eq!(d.csum_partial, 0, "{d:?}");
        assert!(d.frames_out >= 50 && d.direct == d.frames_out, "{d:?}");
    }
    assert_balanced(&report);
    // Every frame corrupted: its partial checksum is completed before the bit flips, so the
    // receiver's stack rejects what it would otherwise have trusted. No altered datagram
    // arrives; the ones that do had a bit flipped outside what any checksum covers.
    let mut cfg = LinkConfig::default();
    cfg.forward.corrupt = 1.0;
    let bridge = start_vnet(cfg);
    let before = udp_counter(&lab.server, "InCsumErrors");
    let got = udp_burst(&lab, 5022, 200);
    let report = bridge.stop();
    let csum_errors = udp_counter(&lab.server, "InCsumErrors") - before;
    eprintln!("corrupt: got {}, InCsumErrors {csum_errors}", got.len());
    assert!(report.forward.corrupted >= 200, "{:?}", report.forward);
    assert!(csum_errors >= 20, "the receiver checked: {csum_errors}");
    let mut seen = std::collections::HashSet::new();
    assert!(got.iter().all(|&i| i < 200 && seen.insert(i)), "{got:?}");
}

#[test]
fn a_reordering_model_reorders_through_the_heap_and_loses_nothing() {
    require_root!();
    let lab = PathLab::new();
    let flags = ImpairmentFlags {
        delay: Some("2ms".to_owned()),
        reorder: Some("25%".to_owned()),
        seed: Some("11".to_owned()),
        ..Default::default()
    };
    let bridge = start_emu(&lab, flags.to_link_config().expect("valid flags"));
    let before = udp_rcvbuf_errors(&lab.server);
    let got = udp_burst(&lab, 5006, 2_000);
    let report = bridge.stop();
    let rcvbuf = udp_rcvbuf_errors(&lab.server) - before;
    // Datagrams that arrived after a higher-numbered one had already arrived (overtaken).
    let overtaken = got
        .iter()
        .scan(0_u32, |max, &n| {
            let late = n < *max;
            *max = (*max).max(n);
            Some(late)
        })
        .filter(|&late| late)
        .count();
    eprintln!(
        "reorder: {} received, {overtaken} overtaken, rcvbuf {rcvbuf}",
        got.len()
    );
    assert!(
        overtaken > 100,
        "25% skip the 2 ms delay line: expected many overtaken, got {overtaken}"
    );
    assert_eq!(got.len() as u64 + rcvbuf, 2_000, "nothing lost");
    let mut sorted = got.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), got.len(), "no datagram twice");
    assert_eq!(
        report.forward.order_clamped, 0,
        "the heap, not the FIFO, held them"
    );
    assert_balanced(&report);
}

/// The scheduling policy (`/proc` stat field 41: 0 SCHED_OTHER, 1 SCHED_FIFO) of each of the
/// bridge's workers, in start order (other tests' bridges run in this process too).
fn worker_policies(tids: &[i32]) -> Vec<u32> {
    tids.iter()
        .map(|tid| {
            let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat"))
                .expect("worker stat");
            // Fields after the parenthesised name; policy is field 41, the 39th after it.
            let after = stat.rsplit_once(") ").map_or("", |(_, rest)| rest);
            after
                .split_whitespace()
                .nth(38)
                .and_then(|p| p.parse().ok())
                .expect("policy field")
        })
        .collect()
}

/// Polls `worker_policies` every ms for up to `limit` until both are `want`.
fn policies_until(tids: &[i32], limit: Duration, want: u32) -> Vec<u32> {
    let start = std::time::Instant::now();
    loop {
        let p = worker_policies(tids);
        if p == [want, want] || start.elapsed() > limit {
            return p;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn a_light_worker_gives_up_sched_fifo_and_takes_it_back_to_hold_a_frame() {
    require_root!();
    let lab = PathLab::new();
    let bridge = start_emu(&lab, LinkConfig::default());
    let tids = bridge.worker_tids().to_vec();
    assert_eq!(tids.len(), 2, "one worker per direction");
    // Idle turns are light: after 10 ms of them (the first idle wake-up, 200 ms) both workers
    // are ordinary tasks.
    let idle = policies_until(&tids, Duration::from_secs(3), 0);
    assert_eq!(idle, [0, 0], "idle workers are SCHED_OTHER");
    // A delay line holds every frame: the worker holding one is SCHED_FIFO until it left.
    bridge
        .reconfigure_link(&link("10ms", "0%"))
        .expect("set 10 ms");
    let pinger = {
        let lab_client = lab.client.name.clone();
        std::thread::spawn(move || {
            std::process::Command::new("ip")
                .args(["netns", "exec", &lab_client, "ping", "-n", "-q", "-c", "40"])
                .args(["-i", "0.025", "-W", "2", SERVER_IP])
                .output()
                .expect("ping")
        })
    };
    let mut seen_fifo = [false; 2];
    while !pinger.is_finished() {
        for (seen, policy) in seen_fifo.iter_mut().zip(worker_policies(&tids)) {
            *seen |= policy == 1;
        }
        std::thread::sleep(Duration::from_micros(500));
    }
    let ping = pinger.join().expect("ping thread");
    assert!(ping.status.success(), "{ping:?}");
    assert_eq!(
        seen_fifo,
        [true, true],
        "each direction held echo frames as SCHED_FIFO"
    );
    let after = policies_until(&tids, Duration::from_secs(3), 0);
    assert_eq!(after, [0, 0], "light again after the pings");
    drop(bridge.stop());
    // With the option at 0 the workers stay SCHED_FIFO however light their turns.
    let opts = IoOptions {
        tuning: tcplab_emu_io::Tuning {
            light_other_after_ns: 0,
            ..Default::default()
        },
        ..Default::default()
    };
    let fifo = lab
        .middle
        .run_in(move || EmuBridge::start("m0", "m1", &LinkConfig::default(), &opts))
        .expect("bridge starts");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        worker_policies(fifo.worker_tids()),
        [1, 1],
        "workers with light_other_after_ns 0"
    );
    drop(fifo.stop());
}
