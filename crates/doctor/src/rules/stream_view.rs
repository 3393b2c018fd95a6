//! What the buffer and loss rules read from a stream result: per sending flow, tcp_info at the
//! start and end of the measured span (the kernel's busy/limited/retransmit counters are
//! cumulative, so the span's share is the difference), and the medians of RTT and window.

use std::collections::BTreeMap;

use tcplab_results::stream::{IntervalSample, StreamResult};
use tcplab_results::tcpinfo::TcpInfo;
use tcplab_stats::quantile;

use crate::battery::Role;

/// One sending flow over the measured span.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FlowSpan {
    /// Which side sent.
    pub sender: Role,
    /// tcp_info at the end of the warm-up (or the first interval), `None` = counters from 0.
    pub start: Option<TcpInfo>,
    /// tcp_info at the end of the last interval.
    pub end: TcpInfo,
}

impl FlowSpan {
    fn delta(&self, f: impl Fn(&TcpInfo) -> u64) -> u64 {
        f(&self.end).saturating_sub(self.start.as_ref().map_or(0, &f))
    }

    /// Busy time in the span, µs.
    pub fn busy_us(&self) -> u64 {
        self.delta(|t| t.busy_us)
    }

    /// Receive-window-limited time in the span, µs.
    pub fn rwnd_limited_us(&self) -> u64 {
        self.delta(|t| t.rwnd_limited_us)
    }

    /// Send-buffer-limited time in the span, µs.
    pub fn sndbuf_limited_us(&self) -> u64 {
        self.delta(|t| t.sndbuf_limited_us)
    }

    /// Bytes retransmitted in the span.
    pub fn bytes_retrans(&self) -> u64 {
        self.delta(|t| t.bytes_retrans)
    }

    /// Bytes acknowledged in the span.
    pub fn bytes_acked(&self) -> u64 {
        self.delta(|t| t.bytes_acked)
    }

    /// Segments retransmitted in the span.
    pub fn retrans_segments(&self) -> u64 {
        self.delta(|t| u64::from(t.total_retrans))
    }

    /// Reordering events the sender detected in the span.
    pub fn reord_seen(&self) -> u64 {
        self.delta(|t| u64::from(t.reord_seen))
    }

    /// Retransmissions the receiver reported as duplicates (D-SACK) in the span: spurious.
    pub fn dsack_dups(&self) -> u64 {
        self.delta(|t| u64::from(t.dsack_dups))
    }

    /// Data segments sent in the span (retransmissions included).
    pub fn data_segs_out(&self) -> u64 {
        self.delta(|t| u64::from(t.data_segs_out))
    }
}

/// The stream as the rules see it.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamView {
    /// Sending flows.
    pub flows: Vec<FlowSpan>,
    /// Measured throughput, bit/s.
    pub throughput_bps: f64,
    /// Median smoothed RTT over the measured sending samples, s.
    pub rtt_s: Option<f64>,
    /// Median peer-advertised window over those samples, bytes.
    pub snd_wnd: Option<f64>,
    /// Median sender MSS, bytes.
    pub mss: Option<f64>,
    /// Measured sending samples in the congestion-avoidance `loss` state (RTO recovery).
    pub loss_state_samples: usize,
    /// Measured sending samples with tcp_info.
    pub samples: usize,
    /// Smallest RTT the sending flows saw (tcp_info min_rtt over the whole connection), s:
    /// the path's RTT without queueing.
    pub min_rtt_s: Option<f64>,
    /// Median data in flight (unacknowledged segments x MSS), bytes.
    pub inflight_bytes: Option<f64>,
    /// Median congestion window, bytes.
    pub cwnd_bytes: Option<f64>,
    /// Share of measured sending samples whose delivery rate was application-limited.
    pub app_limited_share: f64,
    /// Median bytes the receiving application had not read yet, at interval ends (receiving
    /// flows that report it).
    pub unread_bytes: Option<f64>,
    /// Median window the receiver advertised, from its own side, bytes (Linux 6.7+).
    pub rcv_wnd: Option<f64>,
}

