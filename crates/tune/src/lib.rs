//! # tcplab-tune: the parts put together
//!
//! - [`battery`]: the doctor's battery of workloads on one path (a lab or a remote
//!   `tcplab serve`), sized to a time budget, feeding `tcplab_doctor::diagnose`.
//! - [`evidence`]: the battery's raw samples as report series (intervals, per-message delays,
//!   latency under load), labelled `doctor · …`, for a report that shows the doctor's evidence.
//! - [`candidates`]: settings worth trying, from the findings' fixes and from known-good presets
//!   per workload (pure).
//! - [`tune`]: a generated scenario racing the candidates with the study machinery, then the
//!   winner verified against the baseline on fresh repetitions, and the lines to apply.
//!
//! The crate reads no clock of its own for measurement: workloads and the study runner do.

pub mod battery;
pub mod candidates;
pub mod corpus;
pub mod error;
pub mod evidence;
pub mod tune;

pub use error::{Result, TuneError};
