//! One run's raw samples (docs/samples.md) → the report's per-run series: a stream's intervals
//! (throughput, cwnd, RTT, retransmits), the per-message delays of msgs and rr with their
//! stall threshold, and rrul's latency under load ([`super::rrul`]). Pure: text in, series
//! out, so the study's store and the doctor's battery (which holds its samples in memory) go
//! through the same code.

use std::collections::BTreeMap;

use tcplab_report::model::{
    IntervalSample, IntervalSeries, LatencyUnderLoad, MessageDelays, ReportInput,
};
use tcplab_results::samples::Section;

/// The series one run gives, each labelled.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunSeries {
    /// Interval counters (stream runs).
    pub intervals: Vec<IntervalSeries>,
    /// Per-message delays (msgs and rr runs).
    pub message_delays: Vec<MessageDelays>,
    /// Latency under load (rrul runs).
    pub latency_under_load: Vec<LatencyUnderLoad>,
}

impl RunSeries {
    /// True when the samples gave nothing to plot.
    pub fn is_empty(&self) -> bool {
        self.intervals.is_empty()
            && self.message_delays.is_empty()
            && self.latency_under_load.is_empty()
    }

    /// Appends every series to `input`, after what it holds.
    pub fn append_to(self, input: &mut ReportInput) {
        input.intervals.extend(self.intervals);
        input.message_delays.extend(self.message_delays);
        input.latency_under_load.extend(self.latency_under_load);
    }

    /// Adds `other`'s series after these.
    pub fn extend(&mut self, other: RunSeries) {
        self.intervals.extend(other.intervals);
        self.message_delays.extend(other.message_delays);
        self.latency_under_load.extend(other.latency_under_load);
    }
}

/// A samples text split into its workloads: (workload, sections) each. A study run with several
/// workloads stores their files one after the other, each with its own first line, which
/// `tcplab_results::samples::parse` alone would reject; a part that does not parse is left out.
pub fn parse_workloads(text: &str) -> Vec<(String, Vec<Section>)> {
    parse_workloads_at(text)
        .into_iter()
        .map(|(_, workload, sections)| (workload, sections))
        .collect()
}

/// [`parse_workloads`], each part with the offset of its first line in `text`.
pub fn parse_workloads_at(text: &str) -> Vec<(usize, String, Vec<Section>)> {
    const HEAD: &str = "# tcplab-samples ";
    let starts: Vec<usize> = text
        .match_indices(HEAD)
        .map(|(i, _)| i)
        .filter(|&i| i == 0 || text.as_bytes()[i - 1] == b'\n')
        .collect();
    starts
        .iter()
        .enumerate()
        .filter_map(|(k, &a)| {
            let b = starts.get(k + 1).copied().unwrap_or(text.len());
            let (workload, sections) = tcplab_results::samples::parse(&text[a..b]).ok()?;
            Some((a, workload, sections))
        })
        .collect()
}

/// The series of one workload's samples, labelled `label`. `rr_stall_ms`: the stall limit the
/// rr run was configured with, when the caller knows it (the samples file does not carry it).
pub fn run_series(
    label: &str,
    workload: &str,
    sections: &[Section],
    rr_stall_ms: Option<f64>,
) -> RunSeries {
    let mut out = RunSeries::default();
    match workload {
        "stream" => {
            if let Some(intervals) = stream_intervals(sections) {
                out.intervals.push(IntervalSeries {
                    label: label.to_string(),
                    intervals,
                });
            }
        }
        "msgs" | "rr" => {
            let configured = (workload == "rr").then_some(rr_stall_ms).flatten();
            out.message_delays.extend(message_delays(
                label,
                sections,
                configured.map(|ms| ms * 1e3),
            ));
        }
        "rrul" => out
            .latency_under_load
            .extend(super::rrul::latency_under_load(label, sections)),
        _ => {}
    }
    out
}