impl StreamView {
    /// Builds the view; `None` without a throughput or without any sending tcp_info.
    pub fn of(r: &StreamResult) -> Option<Self> {
        let throughput_bps = r.summary.throughput_bps.filter(|v| *v > 0.0)?;
        let mut by_flow: BTreeMap<(u8, u32), Vec<&IntervalSample>> = BTreeMap::new();
        let sides = [
            (Role::Client, &r.intervals),
            (Role::Server, &r.server_intervals),
        ];
        for (side, intervals) in sides {
            for i in intervals
                .iter()
                .filter(|i| i.sending && i.tcp_info.is_some())
            {
                let key = (u8::from(side == Role::Server), i.flow);
                by_flow.entry(key).or_default().push(i);
            }
        }
        let receiving: Vec<&IntervalSample> = r
            .intervals
            .iter()
            .chain(&r.server_intervals)
            .filter(|i| !i.sending && !i.omitted)
            .collect();
        let median_of = |v: Vec<f64>| quantile(&v, 0.5).ok();
        let unread_bytes = median_of(
            receiving
                .iter()
                .filter_map(|i| i.unread_bytes.map(f64::from))
                .collect(),
        );
        let rcv_wnd = median_of(
            receiving
                .iter()
                .filter_map(|i| i.tcp_info.map(|t| f64::from(t.rcv_wnd)))
                .filter(|w| *w > 0.0)
                .collect(),
        );
        let mut flows = Vec::new();
        let mut measured: Vec<TcpInfo> = Vec::new();
        for ((side, _), mut v) in by_flow {
            v.sort_by_key(|i| i.index);
            let start = v.iter().rev().find(|i| i.omitted).and_then(|i| i.tcp_info);
            let Some(end) = v.last().and_then(|i| i.tcp_info) else {
                continue;
            };
            measured.extend(v.iter().filter(|i| !i.omitted).filter_map(|i| i.tcp_info));
            let sender = if side == 1 {
                Role::Server
            } else {
                Role::Client
            };
            flows.push(FlowSpan { sender, start, end });
        }
        if flows.is_empty() {
            return None;
        }
        let med = |f: &dyn Fn(&TcpInfo) -> f64| -> Option<f64> {
            let v: Vec<f64> = measured.iter().map(f).filter(|x| *x > 0.0).collect();
            quantile(&v, 0.5).ok()
        };
        let min_rtt_s = flows
            .iter()
            .map(|f| f.end.min_rtt_us)
            .filter(|v| *v > 0)
            .min()
            .map(|us| f64::from(us) / 1e6);
        let app_limited = measured.iter().filter(|t| t.app_limited).count();
        Some(Self {
            throughput_bps,
            rtt_s: med(&|t| f64::from(t.rtt_us) / 1e6),
            snd_wnd: med(&|t| f64::from(t.snd_wnd)),
            mss: med(&|t| f64::from(t.snd_mss)),
            loss_state_samples: measured.iter().filter(|t| t.ca_state == 4).count(),
            samples: measured.len(),
            min_rtt_s,
            inflight_bytes: med(&|t| f64::from(t.unacked) * f64::from(t.snd_mss)),
            cwnd_bytes: med(&|t| f64::from(t.cwnd) * f64::from(t.snd_mss)),
            app_limited_share: if measured.is_empty() {
                0.0
            } else {
                app_limited as f64 / measured.len() as f64
            },
            unread_bytes,
            rcv_wnd,
            flows,
        })
    }

    /// Σ advertised window / RTT over the flows (median window and RTT), bit/s.
    pub fn window_over_rtt_bps(&self) -> Option<f64> {
        let (w, rtt) = (self.snd_wnd?, self.rtt_s?);
        Some(w * 8.0 / rtt * self.flows.len() as f64)
    }

    /// Which side sent most (the first flow's), for naming sender/receiver hosts.
    pub fn sender(&self) -> Role {
        self.flows.first().map_or(Role::Client, |f| f.sender)
    }

    /// Σ limited / Σ busy over the sending flows, `None` when nothing was busy.
    pub fn limited_fraction(&self, limited: impl Fn(&FlowSpan) -> u64) -> Option<f64> {
        let busy: u64 = self.flows.iter().map(FlowSpan::busy_us).sum();
        let lim: u64 = self.flows.iter().map(limited).sum();
        (busy > 0).then(|| lim as f64 / busy as f64)
    }
}

/// The other side.
pub fn peer(role: Role) -> Role {
    match role {
        Role::Client => Role::Server,
        Role::Server => Role::Client,
    }
}
