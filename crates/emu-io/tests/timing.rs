//! Root integration tests that judge how well the emulator keeps time: the delay a flow sees
//! and the verdict of a quiet run. They run in a test binary of their own (cargo runs test
//! binaries one after another, so no other test's traffic or SCHED_FIFO workers share the
//! CPUs with them) and one at a time within it ([`alone`]). Each asserts only what a stall of
//! the machine cannot move: medians, counts and CPU shares, with margins of 0.5 ms or more
//! against lateness of a few µs. The tail of the lateness (its p99), which one stall of a
//! shared machine decides, is measured by the benchmarks (`benches/emu.sh`, its delay
//! section), not asserted here. Each test builds its own namespaces (removed on drop, also on
//! failure).

mod common;

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use common::{
    PathLab, assert_balanced, link, median, model, start, start_emu, tcp_echo_server, tcp_rr_rtts,
};
use tcplab_emu_io::{IoOptions, Thresholds};

/// Held for the whole of each test, so the tests of this binary never overlap (a failed
/// test poisons it; the next one runs anyway).
fn alone() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(PoisonError::into_inner)
}

#[test]
fn ten_ms_delay_shows_in_tcp_rtt_and_ping() {
    require_root!();
    let _alone = alone();
    let lab = PathLab::new();
    let bridge = start_emu(&lab, link("10ms", "0%"));
    assert_eq!(bridge.seed(), Some(7));
    let server = tcp_echo_server(&lab, 5002);
    let rr = tcp_rr_rtts(&lab, 5002, 50);
    drop(server.join());
    let ping = lab.ping_rtts(20, "0.05");
    std::thread::sleep(Duration::from_millis(30));
    let report = bridge.stop();
    let (rr_med, ping_med) = (median(&rr), median(&ping));
    eprintln!("10 ms/10 ms: TCP RR median {rr_med:.3} ms, ping median {ping_med:.3} ms");
    eprintln!(
        "lateness a->b {:?} b->a {:?}",
        report.forward.lateness, report.reverse.lateness
    );
    assert!(
        (20.0..21.0).contains(&rr_med),
        "TCP RR median {rr_med} ms, want 20 ms + base"
    );
    assert_eq!(ping.len(), 20);
    assert!(
        (20.0..21.0).contains(&ping_med),
        "ping median {ping_med} ms"
    );
    assert!(
        rr.iter().all(|&r| r >= 20.0),
        "no RTT below the configured 20 ms: {rr:?}"
    );
    assert_balanced(&report);
    // The model's own account, published when the workers stopped: every frame got exactly
    // the fixed delay, and there is no bottleneck queue without a rate.
    for d in [&report.forward, &report.reverse] {
        let line = d
            .realised
            .delay_line
            .expect("a delayed direction reports its line");
        assert_eq!(line.count, d.frames_out + d.queued, "{line:?}");
        assert_eq!((line.mean_ns, line.sd_ns), (10e6, 0.0), "{line:?}");
        assert_eq!((line.held_for_order, line.clamped_at_zero), (0, 0));
        assert_eq!(d.realised.queue, None);
    }
}

#[test]
fn verdict_of_a_quiet_run_is_trustworthy() {
    require_root!();
    let _alone = alone();
    let lab = PathLab::new();
    let bridge = start(
        &lab,
        model(5, 0.0, 1),
        model(5, 0.0, 2),
        IoOptions::default(),
    );
    let rtts = lab.ping_rtts(150, "0.01");
    assert_eq!(rtts.len(), 150);
    let report = bridge.stop();
    // Every reason of the verdict but the lateness tail: no drop of the emulator's own, no
    // ring overflow, no worker error, no worker near a whole CPU.
    let v = report.verdict(&Thresholds {
        lateness_p99_ns: u64::MAX,
        ..Default::default()
    });
    assert!(v.trustworthy, "{:?} {report:?}", v.reasons);
    // The schedule: a quiet emulator sends a ping 0.2-1 µs late at the median (spinning to
    // its departure). A worker that woke a timer tick (4 ms) or a whole delay late would move
    // the median of 150 frames past 0.5 ms; a stall of the machine, which delays a frame or
    // two, cannot. (The p99 of 150 frames is their second-worst: one 20-ms stall of a shared
    // VM, or another test's SCHED_FIFO workers, decided it when it was asserted here.)
    for d in [&report.forward, &report.reverse] {
        assert!(
            d.lateness.p50_ns < 500_000,
            "{:?}; the machine: {}",
            d.lateness,
            machine_state()
        );
    }
    eprintln!(
        "quiet: lateness a->b {} / b->a {}",
        report.forward.lateness, report.reverse.lateness
    );
    // Pings 10 ms apart are each alone in their flow: every echo and reply is a lone frame.
    for d in [&report.forward, &report.reverse] {
        let (lone, all) = (d.lone_lateness.count, d.lateness.count);
        assert!(lone >= 150 && lone <= all, "lone {lone} of {all}: {d:?}");
        assert!(d.lone_lateness.max_ns <= d.lateness.max_ns);
    }
    assert!(
        report.threads[0].ratio() < 0.5,
        "idle worker used {:.2} of a CPU",
        report.threads[0].ratio()
    );
}

/// The load average and the busiest processes, for a timing assertion's message: a median
/// moved by the machine (another process on the CPUs) reads differently from one moved by
/// the emulator.
fn machine_state() -> String {
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let busiest = std::process::Command::new("ps")
        .args(["-eo", "pid,pcpu,comm", "--sort=-pcpu"])
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .skip(1)
                .take(6)
                .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
                .collect::<Vec<_>>()
                .join("; ")
        })
        .unwrap_or_default();
    format!("load {}; busiest: {busiest}", load.trim())
}
