//! Every workload end to end inside a lab (pair topology, root): the server thread in host
//! "server", the client thread in host "client", traffic over the veth pair between their
//! 198.18.0.0/15 addresses. The lab is process-owned: dropping it (also on a failed assert)
//! removes its namespaces.

use tcplab_front::lab::run_on;
use tcplab_lab::{BuiltinOptions, Lab, LabSpec, Ownership, StateDir, Topology};
use tcplab_load::sockopt::SockOpts;
use tcplab_load::{Report, crr, msgs, rr, stream};

/// Lab tests measure; running them at once on two cores would measure each other.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn build_pair(state: &tempfile::TempDir, tag: &str) -> Lab {
    build_pair_with(state, tag, Vec::new())
}

fn build_pair_with(
    state: &tempfile::TempDir,
    tag: &str,
    sysctls: Vec<tcplab_lab::SysctlSetting>,
) -> Lab {
    assert!(
        tcplab_lab::require_root("lab tests").is_ok(),
        "the lab tests need root (namespaces, veth): run `sudo cargo test`"
    );
    let name = format!("ld{}{tag}", std::process::id() % 100_000);
    let spec = LabSpec::builtin(&BuiltinOptions {
        name,
        topology: Topology::Pair,
        sysctls,
        ..BuiltinOptions::default()
    })
    .expect("valid spec");
    Lab::build_in(StateDir::at(state.path()), spec, Ownership::Process).expect("lab builds")
}

fn namespaces_of(lab: &str) -> usize {
    let prefix = format!("tcplab-{lab}-");
    tcplab_lab::netns::list()
        .into_iter()
        .filter(|n| n.starts_with(&prefix))
        .count()
}

fn nodelay() -> SockOpts {
    SockOpts {
        nodelay: true,
        ..SockOpts::default()
    }
}

