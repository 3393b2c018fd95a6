//! crr's SYN-retransmission figures against real SYN loss (root): a path lab whose emulator
//! drops a third of the client → server packets, SYNs included. The kernel counts the
//! retransmitted SYNs (TcpExt TCPSynRetrans of the client host) and crr infers them from
//! connects that took the initial RTO, about 1 s. The lab is process-owned: dropping it (also
//! on a failed assert) removes its namespaces and stops its emulator.

use std::time::{Duration, Instant};

use tcplab_emu::{DirectionConfig, LinkConfig, Loss};
use tcplab_front::lab::run_on;
use tcplab_lab::{BridgeMode, BuiltinOptions, Lab, LabSpec, Ownership, StateDir, Topology};
use tcplab_load::crr::{self, CrrConfig};
use tcplab_load::report::Report;

/// Client → server loss: at 1 in 3, a run of a few hundred connects loses dozens of SYNs.
const LOSS: f64 = 0.33;

fn lossy_path(state: &tempfile::TempDir) -> Lab {
    assert!(
        tcplab_lab::require_root("lab tests").is_ok(),
        "the lab tests need root (namespaces, veth, the emulator): run `sudo cargo test`"
    );
    let link = LinkConfig {
        forward: DirectionConfig {
            loss: Some(Loss::Bernoulli { probability: LOSS }),
            ..DirectionConfig::default()
        },
        reverse: DirectionConfig::default(),
        seed: Some(4),
    };
    let spec = LabSpec::builtin(&BuiltinOptions {
        name: format!("sl{}", std::process::id() % 100_000),
        topology: Topology::Path,
        bridge: BridgeMode::Emu,
        link: Some(link),
        ..BuiltinOptions::default()
    })
    .expect("valid spec");
    Lab::build_in(StateDir::at(state.path()), spec, Ownership::Process).expect("lab builds")
}

#[test]
fn lost_syns_are_counted_by_the_kernel_and_inferred_from_connect_times() {
    let state = tempfile::tempdir().expect("state dir");
    let lab = lossy_path(&state);
    let cfg = CrrConfig {
        concurrency: 8,
        duration_ms: Some(3_000),
        // Long enough for a SYN lost twice (1 s + 2 s), so such connects complete and count.
        connect_timeout_ms: 4_500,
        timeout_ms: 8_000,
        ..CrrConfig::default()
    };
    let start = Instant::now();
    // Live intervals too: the reporter thread must read the client host's counters.
    let live = std::sync::Mutex::new(Vec::new());
    let collect = |iv: &crr::CrrInterval| {
        if let Ok(mut v) = live.lock() {
            v.push(*iv);
        }
    };
    let Report::Crr(c) = run_on(&lab, "client", "server", |to, f| {
        crr::run_client_live(&cfg, to, f, 1_000, Some(&collect)).map(Report::Crr)
    })
    .expect("crr over the lossy path") else {
        panic!("not crr")
    };
    let took = start.elapsed();
    let s = c.syn_retrans;
    eprintln!(
        "{} connects in {:.1} s ({took:?} wall), SYN retransmissions: kernel {:?}, \
         connects near 1 s {}, near 3 s {}; connect p50 {:?} µs, max {:?} µs; errors {:?}",
        c.summary.transactions,
        c.elapsed_s,
        s.kernel_syn_retrans,
        s.connects_near_1s,
        s.connects_near_3s,
        c.summary.connect_us.p50,
        c.summary.connect_us.max,
        c.errors_total
    );
    assert!(
        c.summary.transactions >= 20,
        "{} connects",
        c.summary.transactions
    );
    let kernel = s
        .kernel_syn_retrans
        .expect("TcpExt TCPSynRetrans readable in the client host");
    assert!(kernel > 0, "the kernel counted no SYN retransmission");
    assert!(
        s.connects_near_1s > 0,
        "no connect took ~1 s (one lost SYN): {s:?}"
    );
    // Every inferred loss is a real one: a connect near 1 s retransmitted its SYN once, near 3 s
    // at least twice (the kernel also counts SYNs of connects that never completed).
    assert!(
        kernel >= s.connects_near_1s + 2 * s.connects_near_3s,
        "inferred more than the kernel counted: {s:?}"
    );
    // With 1 in 3 SYNs lost, about a third of the connects wait; not all, not none.
    let share = s.connects_near_1s as f64 / c.summary.transactions as f64;
    assert!(
        (0.05..0.6).contains(&share),
        "share of ~1 s connects {share:.2} with loss {LOSS}"
    );
    assert!(took < Duration::from_secs(30), "took {took:?}");
    let live = live.into_inner().expect("lock");
    let live_syn: u64 = live.iter().filter_map(|i| i.kernel_syn_retrans).sum();
    let live_done: u64 = live.iter().map(|i| i.connections).sum();
    eprintln!(
        "live: {} intervals, {live_done} connects, {live_syn} SYN retransmissions",
        live.len()
    );
    assert!(live.len() >= 3, "{live:?}");
    assert_eq!(live_done, c.summary.transactions, "intervals add up");
    assert!(
        live_syn > 0 && live_syn <= kernel,
        "live SYN retransmissions {live_syn}, whole run {kernel}"
    );
}
