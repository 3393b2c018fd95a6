//! Measures the sweep's own overhead (planning, storing, racing statistics) against a mock
//! executor that sleeps for each run, on a shipped scenario.
//!
//! ```text
//! cargo run --release -p tcplab-study --example overhead -- [SCENARIO] [RUN_MS] [--race] [--quick]
//! ```
//! Defaults: `scenarios/balticgrid.toml` of the workspace, 50 ms per run. Prints one line of
//! figures; the progress bar shows on a terminal.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use tcplab_study::mock::MockExecutor;
use tcplab_study::{Plan, PlanOptions, ScenarioFile, Store, SweepOptions, sweep};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flags: Vec<&String> = args.iter().filter(|a| a.starts_with("--")).collect();
    let mut positional = args.iter().filter(|a| !a.starts_with("--"));
    let scenario = positional.next().map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/balticgrid.toml"),
        PathBuf::from,
    );
    let run_ms: u64 = positional.next().map_or(Ok(50), |s| s.parse())?;
    let race = flags.iter().any(|f| *f == "--race");
    let quick = flags.iter().any(|f| *f == "--quick");

    let t = Instant::now();
    let file = ScenarioFile::load(&scenario)?;
    let plan = Plan::new(&file, PlanOptions { seed: None, quick })?;
    let planning = t.elapsed();
    let dir = tempfile::tempdir()?;
    let store = Store::create(&dir.path().join("study.db"), &plan)?;
    let metric = plan.objective.metric.clone();
    let mut exec = MockExecutor::new(&metric, Box::new(|c| Ok(100.0 + c.id as f64)), 0.05, 1)
        .with_delay(Duration::from_millis(run_ms));
    let opts = SweepOptions {
        race,
        progress: true,
        ..SweepOptions::default()
    };
    let report = sweep(&plan, &store, &mut exec, opts)?;
    let t = Instant::now();
    let dump = tcplab_study::export::dump(&store)?;
    let summarising = t.elapsed();
    let wall = report.wall + planning + summarising;
    let own = wall.saturating_sub(report.executor_time);
    println!(
        "{}: {} configurations, {} runs of {run_ms} ms{}: wall {:.3} s, executor {:.3} s; planning {:.1} ms, store {:.1} ms ({:.2} ms/run), racing {:.1} ms, summaries {:.1} ms; overhead {:.2}% ({:.2} ms/run)",
        plan.name,
        plan.configurations.len(),
        report.executed,
        if race { ", racing" } else { "" },
        wall.as_secs_f64(),
        report.executor_time.as_secs_f64(),
        planning.as_secs_f64() * 1e3,
        report.store_time.as_secs_f64() * 1e3,
        report.store_time.as_secs_f64() * 1e3 / report.executed.max(1) as f64,
        report.stats_time.as_secs_f64() * 1e3,
        summarising.as_secs_f64() * 1e3,
        own.as_secs_f64() / wall.as_secs_f64() * 100.0,
        own.as_secs_f64() * 1e3 / report.executed.max(1) as f64,
    );
    println!("{}", report.overhead().line());
    eprintln!("{} configurations summarised", dump.summaries.len());
    Ok(())
}
