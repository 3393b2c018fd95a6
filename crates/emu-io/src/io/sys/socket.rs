//! The `AF_PACKET` socket: creation, ring set-up options, bind, promiscuous membership, ring
//! statistics and the TX-ring kick. Thin wrappers; each returns `io::Error` and the caller adds
//! which interface and option failed.

use std::io;
use std::mem::size_of;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// `ETH_P_ALL`: receive every protocol.
pub const ETH_P_ALL: u16 = 0x0003;

/// Ring geometry in the kernel's `tpacket_req3` shape (the V2 request is its prefix).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingRequest {
    /// Bytes per block; a multiple of the page size.
    pub block_size: u32,
    /// Number of blocks.
    pub block_nr: u32,
    /// Bytes per frame (V2 only; V3 packs variable-size packets into blocks).
    pub frame_size: u32,
    /// Total frames (V2) = block_nr * block_size / frame_size.
    pub frame_nr: u32,
    /// V3 only: block retire timeout in ms.
    pub retire_blk_tov: u32,
}

impl RingRequest {
    /// Total bytes the ring occupies in the mapping.
    pub fn bytes(&self) -> usize {
        self.block_size as usize * self.block_nr as usize
    }
}

/// A packet socket; closed on drop (which also drops its promiscuous membership).
#[derive(Debug)]
pub struct PacketSocket {
    fd: OwnedFd,
}

/// Kernel ring counters read (and reset) with `PACKET_STATISTICS`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RingStats {
    /// Packets the socket saw (including dropped ones).
    pub packets: u64,
    /// Packets dropped because the RX ring was full.
    pub drops: u64,
}

impl PacketSocket {
    /// A raw packet socket that receives nothing until [`PacketSocket::bind`] gives it a protocol.
    pub fn open() -> io::Result<Self> {
        // Safety: plain socket(2); the returned fd is checked and then owned.
        let fd = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
                0,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // Safety: fd is a fresh, valid descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Self { fd })
    }

    fn setsockopt<T>(&self, name: libc::c_int, value: &T) -> io::Result<()> {
        setsockopt(self.fd.as_fd(), libc::SOL_PACKET, name, value)
    }

    /// `PACKET_VERSION` (TPACKET_V2 = 1, TPACKET_V3 = 2).
    pub fn set_version(&self, version: libc::c_int) -> io::Result<()> {
        self.setsockopt(libc::PACKET_VERSION, &version)
    }

    /// `PACKET_RX_RING` / `PACKET_TX_RING` with a V2 request.
    pub fn set_ring_v2(&self, tx: bool, req: &RingRequest) -> io::Result<()> {
        let raw = libc::tpacket_req {
            tp_block_size: req.block_size,
            tp_block_nr: req.block_nr,
            tp_frame_size: req.frame_size,
            tp_frame_nr: req.frame_nr,
        };
        self.setsockopt(
            if tx {
                libc::PACKET_TX_RING
            } else {
                libc::PACKET_RX_RING
            },
            &raw,
        )
    }

