//! The whole doctor on synthetic batteries: silence on a healthy path, every pathology found
//! and ordered by severity, and the `--json` document's shape.

#![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]

use tcplab_doctor::synth::{self, MsgSim, StreamSim};
use tcplab_doctor::{
    Battery, Diagnosis, EmulatorFidelity, PathInfo, Severity, diagnose, diagnosis,
};

const MS: u64 = 1_000_000;

/// 1 Gbit/s, 30 ms path, everything fine.
fn healthy() -> Battery {
    let mut paced = MsgSim::new(5_000, 16);
    paced.spacing_ns = MS;
    Battery {
        stream: Some(StreamSim::healthy(940e6, 30_000).run()),
        msgs: Some(synth::msgs(vec![paced.run(|_| 0)], true)),
        rr: Some(synth::rr(64, &[30_100_000; 500], true)),
        crr: Some(synth::crr(2_000, 500.0, |i| {
            30_000_000 + (i % 5) as u64 * 10_000
        })),
        facts: Some(synth::facts(250)),
        fidelity: Some(EmulatorFidelity {
            trustworthy: true,
            reasons: Vec::new(),
            late_parts: Vec::new(),
        }),
        path: PathInfo {
            configured_rtt_ms: Some(30.0),
            rate_bps: Some(1e9),
            ..PathInfo::default()
        },
        ..Battery::default()
    }
}

/// The same path with every pathology at once.
fn sick() -> Battery {
    let mut b = healthy();
    let mut sim = StreamSim::healthy(35e6, 30_000);
    sim.rwnd_share = 0.8;
    sim.snd_wnd = 131_072;
    b.stream = Some(sim.run());
    let mut paced = MsgSim::new(4_100, 16);
    paced.spacing_ns = MS;
    b.msgs = Some(synth::msgs(
        vec![paced.run(|i| if i % 41 == 40 { 8 * MS } else { 0 })],
        false,
    ));
    // Write-write-read with Nagle: a stalled transaction takes the timer and a second round
    // trip (the held half leaves when the delayed ACK arrives).
    let wwr: Vec<u64> = (0..300)
        .map(|i| if i < 10 { 30_100_000 } else { 101_000_000 })
        .collect();
    b.rr = Some(synth::rr(100, &wwr, false));
    let mut crr = synth::crr(30_000, 1_000.0, |_| 30_000_000);
    crr.time_wait.max = 28_232;
    b.crr = Some(synth::with_addrnotavail(crr, &[28, 29], 500));
    b.fidelity = Some(EmulatorFidelity {
        trustworthy: false,
        reasons: vec!["b->a: ring overflow 12 frames".into()],
        late_parts: Vec::new(),
    });
    b
}

#[test]
fn healthy_path_gives_no_findings() {
    let f = diagnose(&healthy());
    assert!(
        f.is_empty(),
        "{}",
        Diagnosis {
            findings: f,
            ..Diagnosis::default()
        }
    );
}

#[test]
fn every_pathology_is_found_most_severe_first() {
    let d = diagnosis(&sick());
    let ids: Vec<&str> = d.findings.iter().map(|f| f.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "untrustworthy.emulator",
            "rwnd_limited",
            "connection_trouble.port_exhaustion",
            "delayed_ack_stall",
            "periodic_stall",
        ],
        "{d}"
    );
    let sev: Vec<Severity> = d.findings.iter().map(|f| f.severity).collect();
    assert!(sev.windows(2).all(|w| w[0] >= w[1]), "{sev:?}");
    assert_eq!(d.worst(), Some(Severity::Critical));
    assert!(d.fails("error".parse().unwrap()));
    let periodic = &d.findings[4];
    assert_eq!(periodic.figure("period_messages"), Some(41.0));
    assert_eq!(
        periodic.figure("stall_delay_ticks").map(f64::round),
        Some(2.0)
    );
    assert!(!diagnosis(&healthy()).fails(Severity::Info));
}

