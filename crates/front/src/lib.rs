//! tcplab-front: the workload commands once their flags are parsed (crates/cli parses them into
//! the workloads' configs and these options): where both sides run (a remote agent, or two hosts
//! of a lab), lab runs with the emulator's verdict, and printing.
//!
//! # Map
//! ```text
//! commands (stream, msgs, rr, crr, rrul) ─► place: --to ADDR ─► the workload's client
//!                                                 │ --lab NAME ─► lab::run_on ─┐
//! http (tcplab http) ─► --to ADDR ─► tcplab_load::http::run                   │
//!                       --lab NAME ─► http::lab (built-in server or nginx) ─┐  │
//!                                                                          ▼  ▼
//!   server: tcplab_agent::Server in the server host · client in the client host · facts ·
//!   an emulated lab's verdict over the run (judge_workload) ─► Report ─► output
//! serve (tcplab serve) ─► tcplab_agent::Server + the built-in HTTP file server
//! ```
//! - [`commands`]: the client commands' options and runs; [`serve`]: `tcplab serve`.
//! - [`place`]: where the two sides run, and the target addresses people write.
//! - [`lab`]: both sides in a lab; what a workload's figures need of the emulator, and its
//!   verdict over one run recorded in the result's facts.
//! - [`http`]: `tcplab http`'s options and run; [`http::lab`]: HTTP runs in a lab.
//! - [`output`]: the result as text, JSON or NDJSON, raw samples, errors, exit codes.
//!
//! The workloads, their clients and their server routines are `tcplab_load`'s; the server
//! around them is `tcplab_agent`'s; labs are `tcplab_lab`'s. This crate is the only one of the
//! workload crates that links the emulator, through the lab.

pub mod commands;
pub mod http;
pub mod lab;
pub mod output;
pub mod place;
pub mod serve;

pub use commands::{ClientOptions, run_crr, run_msgs, run_rr, run_rrul, run_stream};
pub use output::{Output, print_error};
pub use serve::ServeOptions;
