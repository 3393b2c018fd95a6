//! Per-sample series taken out of the load results: one value per message or transaction, in
//! sequence order, in seconds. Interval averages are never turned into series: a periodic
//! pattern must be in the per-message data (see `tcplab_stats::stall`).

use tcplab_results::msgs::{MsgsResult, MsgsRun};
use tcplab_results::rr::RrPoint;
use tcplab_results::session::RunMeta;

use crate::battery::Battery;

/// One per-sample series.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Name as in the samples file, e.g. `msgs size=16 message`.
    pub source: String,
    /// Message or request size, bytes.
    pub size: u32,
    /// What the values measure: `one-way delay`, `receive gap` or `rr latency`.
    pub measure: &'static str,
    /// One value per sample, seconds.
    pub values: Vec<f64>,
    /// The network's share of each value when nothing stalls: RTT/2 for one-way delays, RTT
    /// for a request/response, 0 for receive gaps (what an excess is measured from).
    pub rtt_multiple: f64,
    /// TCP_NODELAY on the sending socket as read back (`None` when not recorded).
    pub sender_nodelay: Option<bool>,
    /// Whether this kernel has TCP_DELACK_MAX_US (read back as a value, not null).
    pub delack_max_supported: Option<bool>,
    /// SO_SNDBUF the workload set explicitly (autotuning off), bytes.
    pub sndbuf: Option<u32>,
    /// SO_RCVBUF the workload set explicitly, bytes.
    pub rcvbuf: Option<u32>,
}

/// One-way delays of a msgs run (recv − send, same CLOCK_MONOTONIC), `None` without stamps.
pub fn one_way_delays(run: &MsgsRun) -> Option<Vec<f64>> {
    if run.send_ns.is_empty() || run.recv_ns.is_empty() {
        return None;
    }
    Some(
        run.send_ns
            .iter()
            .zip(run.recv_ns.iter())
            .map(|(s, r)| r.saturating_sub(s) as f64 / 1e9)
            .collect(),
    )
}

/// Receive gaps of a msgs run: value i is `recv[i] − recv[i−1]` (0 for the first message), so a
/// stall that holds up the whole stream shows at the index of the message it delayed even when
/// back-to-back sending keeps the one-way delays queued up. `None` without stamps.
pub fn receive_gaps(run: &MsgsRun) -> Option<Vec<f64>> {
    let first = run.recv_ns.first()?;
    let mut prev = first;
    Some(
        run.recv_ns
            .iter()
            .map(|r| {
                let g = r.saturating_sub(prev) as f64 / 1e9;
                prev = r;
                g
            })
            .collect(),
    )
}

/// Uncorrected latencies (response done − request sent) of an rr point.
pub fn rr_latencies(point: &RrPoint) -> Vec<f64> {
    point
        .samples
        .iter()
        .map(|s| s.done_ns.saturating_sub(s.sent_ns) as f64 / 1e9)
        .collect()
}

/// TCP_NODELAY of the client's data socket (the sender of msgs and of rr requests).
fn sender_nodelay(meta: &RunMeta) -> Option<bool> {
    meta.options.as_ref().map(|o| o.nodelay)
}

/// TCP_DELACK_MAX_US is read back as a number on kernels that have it (6.15+), null otherwise.
fn delack_max_supported(meta: &RunMeta) -> Option<bool> {
    let sides = [meta.options.as_ref(), meta.server_options.as_ref()];
    let known: Vec<bool> = sides
        .into_iter()
        .flatten()
        .map(|o| o.delack_max_us.is_some())
        .collect();
    (!known.is_empty()).then(|| known.iter().any(|&b| b))
}

fn msgs_series(result: &MsgsResult, gaps: bool, out: &mut Vec<Series>) {
    for run in &result.runs {
        let (measure, values) = if gaps {
            ("receive gap", receive_gaps(run))
        } else {
            ("one-way delay", one_way_delays(run))
        };
        if let Some(values) = values.filter(|_| !run.send_ns.is_empty()) {
            out.push(Series {
                source: format!("msgs size={} message", run.size),
                size: run.size,
                measure,
                values,
                rtt_multiple: if gaps { 0.0 } else { 0.5 },
                sender_nodelay: sender_nodelay(&result.meta),
                delack_max_supported: delack_max_supported(&result.meta),
                sndbuf: result.config.opts.sndbuf,
                rcvbuf: result.config.opts.rcvbuf,
            });
        }
    }
}

/// Every per-message one-way delay series of the battery's msgs runs (small run first, then
/// the sweep).
pub fn message_series(battery: &Battery) -> Vec<Series> {
    let mut out = Vec::new();
    for r in [&battery.msgs, &battery.msgs_sweep].into_iter().flatten() {
        msgs_series(r, false, &mut out);
    }
    out
}

/// Every per-message receive-gap series, in the same order as [`message_series`].
pub fn message_gap_series(battery: &Battery) -> Vec<Series> {
    let mut out = Vec::new();
    for r in [&battery.msgs, &battery.msgs_sweep].into_iter().flatten() {
        msgs_series(r, true, &mut out);
    }
    out
}

/// Every per-message and per-transaction latency series of messages up to `max_size` bytes.
pub fn small_message_series(battery: &Battery, max_size: u32) -> Vec<Series> {
    let mut out: Vec<Series> = message_series(battery)
        .into_iter()
        .filter(|s| s.size <= max_size)
        .collect();
    if let Some(rr) = &battery.rr {
        for p in rr.points.iter().filter(|p| p.req <= max_size) {
            let values = rr_latencies(p);
            if !values.is_empty() {
                out.push(Series {
                    source: format!("rr req={} resp={} transaction", p.req, p.resp),
                    size: p.req,
                    measure: "rr latency",
                    values,
                    rtt_multiple: 1.0,
                    sender_nodelay: sender_nodelay(&rr.meta),
                    delack_max_supported: delack_max_supported(&rr.meta),
                    sndbuf: rr.config.opts.sndbuf,
                    rcvbuf: rr.config.opts.rcvbuf,
                });
            }
        }
    }
    out
}
