//! The doctor on an emulated WAN built by the lab (client ─ emulator ─ server, 100 Mbit/s,
//! 30 ms RTT), as root. Seed 002: a receiver with 2.6.9-era buffers (tcp_rmem max 128 KiB) is
//! window-limited; the doctor's tcp_rmem line, applied to the server host, lifts the
//! throughput. And a 2% lossy link under cubic is loss-limited near the Mathis bound; the
//! congestion control the doctor names (bbr) is faster there. Each stream runs 4 s.

#![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]

use tcplab_doctor::{Battery, EmulatorFidelity, FixKind, PathInfo, Scope, diagnose};
use tcplab_emu::{DirectionConfig, LinkConfig, Loss};
use tcplab_lab::{BridgeMode, BuiltinOptions, Lab, LabSpec, Ownership, StateDir, Topology};
use tcplab_load::report::Report;
use tcplab_load::sockopt::SockOpts;
use tcplab_load::stream::{StreamConfig, StreamResult};
use tcplab_results::emulator::Thresholds;

const RATE: u64 = 100_000_000;
const ONE_WAY_MS: u64 = 15;

/// The lab needs root; CI runs the suite as root, so a test without it fails, never passes.
fn require_root() {
    // Safety: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    assert!(
        root,
        "this test builds an emulated lab and needs root (run the suite as root)"
    );
}

fn link(loss: f64) -> LinkConfig {
    let dir = DirectionConfig {
        delay_ns: ONE_WAY_MS * 1_000_000,
        rate_bps: Some(RATE),
        ..DirectionConfig::default()
    };
    let forward = DirectionConfig {
        loss: (loss > 0.0).then_some(Loss::Bernoulli { probability: loss }),
        ..dir.clone()
    };
    LinkConfig {
        forward,
        reverse: dir,
        seed: Some(2),
    }
}

/// A process-owned lab in a private state directory; dropping it tears it down.
fn wan(state: &tempfile::TempDir, tag: &str, loss: f64) -> Lab {
    let spec = LabSpec::builtin(&BuiltinOptions {
        name: format!("d{}{tag}", std::process::id() % 10_000),
        topology: Topology::Path,
        bridge: BridgeMode::Emu,
        link: Some(link(loss)),
        ..BuiltinOptions::default()
    })
    .unwrap();
    Lab::build_in(StateDir::at(state.path()), spec, Ownership::Process).unwrap()
}

fn set_sysctl(lab: &Lab, host: &str, key: &str, value: &str) {
    let path = format!("/proc/sys/{}", key.replace('.', "/"));
    let value = value.to_string();
    lab.host(host)
        .unwrap()
        .run(move || std::fs::write(path, value))
        .unwrap()
        .unwrap();
}

fn stream(lab: &Lab, opts: SockOpts) -> StreamResult {
    let cfg = StreamConfig {
        duration_ms: Some(4_000),
        omit_ms: 1_000,
        interval_ms: 500,
        opts,
        ..StreamConfig::default()
    };
    let r = tcplab_front::lab::run_on(lab, "client", "server", |addr, facts| {
        tcplab_load::stream::run_client(&cfg, addr, facts, None).map(Report::Stream)
    })
    .unwrap();
    match r {
        Report::Stream(s) => s,
        other => panic!("not a stream result: {other:?}"),
    }
}

fn battery(r: StreamResult, loss: f64) -> Battery {
    Battery {
        stream: Some(r),
        path: PathInfo {
            configured_rtt_ms: Some(2.0 * ONE_WAY_MS as f64),
            rate_bps: Some(RATE as f64),
            loss: (loss > 0.0).then_some(loss),
            ..PathInfo::default()
        },
        ..Battery::default()
    }
}

/// Stops the emulator and prints its fidelity verdict (the runs are over; on a busy 2-CPU
/// machine it may be late, which the doctor would then report as `untrustworthy.emulator`).
fn report_fidelity(mut lab: Lab) {
    if let Some(report) = lab.stop_emulator() {
        let f = EmulatorFidelity::from(&report.verdict(&Thresholds::default()));
        eprintln!(
            "emulator fidelity: trustworthy {} {:?}",
            f.trustworthy, f.reasons
        );
    }
}

fn mbit(r: &StreamResult) -> f64 {
    r.summary.throughput_bps.unwrap() / 1e6
}

