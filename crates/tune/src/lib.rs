//! # tcplab-tune: the parts put together
//!
//! The doctor's battery and its corpus are `tcplab-battery`'s; tune starts from its findings.
//!
//! - [`candidates`]: settings worth trying, from the findings' fixes and from known-good presets
//!   per workload (pure).
//! - [`tune`]: a generated scenario racing the candidates with the study machinery, then the
//!   winner verified against the baseline on fresh repetitions, and the lines to apply.
//!
//! The crate reads no clock of its own for measurement: workloads and the study runner do.

pub mod candidates;
pub mod error;
pub mod tune;

pub use error::{Result, TuneError};