/// Column `name`'s position in `s`.
pub(crate) fn col(s: &Section, name: &str) -> Option<usize> {
    s.columns.iter().position(|c| c == name)
}

/// (seq, `to − from` in µs, `from` in s) for every row with both stamps. Stamps are relative to
/// the section's `t0_ns`, so `from` is already seconds since the section's start.
pub(crate) fn delays_between(s: &Section, from: &str, to: &str) -> Vec<(u64, f64, f64)> {
    let (Some(seq), Some(a), Some(b)) = (col(s, "seq"), col(s, from), col(s, to)) else {
        return Vec::new();
    };
    s.rows
        .iter()
        .filter_map(|r| {
            let (q, a, b) = (
                r.get(seq).copied()??,
                r.get(a).copied()??,
                r.get(b).copied()??,
            );
            Some((q as u64, (b - a) / 1e3, a / 1e9))
        })
        .collect()
}

/// Per-message delays of the first `message` (msgs: one-way, send to receive) or `transaction`
/// (rr: response time from the intended send time, so a request that waited behind a slow one
/// is charged the wait) section, with the stall threshold of [`stall_threshold_us`].
pub fn message_delays(
    label: &str,
    sections: &[Section],
    configured_stall_us: Option<f64>,
) -> Option<MessageDelays> {
    let s = sections
        .iter()
        .find(|s| s.kind == "message" || s.kind == "transaction")?;
    let rows = if s.kind == "message" {
        delays_between(s, "send_ns", "recv_ns")
    } else {
        delays_between(s, "intended_ns", "done_ns")
    };
    if rows.is_empty() {
        return None;
    }
    let delays: Vec<f64> = rows.iter().map(|r| r.1).collect();
    Some(MessageDelays {
        label: label.to_string(),
        stall_us: stall_threshold_us(configured_stall_us, &delays),
        points: rows.iter().map(|r| (r.0, r.1)).collect(),
        times_s: rows.iter().map(|r| r.2).collect(),
        ..MessageDelays::default()
    })
}

/// The median of `v`, None when empty.
pub(crate) fn median(v: &[f64]) -> Option<f64> {
    tcplab_stats::quantile(v, 0.5).ok()
}

/// The stall rule for a run without a configured limit: a delay is a stall when it exceeds
/// the median by `max(1 ms, 4 × (p90 − median))`, µs. A stall (a delayed ACK, a
/// retransmission timeout, a timer tick) adds milliseconds to a few messages: it sits far
/// outside the spread of the ordinary nine in ten, whatever the path's own delay (a multiple
/// of the median would hide a 30 ms stall on a 40 ms path); the 1 ms floor keeps sub-100 µs
/// runs on loopback or a bare pair from calling scheduler noise a stall.
pub fn stall_rule_us(delays_us: &[f64]) -> Option<f64> {
    let m = median(delays_us)?;
    let p90 = tcplab_stats::quantile(delays_us, 0.9).ok()?;
    Some(stall_rule_of(m, p90))
}

/// [`stall_rule_us`] from the median and the 90th percentile, µs.
pub fn stall_rule_of(median_us: f64, p90_us: f64) -> f64 {
    median_us + (4.0 * (p90_us - median_us)).max(1e3)
}

/// The threshold the scatter marks: the run's configured limit when it lies above the run's
/// median delay, else [`stall_rule_us`]. A configured limit under the typical delay (rr's
/// default 5 ms on a 30 ms path) would mark nearly every transaction, which says nothing
/// about stalls.
pub fn stall_threshold_us(configured_us: Option<f64>, delays_us: &[f64]) -> Option<f64> {
    let m = median(delays_us)?;
    let p90 = tcplab_stats::quantile(delays_us, 0.9).ok()?;
    Some(stall_threshold_of(configured_us, m, p90))
}

/// [`stall_threshold_us`] from the median and the 90th percentile, µs.
pub fn stall_threshold_of(configured_us: Option<f64>, median_us: f64, p90_us: f64) -> f64 {
    match configured_us {
        Some(c) if c > median_us => c,
        _ => stall_rule_of(median_us, p90_us),
    }
}

