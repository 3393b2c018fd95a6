//! stream end to end on loopback.

mod common;

use std::sync::Mutex;

use common::LoopServer;
use tcplab_load::stream::{Direction, IntervalReport, StreamConfig, run_client};

#[test]
fn upload_over_loopback_exceeds_a_gigabit() {
    let srv = LoopServer::start();
    let cfg = StreamConfig {
        duration_ms: Some(1_000),
        interval_ms: 250,
        ..StreamConfig::default()
    };
    let seen = Mutex::new(Vec::new());
    let cb = |iv: &IntervalReport| seen.lock().expect("lock").push(iv.index);
    let r = run_client(&cfg, srv.addr, None, Some(&cb)).expect("stream");
    assert!(r.meta.complete, "{:?}", r.meta.incomplete_reason);
    let bps = r.summary.throughput_bps.expect("throughput");
    assert!(bps > 1e9, "loopback throughput {bps} bit/s");
    assert_eq!(
        r.server_bytes_received, r.client_bytes_sent,
        "every byte sent arrived"
    );
    assert!(r.intervals.len() >= 4, "{} intervals", r.intervals.len());
    let seen = seen.into_inner().expect("lock");
    assert_eq!(seen.len(), r.intervals.len(), "one callback per interval");
    let info = r
        .intervals
        .iter()
        .find_map(|i| i.tcp_info)
        .expect("tcp_info sampled");
    assert!(info.cwnd > 0 && info.snd_mss > 0);
    assert!(r.client_cpu_s_per_gb.expect("cpu") > 0.0);
    assert!(r.server_cpu_s_per_gb.expect("cpu") > 0.0);
    common::assert_cpu_waits(&r.meta, r.elapsed_s, f64::from(cfg.flows.max(1)));
}

#[test]
fn byte_bounded_bidirectional_moves_exactly_the_bytes() {
    let srv = LoopServer::start();
    let cfg = StreamConfig {
        flows: 2,
        direction: Direction::Bidir,
        duration_ms: None,
        bytes: Some(50_000_001),
        interval_ms: 100,
        ..StreamConfig::default()
    };
    let r = run_client(&cfg, srv.addr, None, None).expect("stream");
    assert!(r.meta.complete, "{:?}", r.meta.incomplete_reason);
    assert_eq!(r.client_bytes_sent, 50_000_001);
    assert_eq!(r.server_bytes_received, 50_000_001);
    assert_eq!(r.server_bytes_sent, 50_000_001);
    assert_eq!(r.client_bytes_received, 50_000_001);
    assert!(r.summary.up_bps.is_some() && r.summary.down_bps.is_some());
}

#[test]
fn omitted_intervals_are_marked() {
    let srv = LoopServer::start();
    let cfg = StreamConfig {
        direction: Direction::Down,
        duration_ms: Some(600),
        omit_ms: 200,
        interval_ms: 100,
        ..StreamConfig::default()
    };
    let r = run_client(&cfg, srv.addr, None, None).expect("stream");
    assert!(r.intervals.iter().filter(|i| i.omitted).count() >= 2);
    assert!(r.intervals.iter().any(|i| !i.omitted));
    assert!(r.summary.down_bps.expect("down") > 0.0);
}
