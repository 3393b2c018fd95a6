//! # tcplab-study: declare an experiment once, run it reproducibly, keep every result
//!
//! A *study* is a scenario file (TOML, see docs/scenarios.md) run as a sweep: every
//! configuration of its factors, repeated, in a seeded interleaved order, each run written to
//! a SQLite file the moment it ends, so a study killed at any point resumes where it stopped.
//!
//! ## Map
//! ```text
//! scenario.toml ─► scenario::ScenarioFile::parse ──(errors: span → file:line:col, field, did-you-mean)
//!                    │ workload (flat [[workload]] tables)      span (offsets ↔ field paths)
//!                    ▼
//!                  plan::Plan::new ─ factor (names → Target, values/ranges, apply)
//!                    │ configurations × repetitions, blocked random order (seed)
//!                    ▼
//!                  runner::sweep ─► Executor::run (executor::LabExecutor, remote::RemoteExecutor, mock)
//!                    │   │  LabExecutor: labsession::LabSession (lab + its server, kept between
//!                    │   │  runs; reset = "reset": sysctls back to fresh values, tcp_metrics flush;
//!                    │   │  worker::HostWorker: a thread kept in each host for writes and the client)
//!                    │   │  samples packed by codec (delta + varint); RunTiming per run
//!                    │   racing rounds (tcplab_stats::race_round)      progress bar (stderr)
//!                    ▼
//!                  store::Store (SQLite: study, configuration, run, race, sweep_session)
//!                    │   samples LZ4-compressed; schema 1 files upgraded, their zlib rows read
//!                    ▼
//!                  export (CSV, JSON), to_report (→ tcplab-report)
//! ```
//! Pure layers (no I/O, no clock): [`span`], [`workload`], [`scenario`] parsing from text,
//! [`factor`], [`plan`], [`codec`]. I/O: [`store`] (the file), [`runner`] (the clock, the
//! executor, the progress bar), [`executor`], [`labsession`], [`worker`] and [`tcp_metrics`]
//! (labs, sockets, netlink), [`export`] (writers).
//!
//! Where a sweep's time goes is measured, not guessed: every run stores its
//! [`RunTiming`] (the workloads' own time, lab, packing), and every `sweep` call stores an
//! [`Overhead`] (wall time minus the workloads' own time, split into labs, harness, packing,
//! storing, statistics and scheduling) in `sweep_session`.
//!
//! ## Use
//! ```
//! use tcplab_study::{Plan, PlanOptions, ScenarioFile};
//! let text = r#"
//! name = "nagle"
//! repetitions = 3
//! objective = { metric = "per_message_us.mean", goal = "minimise" }
//! [[workload]]
//! kind = "msgs"
//! count = 100000
//! [[factor]]
//! name = "socket.nodelay"
//! values = [false, true]
//! [[factor]]
//! name = "link.delay"
//! range = "1ms..40ms"
//! steps = 3
//! scale = "log"
//! "#;
//! let file = ScenarioFile::parse("nagle.toml", text)?;
//! let plan = Plan::new(&file, PlanOptions::default())?;
//! assert_eq!(plan.configurations.len(), 2 * 3);
//! assert_eq!(plan.runs.len(), 6 * 3);
//! assert_eq!(plan.configurations[1].label, "socket.nodelay=false, link.delay=6.32ms");
//! # Ok::<(), tcplab_study::ScenarioError>(())
//! ```

pub mod codec;
pub mod error;
pub mod executor;
pub mod export;
pub mod factor;
pub mod labsession;
pub mod mock;
pub mod plan;
pub mod remote;
pub mod runner;
pub mod scenario;
pub mod span;
pub mod store;
pub mod tcp_metrics;
pub mod to_report;
pub mod worker;
pub mod workload;

pub use error::{Diagnostic, ScenarioError, StoreError, StudyError};
pub use plan::{Configuration, Plan, PlanOptions, PlannedRun};
pub use runner::{
    Executor, Fidelity, Overhead, RunError, RunOutcome, RunTiming, SweepOptions, SweepReport, sweep,
};
pub use scenario::{Scenario, ScenarioFile};
pub use store::Store;
