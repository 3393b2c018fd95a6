//! Reports for tcplab: results in, text/SVG/HTML out. Pure: no clock, no disk, no network; the
//! caller (the `tcplab report` command) writes the strings to files or the terminal.
//!
//! The map:
//!
//! | module | job |
//! |---|---|
//! | [`model`] | the input: [`ReportInput`] with its [`ConfigurationResult`]s, message delays, interval counters (serde, filled by the study store) |
//! | [`table`] | [`Table::from_input`]: every figure from `tcplab_stats` (describe, rank); sfperf-style text and Markdown |
//! | `export` | [`Table::to_json`], [`Table::to_ndjson`] and [`Table::to_csv`] of the rows |
//! | [`plot`] | SVG plots, each a pure function returning a `String`: objective vs a factor with CI bands, stall scatter, CDFs, box plots, time series |
//! | [`html`] | [`html::render`]: one self-contained HTML page with tables, inline SVGs, facts and the scenario |
//!
//! To look at a page as a reader will: `crates/report/screenshot.sh` renders the sample report
//! of `examples/sample_report.rs` to /tmp/report.html and screenshots it with headless Chromium.
//!
//! Numbers are never computed here: summaries, intervals, speed-ups and ranks come from
//! `tcplab_stats`; this crate chooses what to show and how to print it.
//!
//! ```
//! use tcplab_report::{ConfigurationResult, ObjectiveSpec, ReportInput, Table};
//! use tcplab_stats::Objective;
//!
//! let objective = ObjectiveSpec { name: "time".into(), unit: "seconds".into(), goal: Objective::Minimise };
//! let configs = vec![
//!     ConfigurationResult::new("nagle", &[("nodelay", "0")], vec![0.41, 0.39, 0.44, 0.40]),
//!     ConfigurationResult::new("nodelay", &[("nodelay", "1")], vec![0.28, 0.19, 0.31, 0.22]),
//! ];
//! let mut input = ReportInput::new("sfperf", objective, configs);
//! input.baseline = Some("nagle".into());
//! let table = Table::from_input(&input)?;
//! assert_eq!(table.rows[0].label, "nodelay"); // ranked first
//! assert!(table.to_text().contains("nodelay: 1  time: 0.250 +/- 0.055"));
//! # Ok::<(), tcplab_report::ReportError>(())
//! ```

mod error;
mod export;
pub mod html;
pub mod model;
mod num;
pub mod plot;
pub mod table;

pub use error::ReportError;
pub use model::{
    ConfigurationResult, IntervalSample, IntervalSeries, LatencyUnderLoad, MessageDelays,
    ObjectiveSpec, ReportInput, SweepPlotSpec, TimeLine,
};
pub use table::{Table, TableRow};
