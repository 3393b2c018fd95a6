//! What the monitor reads from one pair's result, pure: a few figures per workload, each with
//! its unit and which way is better, and whether regressions of it raise alerts. The full
//! result stays in the database; these are what the metrics page and the alerts are made of.

use serde::{Deserialize, Serialize};
use tcplab_results::report::Report;
use tcplab_stats::Objective;

/// One figure the monitor keeps per pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Figure {
    /// stream: received bits per second.
    ThroughputBps,
    /// stream: TCP retransmissions during the run.
    Retransmits,
    /// rr: median latency, seconds.
    LatencyP50S,
    /// rr: 99th percentile latency, seconds.
    LatencyP99S,
    /// msgs, rr: messages or transactions stalled past the stall threshold.
    Stalls,
    /// crr: connections per second.
    ConnectionsPerS,
}

impl Figure {
    /// Every figure, in the order the metrics page lists them.
    pub const ALL: [Figure; 6] = [
        Figure::ThroughputBps,
        Figure::Retransmits,
        Figure::LatencyP50S,
        Figure::LatencyP99S,
        Figure::Stalls,
        Figure::ConnectionsPerS,
    ];

    /// Its name in alerts and the database.
    pub fn name(self) -> &'static str {
        match self {
            Figure::ThroughputBps => "throughput_bps",
            Figure::Retransmits => "retransmits",
            Figure::LatencyP50S => "latency_p50_s",
            Figure::LatencyP99S => "latency_p99_s",
            Figure::Stalls => "stalls",
            Figure::ConnectionsPerS => "connections_per_s",
        }
    }

    /// Which way is better.
    pub fn objective(self) -> Objective {
        match self {
            Figure::ThroughputBps | Figure::ConnectionsPerS => Objective::Maximise,
            Figure::Retransmits | Figure::LatencyP50S | Figure::LatencyP99S | Figure::Stalls => {
                Objective::Minimise
            }
        }
    }

    /// Whether a regression of it raises an alert: the headline figures do; retransmissions
    /// are context for them (a count that is zero on most runs of a healthy path has no
    /// baseline to compare a share against).
    pub fn alerts(self) -> bool {
        !matches!(self, Figure::Retransmits)
    }
}

/// The figures of one result (those it has: a run cut short may have none).
pub fn of(report: &Report) -> Vec<(Figure, f64)> {
    let mut out = Vec::new();
    let mut put = |f: Figure, v: Option<f64>| {
        if let Some(v) = v.filter(|v| v.is_finite()) {
            out.push((f, v));
        }
    };
    match report {
        Report::Stream(r) => {
            put(Figure::ThroughputBps, r.summary.throughput_bps);
            put(Figure::Retransmits, Some(r.summary.retransmits as f64));
        }
        Report::Rr(r) => {
            put(
                Figure::LatencyP50S,
                r.summary.latency_us.p50.map(|us| us / 1e6),
            );
            put(
                Figure::LatencyP99S,
                r.summary.latency_us.p99.map(|us| us / 1e6),
            );
            if r.summary.transactions > 0 {
                put(Figure::Stalls, Some(r.summary.stalls as f64));
            }
        }
        Report::Msgs(r) => {
            if let Some(run) = r.runs.first().filter(|run| run.received > 0) {
                put(Figure::Stalls, Some(run.stalls as f64));
            }
        }
        Report::Crr(r) => put(Figure::ConnectionsPerS, r.summary.connections_per_s),
        Report::Rrul(_) | Report::Http(_) => {}
    }
    out
}
