//! What the buffer and loss rules read from a stream result: per sending flow, tcp_info at the
//! start and end of the measured span (the kernel's busy/limited/retransmit counters are
//! cumulative, so the span's share is the difference), and the medians of RTT and window.

use std::collections::BTreeMap;

use tcplab_load::stream::{IntervalSample, StreamResult};
use tcplab_load::tcpinfo::TcpInfo;
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
        Some(Self {
            throughput_bps,
            rtt_s: med(&|t| f64::from(t.rtt_us) / 1e6),
            snd_wnd: med(&|t| f64::from(t.snd_wnd)),
            mss: med(&|t| f64::from(t.snd_mss)),
            loss_state_samples: measured.iter().filter(|t| t.ca_state == 4).count(),
            samples: measured.len(),
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
