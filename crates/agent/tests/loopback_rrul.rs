//! rrul end to end on loopback: a short run (0.5 s idle, 1 s of load both ways, 0.5 s idle)
//! against an in-process server fills every phase with probes, moves bulk bytes both ways,
//! and its JSON, samples file and human form agree with the result. (`tcplab rrul`'s flags and
//! NDJSON are tested with the command line, crates/cli/tests/workload_cli.rs.)

mod common;

use common::{LoopServer, validate_schema};
use tcplab_load::Report;
use tcplab_load::rrul::{self, LoadDirection, PhaseName, RrulConfig, RrulResult};
use tcplab_load::sockopt::SockOpts;

fn short() -> RrulConfig {
    RrulConfig {
        direction: LoadDirection::Both,
        before_ms: 500,
        during_ms: 1_000,
        after_ms: 500,
        drain_ms: 300,
        interval_ms: 250,
        ..RrulConfig::default()
    }
}

/// The windows tile the span without gaps, on the load's measured edges.
fn assert_windows(r: &RrulResult) {
    let names: Vec<PhaseName> = r.phases.iter().map(|p| p.name).collect();
    assert_eq!(names, PhaseName::ALL);
    let (b, d, a) = (&r.phases[0], &r.phases[1], &r.phases[2]);
    assert_eq!(b.end_ns, r.load.start_ns);
    assert_eq!(d.start_ns, r.load.start_ns);
    assert_eq!(d.end_ns, r.load.end_ns);
    assert_eq!(a.start_ns, r.load.end_ns);
    assert!(
        (b.duration_s() - 0.5).abs() < 0.02,
        "before lasted {} s",
        b.duration_s()
    );
    assert!(
        d.duration_s() >= 1.0,
        "the load sent for 1 s, so it ran at least that: {} s",
        d.duration_s()
    );
    assert!(
        (a.duration_s() - 0.5).abs() < 0.02,
        "after lasted {} s",
        a.duration_s()
    );
}

#[test]
fn a_short_rrul_fills_every_phase_and_moves_bytes_both_ways() {
    let srv = LoopServer::start();
    let r = rrul::run_client(&short(), srv.addr, None).expect("rrul");
    assert!(r.meta.complete, "{:?}", r.meta.incomplete_reason);
    assert_windows(&r);
    // One probe per 10 ms: ~50 before, ~100+ during, ~50 after.
    for p in &r.phases {
        assert!(
            p.transactions >= 30,
            "{} has {} probes",
            p.name.as_str(),
            p.transactions
        );
        assert_eq!(p.latency_us.n, p.transactions);
        assert!(p.latency_us.p50.is_some_and(|v| v > 0.0), "{p:?}");
    }
    let placed: u64 = r.phases.iter().map(|p| p.transactions).sum();
    assert_eq!(
        placed + r.outside_transactions,
        r.probes.summary.transactions,
        "every probe is in one phase or counted outside"
    );
    assert_eq!(r.samples().len() as u64, r.probes.summary.transactions);
    assert_eq!(r.probes.mode, "open");
    assert!(r.bulk.client_bytes_sent > 0 && r.bulk.client_bytes_received > 0);
    assert!(r.summary.up_bps.is_some_and(|b| b > 0.0), "{:?}", r.summary);
    assert!(
        r.summary.down_bps.is_some_and(|b| b > 0.0),
        "{:?}",
        r.summary
    );
    assert!(!r.bulk.intervals.is_empty(), "interval tcp_info kept");
    let i = &r.summary.inflation;
    assert_eq!(i.before_p50_us, r.phases[0].latency_us.p50);
    assert_eq!(i.during_p50_us, r.phases[1].latency_us.p50);
    assert!(i.p50_ratio.is_some());

    // JSON: schema-valid, and it reads back as the same result (raw samples stay out of it).
    let report = Report::Rrul(r.clone());
    let json = report.to_json();
    let doc: serde_json::Value = serde_json::from_str(&json).expect("JSON");
    validate_schema(&doc);
    assert_eq!(doc["workload"], "rrul");
    assert!(doc["summary"]["inflation"]["p50_added_us"].is_number());
    let Report::Rrul(back) = serde_json::from_str::<Report>(&json).expect("reads back") else {
        panic!("not rrul")
    };
    assert!(
        back.samples().is_empty(),
        "raw samples stay out of the JSON"
    );
    // Integers compare exactly; floats are compared as the document (one parse of the same text).
    let edges = |x: &RrulResult| -> Vec<(u64, u64, u64)> {
        x.phases
            .iter()
            .map(|p| (p.start_ns, p.end_ns, p.transactions))
            .collect()
    };
    assert_eq!(edges(&back), edges(&r));
    assert_eq!(back.load, r.load);
    assert_eq!(back.config, r.config);
    assert_eq!(
        serde_json::to_value(Report::Rrul(back)).expect("encodes"),
        doc,
        "the document reads back whole"
    );

    // Samples: the phases' windows, then every probe with its phase.
    let mut text = Vec::new();
    tcplab_load::samples::write(&mut text, &report).expect("samples");
    let text = String::from_utf8(text).expect("utf-8");
    let (workload, sections) = tcplab_load::samples::parse(&text).expect("parses");
    assert_eq!(workload, "rrul");
    let kinds: Vec<&str> = sections.iter().map(|s| s.kind.as_str()).collect();
    assert_eq!(kinds, ["phase", "probe", "interval", "interval"]);
    assert_eq!(sections[0].rows.len(), 3);
    let probe = &sections[1];
    assert_eq!(
        probe.columns,
        ["seq", "intended_ns", "sent_ns", "done_ns", "phase"]
    );
    assert_eq!(probe.rows.len(), r.samples().len());
    for p in &r.phases {
        let in_file = probe
            .rows
            .iter()
            .filter(|row| row[4] == Some(p.name.index() as f64))
            .count() as u64;
        assert_eq!(in_file, p.transactions, "{}", p.name.as_str());
        assert_eq!(
            sections[0].rows[p.name.index()][3],
            Some(p.transactions as f64)
        );
    }

    let human = report.to_string();
    assert!(human.contains("latency under load: p50 "), "{human}");
    assert!(human.contains("  phase               before"), "{human}");
}

#[test]
fn a_refused_bulk_option_fails_at_once_naming_its_flag() {
    let srv = LoopServer::start();
    let cfg = RrulConfig {
        opts: SockOpts {
            congestion: Some("nosuchcc".into()),
            ..SockOpts::default()
        },
        ..RrulConfig::default()
    };
    let t = std::time::Instant::now();
    let e = rrul::run_client(&cfg, srv.addr, None).expect_err("refused");
    assert!(e.is_usage(), "{e}");
    assert!(e.to_string().starts_with("--cc:"), "{e}");
    assert!(
        t.elapsed() < std::time::Duration::from_secs(1),
        "checked before the 2 s idle phase, took {:?}",
        t.elapsed()
    );
}