#[test]
fn json_has_the_documented_shape_and_round_trips() {
    let d = diagnosis(&sick());
    let text = d.to_json();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let findings = v["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 5);
    for f in findings {
        for key in [
            "id",
            "severity",
            "title",
            "evidence",
            "samples",
            "explanation",
            "fix",
        ] {
            assert!(f.get(key).is_some(), "{key} missing in {f}");
        }
        assert!(
            ["info", "warning", "error", "critical"].contains(&f["severity"].as_str().unwrap())
        );
        for e in f["evidence"].as_array().unwrap() {
            assert!(e["figure"].is_string() && e["value"].is_number(), "{e}");
            assert!(e["unit"].is_string() && e["context"].is_string(), "{e}");
        }
        for x in f["fix"].as_array().unwrap() {
            let kind = x["kind"].as_str().unwrap();
            assert!(
                ["sysctl", "setsockopt", "route", "other"].contains(&kind),
                "{x}"
            );
            assert!(x["lines"].is_array() && x["applies_to"].is_string(), "{x}");
            if kind == "sysctl" {
                assert!(["namespace", "host_global"].contains(&x["scope"].as_str().unwrap()));
                assert!(x["key"].is_string() && x["value"].is_string());
            }
        }
    }
    let rwnd = findings.iter().find(|f| f["id"] == "rwnd_limited").unwrap();
    assert_eq!(rwnd["fix"][0]["kind"], "sysctl");
    assert_eq!(rwnd["fix"][0]["key"], "net.ipv4.tcp_rmem");
    assert_eq!(rwnd["fix"][0]["scope"], "namespace");
    assert_eq!(rwnd["fix"][1]["scope"], "host_global");
    let back: Diagnosis = serde_json::from_str(&text).unwrap();
    assert_eq!(back.findings.len(), d.findings.len());
    for (b, a) in back.findings.iter().zip(&d.findings) {
        assert_eq!(
            (&b.id, b.severity, &b.fixes, &b.samples),
            (&a.id, a.severity, &a.fixes, &a.samples)
        );
        for (eb, ea) in b.evidence.iter().zip(&a.evidence) {
            assert_eq!(eb.figure, ea.figure);
            assert!((eb.value - ea.value).abs() <= 1e-12 * ea.value.abs().max(1.0));
        }
    }
}

#[test]
fn severity_parses_for_fail_on() {
    assert_eq!("warning".parse::<Severity>().unwrap(), Severity::Warning);
    assert_eq!("CRITICAL".parse::<Severity>().unwrap(), Severity::Critical);
    let e = "fatal".parse::<Severity>().unwrap_err().to_string();
    assert!(
        e.contains("--fail-on") && e.contains("info, warning, error or critical"),
        "{e}"
    );
    assert!(Severity::Critical > Severity::Error && Severity::Warning > Severity::Info);
}

#[test]
fn facts_are_read_from_the_results_when_not_given() {
    let mut b = healthy();
    let facts = b.facts.take().map(|mut f| {
        f.hz.hz = 1000;
        f.hz.configured = Some(1000);
        f
    });
    let wwr: Vec<u64> = (0..300)
        .map(|i| if i < 10 { 30_100_000 } else { 100_600_000 })
        .collect();
    let mut rr = synth::rr(100, &wwr, false);
    rr.meta.facts.machine = facts;
    b.rr = Some(rr);
    let f = diagnose(&b);
    assert_eq!(f[0].id, "delayed_ack_stall");
    assert_eq!(
        f[0].figure("delack_timer_ticks"),
        Some(40.0),
        "HZ 1000 from meta.facts"
    );
}

#[test]
fn terminal_text_lists_figures_and_fix_lines() {
    let text = diagnosis(&sick()).to_string();
    assert!(text.contains("[critical]"));
    assert!(
        text.contains("net.ipv4.ip_local_port_range = 1024 65535"),
        "{text}"
    );
    assert!(text.contains("period_messages"));
    // The path as the battery measured it comes first, then the findings (none here).
    let healthy = diagnosis(&healthy()).to_string();
    assert!(healthy.starts_with("the path as measured:\n"), "{healthy}");
    assert!(healthy.contains("bottleneck rate   at least"), "{healthy}");
    assert!(
        healthy.ends_with("\nno findings: nothing on this path looks wrong\n"),
        "{healthy}"
    );
}
