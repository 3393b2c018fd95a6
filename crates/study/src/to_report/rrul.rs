//! rrul samples (sections `phase`, `probe` and the load's `interval`s; docs/samples.md) → one
//! [`LatencyUnderLoad`]: the bulk flows' throughput and the probes' latency on one time axis,
//! the idle latency and when the load ran.
//!
//! ## One time origin
//! Every time here is seconds since the `probe` section's `t0_ns`, the first probe's due time:
//! - `phase` and `probe` are written with the same `t0_ns`, so their stamps compare directly;
//!   should they ever differ, the phases are moved onto the probes' origin.
//! - The load's `interval` sections carry no `t0_ns`: their `start_s`/`end_s` count from the
//!   stream test's start on each side. On the client that start is exactly what rrul measured
//!   as the load's start (`LoadSpan::start_ns`, the earliest `now − end_s` over the client's
//!   interval callbacks), which is the `during` phase's `start_ns`: a client interval ending at
//!   `t` ends at `during.start + t`.
//! - The server starts its clock when it reads the Start frame that the client sent just
//!   before starting its own, one one-way trip later. On the still idle path that trip is half
//!   the idle round trip, so a server interval ending at `t` is placed at
//!   `during.start + idle / 2 + t`; what remains (the two directions' asymmetry, the frame's
//!   scheduling) is far below a 100 ms interval.

use std::collections::BTreeMap;

use tcplab_report::model::{LatencyUnderLoad, TimeLine};
use tcplab_results::samples::Section;

use super::series::{FlowRow, col, interval_rows, median};

/// The latency-under-load view of an rrul run's samples; None without probes.
pub fn latency_under_load(label: &str, sections: &[Section]) -> Option<LatencyUnderLoad> {
    let probe = sections.iter().find(|s| s.kind == "probe")?;
    let probes = probe_rows(probe);
    if probes.is_empty() {
        return None;
    }
    let windows = sections
        .iter()
        .find(|s| s.kind == "phase")
        .map(|s| phase_windows(s, t0_ns(probe)))
        .unwrap_or_default();
    let idle: Vec<f64> = probes
        .iter()
        .filter(|p| p.phase == Some(0))
        .map(|p| p.latency_us)
        .collect();
    let idle_latency_us = median(&idle);
    let load_s = windows.get(&1).copied();
    let throughput = load_s.map_or_else(Vec::new, |(start, _)| {
        let server_lag_s = idle_latency_us.map_or(0.0, |us| us / 2e6);
        throughput_lines(sections, start, start + server_lag_s)
    });
    Some(LatencyUnderLoad {
        label: label.to_string(),
        throughput,
        probes: probes.iter().map(|p| (p.due_s, p.latency_us)).collect(),
        idle_latency_us,
        load_s,
    })
}

/// One probe: when it was due (s since the probes' t0), its latency from then (µs), its phase.
struct Probe {
    due_s: f64,
    latency_us: f64,
    phase: Option<u8>,
}

fn probe_rows(s: &Section) -> Vec<Probe> {
    let (Some(due), Some(done)) = (col(s, "intended_ns"), col(s, "done_ns")) else {
        return Vec::new();
    };
    let phase = col(s, "phase");
    s.rows
        .iter()
        .filter_map(|r| {
            let get = |i: usize| r.get(i).copied().flatten();
            let (a, b) = (get(due)?, get(done)?);
            Some(Probe {
                due_s: a / 1e9,
                latency_us: (b - a) / 1e3,
                phase: phase.and_then(get).map(|p| p as u8),
            })
        })
        .collect()
}

