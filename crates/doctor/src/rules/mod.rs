//! The rules, one module each. A rule reads the shared [`Context`] and returns zero or more
//! findings; it stays silent when its input is missing (the `untrustworthy` rule says what
//! was missing instead). Every threshold is a named constant with the reason for its value.

use crate::battery::Context;
use crate::finding::Finding;

pub mod blackhole;
pub mod buffers;
pub mod connection;
pub mod delayed_ack;
pub mod endpoint;
pub mod explain;
pub mod fixes;
pub mod loss;
pub mod periodic_stall;
pub mod probes;
pub mod queue;
pub mod reorder;
pub mod shallow;
pub mod stream_view;
pub mod untrustworthy;

/// Signature every rule has.
pub type Rule = fn(&Context<'_>) -> Vec<Finding>;

/// Every rule, in the order their findings are listed at equal severity.
pub const RULES: &[(&str, Rule)] = &[
    ("untrustworthy", untrustworthy::check),
    ("connection_trouble", connection::check),
    ("periodic_stall", periodic_stall::check),
    ("delayed_ack_stall", delayed_ack::check),
    ("rwnd_limited", buffers::check_rwnd),
    ("sndbuf_limited", buffers::check_sndbuf),
    ("loss_limited", loss::check),
    ("mtu_blackhole", blackhole::check),
    ("receiver_limited", endpoint::check_receiver),
    ("cpu_limited", endpoint::check_cpu),
    ("bufferbloat", queue::check_bloat),
    ("shallow_queue", queue::check_shallow),
    ("reordering", reorder::check),
];
