//! tcplab-results: what tcplab measures, as plain data. Workload configurations and results,
//! the facts that explain them, the link emulator's counters and fidelity verdict, and the raw
//! samples text format, each a serde type with the pure functions that belong to it (checks
//! that name the flag, derived figures, the human form, the samples writer and parser).
//!
//! No sockets, no system calls, no clock, no disk: the crates that run things (`tcplab-load`
//! the workloads, `tcplab-lab` the labs and their facts, `tcplab-emu-io` the emulator) fill
//! these types and re-export them from their old paths, and the crates that only read results
//! (`tcplab-doctor`, the study's store → report mapping, tune's evidence) depend on this crate
//! instead of on them.
//!
//! # Map
//! ```text
//! report::Report ── stream · msgs · rr · crr · rrul (phase: before/during/after, pure) · http
//!   │                 each: XConfig (validate → ConfigError naming the flag), XResult, XInterval
//!   ├─ session::RunMeta (every result's common record; facts as JSON; the server's own
//!   │    view of the run, peer::PeerView)
//!   ├─ sockopt::{SockOpts, AppliedOpts} · tcpinfo::TcpInfo · stats (summaries, percentiles)
//!   └─ Display: the human form
//! samples ── the `--samples` text: write to any `Write`, parse back into sections
//! facts::Facts ── kernel, HZ, CPUs, congestion control, per-host sysctls and interfaces
//! emulator ── counters snapshot, Need, end-of-run verdict (Fidelity), one run's verdict and
//!             account (RunFidelity, RunAccount)
//! ```
//!
//! JSON output follows `schema/result.schema.json` and docs/results.md; raw samples follow
//! docs/samples.md. The serde attributes here are the format: change them with the schema.

pub mod crr;
pub mod emulator;
pub mod error;
pub mod facts;
pub mod http;
pub mod msgs;
pub mod peer;
pub mod report;
pub mod rr;
pub mod rrul;
pub mod run_facts;
pub mod samples;
pub mod session;
pub mod sockopt;
pub mod spec;
pub mod stamps;
pub mod stats;
pub mod stream;
pub mod tcpinfo;
pub mod units;

pub use error::ConfigError;
pub use facts::Facts;
pub use report::Report;
