//! msgs end to end on loopback: timing, stamps and the delayed-ACK stall.

mod common;

use common::LoopServer;
use tcplab_load::msgs::{MsgsConfig, Pattern, run_client};
use tcplab_load::sockopt::SockOpts;

/// The speed goal (100,000 x 1 B under 1 s: 0.17 s measured) is benches/load.sh's; here the
/// bound only says the run ends, with a margin sibling tests loading the machine cannot cross.
#[test]
fn hundred_thousand_one_byte_messages_with_nodelay() {
    let srv = LoopServer::start();
    let cfg = MsgsConfig {
        opts: SockOpts {
            nodelay: true,
            ..SockOpts::default()
        },
        link_rate_bps: Some(100_000_000),
        ..MsgsConfig::default()
    };
    let r = run_client(&cfg, srv.addr, None).expect("msgs");
    assert!(r.meta.complete, "{:?}", r.meta.incomplete_reason);
    let run = &r.runs[0];
    assert_eq!((run.sent, run.received), (100_000, 100_000));
    assert!(
        run.total_s < 10.0,
        "100,000 x 1 byte took {} s",
        run.total_s
    );
    common::assert_cpu_waits(&r.meta, run.total_s, 1.0);
    let mean = run.per_message_us.mean.expect("mean");
    assert!(
        (mean - run.total_s * 1e6 / 100_000.0).abs() < 1e-3 * mean,
        "mean cost {mean} µs"
    );
    let ow = run.one_way_us.expect("one-way");
    assert!(
        ow.min.expect("min") >= 0.0 && ow.p50.expect("p50") < 50_000.0,
        "{ow:?}"
    );
    assert_eq!(run.recv_ns.len(), 100_000);
    assert!(
        run.recv_ns
            .to_vec()
            .unwrap()
            .windows(2)
            .all(|w| w[0] <= w[1]),
        "receive stamps are monotonic"
    );
    assert!(
        run.send_ns.iter().zip(&run.recv_ns).all(|(s, r)| r >= s),
        "nothing arrives before it is sent"
    );
    assert!(r.meta.options.as_ref().expect("options").nodelay);
    let t = run.theoretical.expect("theory");
    assert!((t.per_message_us - 7.28).abs() < 1e-9);
}

fn write_write_read(nodelay: bool) -> tcplab_load::msgs::MsgsRun {
    let srv = LoopServer::start();
    let cfg = MsgsConfig {
        count: 12,
        size: 200,
        pattern: Pattern::WriteWriteRead,
        opts: SockOpts {
            nodelay,
            ..SockOpts::default()
        },
        ..MsgsConfig::default()
    };
    let r = run_client(&cfg, srv.addr, None).expect("msgs");
    assert!(r.meta.complete, "{:?}", r.meta.incomplete_reason);
    r.runs.into_iter().next().expect("one run")
}

#[test]
fn nagle_with_write_write_read_stalls_on_delayed_acks() {
    let run = write_write_read(false);
    // Linux's delayed-ACK timer is at least 40 ms (TCP_DELACK_MIN = HZ/25); after the first
    // quick ACKs every message waits for it: Nagle holds the second write until the first
    // is ACKed, and the receiver has no reply to piggyback the ACK on yet.
    let p50 = run.per_message_us.mean.expect("mean");
    let stalled = run.recv_gap_us.as_ref().and_then(|d| d.p50).expect("gaps");
    eprintln!(
        "nagle: mean per message {p50} µs, recv gap p50 {stalled} µs, stalls {}",
        run.stalls
    );
    assert!(
        stalled >= 35_000.0,
        "median receive gap {stalled} µs, expected a ~40 ms delayed-ACK stall"
    );
    assert!(
        stalled <= 60_000.0,
        "median receive gap {stalled} µs: longer than the 40 ms timer plus jiffy rounding (HZ=250)"
    );
    assert!(run.stalls >= 8, "{} of 11 gaps stalled", run.stalls);
}

