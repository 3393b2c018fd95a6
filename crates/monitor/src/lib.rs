//! # tcplab-monitor: a fleet measured continuously
//!
//! `tcplab mesh` measures every ordered pair of a fleet once; the monitor does it again and
//! again, keeps each pair's history, and says when a pair got worse than its own past.
//!
//! ## Map
//! - [`core`](mod@core) (pure): the monitor's decisions in one place (what starts, what a
//!   finished test changes), resumed from the kept runs; the coordinator and the simulation
//!   in its tests drive the same code.
//! - [`schedule`] (pure): which tests start now. Every (pair, workload) slot comes due once
//!   per its workload's interval, jittered by a seeded hash so a restart computes the same
//!   times; no host is ever in two tests at once; the most overdue slot goes first.
//! - [`alerts`] (pure): each result's figures against the pair's own history
//!   (`tcplab_stats::regression`); an alert opens on a regression, keeps the pre-regression
//!   baseline while open, and closes when the pair is back.
//! - [`evidence`] (pure): the doctor's findings on a regressed pair and the cause its alerts
//!   name.
//! - [`figures`] (pure): the few figures kept per result, each with its better direction.
//! - [`metrics`] (pure): the state as an OpenMetrics page (`prometheus-client`), labels
//!   bounded by the fleet.
//! - [`run`]: the coordinator: each test on its own thread through the mesh's `PairRunner`,
//!   each outcome recorded as it ends, the page's snapshot kept current.
//! - [`serve`]: `/metrics` over HTTP (httparse; a bearer token off loopback).
//! - [`text`] (pure): how alerts read in the log and in `tcplab monitor alerts`.
//! - [`webhook`]: each alert's change POSTed as JSON (`--webhook`), from its own thread.
//! - [`store`]: the SQLite history (figures per run, the last full result per slot, alerts
//!   with the doctor's evidence), a run noted twice kept once, pruned to `--keep`.

pub mod alerts;
pub mod core;
pub mod evidence;
pub mod figures;
pub mod metrics;
pub mod run;
pub mod schedule;
pub mod serve;
pub mod store;
pub mod text;
pub mod webhook;

pub use alerts::{Alerts, Event, Watched};
pub use core::{Finished, Monitor, Task, Workload};
pub use evidence::{Cause, Evidence};
pub use schedule::{Cadence, Pair, Schedule, Slot};
pub use tcplab_stats::RegressionConfig;
