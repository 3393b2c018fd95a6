//! stream for real in an anonymous network namespace: a receiver whose tcp_rmem maximum is
//! 8 KiB makes the sender wait on the receive window; the doctor reports `rwnd_limited` with
//! the kernel's own limited-time share, and with its namespace tcp_rmem line applied the
//! throughput rises.

#![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]

mod common;

use common::{facts_here, in_fresh_netns, pin_to_this_cpu, serve, sysctl};
use tcplab_doctor::{Battery, FixKind, Scope, diagnose};
use tcplab_load::stream::{StreamConfig, StreamResult};

const KEYS: &[&str] = &["net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"];

fn stream() -> StreamResult {
    let cfg = StreamConfig {
        duration_ms: Some(1_500),
        omit_ms: 500,
        interval_ms: 250,
        ..StreamConfig::default()
    };
    serve(|addr| tcplab_load::stream::run_client(&cfg, addr, None, None)).unwrap()
}

fn battery(r: StreamResult, facts: tcplab_lab::Facts) -> Battery {
    Battery {
        stream: Some(r),
        facts: Some(facts),
        ..Battery::default()
    }
}

/// Most measurements taken before giving up on one that shows the limit.
const ATTEMPTS: usize = 3;

/// A stream with an 8 KiB receive buffer, both ends on one CPU, measured up to [`ATTEMPTS`]
/// times until the doctor reports `rwnd_limited`. This test checks that the kernel's
/// rwnd-limited clock reaches the rule (the rule's thresholds are tested exactly on synthetic
/// flows in `rules::buffers`). Unpinned, the share depended on where the scheduler put the two
/// ends: 0.23-0.77 in most runs, under the rule's 0.2 in about a third (2 CPUs, idle machine);
/// on one CPU it was 0.41-0.77 in 5 of 5. The retries cover a CI machine busy with the rest of
/// the suite, where one 1.5 s run can show the CPU rather than the window as the limit
/// (`untrustworthy.cpu`).
fn small_buffer_run() -> (StreamResult, Vec<tcplab_doctor::Finding>) {
    let mut last = None;
    for attempt in 1..=ATTEMPTS {
        let (r, facts) = in_fresh_netns(|| {
            pin_to_this_cpu();
            sysctl("net.ipv4.tcp_rmem", "4096 8192 8192");
            (stream(), facts_here(KEYS))
        });
        let found = diagnose(&battery(r.clone(), facts));
        let shown = found.iter().any(|f| f.id == "rwnd_limited");
        if !shown {
            let ids: Vec<_> = found.iter().map(|f| f.id.as_str()).collect();
            eprintln!("attempt {attempt}: no rwnd_limited (findings {ids:?})");
        }
        last = Some((r, found));
        if shown {
            break;
        }
    }
    last.expect("ATTEMPTS is at least 1")
}

#[test]
fn small_receive_buffer_is_found_and_the_fix_helps() {
    let (r, found) = small_buffer_run();
    let before_bps = r.summary.throughput_bps.unwrap();
    let f = found
        .iter()
        .find(|f| f.id == "rwnd_limited")
        .unwrap_or_else(|| panic!("no rwnd_limited in {found:#?}"));
    eprintln!("{f}");
    let share = f.figure("rwnd_limited_fraction").unwrap();
    assert!(share >= 0.2, "rwnd-limited share {share}");
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
    let max: u64 = rmem.split_whitespace().nth(2).unwrap().parse().unwrap();
    assert!(max > 8_192, "suggested tcp_rmem {rmem}");

    let (after, facts) = in_fresh_netns(move || {
        pin_to_this_cpu();
        sysctl("net.ipv4.tcp_rmem", &rmem);
        (stream(), facts_here(KEYS))
    });
    let after_bps = after.summary.throughput_bps.unwrap();
    let found = diagnose(&battery(after, facts));
    let share_after = found
        .iter()
        .find(|f| f.id == "rwnd_limited")
        .and_then(|f| f.figure("rwnd_limited_fraction"))
        .unwrap_or(0.0);
    eprintln!(
        "before: {:.0} Mbit/s, rwnd-limited {share:.2}; after tcp_rmem max {max}: {:.0} Mbit/s, {share_after:.2}",
        before_bps / 1e6,
        after_bps / 1e6
    );
    // Loopback has no path to fill: its receiver is the slower side whatever the buffer, so
    // the limited share need not fall; the throughput must rise.
    assert!(after_bps > before_bps, "{after_bps} <= {before_bps}");
}