#[test]
fn nodelay_with_write_write_read_does_not_stall() {
    let run = write_write_read(true);
    let max_gap = run.recv_gap_us.as_ref().and_then(|d| d.max).expect("gaps");
    assert!(
        max_gap < 10_000.0,
        "largest receive gap {max_gap} µs with TCP_NODELAY"
    );
    assert_eq!(run.stalls, 0);
}

#[test]
fn size_sweep_runs_every_size_and_timestamps_can_be_turned_off() {
    let srv = LoopServer::start();
    let cfg = MsgsConfig {
        count: 1000,
        sizes: vec![1, 100, 1000],
        timestamps: false,
        ..MsgsConfig::default()
    };
    let machine = tcplab_host::facts::machine();
    let r = run_client(&cfg, srv.addr, Some(machine.clone())).expect("msgs");
    assert_eq!(
        r.runs.iter().map(|x| x.size).collect::<Vec<_>>(),
        vec![1, 100, 1000]
    );
    assert!(r.runs.iter().all(|x| x.sent == 1000 && x.received == 1000));
    assert!(
        r.runs
            .iter()
            .all(|x| x.one_way_us.is_none() && x.per_message_us.sd.is_none())
    );
    assert_eq!(
        r.meta.facts.machine,
        Some(machine),
        "the facts given, as given"
    );
}

#[test]
fn delack_max_us_shortens_the_delayed_ack_stall() {
    let srv = LoopServer::start();
    let cfg = MsgsConfig {
        count: 12,
        size: 200,
        pattern: Pattern::WriteWriteRead,
        opts: SockOpts {
            delack_max_us: Some(5_000),
            rto_min_us: Some(50_000),
            ..SockOpts::default()
        },
        ..MsgsConfig::default()
    };
    let r = run_client(&cfg, srv.addr, None).expect("msgs");
    let o = r.meta.server_options.as_ref().expect("server options");
    // The kernel keeps both in jiffies and rounds up (HZ=250 here: 8,000 and 52,000 µs), which
    // is why the result records the read-back values, not the request.
    let (delack, rto) = (o.delack_max_us.expect("delack"), o.rto_min_us.expect("rto"));
    assert!(
        (5_000..13_000).contains(&delack),
        "delack_max read back {delack}"
    );
    assert!((50_000..58_000).contains(&rto), "rto_min read back {rto}");
    let p50 = r.runs[0]
        .recv_gap_us
        .as_ref()
        .and_then(|d| d.p50)
        .expect("gaps");
    eprintln!("delack_max 5 ms: median gap {p50} µs");
    assert!(
        (1_000.0..20_000.0).contains(&p50),
        "median gap {p50} µs with TCP_DELACK_MAX_US=5000 (44 ms without)"
    );
}

#[test]
fn paced_messages_follow_the_gap() {
    let srv = LoopServer::start();
    let cfg = MsgsConfig {
        count: 50,
        size: 32,
        gap_us: 2_000,
        opts: SockOpts {
            nodelay: true,
            ..SockOpts::default()
        },
        ..MsgsConfig::default()
    };
    let r = run_client(&cfg, srv.addr, None).expect("msgs");
    let run = &r.runs[0];
    // Writes start on an absolute schedule: message 49 at 98 ms.
    assert!(
        (0.098..0.2).contains(&run.total_s),
        "total {} s",
        run.total_s
    );
    let send = run.send_ns.to_vec().unwrap();
    let gaps = send.windows(2).map(|w| (w[1] - w[0]) as f64 / 1e3);
    let median = tcplab_load::stats::median(&gaps.collect::<Vec<_>>()).expect("median");
    assert!(
        (1_900.0..2_500.0).contains(&median),
        "median send gap {median} µs"
    );
    let p50 = run.recv_gap_us.and_then(|d| d.p50).expect("gaps");
    assert!(
        (1_500.0..2_600.0).contains(&p50),
        "receive gaps follow the pacing: {p50} µs"
    );
}
