//! The kernel's per-connection state (`struct tcp_info`, man 7 tcp) as a result records it;
//! `tcplab_load::tcpinfo::read` fills it from a socket.

use serde::{Deserialize, Serialize};

/// The `tcp_info` fields a TCP performance study looks at, in plain units. Fields added after
/// the first release default to 0 when an older result is read back.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TcpInfo {
    /// TCP state (1 = ESTABLISHED).
    pub state: u8,
    /// Congestion-avoidance state (0 open, 1 disorder, 2 CWR, 3 recovery, 4 loss).
    pub ca_state: u8,
    /// Smoothed RTT, µs.
    pub rtt_us: u32,
    /// RTT variance, µs.
    pub rttvar_us: u32,
    /// Minimum RTT seen, µs.
    pub min_rtt_us: u32,
    /// Retransmission timeout, µs.
    pub rto_us: u32,
    /// Delayed-ACK timeout, µs.
    pub ato_us: u32,
    /// Congestion window, segments.
    pub cwnd: u32,
    /// Slow-start threshold, segments (large = not set).
    pub ssthresh: u32,
    /// Sender MSS, bytes.
    pub snd_mss: u32,
    /// Segments sent but not acknowledged.
    pub unacked: u32,
    /// Segments currently considered lost.
    pub lost: u32,
    /// Segments retransmitted and not yet acknowledged.
    pub retrans: u32,
    /// Retransmitted segments over the connection's life.
    pub total_retrans: u32,
    /// Last delivery-rate sample, bit/s.
    pub delivery_rate_bps: u64,
    /// Pacing rate, bit/s (u64::MAX*8 saturates: unpaced).
    pub pacing_rate_bps: u64,
    /// Time busy sending data, µs.
    pub busy_us: u64,
    /// Time limited by the peer's receive window, µs.
    pub rwnd_limited_us: u64,
    /// Time limited by the send buffer, µs.
    pub sndbuf_limited_us: u64,
    /// Bytes acknowledged by the peer.
    pub bytes_acked: u64,
    /// Bytes received.
    pub bytes_received: u64,
    /// Bytes retransmitted.
    pub bytes_retrans: u64,
    /// Bytes written but not yet sent.
    pub notsent_bytes: u32,
    /// Peer's advertised receive window, bytes.
    pub snd_wnd: u32,
    /// Receiver's estimate of its buffer need (DRS), bytes.
    pub rcv_space: u32,
    /// Consecutive retransmission timeouts of the segment at the head (0 when none pending).
    pub retransmits: u8,
    /// Exponential backoff of the retransmission timer (RTOs in a row).
    pub backoff: u8,
    /// Unanswered zero-window (or keepalive) probes.
    pub probes: u8,
    /// The last delivery-rate sample was application-limited (the sender had nothing to send).
    pub app_limited: bool,
    /// Path MTU the connection uses, bytes.
    pub pmtu: u32,
    /// MSS this side advertised, bytes.
    pub advmss: u32,
    /// Receiver-side estimate of the peer's MSS, bytes.
    pub rcv_mss: u32,
    /// Reordering degree the sender tolerates (dupthresh), segments.
    pub reordering: u32,
    /// Reordering events seen by the sender.
    pub reord_seen: u32,
    /// Duplicate segments the peer reported (D-SACK): retransmissions that were not needed.
    pub dsack_dups: u32,
    /// Out-of-order packets received.
    pub rcv_ooopack: u32,
    /// Segments SACKed and not yet cumulatively acknowledged.
    pub sacked: u32,
    /// Segments delivered (acknowledged, in any way).
    pub delivered: u32,
    /// Data segments sent, retransmissions included.
    pub data_segs_out: u32,
    /// Receiver's RTT estimate, µs (0 when it has none).
    pub rcv_rtt_us: u32,
    /// Window this side advertises, bytes (Linux 6.7+).
    pub rcv_wnd: u32,
    /// Retransmission timeouts over the connection's life, SYN ones included (Linux 6.7+).
    pub total_rto: u16,
    /// Recoveries that began with a timeout (Linux 6.7+).
    pub total_rto_recoveries: u16,
    /// Time spent in those recoveries, ms (Linux 6.7+).
    pub total_rto_time_ms: u32,
    /// The congestion control's own estimate of the path's bottleneck bandwidth, bit/s
    /// (`TCP_CC_INFO`: BBR's windowed maximum of the delivery rate); 0 when the control keeps
    /// none (cubic, reno).
    pub cc_bw_bps: u64,
    /// The congestion control's own minimum RTT, µs (BBR's `bbr_min_rtt`); 0 when none.
    pub cc_min_rtt_us: u32,
    /// The connection negotiated ECN (`tcpi_options & TCPI_OPT_ECN`): both ends asked for it
    /// (`net.ipv4.tcp_ecn`), so a queue that marks CE slows it instead of dropping.
    pub ecn: bool,
    /// Segments the peer reported delivered with CE set (`tcpi_delivered_ce`): how often a
    /// queue marked this connection's packets.
    pub delivered_ce: u32,
}
