//! Root integration tests: 8 MB each way of TCP through the bridge under each I/O mode, with
//! byte-exact data checks and exact accounting.

mod common;

use std::time::Duration;

#[allow(
    unused_imports,
    reason = "one import list for every test file; each uses a subset"
)]
use common::{
    PathLab, SERVER_IP, assert_balanced, link, median, model, start, start_emu, tcp_echo_server,
    tcp_rr_rtts, udp_burst, udp_rcvbuf_errors,
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

/// 8 MB each way through the bridge with `opts`; checks the bytes and the accounting.
fn bulk_echo(opts: IoOptions, port: u16) {
    let lab = PathLab::new();
    let o = opts.clone();
    let bridge = lab
        .middle
        .run_in(move || EmuBridge::start("m0", "m1", &LinkConfig::default(), &o))
        .expect("bridge starts");
    let server = tcp_echo_server(&lab, port);
    const TOTAL: usize = 8 << 20;
    let echoed = lab.client.run_in(move || {
        use std::io::{Read, Write};
        let s = std::net::TcpStream::connect((SERVER_IP, port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        let mut w = s.try_clone().expect("clone");
        let writer = std::thread::spawn(move || {
            let chunk: Vec<u8> = (0..65_536_u32).map(|i| (i % 251) as u8).collect();
            for _ in 0..TOTAL / chunk.len() {
                w.write_all(&chunk).expect("write");
            }
            w.shutdown(std::net::Shutdown::Write).expect("shutdown");
        });
        let mut r = s;
        let mut buf = vec![0_u8; 65_536];
        let (mut total, mut pos) = (0_usize, 0_u32);
        loop {
            let n = r.read(&mut buf).expect("read echo");
            if n == 0 {
                break;
            }
            for &b in &buf[..n] {
                assert_eq!(b, (pos % 65_536 % 251) as u8, "byte {total} corrupted");
                pos = pos.wrapping_add(1);
                total += 1;
            }
        }
        writer.join().expect("writer");
        total
    });
    assert_eq!(echoed, TOTAL);
    assert_eq!(server.join().expect("server"), TOTAL as u64);
    std::thread::sleep(Duration::from_millis(20));
    let report = bridge.stop();
    eprintln!(
        "{opts:?}\n  a->b {} frames, lateness {:?}\n  b->a {} frames, lateness {:?}, threads {:?}",
        report.forward.frames_out,
        report.forward.lateness,
        report.reverse.frames_out,
        report.reverse.lateness,
        report.threads
    );
    assert!(report.forward.frames_out > (TOTAL / 1_514) as u64);
    use tcplab_emu_io::{RxRingKind, TxKind};
    if matches!(opts.rings.tx, TxKind::Sendmmsg | TxKind::Xsk)
        && matches!(opts.rings.rx, RxRingKind::V2 | RxRingKind::Xdp)
    {
        // No delay: every data frame is due on arrival and leaves straight from the RX ring
        // (or the AF_XDP UMEM).
        assert!(
            report.forward.direct > report.forward.frames_out / 2,
            "{report:?}"
        );
    } else {
        assert_eq!(report.forward.direct, 0);
    }
    assert_eq!(
        report.threads.len(),
        if opts.threads == tcplab_emu_io::Threads::Single {
            1
        } else {
            2
        }
    );
    assert_balanced(&report);
}

#[test]
fn bulk_tcp_default_options() {
    require_root!();
    bulk_echo(IoOptions::default(), 5010);
}

#[test]
fn bulk_tcp_tx_ring() {
    require_root!();
    bulk_echo(
        IoOptions {
            rings: tcplab_emu_io::Rings {
                tx: tcplab_emu_io::TxKind::Ring,
                ..Default::default()
            },
            ..Default::default()
        },
        5014,
    );
}

#[test]
fn bulk_tcp_single_thread_normal_priority() {
    require_root!();
    bulk_echo(
        IoOptions {
            threads: tcplab_emu_io::Threads::Single,
            rt_priority: None,
            ..Default::default()
        },
        5011,
    );
}

#[test]
fn bulk_tcp_v3_ring() {
    require_root!();
    bulk_echo(
        IoOptions {
            rings: tcplab_emu_io::Rings {
                rx: tcplab_emu_io::RxRingKind::V3,
                ..Default::default()
            },
            ..Default::default()
        },
        5012,
    );
}

#[test]
fn bulk_tcp_busy_poll() {
    require_root!();
    bulk_echo(
        IoOptions {
            busy_poll: true,
            rt_priority: None,
            ..Default::default()
        },
        5013,
    );
}

#[test]
fn bulk_tcp_af_xdp_rx() {
    require_root!();
    bulk_echo(
        IoOptions {
            rings: tcplab_emu_io::Rings {
                rx: tcplab_emu_io::RxRingKind::Xdp,
                ..Default::default()
            },
            ..Default::default()
        },
        5015,
    );
}

#[test]
fn bulk_tcp_af_xdp_rx_and_tx() {
    require_root!();
    bulk_echo(
        IoOptions {
            rings: tcplab_emu_io::Rings {
                rx: tcplab_emu_io::RxRingKind::Xdp,
                tx: tcplab_emu_io::TxKind::Xsk,
                ..Default::default()
            },
            ..Default::default()
        },
        5016,
    );
}

#[test]
fn bulk_tcp_af_xdp_tx_single_thread() {
    require_root!();
    bulk_echo(
        IoOptions {
            rings: tcplab_emu_io::Rings {
                tx: tcplab_emu_io::TxKind::Xsk,
                ..Default::default()
            },
            threads: tcplab_emu_io::Threads::Single,
            ..Default::default()
        },
        5017,
    );
}