#[test]
fn every_workload_runs_between_lab_hosts() {
    let _serial = serial();
    let state = tempfile::tempdir().expect("state dir");
    let lab = build_pair(&state, "e2e");
    let name = lab.name().to_string();
    let server_ip = lab
        .host("server")
        .expect("server")
        .ipv4()
        .expect("server address");
    assert!(
        server_ip.octets()[0] == 198 && (server_ip.octets()[1] & 0xfe) == 18,
        "{server_ip}"
    );

    // msgs: 100,000 x 1 byte in under a second with NODELAY; exact one-way delays.
    let cfg = msgs::MsgsConfig {
        opts: nodelay(),
        link_rate_bps: Some(100_000_000),
        ..msgs::MsgsConfig::default()
    };
    let Report::Msgs(m) = run_on(&lab, "client", "server", |to, facts| {
        msgs::run_client(&cfg, to, facts).map(Report::Msgs)
    })
    .expect("msgs in lab") else {
        panic!("not msgs")
    };
    assert!(m.meta.complete, "{:?}", m.meta.incomplete_reason);
    assert_eq!(
        m.meta.target.split(':').next(),
        Some(server_ip.to_string().as_str())
    );
    let run = &m.runs[0];
    assert_eq!(run.received, 100_000);
    // A functional bound, not a speed figure (that is a benchmark's): ~0.5 s on an idle
    // machine, and a stall per message (a 40 ms timer) would take an hour; 10 s stays clear of
    // a machine loaded by the sibling tests.
    assert!(
        run.total_s < 10.0,
        "100,000 x 1 byte took {} s in the lab",
        run.total_s
    );
    assert!(run.one_way_us.and_then(|d| d.min).expect("one-way") >= 0.0);
    assert!(
        m.meta
            .facts
            .machine
            .as_ref()
            .is_some_and(|f| f.hosts.contains_key("server")),
        "lab facts recorded: {:?}",
        m.meta.facts
    );
    eprintln!(
        "lab msgs: {} s total, {:?} µs/message",
        run.total_s, run.per_message_us.mean
    );

    // msgs write-write-read: ~40 ms delayed-ACK stalls with Nagle, none with NODELAY.
    for (nodelay_on, stalls_expected) in [(false, true), (true, false)] {
        let cfg = msgs::MsgsConfig {
            count: 10,
            size: 100,
            pattern: msgs::Pattern::WriteWriteRead,
            opts: SockOpts {
                nodelay: nodelay_on,
                ..SockOpts::default()
            },
            ..msgs::MsgsConfig::default()
        };
        let Report::Msgs(m) = run_on(&lab, "client", "server", |to, f| {
            msgs::run_client(&cfg, to, f).map(Report::Msgs)
        })
        .expect("wwr") else {
            panic!("not msgs")
        };
        let p50 = m.runs[0].recv_gap_us.and_then(|d| d.p50).expect("gaps");
        if stalls_expected {
            assert!(
                (35_000.0..60_000.0).contains(&p50),
                "Nagle + delayed ACK: median gap {p50} µs"
            );
        } else {
            assert!(p50 < 5_000.0, "NODELAY: median gap {p50} µs");
        }
    }

    // rr: exact count, sane latency.
    let cfg = rr::RrConfig {
        req: 64,
        resp: 64,
        count: Some(3_000),
        duration_ms: None,
        opts: nodelay(),
        ..rr::RrConfig::default()
    };
    let Report::Rr(r) = run_on(&lab, "client", "server", |to, f| {
        rr::run_client(&cfg, to, f).map(Report::Rr)
    })
    .expect("rr") else {
        panic!("not rr")
    };
    assert_eq!(
        (r.summary.transactions, r.points[0].server_transactions),
        (3_000, 3_000)
    );
    let p50 = r.summary.latency_us.p50.expect("p50");
    assert!((1.0..5_000.0).contains(&p50), "lab rr p50 {p50} µs");

    // crr: exact count; TIME_WAIT counted in the client host.
    let cfg = crr::CrrConfig {
        concurrency: 4,
        count: Some(300),
        duration_ms: Some(20_000),
        ..crr::CrrConfig::default()
    };
    let Report::Crr(c) = run_on(&lab, "client", "server", |to, f| {
        crr::run_client(&cfg, to, f).map(Report::Crr)
    })
    .expect("crr") else {
        panic!("not crr")
    };
    assert_eq!((c.summary.transactions, c.server_transactions), (300, 300));
    assert!(
        c.time_wait.max >= 100,
        "client-host TIME_WAIT max {}",
        c.time_wait.max
    );
    assert_eq!(c.syn_retrans.kernel_syn_retrans, Some(0));

    // stream: bulk over the veth pair.
    let cfg = stream::StreamConfig {
        duration_ms: Some(1_000),
        interval_ms: 250,
        ..stream::StreamConfig::default()
    };
    let Report::Stream(st) = run_on(&lab, "client", "server", |to, f| {
        stream::run_client(&cfg, to, f, None).map(Report::Stream)
    })
    .expect("stream") else {
        panic!("not stream")
    };
    let bps = st.summary.throughput_bps.expect("bps");
    eprintln!("lab stream: {:.0} Mbit/s", bps / 1e6);
    assert!(bps > 300e6, "veth pair throughput {bps} bit/s");
    assert_eq!(st.server_bytes_received, st.client_bytes_sent);

    drop(lab);
    assert_eq!(namespaces_of(&name), 0, "lab namespaces removed");
}

#[test]
fn unknown_host_is_a_clear_error() {
    let _serial = serial();
    let state = tempfile::tempdir().expect("state dir");
    let lab = build_pair(&state, "bad");
    let e = run_on(
        &lab,
        "nosuch",
        "server",
        |_, _| -> tcplab_load::Result<Report> { panic!("never runs") },
    )
    .expect_err("no such host");
    assert!(e.to_string().starts_with("--lab:"), "{e}");
    assert!(e.to_string().contains("nosuch"), "{e}");
}