    /// `PACKET_RX_RING` with a V3 (block) request.
    pub fn set_rx_ring_v3(&self, req: &RingRequest) -> io::Result<()> {
        let raw = libc::tpacket_req3 {
            tp_block_size: req.block_size,
            tp_block_nr: req.block_nr,
            tp_frame_size: req.frame_size,
            tp_frame_nr: req.frame_nr,
            tp_retire_blk_tov: req.retire_blk_tov,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        self.setsockopt(libc::PACKET_RX_RING, &raw)
    }

    /// `PACKET_QDISC_BYPASS`: transmit straight to the driver (no qdisc, no `tc` taps).
    pub fn set_qdisc_bypass(&self) -> io::Result<()> {
        self.setsockopt(libc::PACKET_QDISC_BYPASS, &1_i32)
    }

    /// `PACKET_IGNORE_OUTGOING`: the kernel does not even queue our own transmissions to us.
    pub fn set_ignore_outgoing(&self) -> io::Result<()> {
        self.setsockopt(libc::PACKET_IGNORE_OUTGOING, &1_i32)
    }

    /// `PACKET_VNET_HDR`: every received frame is preceded by a `struct virtio_net_hdr` (GSO
    /// type and size, checksum offsets) and every sent one must be, so GSO super-packets and
    /// partial checksums cross user space whole.
    pub fn set_vnet_hdr(&self) -> io::Result<()> {
        /// `PACKET_VNET_HDR` from `linux/if_packet.h`.
        const PACKET_VNET_HDR: libc::c_int = 15;
        self.setsockopt(PACKET_VNET_HDR, &1_i32)
    }

    /// `SO_SNDBUF`: bytes of sent-but-not-yet-orphaned skbs the socket may hold before a
    /// non-blocking send fails with `EAGAIN`.
    pub fn set_sndbuf(&self, bytes: i32) -> io::Result<()> {
        // Safety: value points to a live i32; the kernel copies it.
        let rc = unsafe {
            libc::setsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_SNDBUF,
                (&bytes as *const i32).cast(),
                size_of::<i32>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    /// `PACKET_LOSS`: a malformed TX frame is marked `TP_STATUS_WRONG_FORMAT` and skipped
    /// instead of stalling the ring.
    pub fn set_tx_loss(&self) -> io::Result<()> {
        self.setsockopt(libc::PACKET_LOSS, &1_i32)
    }

    /// Promiscuous membership on `ifindex` (reference-counted by the kernel, dropped on close).
    pub fn set_promisc(&self, ifindex: i32) -> io::Result<()> {
        let mreq = libc::packet_mreq {
            mr_ifindex: ifindex,
            mr_type: libc::PACKET_MR_PROMISC as libc::c_ushort,
            mr_alen: 0,
            mr_address: [0; 8],
        };
        self.setsockopt(libc::PACKET_ADD_MEMBERSHIP, &mreq)
    }

    /// Binds to one interface; `protocol` in host order (`ETH_P_ALL` to receive, 0 for TX only).
    pub fn bind(&self, ifindex: i32, protocol: u16) -> io::Result<()> {
        // Safety: sockaddr_ll is plain old data; all-zero is a valid value.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = protocol.to_be();
        sll.sll_ifindex = ifindex;
        // Safety: sll is a valid sockaddr_ll and the length passed is its size.
        let rc = unsafe {
            libc::bind(
                self.fd.as_raw_fd(),
                (&sll as *const libc::sockaddr_ll).cast(),
                size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    /// Reads and resets `PACKET_STATISTICS` (the V3 struct is a superset of V2's; the kernel
    /// copies the size matching the socket's version, so the V3 buffer is always big enough).
    pub fn take_stats(&self) -> io::Result<RingStats> {
        let mut st = libc::tpacket_stats_v3 {
            tp_packets: 0,
            tp_drops: 0,
            tp_freeze_q_cnt: 0,
        };
        let mut len = size_of::<libc::tpacket_stats_v3>() as libc::socklen_t;
        // Safety: st is writable for len bytes; the kernel writes at most len bytes.
        let rc = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                (&mut st as *mut libc::tpacket_stats_v3).cast(),
                &mut len,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(RingStats {
            packets: u64::from(st.tp_packets),
            drops: u64::from(st.tp_drops),
        })
    }

    /// Asks the kernel to transmit every TX-ring frame marked `TP_STATUS_SEND_REQUEST`.
    /// Non-blocking: returns after the frames were handed to the driver.
    pub fn kick_tx(&self) -> io::Result<()> {
        // Safety: a zero-length send with a NULL buffer is the documented TX-ring trigger.
        let rc =
            unsafe { libc::send(self.fd.as_raw_fd(), std::ptr::null(), 0, libc::MSG_DONTWAIT) };
        if rc < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }
}

impl AsFd for PacketSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// `setsockopt(fd, level, name, value)` for a plain-data `value` (shared with `sys::xsk`).
pub(crate) fn setsockopt<T>(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
    value: &T,
) -> io::Result<()> {
    // Safety: value points to a live T of the size passed; the kernel copies it.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (value as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}
