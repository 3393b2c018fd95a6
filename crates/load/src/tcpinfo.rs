//! `TCP_INFO`: the kernel's per-connection state (man 7 tcp, `struct tcp_info` of
//! include/uapi/linux/tcp.h). The raw struct is declared here up to `tcpi_total_rto_time`
//! (Linux 6.7) because the libc crate's copy stops earlier; the kernel fills only as much as
//! both sides know, so an older kernel simply leaves the newer fields zero.

use std::os::fd::RawFd;

pub use tcplab_results::tcpinfo::TcpInfo;

/// Layout of `struct tcp_info` as of Linux 6.7+ (fields up to `tcpi_total_rto_time`).
#[repr(C)]
#[derive(Default)]
struct RawTcpInfo {
    state: u8,
    ca_state: u8,
    retransmits: u8,
    probes: u8,
    backoff: u8,
    options: u8,
    wscale: u8,
    app_limited: u8,
    rto: u32,
    ato: u32,
    snd_mss: u32,
    rcv_mss: u32,
    unacked: u32,
    sacked: u32,
    lost: u32,
    retrans: u32,
    fackets: u32,
    last_data_sent: u32,
    last_ack_sent: u32,
    last_data_recv: u32,
    last_ack_recv: u32,
    pmtu: u32,
    rcv_ssthresh: u32,
    rtt: u32,
    rttvar: u32,
    snd_ssthresh: u32,
    snd_cwnd: u32,
    advmss: u32,
    reordering: u32,
    rcv_rtt: u32,
    rcv_space: u32,
    total_retrans: u32,
    pacing_rate: u64,
    max_pacing_rate: u64,
    bytes_acked: u64,
    bytes_received: u64,
    segs_out: u32,
    segs_in: u32,
    notsent_bytes: u32,
    min_rtt: u32,
    data_segs_in: u32,
    data_segs_out: u32,
    delivery_rate: u64,
    busy_time: u64,
    rwnd_limited: u64,
    sndbuf_limited: u64,
    delivered: u32,
    delivered_ce: u32,
    bytes_sent: u64,
    bytes_retrans: u64,
    dsack_dups: u32,
    reord_seen: u32,
    rcv_ooopack: u32,
    snd_wnd: u32,
    rcv_wnd: u32,
    rehash: u32,
    total_rto: u16,
    total_rto_recoveries: u16,
    total_rto_time: u32,
}

/// Reads `TCP_INFO` from `fd`; `None` if the socket is not TCP or already closed.
pub fn read(fd: RawFd) -> Option<TcpInfo> {
    let mut raw = RawTcpInfo::default();
    let mut len = std::mem::size_of::<RawTcpInfo>() as libc::socklen_t;
    // Safety: `raw` is a plain-old-data repr(C) struct writable for `len` bytes; the kernel
    // writes at most `len` bytes and reports how many.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut raw as *mut RawTcpInfo).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return None;
    }
    Some(TcpInfo {
        state: raw.state,
        ca_state: raw.ca_state,
        rtt_us: raw.rtt,
        rttvar_us: raw.rttvar,
        min_rtt_us: raw.min_rtt,
        rto_us: raw.rto,
        ato_us: raw.ato,
        cwnd: raw.snd_cwnd,
        ssthresh: raw.snd_ssthresh,
        snd_mss: raw.snd_mss,
        unacked: raw.unacked,
        lost: raw.lost,
        retrans: raw.retrans,
        total_retrans: raw.total_retrans,
        delivery_rate_bps: raw.delivery_rate.saturating_mul(8),
        pacing_rate_bps: raw.pacing_rate.saturating_mul(8),
        busy_us: raw.busy_time,
        rwnd_limited_us: raw.rwnd_limited,
        sndbuf_limited_us: raw.sndbuf_limited,
        bytes_acked: raw.bytes_acked,
        bytes_received: raw.bytes_received,
        bytes_retrans: raw.bytes_retrans,
        notsent_bytes: raw.notsent_bytes,
        snd_wnd: raw.snd_wnd,
        rcv_space: raw.rcv_space,
        retransmits: raw.retransmits,
        backoff: raw.backoff,
        probes: raw.probes,
        // tcpi_delivery_rate_app_limited is the lowest bit of the byte after tcpi_wscale.
        app_limited: raw.app_limited & 1 == 1,
        pmtu: raw.pmtu,
        advmss: raw.advmss,
        rcv_mss: raw.rcv_mss,
        reordering: raw.reordering,
        reord_seen: raw.reord_seen,
        dsack_dups: raw.dsack_dups,
        rcv_ooopack: raw.rcv_ooopack,
        sacked: raw.sacked,
        delivered: raw.delivered,
        data_segs_out: raw.data_segs_out,
        rcv_rtt_us: raw.rcv_rtt,
        rcv_wnd: raw.rcv_wnd,
        total_rto: raw.total_rto,
        total_rto_recoveries: raw.total_rto_recoveries,
        total_rto_time_ms: raw.total_rto_time,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;

    #[test]
    fn reads_live_connection_state() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let mut c = std::net::TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
        let (mut s, _) = l.accept().expect("accept");
        c.write_all(&[7u8; 10_000]).expect("write");
        let mut buf = [0u8; 10_000];
        s.read_exact(&mut buf).expect("read");
        let info = read(c.as_raw_fd()).expect("tcp_info");
        assert_eq!(info.state, 1, "ESTABLISHED");
        assert!(info.cwnd >= 2, "cwnd {}", info.cwnd);
        assert!(info.snd_mss > 0);
        let rinfo = read(s.as_raw_fd()).expect("tcp_info");
        assert_eq!(rinfo.bytes_received, 10_000);
        // Fields past tcpi_snd_wnd are filled on this kernel (6.7+): a window is advertised.
        assert!(rinfo.rcv_wnd > 0, "rcv_wnd {}", rinfo.rcv_wnd);
        assert!(info.pmtu >= 1280 && info.advmss > 0, "{info:?}");
        assert!(info.delivered > 0 && info.data_segs_out > 0, "{info:?}");
    }
}