/// The section's `t0_ns` attribute (0 when absent).
fn t0_ns(s: &Section) -> i128 {
    s.attrs
        .get("t0_ns")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// phase number → (start, end) in seconds since `origin_ns` (CLOCK_MONOTONIC).
fn phase_windows(s: &Section, origin_ns: i128) -> BTreeMap<u8, (f64, f64)> {
    let shift_s = (t0_ns(s) - origin_ns) as f64 / 1e9;
    let (Some(p), Some(a), Some(b)) = (col(s, "phase"), col(s, "start_ns"), col(s, "end_ns"))
    else {
        return BTreeMap::new();
    };
    s.rows
        .iter()
        .filter_map(|r| {
            let get = |i: usize| r.get(i).copied().flatten();
            Some((
                get(p)? as u8,
                (get(a)? / 1e9 + shift_s, get(b)? / 1e9 + shift_s),
            ))
        })
        .collect()
}

/// What each bulk flow delivered per interval, as its receiver counted it (the stream's own
/// throughput figures do the same): `flow N ↑` (client to server, the server's receiving
/// rows) and `flow N ↓` (the client's), N in connect order from 1, then `total` when there
/// are several. A side without rows falls back to its peer's sending rows. Client times start
/// at `client_origin_s`, the server's at `server_origin_s` (see the module's documentation).
fn throughput_lines(
    sections: &[Section],
    client_origin_s: f64,
    server_origin_s: f64,
) -> Vec<TimeLine> {
    let client = interval_rows(sections, "client").unwrap_or_default();
    let server = interval_rows(sections, "server").unwrap_or_default();
    let receiving = |rows: &[FlowRow], origin: f64| -> Vec<(FlowRow, f64)> {
        rows.iter()
            .filter(|r| !r.sending)
            .map(|r| (*r, origin))
            .collect()
    };
    let sending = |rows: &[FlowRow], origin: f64| -> Vec<(FlowRow, f64)> {
        rows.iter()
            .filter(|r| r.sending)
            .map(|r| (*r, origin))
            .collect()
    };
    let mut up = receiving(&server, server_origin_s);
    if up.is_empty() {
        up = sending(&client, client_origin_s);
    }
    let mut down = receiving(&client, client_origin_s);
    if down.is_empty() {
        down = sending(&server, server_origin_s);
    }
    let mut lines = flow_lines(&up, "↑");
    lines.extend(flow_lines(&down, "↓"));
    lines.sort_by_key(|(flow, _)| *flow);
    let mut out: Vec<TimeLine> = lines.into_iter().map(|(_, l)| l).collect();
    if out.len() > 1 {
        out.push(total_line(up.iter().chain(&down)));
    }
    out
}

/// One line per flow of `rows`, labelled `flow N {arrow}`, keyed by flow for ordering.
fn flow_lines(rows: &[(FlowRow, f64)], arrow: &str) -> Vec<(u64, TimeLine)> {
    let mut by_flow: BTreeMap<u64, Vec<(u64, f64, f64)>> = BTreeMap::new();
    for (r, origin) in rows {
        if let Some(bps) = r.bps() {
            by_flow
                .entry(r.flow)
                .or_default()
                .push((r.index, origin + r.end_s, bps));
        }
    }
    by_flow
        .into_iter()
        .map(|(flow, mut v)| {
            v.sort_by_key(|p| p.0);
            let line = TimeLine {
                label: format!("flow {} {arrow}", flow + 1),
                points: v.into_iter().map(|(_, t, bps)| (t, bps)).collect(),
            };
            (flow, line)
        })
        .collect()
}

/// The flows' sum per interval, placed at the latest end among them (the interval is whole
/// once every side has closed it).
fn total_line<'a>(rows: impl Iterator<Item = &'a (FlowRow, f64)>) -> TimeLine {
    let mut by_index: BTreeMap<u64, (f64, f64)> = BTreeMap::new();
    for (r, origin) in rows {
        if let Some(bps) = r.bps() {
            let e = by_index.entry(r.index).or_insert((f64::MIN, 0.0));
            e.0 = e.0.max(origin + r.end_s);
            e.1 += bps;
        }
    }
    TimeLine {
        label: "total".into(),
        points: by_index.into_values().collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const COLS: &str = "index,flow,sending,start_s,end_s,bytes,omitted,cwnd,rtt_us,rttvar_us,total_retrans,delivery_rate_bps,busy_us,rwnd_limited_us,sndbuf_limited_us";

    /// Phases before [0, 1 s), during [1 s, 3 s), after [3 s, 4 s) with `phase_t0` − `probe_t0`
    /// ns between the two sections' origins; a probe every 0.5 s, 10 ms idle and 100 ms
    /// loaded; one flow each way (connect order: flow 0 up, flow 1 down) over two 0.1 s
    /// intervals.
    fn rrul(phase_t0: u64, probe_t0: u64) -> Vec<Section> {
        let shift = probe_t0 as i128 - phase_t0 as i128;
        let at = |ns: i128| (ns + shift).to_string();
        let mut t = format!(
            "# tcplab-samples 1 workload=rrul\n\
             # section=phase t0_ns={phase_t0} columns=phase,start_ns,end_ns,transactions\n\
             0,{},{},2\n1,{},{},4\n2,{},{},2\n\
             # section=probe req=64 resp=64 t0_ns={probe_t0} columns=seq,intended_ns,sent_ns,done_ns,phase\n",
            at(0),
            at(1_000_000_000),
            at(1_000_000_000),
            at(3_000_000_000),
            at(3_000_000_000),
            at(4_000_000_000)
        );
        for i in 0..8u64 {
            let due = i * 500_000_000;
            let (lat, phase) = match due {
                d if d < 1_000_000_000 => (10_000_000, 0),
                d if d < 3_000_000_000 => (100_000_000, 1),
                _ => (10_000_000, 2),
            };
            t.push_str(&format!("{i},{due},{due},{},{phase}\n", due + lat));
        }
        t.push_str(&format!(
            "# section=interval side=client columns={COLS}\n\
             0,0,1,0,0.1,1250000,0,10,-,-,0,-,-,-,-\n0,1,0,0,0.1,250000,0,-,-,-,-,-,-,-,-\n\
             1,0,1,0.1,0.2,1250000,0,10,-,-,0,-,-,-,-\n1,1,0,0.1,0.2,375000,0,-,-,-,-,-,-,-,-\n\
             # section=interval side=server columns={COLS}\n\
             0,0,0,0,0.1,1000000,0,-,-,-,-,-,-,-,-\n0,1,1,0,0.1,250000,0,-,-,-,-,-,-,-,-\n\
             1,0,0,0.1,0.2,1125000,0,-,-,-,-,-,-,-,-\n1,1,1,0.1,0.2,375000,0,-,-,-,-,-,-,-,-\n"
        ));
        tcplab_results::samples::parse(&t).unwrap().1
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-6
    }

    #[test]
    fn probes_load_and_throughput_share_the_probes_origin() {
        let l = latency_under_load("r", &rrul(5_000_000_000, 5_000_000_000)).unwrap();
        assert_eq!(l.load_s, Some((1.0, 3.0)));
        assert_eq!(l.idle_latency_us, Some(10_000.0));
        assert_eq!(l.probes.len(), 8);
        assert_eq!(
            l.probes[2],
            (1.0, 100_000.0),
            "due at the load's start, loaded"
        );
        let labels: Vec<&str> = l.throughput.iter().map(|t| t.label.as_str()).collect();
        assert_eq!(labels, ["flow 1 ↑", "flow 2 ↓", "total"]);
        let (up, down, total) = (&l.throughput[0], &l.throughput[1], &l.throughput[2]);
        // The client's intervals start with the load; the server's half an idle RTT later.
        assert!(close(down.points[0].0, 1.1), "{:?}", down.points);
        assert!(close(down.points[0].1, 20e6), "{:?}", down.points);
        assert!(close(up.points[0].0, 1.105), "{:?}", up.points);
        assert!(
            close(up.points[1].1, 90e6),
            "the receiver's count: {:?}",
            up.points
        );
        assert!(close(total.points[0].0, 1.105) && close(total.points[0].1, 100e6));
        assert!(close(total.points[1].1, 120e6), "{:?}", total.points);
    }

    #[test]
    fn phases_written_with_another_origin_are_moved_onto_the_probes() {
        let same = latency_under_load("r", &rrul(5_000_000_000, 5_000_000_000)).unwrap();
        let moved = latency_under_load("r", &rrul(4_500_000_000, 5_000_000_000)).unwrap();
        let (a, b) = (same.load_s.unwrap(), moved.load_s.unwrap());
        assert!(close(a.0, b.0) && close(a.1, b.1), "{a:?} vs {b:?}");
        assert_eq!(same.throughput, moved.throughput);
    }

    #[test]
    fn one_flow_has_no_total_and_no_probes_no_view() {
        let mut s = rrul(0, 0);
        for sec in s.iter_mut().filter(|s| s.kind == "interval") {
            sec.rows.retain(|r| r[1] == Some(0.0));
        }
        let l = latency_under_load("r", &s).unwrap();
        let labels: Vec<&str> = l.throughput.iter().map(|t| t.label.as_str()).collect();
        assert_eq!(labels, ["flow 1 ↑"]);
        s.retain(|s| s.kind != "probe");
        assert!(latency_under_load("r", &s).is_none());
    }
}