#[test]
fn exhausted_port_range_is_counted_not_fatal() {
    let _serial = serial();
    // 20 local ports and no TIME_WAIT reuse off loopback: after ~20 connections every connect
    // fails with EADDRNOTAVAIL for the next 60 s, the SPECweb96 TIME_WAIT trap.
    let state = tempfile::tempdir().expect("state dir");
    let range = tcplab_lab::SysctlSetting {
        host: "client".into(),
        key: "net.ipv4.ip_local_port_range".into(),
        value: "40000 40019".into(),
    };
    let lab = build_pair_with(&state, "ports", vec![range]);
    let cfg = crr::CrrConfig {
        concurrency: 2,
        duration_ms: Some(1_500),
        ..crr::CrrConfig::default()
    };
    let Report::Crr(c) = run_on(&lab, "client", "server", |to, f| {
        crr::run_client(&cfg, to, f).map(Report::Crr)
    })
    .expect("crr") else {
        panic!("not crr")
    };
    eprintln!(
        "ports: {} done, errors {:?}, TIME_WAIT max {}",
        c.summary.transactions, c.errors_total, c.time_wait.max
    );
    assert!(c.meta.complete, "{:?}", c.meta.incomplete_reason);
    // 20 ports to the data port, one taken by the option probe (now in TIME_WAIT); the
    // control connection goes to another server port, so its source port may be reused.
    assert_eq!(c.summary.transactions, 19);
    assert!(c.errors_total.addrnotavail > 50, "{:?}", c.errors_total);
    assert!(
        c.errors.iter().any(|e| e.second == 1 && e.addrnotavail > 0),
        "counted per second: {:?}",
        c.errors
    );
    assert_eq!(
        c.time_wait.max, 20,
        "every data connection of the run sits in TIME_WAIT"
    );
}

#[test]
fn stream_measures_a_tbf_limited_100_mbit_link() {
    let _serial = serial();
    let state = tempfile::tempdir().expect("state dir");
    let lab = build_pair(&state, "tbf");
    let status = lab
        .host("client")
        .expect("client")
        .command("tc")
        .args([
            "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", "100mbit", "burst", "64kb",
            "latency", "50ms",
        ])
        .status()
        .expect("tc runs");
    assert!(status.success(), "tc qdisc add tbf failed");
    let cfg = stream::StreamConfig {
        duration_ms: Some(2_500),
        omit_ms: 500,
        interval_ms: 500,
        ..stream::StreamConfig::default()
    };
    let Report::Stream(st) = run_on(&lab, "client", "server", |to, f| {
        stream::run_client(&cfg, to, f, None).map(Report::Stream)
    })
    .expect("stream") else {
        panic!("not stream")
    };
    let bps = st.summary.throughput_bps.expect("bps");
    eprintln!("tbf 100mbit: {:.2} Mbit/s", bps / 1e6);
    // Payload share of a 1514-byte frame TBF counts: 1448/1514 = 95.6 %. A 2-second window on
    // a loaded 2-vCPU machine measured 92.9 once in CI: the bound below the share
    // leaves room for that, and still fails a link the shaper did not hold to 100 Mbit/s.
    assert!(
        (88e6..=100e6).contains(&bps),
        "throughput {bps} bit/s on a 100 Mbit/s TBF link"
    );
    let rtt = st
        .intervals
        .iter()
        .filter_map(|i| i.tcp_info)
        .map(|t| t.rtt_us)
        .max()
        .expect("rtt");
    assert!(rtt > 100, "the TBF queue shows in the RTT: {rtt} µs");
}

#[test]
fn a_panicking_client_does_not_hang_the_lab_server() {
    let _serial = serial();
    let state = tempfile::tempdir().expect("state dir");
    let lab = build_pair(&state, "pan");
    let start = std::time::Instant::now();
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = run_on(
            &lab,
            "client",
            "server",
            |_, _| -> tcplab_load::Result<Report> { panic!("client bug") },
        );
    }));
    assert!(caught.is_err(), "the panic reaches the caller");
    assert!(
        start.elapsed() < std::time::Duration::from_secs(3),
        "server stopped promptly"
    );
}
