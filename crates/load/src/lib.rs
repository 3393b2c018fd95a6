//! tcplab-load: the workloads of tcplab, both sides, and their measurement.
//!
//! # Map
//! ```text
//! <workload>::run_client ──► session (control protocol, client side: connect, the client's
//!      │  (client::run: the     half of the handshake, Hello, Ready) ──► Report
//!      │   one dispatch)      proto (length-prefixed JSON frames over the sealed channel of
//!      │                        tcplab_auth; bulk: binary per-message arrays; cause: why a
//!      │                        peer refused)
//! serve::routine ──► <workload>::serve(serve_ctx::ServerCtx) — run by the agent
//!      (tcplab_agent), which hands each test a TestGuard that holds its data sockets
//!                                                        ▼
//!                               net (sockets with options before connect/listen, timeouts)
//!                               sockopt (apply + read back) · tcpinfo (TCP_INFO) · clock
//!                               bpf (socket filters: only lab addresses, only one client)
//!                               sysinfo + sockdiag (netstat counters, TIME_WAIT of this netns)
//! stats (summaries/percentiles, post-run) · samples (raw samples file) · report (JSON, text)
//! live (--ndjson of msgs/rr/crr: a reporter thread reading counters the timed loop publishes)
//! units (durations, byte counts, rates, size lists as people write them)
//! http (HTTP/1.1 load: the response reader, the client's loops, the built-in file server)
//! ```
//!
//! This crate parses no flags and links no lab: crates/cli parses the flags, and
//! `tcplab_front` places a run (a remote agent, or two hosts of a lab, with the emulator's
//! verdict) and prints it. The server around the workloads' server routines, and the asks, are
//! `tcplab_agent`'s; keys and the sealed channel are `tcplab_auth`'s.
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
//! Every control connection is authenticated both ways and sealed (`tcplab_auth`); the server
//! is the fleet's agent (`tcplab_agent`): keys, loopback-and-lab scope without keys, and limits
//! (docs/fleet.md). The server listens on [`proto::DEFAULT_PORT`] (5301) by default. JSON output follows
//! `schema/result.schema.json`; raw samples follow docs/samples.md; the JSON result is documented in docs/results.md.

pub mod bpf;
pub mod bulk;
pub mod cause;
pub mod client;
pub mod clock;
pub mod crr;
pub mod error;
pub mod http;
pub mod live;
pub mod msgs;
pub mod net;
pub mod proto;
/// The result of every workload and its human form (`tcplab_results::report`).
pub use tcplab_results::report;
pub mod rr;
pub mod rrul;
pub mod samples;
pub mod sched;
pub mod serve;
pub mod serve_ctx;
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
