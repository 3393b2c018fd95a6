//! Reports for tcplab: results in, text/SVG/HTML out. Pure: no clock, no disk, no network; the
//! caller (the `tcplab report` command) writes the strings to files or the terminal.
//!
//! The map:
//!
//! | module | job |
//! |---|---|
//! | [`model`] | the input: [`ReportInput`] with its [`ConfigurationResult`]s, message delays, interval counters (serde, filled by the study store) |
//! | [`label`] | short, distinct configuration labels (`rmem=7.6M cc=bbr`) and the key back to the full settings |
//! | [`table`] | [`Table::from_input`]: every figure from `tcplab_stats` (describe, rank); the terminal table fitted to a width, Markdown |
//! | [`text`] | terminal layout: width, colour, wrapping |
//! | `export` | [`Table::to_json`], [`Table::to_ndjson`] and [`Table::to_csv`] of the rows |
//! | [`plot`] | SVG plots, each a pure function returning a `String`: objective vs a factor with CI bands, stall scatter, CDFs, box plots, time series |
//! | [`html`] | [`html::render`]: one self-contained HTML page with tables, inline SVGs, facts and the scenario |
//! | [`compare`] | [`compare::compare`]: studies side by side (before/after a kernel, host or code change): configurations matched by their factors, one set of labels, ratios to the first study with bootstrap CIs and Welch/Holm verdicts, the facts that differ; text, Markdown, JSON and a one-file HTML page |
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
//! input.shorten_labels(); // "nodelay=1": only the factors that vary, abbreviated
//! let table = Table::from_input(&input)?;
//! assert_eq!(table.rows[0].label, "nodelay=1"); // ranked first
//! // Seconds shown in the unit their magnitude reads best in.
//! assert!(table.to_text().contains("nodelay=1              250 ± 55"));
//! # Ok::<(), tcplab_report::ReportError>(())
//! ```

pub mod compare;
mod error;
mod export;
pub mod html;
pub mod label;
pub mod model;
mod num;
pub mod plot;
pub mod table;
pub mod text;
pub use tcplab_stats::units;

pub use error::ReportError;
pub use model::{
    ConfigurationResult, IntervalSample, IntervalSeries, LatencyUnderLoad, MessageDelays,
    ObjectiveSpec, ReportInput, SweepPlotSpec, TimeLine,
};
pub use table::{Table, TableRow};
