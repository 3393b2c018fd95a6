//! The rules, one module each. A rule reads the shared [`Context`] and returns zero or more
//! findings; it stays silent when its input is missing (the `untrustworthy` rule says what
//! was missing instead). Every threshold is a named constant with the reason for its value.

use crate::battery::Context;
use crate::finding::Finding;
use crate::plan::PartKind;

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

/// One rule: its name, the function, and the parts of the battery its findings rest on (what
/// a caveat about one part's measurement, `untrustworthy.*`, weighs on; a rule that sets
/// `Finding::rests_on` itself, as `untrustworthy` does, keeps its own).
#[derive(Debug)]
pub struct RuleEntry {
    /// The rule's name: its findings' id, or their prefix.
    pub name: &'static str,
    /// The rule.
    pub check: Rule,
    /// The parts whose results its verdicts are built from.
    pub reads: &'static [PartKind],
}

const fn rule(name: &'static str, check: Rule, reads: &'static [PartKind]) -> RuleEntry {
    RuleEntry { name, check, reads }
}

use PartKind::{Crr, Http, Msgs, MsgsSweep, MsgsTrap, Rr, Rrul, Stream, Train};

/// The parts whose message and request timings the stall rules read.
const TIMINGS: &[PartKind] = &[Msgs, MsgsSweep, MsgsTrap, Rr];

/// Every rule, in the order their findings are listed at equal severity.
pub const RULES: &[RuleEntry] = &[
    rule("untrustworthy", untrustworthy::check, &[]),
    rule("connection_trouble", connection::check, &[Crr, Http]),
    rule("periodic_stall", periodic_stall::check, TIMINGS),
    rule("delayed_ack_stall", delayed_ack::check, TIMINGS),
    rule("rwnd_limited", buffers::check_rwnd, &[Stream, Train]),
    rule("sndbuf_limited", buffers::check_sndbuf, &[Stream, Train]),
    // The bulk flow, and the paced parts that say whether the path itself loses.
    rule("loss_limited", loss::check, &[Stream, Train, Msgs, Rr, Crr]),
    rule("mtu_blackhole", blackhole::check, &[Stream, Rr]),
    rule("receiver_limited", endpoint::check_receiver, &[Stream]),
    rule("cpu_limited", endpoint::check_cpu, &[Stream]),
    rule("bufferbloat", queue::check_bloat, &[Stream, Train, Rrul]),
    rule(
        "shallow_queue",
        queue::check_shallow,
        &[Stream, Train, Rrul, Msgs],
    ),
    rule("reordering", reorder::check, &[Stream]),
];
