//! rrul on an emulated path with a deep queue (root): client ─ emulator ─ server, `--delay 5ms
//! --rate 20mbit --queue 1000` each way, set through the lab spec as `tcplab lab up` does.
//! Drop-tail: one reno flow up fills the 1000-packet queue (1000 x 1514 B at 20 Mbit/s ≈
//! 600 ms; reno halves to ~300 ms on each loss and climbs back): the probes' median rises from
//! the ~10 ms RTT to hundreds of ms while the load runs, and comes back once it is over. The
//! same path with `--queue-discipline fq_codel` and ECN on both hosts: the probes stay near the
//! base RTT (their own flow goes first), the bulk flow still fills the link, and the queue
//! marks it instead of dropping. The labs are process-owned: dropping one (also on a failed
//! assert) removes its namespaces.

use tcplab_emu::ImpairmentFlags;
use tcplab_front::lab::run_on;
use tcplab_lab::{BridgeMode, BuiltinOptions, Lab, LabSpec, Ownership, StateDir, Topology};
use tcplab_load::Report;
use tcplab_load::rrul::{self, LoadDirection, PhaseName, RrulConfig, RrulResult};
use tcplab_load::sockopt::SockOpts;

/// Lab tests measure; running them at once on two cores would measure each other.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A process-owned path lab with a deep queue, in a private state directory.
fn deep_queue_path(state: &tempfile::TempDir) -> Lab {
    path_with(state, "rl", None, Vec::new())
}

/// The deep-queue path with `discipline` at its bottleneck and `sysctls` on its hosts.
fn path_with(
    state: &tempfile::TempDir,
    tag: &str,
    discipline: Option<&str>,
    sysctls: Vec<tcplab_lab::SysctlSetting>,
) -> Lab {
    assert!(
        tcplab_lab::require_root("lab tests").is_ok(),
        "the lab tests need root (namespaces, veth): run `sudo cargo test`"
    );
    let link = ImpairmentFlags {
        delay: Some("5ms".into()),
        rate: Some("20mbit".into()),
        queue: Some("1000".into()),
        queue_discipline: discipline.map(Into::into),
        seed: Some("7".into()),
        ..ImpairmentFlags::default()
    }
    .to_link_config()
    .expect("valid impairments");
    let spec = LabSpec::builtin(&BuiltinOptions {
        name: format!("{tag}{}", std::process::id() % 100_000),
        topology: Topology::Path,
        bridge: BridgeMode::Emu,
        link: Some(link),
        sysctls,
        ..BuiltinOptions::default()
    })
    .expect("valid spec");
    Lab::build_in(StateDir::at(state.path()), spec, Ownership::Process).expect("lab builds")
}

/// One reno flow up beside the probes: 1 s idle, 3 s loaded, 1.5 s after.
fn reno_up() -> RrulConfig {
    RrulConfig {
        direction: LoadDirection::Up,
        flows: 1,
        before_ms: 1_000,
        during_ms: 3_000,
        after_ms: 1_500,
        drain_ms: 2_000,
        interval_ms: 500,
        opts: SockOpts {
            congestion: Some("reno".into()),
            ..SockOpts::default()
        },
        ..RrulConfig::default()
    }
}

fn p50(r: &RrulResult, name: PhaseName) -> f64 {
    r.phase(name)
        .and_then(|p| p.latency_us.p50)
        .unwrap_or_else(|| panic!("no {} median", name.as_str()))
}