/// One row of an `interval` section (one flow, one interval).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct FlowRow {
    pub index: u64,
    pub flow: u64,
    pub sending: bool,
    pub start_s: f64,
    pub end_s: f64,
    pub bytes: f64,
    pub cwnd: Option<f64>,
    pub rtt_us: Option<f64>,
    pub total_retrans: Option<f64>,
}

impl FlowRow {
    /// bytes·8 over the interval's length; None for an empty interval.
    pub fn bps(&self) -> Option<f64> {
        (self.end_s > self.start_s).then(|| self.bytes * 8.0 / (self.end_s - self.start_s))
    }
}

/// The rows of the `interval` section of `side` (client, server); None without one.
pub(crate) fn interval_rows(sections: &[Section], side: &str) -> Option<Vec<FlowRow>> {
    let s = sections
        .iter()
        .find(|s| s.kind == "interval" && s.attrs.get("side").is_some_and(|v| v == side))?;
    let c = |name: &str| col(s, name);
    let (index, flow, sending) = (c("index")?, c("flow")?, c("sending")?);
    let (start, end, bytes) = (c("start_s")?, c("end_s")?, c("bytes")?);
    let (cwnd, rtt, retrans) = (c("cwnd"), c("rtt_us"), c("total_retrans"));
    let rows = s
        .rows
        .iter()
        .filter_map(|r| {
            let get = |i: usize| r.get(i).copied().flatten();
            let opt = |i: Option<usize>| i.and_then(get);
            Some(FlowRow {
                index: get(index)? as u64,
                flow: get(flow)? as u64,
                sending: get(sending)? != 0.0,
                start_s: get(start)?,
                end_s: get(end)?,
                bytes: get(bytes)?,
                cwnd: opt(cwnd),
                rtt_us: opt(rtt),
                total_retrans: opt(retrans),
            })
        })
        .collect();
    Some(rows)
}

/// A stream run's intervals, from its senders: the client's sending flows (one clock, the one
/// their tcp_info was read on), or the server's when the client sent nothing (a `down` stream).
pub fn stream_intervals(sections: &[Section]) -> Option<Vec<IntervalSample>> {
    let sending = |side: &str| -> Vec<FlowRow> {
        interval_rows(sections, side)
            .unwrap_or_default()
            .into_iter()
            .filter(|r| r.sending)
            .collect()
    };
    let mut rows = sending("client");
    if rows.is_empty() {
        rows = sending("server");
    }
    let out = sender_intervals(&rows);
    (!out.is_empty()).then_some(out)
}

/// Per interval over the sending flows: throughput is the sum of what they wrote, cwnd the sum
/// of their windows (the aggregate a path sees), RTT their mean, and retransmits the sum of
/// each flow's rise in `total_retrans` since its previous interval (the first from 0: the
/// counter starts with the connection). `t_s` is the interval's end.
pub(crate) fn sender_intervals(rows: &[FlowRow]) -> Vec<IntervalSample> {
    let mut sorted: Vec<&FlowRow> = rows.iter().collect();
    sorted.sort_by_key(|r| (r.index, r.flow));
    let mut last_retrans: BTreeMap<u64, f64> = BTreeMap::new();
    let mut by_index: BTreeMap<u64, (IntervalSample, Vec<f64>)> = BTreeMap::new();
    for r in sorted {
        let (e, rtts) = by_index.entry(r.index).or_insert_with(|| {
            (
                IntervalSample {
                    t_s: r.end_s,
                    ..IntervalSample::default()
                },
                Vec::new(),
            )
        });
        e.t_s = e.t_s.max(r.end_s);
        add(&mut e.throughput_bps, r.bps());
        add(&mut e.cwnd_segments, r.cwnd);
        if let Some(total) = r.total_retrans {
            let before = last_retrans.insert(r.flow, total).unwrap_or(0.0);
            add(&mut e.retransmits, Some((total - before).max(0.0)));
        }
        rtts.extend(r.rtt_us);
    }
    by_index
        .into_values()
        .map(|(mut e, rtts)| {
            e.rtt_us = (!rtts.is_empty()).then(|| rtts.iter().sum::<f64>() / rtts.len() as f64);
            e
        })
        .collect()
}