#[test]
fn seed002_small_receive_buffer_and_the_four_lines() {
    require_root();
    let state = tempfile::tempdir().unwrap();
    let lab = wan(&state, "w", 0.0);
    set_sysctl(&lab, "server", "net.ipv4.tcp_rmem", "4096 65536 131072");
    let before = stream(&lab, SockOpts::default());
    let before_mbit = mbit(&before);
    let found = diagnose(&battery(before, 0.0));
    let f = found
        .iter()
        .find(|f| f.id == "rwnd_limited")
        .unwrap_or_else(|| panic!("no rwnd_limited at {before_mbit:.1} Mbit/s: {found:#?}"));
    eprintln!("{f}");
    // 100 Mbit/s x 30 ms = 375,000 B; 2 x BDP page-rounded = 753,664 B.
    assert_eq!(f.figure("buffer_max_needed_bytes"), Some(753_664.0));
    let rmem = f
        .fixes
        .iter()
        .find_map(|x| match &x.kind {
            FixKind::Sysctl {
                key,
                value,
                scope: Scope::Namespace,
            } if key == "net.ipv4.tcp_rmem" => Some(value.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        rmem, "4096 65536 753664",
        "min and default kept from the facts"
    );
    set_sysctl(&lab, "server", "net.ipv4.tcp_rmem", &rmem);
    let after = stream(&lab, SockOpts::default());
    let after_mbit = mbit(&after);
    eprintln!("seed 002 at 30 ms: {before_mbit:.1} Mbit/s -> {after_mbit:.1} Mbit/s with {rmem}");
    // The run's own account of the link: every packet got exactly the 15 ms (no jitter), and
    // the data went through the 100 Mbit/s queue (its stay is at least one 1500-B frame's
    // serialisation, 120 µs, reported whatever the flow made of the queue).
    // As the result's JSON gives it (`facts.emulator.realised.forward`).
    let realised = serde_json::to_value(
        after
            .meta
            .facts
            .emulator
            .as_ref()
            .and_then(|e| e.realised.as_ref())
            .and_then(|a| a.forward.as_ref()),
    )
    .unwrap();
    eprintln!("realised over the run after the fix: {realised}");
    assert_eq!(realised["delay_mean_ns"], 15e6, "{realised}");
    assert_eq!(realised["delay_sd_ns"], 0.0, "{realised}");
    assert!(
        realised["delay_count"].as_u64().unwrap() > 10_000,
        "{realised}"
    );
    assert!(
        realised["queue_accepted"].as_u64().unwrap() > 10_000,
        "{realised}"
    );
    assert!(
        realised["queue_mean_sojourn_ns"].as_u64().unwrap() >= 120_000,
        "{realised}"
    );
    assert!(
        after_mbit > 2.0 * before_mbit,
        "{before_mbit} -> {after_mbit}"
    );
    report_fidelity(lab);
    let again = diagnose(&battery(after, 0.0));
    assert!(
        again
            .iter()
            .all(|f| f.id != "rwnd_limited" || f.severity < tcplab_doctor::Severity::Error),
        "{again:#?}"
    );
}

#[test]
fn lossy_link_under_cubic_is_loss_limited_and_bbr_is_named() {
    require_root();
    let state = tempfile::tempdir().unwrap();
    let lab = wan(&state, "l", 0.02);
    let cubic = SockOpts {
        congestion: Some("cubic".into()),
        ..SockOpts::default()
    };
    let before = stream(&lab, cubic);
    let before_mbit = mbit(&before);
    let found = diagnose(&battery(before, 0.02));
    let f = found
        .iter()
        .find(|f| f.id == "loss_limited")
        .unwrap_or_else(|| panic!("no loss_limited at {before_mbit:.1} Mbit/s: {found:#?}"));
    eprintln!("{f}");
    let ratio = f.figure("throughput_over_mathis").unwrap();
    assert!(
        (0.3..3.0).contains(&ratio),
        "cubic at {ratio:.2} x the Mathis bound"
    );
    let cc = f
        .fixes
        .iter()
        .find_map(|x| match &x.kind {
            FixKind::SetSockOpt { option, value } if option == "TCP_CONGESTION" => {
                Some(value.clone())
            }
            _ => None,
        })
        .unwrap();
    assert_eq!(cc, "bbr");
    let after = stream(
        &lab,
        SockOpts {
            congestion: Some(cc),
            ..SockOpts::default()
        },
    );
    let after_mbit = mbit(&after);
    eprintln!("2% loss at 30 ms: cubic {before_mbit:.1} Mbit/s -> bbr {after_mbit:.1} Mbit/s");
    assert!(
        after_mbit > 2.0 * before_mbit,
        "{before_mbit} -> {after_mbit}"
    );
    report_fidelity(lab);
}
