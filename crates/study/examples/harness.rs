//! Where a real run's time goes beyond the workload (root): builds a pair lab, starts its
//! server once, then times each step of N msgs runs of a scenario's baseline.
//!
//! ```text
//! cargo run --release -p tcplab-study --example harness -- [SCENARIO] [RUNS]
//! ```

use std::path::PathBuf;
use std::time::Instant;

use tcplab_lab::{Lab, Ownership, StateDir};
use tcplab_study::labsession::LabSession;
use tcplab_study::{Plan, PlanOptions, ScenarioFile};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let scenario = args.next().map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/sfperf.toml"),
        PathBuf::from,
    );
    let runs: usize = args.next().map_or(Ok(10), |s| s.parse())?;
    let plan = Plan::new(&ScenarioFile::load(&scenario)?, PlanOptions::default())?;
    let config = plan.baseline().unwrap_or(&plan.configurations[0]).clone();
    let state = StateDir::from_env();
    let t = Instant::now();
    let lab = Lab::build_in(
        state,
        config.lab_spec(&format!("hx{}", std::process::id() % 10_000))?,
        Ownership::Process,
    )?;
    let build = t.elapsed();
    let t = Instant::now();
    let session = LabSession::start(lab, config.id).map_err(|e| e.to_string())?;
    println!(
        "lab build {:.1} ms, server start {:.1} ms",
        build.as_secs_f64() * 1e3,
        t.elapsed().as_secs_f64() * 1e3
    );
    let lab = session.lab();
    let client = lab.host(session.client())?;
    let w = &config.settings.workloads[0];
    for _ in 0..runs {
        let t = Instant::now();
        let facts = Some(tcplab_lab::facts::collect(lab)?);
        let facts_ms = t.elapsed().as_secs_f64() * 1e3;
        let t = Instant::now();
        let report = client
            .run(|| tcplab_load::client::run(&w.spec, session.addr(), facts))?
            .map_err(|e| e.to_string())?;
        let client_ms = t.elapsed().as_secs_f64() * 1e3;
        let own_ms = tcplab_study::executor::own_time(&report) * 1e3;
        if let tcplab_results::Report::Msgs(m) = &report
            && let Some(p) = m.runs.first().map(|r| r.phases)
        {
            println!(
                "  client phases: setup {:.2} ms, report {:.2} ms, summaries {:.2} ms",
                p.setup_ns as f64 / 1e6,
                p.report_ns as f64 / 1e6,
                p.summary_ns as f64 / 1e6
            );
        }
        let t = Instant::now();
        let doc = serde_json::to_value(&report)?;
        let json_ms = t.elapsed().as_secs_f64() * 1e3;
        let t = Instant::now();
        let mut packed = Vec::new();
        tcplab_study::codec::pack(&report, &mut packed)?;
        let pack_ms = t.elapsed().as_secs_f64() * 1e3;
        let t = Instant::now();
        let blob = lz4_flex::compress_prepend_size(&packed);
        let lz4_ms = t.elapsed().as_secs_f64() * 1e3;
        println!(
            "facts {facts_ms:.2} ms, client {client_ms:.1} ms of which workload {own_ms:.1} ms (harness {:.1} ms), to_value {json_ms:.2} ms, pack {pack_ms:.2} ms ({} B), lz4 {lz4_ms:.2} ms ({} B){}",
            client_ms - own_ms,
            packed.len(),
            blob.len(),
            if doc["complete"] == false {
                " INCOMPLETE"
            } else {
                ""
            }
        );
    }
    untimed_runs(&session, runs);
    session.close();
    control_frame_cost();
    Ok(())
}

/// The same messages without per-message timestamps: no receive stamps travel back and no
/// percentiles are sorted, so the difference to the timed runs' harness is what those cost.
fn untimed_runs(session: &LabSession, runs: usize) {
    let Ok(client) = session.lab().host(session.client()) else {
        return;
    };
    let cfg = tcplab_results::msgs::MsgsConfig {
        count: 100_000,
        size: 1,
        timestamps: false,
        ..Default::default()
    };
    for _ in 0..runs {
        let t = Instant::now();
        let r = client.run(|| tcplab_load::msgs::run_client(&cfg, session.addr(), None));
        let client_ms = t.elapsed().as_secs_f64() * 1e3;
        if let Ok(Ok(r)) = r {
            let own_ms = r.summary.total_s * 1e3;
            println!(
                "untimed: client {client_ms:.1} ms of which workload {own_ms:.1} ms (harness {:.1} ms)",
                client_ms - own_ms
            );
        }
    }
}

/// The msgs server's report travels as one JSON control frame holding every receive stamp:
/// encoding and decoding it for 100,000 messages, and sorting 100,000 values as a percentile
/// summary does, timed alone.
fn control_frame_cost() {
    use tcplab_load::proto::{Ctrl, ServerReport};
    let recv_ns: Vec<u64> = (0..100_000u64)
        .map(|i| 10_512_345_678_901 + i * 1_500)
        .collect();
    let frame = Ctrl::Report(Box::new(ServerReport {
        recv_ns: recv_ns.into(),
        ..Default::default()
    }));
    let t = Instant::now();
    let body = serde_json::to_vec(&frame).unwrap_or_default();
    let enc = t.elapsed();
    let t = Instant::now();
    let back: Result<Ctrl, _> = serde_json::from_slice(&body);
    let dec = t.elapsed();
    let mut v: Vec<f64> = (0..100_000u64)
        .map(|i| ((i * 7919) % 100_003) as f64)
        .collect();
    let t = Instant::now();
    v.sort_by(|a, b| a.total_cmp(b));
    let sort = t.elapsed();
    println!(
        "control frame of 100,000 receive stamps: {} B, encode {:.1} ms, decode {:.1} ms ({}); sorting 100,000 f64 {:.1} ms",
        body.len(),
        enc.as_secs_f64() * 1e3,
        dec.as_secs_f64() * 1e3,
        if back.is_ok() { "ok" } else { "failed" },
        sort.as_secs_f64() * 1e3
    );
}
