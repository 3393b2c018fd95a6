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
    let (cc_bw_bps, cc_min_rtt_us) = bbr_info(fd).unwrap_or((0, 0));
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
        cc_bw_bps,
        cc_min_rtt_us,
        ecn: raw.options & TCPI_OPT_ECN != 0,
        delivered_ce: raw.delivered_ce,
    })
}

/// `TCPI_OPT_ECN` (include/uapi/linux/tcp.h): ECN was negotiated at the handshake.
const TCPI_OPT_ECN: u8 = 8;

/// `struct tcp_bbr_info` of include/uapi/linux/inet_diag.h, what `TCP_CC_INFO` gives for BBR.
#[repr(C)]
#[derive(Default)]
struct RawBbrInfo {
    bw_lo: u32,
    bw_hi: u32,
    min_rtt: u32,
    pacing_gain: u32,
    cwnd_gain: u32,
}

/// `TCP_CC_INFO` (include/uapi/linux/tcp.h).
const TCP_CC_INFO: libc::c_int = 26;

/// BBR's bottleneck bandwidth estimate (bit/s) and minimum RTT (µs) when `fd` runs BBR; `None`
/// for another congestion control, whose `TCP_CC_INFO` (if any) means something else.
fn bbr_info(fd: RawFd) -> Option<(u64, u32)> {
    if crate::sockopt::congestion_of(fd).as_deref() != Some("bbr") {
        return None;
    }
    let mut raw = RawBbrInfo::default();
    let mut len = std::mem::size_of::<RawBbrInfo>() as libc::socklen_t;
    // Safety: `raw` is a plain-old-data repr(C) struct writable for `len` bytes; the kernel
    // writes at most `len` bytes and reports how many.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            TCP_CC_INFO,
            (&mut raw as *mut RawBbrInfo).cast(),
            &mut len,
        )
    };
    if rc != 0 || (len as usize) < std::mem::size_of::<RawBbrInfo>() {
        return None;
    }
    let bytes_per_s = (u64::from(raw.bw_hi) << 32) | u64::from(raw.bw_lo);
    Some((bytes_per_s.saturating_mul(8), raw.min_rtt))
}

/// Records the server's end of a data connection in its view of the test: `tcp_info` and socket
/// memory as they are now (call it before the socket closes).
pub(crate) fn record_end(view: &mut tcplab_results::peer::PeerView, fd: RawFd) {
    view.tcp_info = read(fd);
    view.memory = memory(fd);
}

/// `SO_MEMINFO`'s array: `SK_MEMINFO_VARS` u32 values (include/uapi/linux/sock_diag.h).
const SK_MEMINFO_VARS: usize = 9;

/// A socket's memory (`SO_MEMINFO`); `None` where the kernel does not answer.
pub fn memory(fd: RawFd) -> Option<tcplab_results::peer::SocketMemory> {
    let mut raw = [0u32; SK_MEMINFO_VARS];
    let mut len = std::mem::size_of_val(&raw) as libc::socklen_t;
    // Safety: `raw` is a u32 array writable for `len` bytes; the kernel writes at most `len`.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_MEMINFO,
            raw.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc != 0 || (len as usize) < std::mem::size_of_val(&raw) {
        return None;
    }
    // SK_MEMINFO_RMEM_ALLOC, RCVBUF, WMEM_ALLOC, SNDBUF, FWD_ALLOC, WMEM_QUEUED, OPTMEM,
    // BACKLOG, DROPS.
    Some(tcplab_results::peer::SocketMemory {
        rmem_alloc: raw[0],
        rcvbuf: raw[1],
        wmem_alloc: raw[2],
        sndbuf: raw[3],
        wmem_queued: raw[5],
        drops: raw[8],
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
        let mem = memory(s.as_raw_fd()).expect("SO_MEMINFO");
        assert!(mem.rcvbuf > 0 && mem.sndbuf > 0, "{mem:?}");
    }

    #[test]
    fn bbr_reports_its_bandwidth_estimate_and_others_none() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let c = std::net::TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
        let fd = c.as_raw_fd();
        let set = |name: &str| {
            // Safety: a plain setsockopt with a byte string of the given length.
            unsafe {
                libc::setsockopt(
                    fd,
                    libc::IPPROTO_TCP,
                    libc::TCP_CONGESTION,
                    name.as_ptr().cast(),
                    name.len() as libc::socklen_t,
                )
            }
        };
        assert_eq!(set("reno"), 0, "reno is always built in");
        assert_eq!(read(fd).expect("tcp_info").cc_bw_bps, 0);
        if set("bbr") == 0 {
            let info = read(fd).expect("tcp_info");
            assert!(info.cc_min_rtt_us > 0 || info.cc_bw_bps > 0, "{info:?}");
        }
    }
}