/// `sum += v`, where None + v = v and a missing v leaves the sum.
fn add(sum: &mut Option<f64>, v: Option<f64>) {
    if let Some(v) = v {
        *sum = Some(sum.unwrap_or(0.0) + v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sections(text: &str) -> Vec<Section> {
        tcplab_results::samples::parse(text).unwrap().1
    }

    const COLS: &str = "index,flow,sending,start_s,end_s,bytes,omitted,cwnd,rtt_us,rttvar_us,total_retrans,delivery_rate_bps,busy_us,rwnd_limited_us,sndbuf_limited_us";

    #[test]
    fn retransmits_are_each_flows_rise_summed_and_the_first_counts_from_zero() {
        let text = format!(
            "# tcplab-samples 1 workload=stream\n# section=interval side=client columns={COLS}\n\
             0,0,1,0,0.1,125000,0,10,20000,1,2,0,0,0,0\n\
             0,1,1,0,0.1,125000,0,30,40000,1,0,0,0,0,0\n\
             1,0,1,0.1,0.2,250000,0,12,22000,1,5,0,0,0,0\n\
             1,1,1,0.1,0.2,0,0,30,-,1,1,0,0,0,0\n\
             2,0,1,0.2,0.25,0,0,-,-,-,-,-,-,-,-\n\
             2,1,1,0.2,0.25,0,0,31,40000,1,4,0,0,0,0\n\
             # section=interval side=server columns={COLS}\n\
             0,0,0,0,0.1,999999,0,-,-,-,-,-,-,-,-\n"
        );
        let iv = stream_intervals(&sections(&text)).unwrap();
        assert_eq!(iv.len(), 3);
        assert_eq!(iv[0].t_s, 0.1, "t_s is the interval's end");
        assert_eq!(iv[0].retransmits, Some(2.0), "2 + 0 from zero");
        assert_eq!(iv[1].retransmits, Some(4.0), "5−2 + 1−0");
        assert_eq!(iv[2].retransmits, Some(3.0), "flow 0 unread; flow 1: 4−1");
        let bps = |i: usize| iv[i].throughput_bps.unwrap();
        assert!(
            (bps(0) - 20e6).abs() < 1e-3,
            "two flows of 10 Mbit/s: {}",
            bps(0)
        );
        assert!(
            (bps(1) - 20e6).abs() < 1e-3,
            "the server's receiving rows are not summed"
        );
        assert_eq!(iv[0].cwnd_segments, Some(40.0), "windows add up");
        assert_eq!(iv[0].rtt_us, Some(30_000.0), "RTT is the flows' mean");
        assert_eq!(
            iv[1].rtt_us,
            Some(22_000.0),
            "a flow without tcp_info is left out"
        );
        assert_eq!(iv[2].cwnd_segments, Some(31.0));
    }

    #[test]
    fn a_down_stream_is_read_from_the_server_senders() {
        let text = format!(
            "# tcplab-samples 1 workload=stream\n# section=interval side=client columns={COLS}\n\
             0,0,0,0,0.1,125000,0,-,-,-,-,-,-,-,-\n\
             # section=interval side=server columns={COLS}\n\
             0,0,1,0,0.1,125000,0,10,20000,1,3,0,0,0,0\n"
        );
        let iv = stream_intervals(&sections(&text)).unwrap();
        assert_eq!(
            (iv[0].cwnd_segments, iv[0].retransmits),
            (Some(10.0), Some(3.0))
        );
    }

    #[test]
    fn the_stall_rule_is_four_spreads_or_a_millisecond_above_the_median() {
        assert_eq!(stall_rule_us(&[]), None);
        assert_eq!(
            stall_rule_us(&[50.0, 60.0, 70.0]),
            Some(1_060.0),
            "floor: median + 1 ms"
        );
        // A 40 ms path with 2 ms of spread and a 30 ms stall every 158th message.
        let wan: Vec<f64> = (0..1_580)
            .map(|i| {
                if i % 158 == 157 {
                    69_500.0
                } else {
                    38_000.0 + f64::from(i % 20) * 200.0
                }
            })
            .collect();
        let t = stall_rule_us(&wan).unwrap();
        assert!((41_000.0..50_000.0).contains(&t), "{t}");
        assert_eq!(
            wan.iter().filter(|d| **d > t).count(),
            10,
            "every stall and only they"
        );
        assert_eq!(
            stall_rule_us(&[100.0, 110.0]),
            Some(1_105.0),
            "even count: mean of two"
        );
        // A configured limit wins when it lies above the typical delay, not below it.
        let typical = [30_000.0, 30_100.0, 30_200.0];
        assert_eq!(stall_threshold_us(Some(5e3), &typical), Some(31_100.0));
        assert_eq!(stall_threshold_us(Some(5e4), &typical), Some(5e4));
        assert_eq!(stall_threshold_us(None, &typical), Some(31_100.0));
    }

    #[test]
    fn msgs_delays_are_one_way_and_timed_from_the_first_send() {
        let text = "# tcplab-samples 1 workload=msgs\n\
                    # section=message size=1 t0_ns=5000000000 columns=seq,send_ns,recv_ns\n\
                    0,0,41000\n1,1000000,1042000\n2,2000000,-\n3,3000000,3500000000\n";
        let d = message_delays("m", &sections(text), None).unwrap();
        assert_eq!(d.points, [(0, 41.0), (1, 42.0), (3, 3_497_000.0)]);
        assert_eq!(
            d.times_s,
            [0.0, 0.001, 0.003],
            "the unreceived message is left out"
        );
        assert_eq!(d.stall_us, stall_rule_us(&[41.0, 42.0, 3_497_000.0]));
    }

    #[test]
    fn rr_delays_run_from_the_intended_send_time() {
        let text = "# tcplab-samples 1 workload=rr\n\
                    # section=transaction req=1 resp=1 t0_ns=7 columns=seq,intended_ns,sent_ns,done_ns\n\
                    0,0,0,100000\n1,1000000,1900000,2000000\n2,2000000,2000000,2100000\n";
        let parts = parse_workloads(text);
        let s = run_series("c · rep 0", &parts[0].0, &parts[0].1, Some(5.0));
        let d = &s.message_delays[0];
        assert_eq!(
            d.points,
            [(0, 100.0), (1, 1000.0), (2, 100.0)],
            "coordinated omission corrected"
        );
        assert_eq!(d.times_s, [0.0, 0.001, 0.002]);
        assert_eq!(
            d.stall_us,
            Some(5_000.0),
            "the configured 5 ms lies above the median"
        );
        assert_eq!(d.label, "c · rep 0");
    }

    #[test]
    fn concatenated_workloads_split_into_parts() {
        let text = "# tcplab-samples 1 workload=msgs\n\
                    # section=message size=1 t0_ns=0 columns=seq,send_ns,recv_ns\n0,0,5000\n\
                    # tcplab-samples 1 workload=rr\n\
                    # section=transaction req=1 resp=1 t0_ns=0 columns=seq,intended_ns,sent_ns,done_ns\n0,0,0,9000\n";
        let parts = parse_workloads(text);
        let kinds: Vec<&str> = parts.iter().map(|p| p.0.as_str()).collect();
        assert_eq!(kinds, ["msgs", "rr"]);
        assert!(parse_workloads("not samples").is_empty());
    }
}
