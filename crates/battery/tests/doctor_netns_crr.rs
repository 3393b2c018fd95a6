//! crr for real, in an anonymous network namespace per test (unshare(CLONE_NEWNET) on a thread:
//! no /run/netns entry, gone when the thread ends, the host's ports untouched): a healthy run
//! gives no connection findings; a 200-port range with tcp_tw_reuse off runs out of ports
//! within the second (seed 003), the doctor says so with the range it read, and with the
//! namespace sysctls it names applied the same run completes without a failed connect.

#![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]

mod common;

use common::{facts_here, in_fresh_netns, serve, sysctl};
use tcplab_doctor::{Battery, FixKind, Scope, Severity, diagnose};
use tcplab_load::crr::{CrrConfig, CrrResult};

const PORT_KEYS: &[&str] = &["net.ipv4.ip_local_port_range", "net.ipv4.tcp_tw_reuse"];

fn crr(cfg: &CrrConfig) -> CrrResult {
    serve(|addr| tcplab_load::crr::run_client(cfg, addr, None)).unwrap()
}

#[test]
fn healthy_crr_has_no_connection_trouble() {
    let (r, facts) = in_fresh_netns(|| {
        let cfg = CrrConfig {
            count: Some(300),
            duration_ms: None,
            ..CrrConfig::default()
        };
        (crr(&cfg), facts_here(PORT_KEYS))
    });
    assert_eq!(r.summary.transactions, 300);
    let found = diagnose(&Battery {
        crr: Some(r),
        facts: Some(facts),
        ..Battery::default()
    });
    assert!(
        found
            .iter()
            .all(|f| !f.id.starts_with("connection_trouble")),
        "{found:#?}"
    );
}

#[test]
fn narrow_port_range_runs_out_and_is_named() {
    let (r, facts) = in_fresh_netns(|| {
        sysctl("net.ipv4.ip_local_port_range", "40000 40199");
        sysctl("net.ipv4.tcp_tw_reuse", "0");
        let cfg = CrrConfig {
            count: None,
            duration_ms: Some(1_000),
            ..CrrConfig::default()
        };
        (crr(&cfg), facts_here(PORT_KEYS))
    });
    eprintln!(
        "200 ports: {} connections, {} EADDRNOTAVAIL, TIME_WAIT max {}",
        r.summary.transactions, r.errors_total.addrnotavail, r.time_wait.max
    );
    assert!(
        r.errors_total.addrnotavail > 0,
        "no port exhaustion with 200 ports"
    );
    let found = diagnose(&Battery {
        crr: Some(r),
        facts: Some(facts),
        ..Battery::default()
    });
    let f = found
        .iter()
        .find(|f| f.id == "connection_trouble.port_exhaustion")
        .unwrap();
    eprintln!("{f}");
    assert_eq!(f.severity, Severity::Error);
    assert_eq!(f.figure("local_ports"), Some(200.0));
    assert!((f.figure("port_limited_rate").unwrap() - 200.0 / 60.0).abs() < 1e-9);
    let lines: Vec<&str> = f
        .fixes
        .iter()
        .flat_map(|x| x.lines.iter().map(String::as_str))
        .collect();
    assert!(
        lines.contains(&"net.ipv4.ip_local_port_range = 1024 65535"),
        "{lines:?}"
    );
    assert!(lines.contains(&"net.ipv4.tcp_tw_reuse = 1"), "{lines:?}");

    // Apply the namespace-scope sysctls the doctor gave to the same narrow start and re-run.
    let fixes: Vec<(String, String)> = f
        .fixes
        .iter()
        .filter_map(|x| match &x.kind {
            FixKind::Sysctl {
                key,
                value,
                scope: Scope::Namespace,
            } => Some((key.clone(), value.clone())),
            _ => None,
        })
        .collect();
    let (after, facts) = in_fresh_netns(move || {
        sysctl("net.ipv4.ip_local_port_range", "40000 40199");
        sysctl("net.ipv4.tcp_tw_reuse", "0");
        for (k, v) in &fixes {
            sysctl(k, v);
        }
        let cfg = CrrConfig {
            count: None,
            duration_ms: Some(1_000),
            ..CrrConfig::default()
        };
        (crr(&cfg), facts_here(PORT_KEYS))
    });
    eprintln!(
        "after the fix: {} connections, {} EADDRNOTAVAIL, TIME_WAIT max {}",
        after.summary.transactions, after.errors_total.addrnotavail, after.time_wait.max
    );
    assert_eq!(after.errors_total.addrnotavail, 0);
    let found = diagnose(&Battery {
        crr: Some(after),
        facts: Some(facts),
        ..Battery::default()
    });
    assert!(
        found
            .iter()
            .all(|f| f.id != "connection_trouble.port_exhaustion"),
        "{found:#?}"
    );
}
