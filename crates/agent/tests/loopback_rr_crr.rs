//! rr and crr end to end on loopback: exact counts and sane latencies.

mod common;

use common::LoopServer;
use tcplab_load::crr::{self, CrrConfig};
use tcplab_load::rr::{self, RrConfig};
use tcplab_load::sockopt::SockOpts;

fn nodelay() -> SockOpts {
    SockOpts {
        nodelay: true,
        ..SockOpts::default()
    }
}

#[test]
fn closed_loop_counts_exactly_and_p50_is_sane() {
    let srv = LoopServer::start();
    let cfg = RrConfig {
        req: 64,
        resp: 64,
        count: Some(5_000),
        duration_ms: None,
        opts: nodelay(),
        ..RrConfig::default()
    };
    let r = rr::run_client(&cfg, srv.addr, None).expect("rr");
    assert!(r.meta.complete, "{:?}", r.meta.incomplete_reason);
    let p = &r.points[0];
    assert_eq!(p.transactions, 5_000);
    assert_eq!(p.server_transactions, 5_000);
    assert_eq!(p.latency_us.n, 5_000);
    assert_eq!(p.samples.len(), 5_000);
    let p50 = r.summary.latency_us.p50.expect("p50");
    assert!(
        (1.0..2_000.0).contains(&p50),
        "loopback ping-pong p50 {p50} µs"
    );
    let tps = r.summary.transactions_per_s.expect("tps");
    assert!(tps > 500.0, "{tps} transactions/s");
    assert!(r.summary.latency_us.max.expect("max") >= p50);
    common::assert_cpu_waits(&r.meta, p.elapsed_s, 1.0);
}

#[test]
fn pipelined_depth_keeps_requests_in_flight() {
    let srv = LoopServer::start();
    let cfg = RrConfig {
        depth: 8,
        count: Some(2_000),
        duration_ms: None,
        opts: nodelay(),
        ..RrConfig::default()
    };
    let r = rr::run_client(&cfg, srv.addr, None).expect("rr");
    assert_eq!(r.points[0].transactions, 2_000);
    assert_eq!(r.points[0].server_transactions, 2_000);
}

#[test]
fn open_loop_follows_the_rate_and_corrects_for_coordinated_omission() {
    let srv = LoopServer::start();
    let cfg = RrConfig {
        rate: Some(2_000.0),
        count: Some(1_000),
        duration_ms: None,
        opts: nodelay(),
        poisson: true,
        ..RrConfig::default()
    };
    let r = rr::run_client(&cfg, srv.addr, None).expect("rr");
    assert!(r.meta.complete, "{:?}", r.meta.incomplete_reason);
    assert_eq!(r.mode, "open");
    assert!(r.meta.seed.is_some(), "Poisson schedule records its seed");
    let p = &r.points[0];
    assert_eq!(p.transactions, 1_000);
    // 1,000 at 2,000/s take about half a second.
    assert!(
        (0.3..1.5).contains(&p.elapsed_s),
        "elapsed {} s",
        p.elapsed_s
    );
    let corrected = p.latency_us.p50.expect("p50");
    let raw = p
        .latency_uncorrected_us
        .as_ref()
        .and_then(|u| u.p50)
        .expect("uncorrected");
    assert!(
        corrected >= raw * 0.99,
        "corrected {corrected} µs below uncorrected {raw} µs"
    );
}

#[test]
fn netpipe_sweep_probes_plus_minus_three() {
    let srv = LoopServer::start();
    let cfg = RrConfig {
        sizes: vec![1, 64],
        count: Some(200),
        duration_ms: None,
        opts: nodelay(),
        ..RrConfig::default()
    };
    let r = rr::run_client(&cfg, srv.addr, None).expect("rr");
    let sizes: Vec<u32> = r.points.iter().map(|p| p.req).collect();
    assert_eq!(sizes, vec![1, 4, 61, 64, 67]);
    assert_eq!(r.summary.transactions, 1_000);
    assert!(r.points.iter().all(|p| p.throughput_bps.is_some()));
}

#[test]
fn crr_counts_connections_exactly() {
    let srv = LoopServer::start();
    let cfg = CrrConfig {
        concurrency: 4,
        count: Some(400),
        duration_ms: Some(20_000),
        ..CrrConfig::default()
    };
    let r = crr::run_client(&cfg, srv.addr, None).expect("crr");
    assert!(r.meta.complete, "{:?}", r.meta.incomplete_reason);
    assert_eq!(r.summary.transactions, 400);
    assert_eq!(r.server_transactions, 400);
    assert_eq!(r.samples.len(), 400);
    assert_eq!(r.errors_total.addrnotavail + r.errors_total.connrefused, 0);
    let c50 = r.summary.connect_us.p50.expect("connect p50");
    assert!(c50 > 0.0 && c50 < 100_000.0, "connect p50 {c50} µs");
    assert!(r.summary.connections_per_s.expect("rate") > 50.0);
    // The client closes first, so its TIME_WAITs were visible while it ran.
    assert!(r.time_wait.max >= 100, "TIME_WAIT max {}", r.time_wait.max);
    common::assert_cpu_waits(&r.meta, r.elapsed_s, 5.0);
    assert_eq!(
        r.syn_retrans.connects_near_1s + r.syn_retrans.connects_near_3s,
        0
    );
}

#[test]
fn ipv6_loopback_works_too() {
    let server = tcplab_agent::Server::bind("[::1]:0".parse().expect("addr")).expect("bind ::1");
    let addr = server.local_addr().expect("addr");
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| server.serve(&stop, Some(1)));
        let cfg = RrConfig {
            count: Some(100),
            duration_ms: None,
            opts: nodelay(),
            ..RrConfig::default()
        };
        let r = rr::run_client(&cfg, addr, None);
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let r = r.expect("rr over ::1");
        assert_eq!(r.points[0].server_transactions, 100);
        assert!(r.meta.target.starts_with("[::1]:"));
    });
}
