//! The shipped SPECweb96 scenario (seed 003, `scenarios/specweb96.toml`) under `--quick`, with
//! its runs shortened further (see [`RUN_SCALE`]), in real labs (root): every configuration's
//! http run through the emulated 100 Mbit/s path completes, its metrics carry SPECweb96's two
//! figures and the TIME_WAIT evidence, and its samples come back as the text
//! `tcplab_load::samples` writes, one row per request.

#![allow(clippy::unwrap_used, reason = "tests fail loudly on unexpected errors")]

use std::time::{Duration, Instant};

use tcplab_lab::StateDir;
use tcplab_study::executor::LabExecutor;
use tcplab_study::to_report::series::parse_workloads;
use tcplab_study::{Plan, PlanOptions, ScenarioFile, Store, SweepOptions, sweep};

/// What `[quick]`'s scale becomes here: the scenario's 10 s runs last 0.5 s instead of the
/// shipped 2 s. The assertions below read no figure closely (ops/s within 10-2,000, the metrics
/// and the TIME_WAIT evidence present, a sample row per request), so every configuration still
/// gets its fresh lab, server, run, samples and stored result, in about half the time (the labs
/// and the harness cost more than 0.5 s of load per run). Not exercised any more: at 0.5 s,
/// about 330 requests, the narrow range's 1,000 client ports do not wrap, so no SYN meets a
/// server TIME_WAIT socket of its own address pair, as with the shipped 2 s (about 1,300
/// requests); nothing here asserted on that.
const RUN_SCALE: f64 = 0.05;

/// What the whole sweep may take here: 16 labs, 0.5 s of load each, and the same 58 s for the
/// labs and the harness that the shipped 2 s runs were allowed (90 s less 32 s of load).
const BUDGET: Duration = Duration::from_secs(66);

#[test]
fn specweb96_quick_serves_the_mix_in_every_configuration() {
    tcplab_lab::require_root("the SPECweb96 scenario test").unwrap();
    let t = Instant::now();
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/specweb96.toml");
    let mut file = ScenarioFile::load(&path).unwrap_or_else(|e| panic!("{e}"));
    file.scenario.quick.scale = RUN_SCALE;
    let plan = Plan::new(
        &file,
        PlanOptions {
            quick: true,
            ..PlanOptions::default()
        },
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(&dir.path().join("specweb96.db"), &plan).unwrap();
    // Labs are registered under the temporary state directory; the executor removes each when
    // the next is built and the last when the sweep finishes (and `Drop` on a panic).
    let mut exec = LabExecutor::new(StateDir::at(dir.path().join("state")), "sw96");
    let report = sweep(&plan, &store, &mut exec, SweepOptions::default()).unwrap();
    assert_eq!(report.executed, plan.runs.len());
    let runs = store.runs().unwrap();
    let failed: Vec<_> = runs.iter().filter(|r| r.status != "ok").collect();
    assert!(
        failed.is_empty(),
        "{:?}",
        failed.iter().map(|r| &r.error).collect::<Vec<_>>()
    );
    for r in &runs {
        let m = &r.metrics;
        let ops = m["ops_per_s"];
        // 100 Mbit/s over a ~15 KB mean response bounds SPECweb96's ops near 850/s.
        assert!(ops > 10.0 && ops < 2_000.0, "ops/s {ops}");
        assert!(m["mean_response_ms"] > 0.5, "{m:?}");
        assert!(m["requests"] > 0.0 && m.contains_key("errors"), "{m:?}");
        for key in [
            "time_wait.max",
            "server_time_wait.max",
            "errors_total.addrnotavail",
            "server.TcpExt.ListenOverflows",
        ] {
            assert!(m.contains_key(key), "{key} in {m:?}");
        }
        // A connection per request leaves TIME_WAIT behind on one side or the other.
        assert!(
            m["time_wait.max"] + m["server_time_wait.max"] > 0.0,
            "{m:?}"
        );
    }
    let text = String::from_utf8(store.samples(runs[0].id).unwrap()).unwrap();
    assert!(text.starts_with("# tcplab-samples 1 workload=http\n# section=request"));
    assert!(
        text.contains("# section=time_wait host=server"),
        "the server's TIME_WAIT"
    );
    let rows = text.lines().filter(|l| !l.starts_with('#')).count() as f64;
    assert!(rows >= runs[0].metrics["requests"], "a row per request");
    // Without a failed request every field is a number and the report's reader takes the
    // part as workload `http` (a failed request's error name is not a number: the reader then
    // leaves the part out rather than failing the report).
    if runs[0].metrics["errors"] == 0.0 {
        let parts = parse_workloads(&text);
        assert_eq!(parts.len(), 1);
        assert_eq!(parts[0].0, "http");
        assert!(parts[0].1.iter().any(|s| s.kind == "request"));
    }
    // The report is made from the store with no per-run plot for http, and no failure.
    let input = tcplab_study::to_report::report_input(&store).unwrap();
    assert!(input.intervals.is_empty() && input.message_delays.is_empty());
    let elapsed = t.elapsed();
    assert!(elapsed < BUDGET, "the quick sweep took {elapsed:?}");
}
