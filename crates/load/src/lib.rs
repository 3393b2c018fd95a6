//! tcplab-load: the workloads of tcplab, both sides, and their measurement.
//!
//! # Map
//! ```text
//! front ──► place (where: --to ADDR | --lab NAME ─► lab) ──► <workload>::run_client ──► Report
//!                                                        │ session (control protocol, client side)
//!  server::Server ──► <workload>::serve                  │ proto (length-prefixed JSON frames,
//!        (one thread per test, data listener per test)   │   bulk: binary per-message arrays)
//!   agent (limits, admission, handshake, socket filters, │ auth (keys, Noise XX handshake and
//!          the watch that stops tests past a limit)      │   sealed records sans-IO, channel)
//!                                                        ▼
//!                               net (sockets with options before connect/listen, timeouts)
//!                               sockopt (apply + read back) · tcpinfo (TCP_INFO) · clock
//!                               sysinfo + sockdiag (netstat counters, TIME_WAIT of this netns)
//! stats (summaries/percentiles, post-run) · samples (raw samples file) · report (JSON, text)
//! live (--ndjson of msgs/rr/crr: a reporter thread reading counters the timed loop publishes)
//! units (durations, byte counts, rates, size lists as people write them)
//! remote (a coordinator's asks of an agent: facts, clock offset, run_from, SysctlHold)
//! ```
//!
//! This crate parses no flags: crates/cli does, into the configs and plain options that
//! [`front`] (and [`http::front`]) run and print.
//!
//! Workloads, one module each, each with a serde config (`validate` names the flag), a
//! `run_client(cfg, target, facts, ..) -> Result<XResult>` (msgs, rr and crr also a
//! `run_client_live` that reports each interval as it closes) and a server routine:
//! - [`stream`]: bulk throughput, N flows, up/down/bidir, interval tcp_info, CPU per GB.
//! - [`msgs`]: sfperf: N messages of S bytes, per-message send/receive stamps, stalls, sweeps.
//! - [`rr`]: request/response, closed loop with depth or open loop with CO correction, HDR
//!   (a directory: configuration and results, the timed loops, the server side).
//! - [`crr`]: connect/request/response/close, connect times, SYN retransmits, TIME_WAIT.
//! - [`rrul`]: latency under load: an open-loop rr test of small probes for the whole span
//!   and a stream test for the middle of it, composed over the same control protocol; the
//!   probes split into before/during/after by the load's measured edges.
//!
//! Measurement loops do not allocate, log or lock: stamps (CLOCK_MONOTONIC ns) go into arrays
//! and histograms sized before the run; atomics are the only shared state. Every wait has a
//! timeout (SO_RCVTIMEO/SO_SNDTIMEO or poll); a peer that goes away mid-test yields a partial
//! result with `complete: false` and the reason.
//!
//! [`lab`] runs both sides inside a tcplab lab (crates/lab): the server bound to the server
//! host's lab address on a thread entered into that host, the client on a thread entered into
//! the client host; the lab's facts go into the result.
//!
//! Every control connection is authenticated both ways and sealed ([`auth`]); the server is
//! the fleet's agent ([`agent`]): keys, loopback-and-lab scope without keys, and limits
//! (docs/fleet.md). The server listens on [`proto::DEFAULT_PORT`] (5301) by default. JSON output follows
//! `schema/result.schema.json`; raw samples follow docs/samples.md; the JSON result is documented in docs/results.md.

pub mod agent;
pub mod auth;
pub mod bulk;
pub mod client;
pub mod clock;
pub mod crr;
pub mod error;
pub mod front;
pub mod http;
pub mod lab;
pub mod live;
pub mod msgs;
mod net;
pub mod place;
pub mod proto;
pub mod remote;
/// The result of every workload and its human form (`tcplab_results::report`).
pub use tcplab_results::report;
pub mod rr;
pub mod rrul;
pub mod samples;
pub mod sched;
pub mod server;
pub mod session;
pub mod sockdiag;
pub mod sockopt;
pub mod stamplog;
/// Summaries and percentiles of a result (`tcplab_results::stats`).
pub use tcplab_results::stats;
pub mod stream;
pub mod sysinfo;
pub mod tcpinfo;
pub mod units;

pub use error::{LoadError, Result};
pub use report::Report;
pub use server::Server;
