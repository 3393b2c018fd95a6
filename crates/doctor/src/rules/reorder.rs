//! `reordering`: the path delivers packets out of order (a reordering element, or jitter larger
//! than the packets' spacing on a path that lets it reorder).
//!
//! The sender's own count says it: tcp_info `reord_seen` counts reordering events the sender
//! detected (from SACK, D-SACK or timestamps), which loss alone does not raise, and its
//! `reordering` grows past the initial three segments as it learns to tolerate more. Out of
//! order data costs a sender that takes it for loss spurious retransmissions (D-SACK reports
//! them, `dsack_dups`) and window cuts; RACK-TLP (Linux 4.18+) copes with much of it, so the
//! finding is a warning when the flow kept the path full and an error when it did not.

use crate::battery::Context;
use crate::finding::{Finding, Fix, Severity};
use crate::rules::stream_view::{FlowSpan, StreamView};

/// Reordering events per data segment from which a path "reorders": one in a thousand
/// segments is far above what a healthy path shows (zero on a single link; rare events on
/// multipath fabrics), and enough to keep RACK's window open.
pub const MIN_REORDER_SHARE: f64 = 0.001;

/// Fewest events for a finding, whatever the share.
pub const MIN_REORDER_EVENTS: u64 = 20;

pub use crate::limits::PATH_FULL_SHARE;

/// The rule.
pub fn check(ctx: &Context<'_>) -> Vec<Finding> {
    let Some(stream) = &ctx.battery.stream else {
        return Vec::new();
    };
    let Some(view) = StreamView::of(stream) else {
        return Vec::new();
    };
    let sum = |f: fn(&FlowSpan) -> u64| -> u64 { view.flows.iter().map(f).sum() };
    let events = sum(FlowSpan::reord_seen);
    let segments = sum(FlowSpan::data_segs_out).max(1);
    let share = events as f64 / segments as f64;
    if events < MIN_REORDER_EVENTS || share < MIN_REORDER_SHARE {
        return Vec::new();
    }
    let spurious = sum(FlowSpan::dsack_dups);
    let retrans = sum(FlowSpan::retrans_segments);
    let rate = ctx.rate_bps();
    let full = rate.is_some_and(|r| view.throughput_bps >= PATH_FULL_SHARE * r);
    // Between two hosts of an unshaped lab the only reordering is the kernel's own: a sender
    // that moves between CPUs queues its segments on different CPUs' backlogs. Worth knowing,
    // nothing on a path to fix.
    let host_made = ctx.unshaped_lab();
    let severity = if host_made {
        Severity::Info
    } else if full {
        Severity::Warning
    } else {
        Severity::Error
    };
    let tolerated = view
        .flows
        .iter()
        .map(|f| f.end.reordering)
        .max()
        .unwrap_or(0);
    let mut f = Finding::new(
        "reordering",
        severity,
        format!(
            "the path reorders packets: {events} reordering events in {segments} segments ({:.2}%)",
            share * 100.0
        ),
    );
    f.push(
        "reorder_events",
        events as f64,
        "events",
        "tcp_info reord_seen of the sending flows, measured span",
    );
    f.push(
        "reorder_share",
        share,
        "fraction",
        "events per data segment sent",
    );
    f.push(
        "reordering_tolerated",
        f64::from(tolerated),
        "segments",
        "the sender's reordering degree (tcp_info reordering; 3 without reordering)",
    );
    f.push(
        "spurious_retransmissions",
        spurious as f64,
        "segments",
        format!("reported as duplicates by the receiver (D-SACK), of {retrans} retransmitted"),
    );
    f.push(
        "throughput_bps",
        view.throughput_bps,
        "bit/s",
        "stream, after warm-up",
    );
    if let Some(r) = ctx.rate() {
        f.push("path_rate_bps", r.bps, "bit/s", r.context());
    }
    f.explanation = format!(
        "Packets arrive in another order than they were sent. A sender that takes the gap for a loss retransmits ({spurious} of {retrans} retransmissions were not needed) and cuts its window; Linux's RACK adapts its reordering window, so the cost is {}. Common causes: parallel paths (ECMP, link aggregation) that split a flow, a NIC or driver spreading one flow over queues, or jitter on a link that does not keep order.",
        if full {
            "small here (the path stayed full), but other stacks and UDP protocols suffer more"
        } else {
            "lost throughput here"
        }
    );
    if host_made {
        f.explanation = format!(
            "Both ends run on this machine and nothing shapes the path between them, so the reordering is the kernel's own: a sender that moves between CPUs queues its segments on different CPUs' backlogs, which drain out of order ({spurious} of {retrans} retransmissions were not needed). A real path does not see this; pinning the sender to one CPU (taskset) removes it."
        );
        return vec![f];
    }
    f.fixes.push(Fix::other(
        "keep each flow on one path: hash ECMP/LAG on the 5-tuple, one RX queue per flow (RSS), no per-packet load balancing",
        "the path",
    ));
    f.fixes.push(Fix::other(
        "let the sender tolerate it: net.ipv4.tcp_recovery = 1 (RACK, the default) and tcp_reordering above 3 only if RACK is off",
        &ctx.describe_host("sender", crate::battery::Role::Client),
    ));
    vec![f]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::battery::{Battery, PathInfo};
    use crate::synth::{self, StreamSim};

    fn reordered(events_per_interval: u32, bps: f64) -> Battery {
        let mut s = StreamSim::healthy(bps, 20_000).run();
        for (k, i) in s.intervals.iter_mut().enumerate() {
            if let Some(t) = i.tcp_info.as_mut() {
                t.reord_seen = events_per_interval * k as u32;
                t.data_segs_out = 10_000 * k as u32;
                t.dsack_dups = 2 * k as u32;
                t.reordering = 30;
            }
        }
        Battery {
            stream: Some(s),
            facts: Some(synth::facts(250)),
            path: PathInfo {
                rate_bps: Some(100e6),
                ..PathInfo::default()
            },
            ..Battery::default()
        }
    }

    #[test]
    fn reordering_is_named_with_its_cost() {
        let f = check(&Context::new(&reordered(100, 60e6)));
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].severity, Severity::Error, "the path was not full");
        // 10 measured intervals after 2 omitted: 1,000 events in 100,000 segments.
        assert_eq!(f[0].figure("reorder_events"), Some(1000.0));
        assert!((f[0].figure("reorder_share").unwrap() - 0.01).abs() < 1e-12);
        assert_eq!(f[0].figure("reordering_tolerated"), Some(30.0));
        let f = check(&Context::new(&reordered(100, 95e6)));
        assert_eq!(f[0].severity, Severity::Warning, "a full path");
    }

    #[test]
    fn reordering_between_two_hosts_of_an_unshaped_lab_is_the_kernels_own() {
        // The synthetic facts list lab hosts; no emulator and no rate: a bare veth pair.
        let mut b = reordered(100, 60e6);
        b.path.rate_bps = None;
        let f = check(&Context::new(&b));
        assert_eq!(f[0].severity, Severity::Info);
        assert!(
            f[0].explanation.contains("CPUs' backlogs"),
            "{}",
            f[0].explanation
        );
        assert!(f[0].fixes.is_empty());
    }

    #[test]
    fn silent_without_reordering_or_with_a_trace_of_it() {
        assert!(check(&Context::new(&reordered(0, 60e6))).is_empty());
        // 2 events per 10,000 segments per interval: 16 in all, under both bounds.
        assert!(check(&Context::new(&reordered(2, 60e6))).is_empty());
    }
}