#[test]
fn a_deep_queue_inflates_latency_under_load_and_it_recovers_after() {
    let _serial = serial();
    let state = tempfile::tempdir().expect("state dir");
    let lab = deep_queue_path(&state);
    let cfg = reno_up();
    let report = run_on(&lab, "client", "server", |to, facts| {
        rrul::run_client(&cfg, to, facts).map(Report::Rrul)
    })
    .expect("rrul in the lab");
    eprintln!("{report}");
    let Report::Rrul(r) = report else {
        panic!("not rrul")
    };
    assert!(r.meta.complete, "{:?}", r.meta.incomplete_reason);
    assert_eq!(
        r.meta.options.as_ref().map(|o| o.congestion.as_str()),
        Some("reno"),
        "the bulk flow ran reno"
    );
    assert!(
        r.meta.facts.emulator.is_some(),
        "the emulator's verdict is attached: {:?}",
        r.meta.facts
    );

    let (before, during, after) = (
        p50(&r, PhaseName::Before),
        p50(&r, PhaseName::During),
        p50(&r, PhaseName::After),
    );
    // Idle: the 10 ms RTT plus serialisation, and little else.
    assert!(
        (10_000.0..30_000.0).contains(&before),
        "idle p50 {before} µs on a 10 ms RTT path"
    );
    // Loaded: a ~300-600 ms standing queue; 5x idle is ~50-100 ms, far below it and far
    // above anything a busy machine adds to an idle probe.
    assert!(
        during >= 5.0 * before,
        "loaded p50 {during} µs is not 5x the idle {before} µs: no bufferbloat seen"
    );
    // After: the queue has drained (the load's end is its last byte delivered).
    assert!(
        after <= 2.0 * before,
        "p50 after the load {after} µs did not come back near the idle {before} µs"
    );
    let i = &r.summary.inflation;
    assert!(i.p50_ratio.is_some_and(|x| x >= 5.0), "{i:?}");
    assert!(i.p99_added_us.is_some_and(|x| x > 0.0), "{i:?}");

    let up = r.summary.up_bps.expect("up throughput");
    assert!(
        (10e6..21e6).contains(&up),
        "a full 20 Mbit/s bottleneck carried {up} bit/s"
    );
    assert_eq!(r.summary.down_bps, None, "up only");
    assert!(
        r.bulk.intervals.iter().any(|i| i.tcp_info.is_some()),
        "interval tcp_info kept"
    );
}

/// The same path and load with FQ-CoDel at the bottleneck and `net.ipv4.tcp_ecn = 1` on both
/// hosts: the probes' loaded median stays within the base RTT + 15 ms, the reno flow still
/// carries most of the link, it negotiated ECN, and the emulator marked its packets rather
/// than dropping them.
#[test]
fn fq_codel_with_ecn_keeps_the_probes_near_the_base_rtt_under_load() {
    let _serial = serial();
    let state = tempfile::tempdir().expect("state dir");
    let ecn = |host: &str| tcplab_lab::SysctlSetting {
        host: host.into(),
        key: "net.ipv4.tcp_ecn".into(),
        value: "1".into(),
    };
    let lab = path_with(
        &state,
        "fq",
        Some("fq_codel"),
        vec![ecn("client"), ecn("server")],
    );
    let cfg = reno_up();
    let report = run_on(&lab, "client", "server", |to, facts| {
        rrul::run_client(&cfg, to, facts).map(Report::Rrul)
    })
    .expect("rrul in the lab");
    eprintln!("{report}");
    let Report::Rrul(r) = report else {
        panic!("not rrul")
    };
    assert!(r.meta.complete, "{:?}", r.meta.incomplete_reason);
    let (before, during) = (p50(&r, PhaseName::Before), p50(&r, PhaseName::During));
    assert!(
        during <= before + 15_000.0,
        "loaded p50 {during} µs: more than the idle {before} µs + 15 ms behind FQ-CoDel"
    );
    let up = r.summary.up_bps.expect("up throughput");
    assert!(
        up >= 15e6,
        "the bulk flow carried {up} bit/s of the 20 Mbit/s link"
    );
    assert!(
        r.bulk
            .intervals
            .iter()
            .filter_map(|i| i.tcp_info.as_ref())
            .any(|t| t.ecn),
        "the bulk flow negotiated ECN"
    );
    let status = lab.emulator_status().expect("the emulator's counters");
    let up: tcplab_results::emulator::DirSnapshot =
        serde_json::from_value(status.counters["forward"].clone()).expect("typed counters");
    assert!(up.marked_ce > 0, "FQ-CoDel marked nothing: {up:?}");
    assert_eq!(
        up.drops.aqm, 0,
        "ECT packets dropped below the memory limit"
    );
}
