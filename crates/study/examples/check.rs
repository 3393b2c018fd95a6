//! Validates a scenario file and prints its `--dry-run` listing, or every error with its line.
//!
//! ```text
//! cargo run -p tcplab-study --example check -- FILE [--quick] [--seed N]
//! ```
//! Exit status 2 on a bad scenario, as `tcplab` does.

use std::path::Path;

use tcplab_study::{Plan, PlanOptions, ScenarioFile};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = args.first() else {
        eprintln!("usage: check FILE [--quick] [--seed N]");
        std::process::exit(2);
    };
    let quick = args.iter().any(|a| a == "--quick");
    let seed = args
        .iter()
        .position(|a| a == "--seed")
        .and_then(|i| args.get(i + 1))
        .and_then(|s| s.parse().ok());
    let plan = ScenarioFile::load(Path::new(path))
        .and_then(|f| Plan::new(&f, PlanOptions { seed, quick }));
    match plan {
        Ok(plan) => print!("{}", plan.dry_run()),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    }
}
