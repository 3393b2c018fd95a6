//! Opening one interface end: an RX port (promiscuous, `ETH_P_ALL`, own transmissions
//! ignored, RX ring mapped) or a TX port (qdisc bypass, TX ring mapped, receives nothing).
//! Each step's failure names the interface and the socket option.

use std::os::fd::{AsFd, BorrowedFd};

use crate::error::IoError;
use crate::io::ring::rx_v2::RxRingV2;
use crate::io::ring::rx_v3::RxRingV3;
use crate::io::ring::tx_v2::TxRingV2;
use crate::io::ring::{RingMem, RxRing};
use crate::io::sys::batch::{SendBatch, TxSock};
use crate::io::sys::iface::IfaceInfo;
use crate::io::sys::mmap::Mmap;
use crate::io::sys::socket::{ETH_P_ALL, PacketSocket, RingRequest, RingStats};
use crate::options::{IoOptions, RxRingKind, TxKind};

/// Ring slot size for an interface MTU: header room + Ethernet + VLAN tag + MTU, rounded up to
/// a power of two, at least 2048.
pub fn frame_size_for_mtu(mtu: u32) -> u32 {
    (mtu.saturating_add(18 + 96)).next_power_of_two().max(2048)
}

/// Largest frame in GSO mode: a 64 KiB super-packet plus Ethernet, VLAN and virtio-net
/// headers (the kernel's default `gso_max_size` is 65536).
pub const GSO_MAX_FRAME: usize = 65_536 + 256;

/// Ring slot size in GSO mode: 17 pages (68 KiB), room for the TPACKET header, the
/// virtio-net header and a 64 KiB super-packet.
pub const GSO_FRAME_SIZE: u32 = 17 * 4096;

/// Ring slot size for `iface` under `opts`.
fn frame_size(iface: &IfaceInfo, opts: &IoOptions) -> u32 {
    if opts.gso() {
        GSO_FRAME_SIZE.max(frame_size_for_mtu(iface.mtu))
    } else {
        frame_size_for_mtu(iface.mtu)
    }
}

/// V2 geometry: blocks of 16 frames (a block is a multiple of the page size for frames of at
/// least 256 bytes); one frame per block for GSO-sized frames (17 pages, so every block is
/// page-aligned without a 1 MiB contiguous allocation).
fn v2_request(frame_size: u32, frames: u32) -> RingRequest {
    let per_block = if frame_size % 4096 == 0 && frame_size > 16_384 {
        1
    } else {
        16.min(frames)
    };
    RingRequest {
        block_size: frame_size * per_block,
        block_nr: frames / per_block,
        frame_size,
        frame_nr: frames,
        retire_blk_tov: 0,
    }
}

/// V3 geometry: the same memory as V2 in 256 KiB blocks (at least two).
fn v3_request(frame_size: u32, frames: u32, retire_ms: u32) -> RingRequest {
    let block_size = (256 * 1024).max(frame_size);
    let block_nr =
        ((u64::from(frame_size) * u64::from(frames)) / u64::from(block_size)).max(2) as u32;
    RingRequest {
        block_size,
        block_nr,
        frame_size,
        frame_nr: block_size / frame_size * block_nr,
        retire_blk_tov: retire_ms,
    }
}

/// The receiving end on one interface.
#[derive(Debug)]
pub struct RxPort {
    /// Parsed ring (points into `_map` or the AF_XDP socket's UMEM; declared first so it is
    /// dropped first).
    pub ring: Box<dyn RxRing>,
    pub(crate) _map: Option<Mmap>,
    /// The socket (ring statistics, poll).
    pub sock: RxSock,
}

/// The socket an [`RxPort`] receives on.
#[derive(Debug)]
pub enum RxSock {
    /// A packet socket with a TPACKET RX ring.
    Packet(PacketSocket),
    /// The interface's AF_XDP socket (its TX side may belong to the other direction).
    Xsk {
        /// The socket.
        sock: std::sync::Arc<crate::io::sys::xsk::XskSocket>,
        /// Cumulative drops already reported (the kernel's counters never reset).
        reported: u64,
    },
}

impl RxSock {
    /// Ring statistics since the last call: frames dropped because the ring (or, for AF_XDP,
    /// the fill ring) was full.
    pub fn take_stats(&mut self) -> std::io::Result<RingStats> {
        match self {
            Self::Packet(s) => s.take_stats(),
            Self::Xsk { sock, reported } => {
                let total = sock.rx_drops()?;
                let drops = total.saturating_sub(*reported);
                *reported = total;
                Ok(RingStats { packets: 0, drops })
            }
        }
    }
}

impl AsFd for RxSock {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            Self::Packet(s) => s.as_fd(),
            Self::Xsk { sock, .. } => sock.as_fd(),
        }
    }
}

/// The transmitting end on one interface: a TX ring, or `sendmmsg` batches.
#[derive(Debug)]
pub enum TxPort {
    /// TPACKET_V2 TX ring.
    Ring {
        /// Parsed ring (points into `_map`).
        ring: TxRingV2,
        /// The mapping (kept alive for `ring`).
        _map: Mmap,
        /// The socket (kick).
        sock: PacketSocket,
    },
    /// `sendmmsg` from the frames' own memory, or an AF_XDP TX ring.
    Send {
        /// Scratch message arrays.
        batch: SendBatch,
        /// The socket.
        sock: TxSock,
        /// Largest frame accepted (including a virtio-net header in GSO mode).
        max_frame: usize,
    },
}

impl TxPort {
    /// Largest frame this port sends (the slab slot size).
    pub fn max_frame(&self) -> usize {
        match self {
            Self::Ring { ring, .. } => ring.max_frame(),
            Self::Send { max_frame, .. } => *max_frame,
        }
    }
}

impl AsFd for RxPort {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.sock.as_fd()
    }
}

fn mem_of(map: &Mmap) -> RingMem {
    // Safety: the mapping is page-aligned, `len` bytes long, and lives in the same port
    // struct as the ring built on it (dropped after the ring).
    unsafe { RingMem::new(map.as_ptr(), map.len()) }
}

/// Opens the RX side on `iface`.
pub fn open_rx(iface: &IfaceInfo, opts: &IoOptions) -> Result<RxPort, IoError> {
    let name = iface.name.as_str();
    let err = |what| move |e| IoError::setup(name, what, e);
    let sock = PacketSocket::open().map_err(err("socket(AF_PACKET)"))?;
    let frame_size = frame_size(iface, opts);
    let frames = opts.effective_ring_frames();
    // Any kind but V3 means V2 here (AF_XDP ports are opened by `open_ports`).
    let v3 = opts.rings.rx == RxRingKind::V3;
    let (req, version) = if v3 {
        (
            v3_request(frame_size, frames, opts.tuning.v3_retire_ms),
            libc::tpacket_versions::TPACKET_V3,
        )
    } else {
        (
            v2_request(frame_size, frames),
            libc::tpacket_versions::TPACKET_V2,
        )
    };
    sock.set_version(version as libc::c_int)
        .map_err(err("PACKET_VERSION"))?;
    if opts.carries_vnet() {
        sock.set_vnet_hdr().map_err(err("PACKET_VNET_HDR"))?;
    }
    if v3 {
        sock.set_rx_ring_v3(&req)
    } else {
        sock.set_ring_v2(false, &req)
    }
    .map_err(err("PACKET_RX_RING"))?;
    let map = Mmap::packet_rings(sock.as_fd(), req.bytes()).map_err(err("mmap of the RX ring"))?;
    let mem = mem_of(&map);
    let ring: Box<dyn RxRing> = if v3 {
        Box::new(RxRingV3::new(
            mem,
            req.block_size as usize,
            req.block_nr as usize,
        ))
    } else {
        Box::new(RxRingV2::new(
            mem,
            frame_size as usize,
            req.frame_nr as usize,
        ))
    };
    sock.set_promisc(iface.index)
        .map_err(err("PACKET_ADD_MEMBERSHIP promiscuous"))?;
    // Older kernels lack it; PACKET_OUTGOING frames are filtered in user space anyway.
    let _ = sock.set_ignore_outgoing();
    sock.bind(iface.index, ETH_P_ALL).map_err(err("bind"))?;
    Ok(RxPort {
        ring,
        _map: Some(map),
        sock: RxSock::Packet(sock),
    })
}

/// The ports of one direction: where it receives, where it sends.
pub type Ports = (RxPort, TxPort);

/// Opens both directions' ports on `a` and `b`: (a->b, b->a). With AF_XDP on either side
/// ([`RxRingKind::Xdp`], [`TxKind::Xsk`]) each interface gets one AF_XDP socket whose RX
/// ring serves the direction receiving there and whose TX ring the direction sending there.
pub fn open_ports(
    a: &IfaceInfo,
    b: &IfaceInfo,
    opts: &IoOptions,
) -> Result<(Ports, Ports), IoError> {
    if !crate::io::xsk_port::uses_xsk(opts) {
        return Ok((
            (open_rx(a, opts)?, open_tx(b, opts)?),
            (open_rx(b, opts)?, open_tx(a, opts)?),
        ));
    }
    let (xa, xb) = (
        crate::io::xsk_port::open(a, opts)?,
        crate::io::xsk_port::open(b, opts)?,
    );
    let rx = |i: &IfaceInfo, x| match x {
        Some(x) => crate::io::xsk_port::rx_port(i, x),
        None => open_rx(i, opts),
    };
    let tx = |i: &IfaceInfo, x| match x {
        Some(x) if opts.effective_tx() == TxKind::Xsk => crate::io::xsk_port::tx_port(i, x, opts),
        _ => open_tx(i, opts),
    };
    let ab = (
        rx(a, xa.as_ref().filter(|x| x.receives()))?,
        tx(b, xb.as_ref())?,
    );
    let ba = (
        rx(b, xb.as_ref().filter(|x| x.receives()))?,
        tx(a, xa.as_ref())?,
    );
    Ok((ab, ba))
}

/// Opens the TX side on `iface`: a TX ring or a `sendmmsg` socket ([`IoOptions::effective_tx`]).
pub fn open_tx(iface: &IfaceInfo, opts: &IoOptions) -> Result<TxPort, IoError> {
    let name = iface.name.as_str();
    let err = |what| move |e| IoError::setup(name, what, e);
    let sock = PacketSocket::open().map_err(err("socket(AF_PACKET)"))?;
    sock.set_qdisc_bypass()
        .map_err(err("PACKET_QDISC_BYPASS"))?;
    if opts.effective_tx() == TxKind::Sendmmsg {
        if opts.carries_vnet() {
            sock.set_vnet_hdr().map_err(err("PACKET_VNET_HDR"))?;
        }
        // Room for a few batches of super-packets not yet orphaned by veth; the kernel caps
        // it at net.core.wmem_max (doubled), which is enough for 1500-byte frames.
        let _ = sock.set_sndbuf(16 << 20);
        sock.bind(iface.index, 0).map_err(err("bind"))?;
        let max_frame = if opts.gso() {
            GSO_MAX_FRAME
        } else {
            frame_size(iface, opts) as usize - crate::io::ring::tx_v2::DATA_OFFSET
        };
        return Ok(TxPort::Send {
            batch: SendBatch::new(opts.tuning.batch as usize),
            sock: TxSock::Packet(sock),
            max_frame,
        });
    }
    let frame_size = frame_size(iface, opts);
    let req = v2_request(frame_size, opts.effective_ring_frames());
    sock.set_version(libc::tpacket_versions::TPACKET_V2 as libc::c_int)
        .map_err(err("PACKET_VERSION"))?;
    sock.set_tx_loss().map_err(err("PACKET_LOSS"))?;
    sock.set_ring_v2(true, &req)
        .map_err(err("PACKET_TX_RING"))?;
    let map = Mmap::packet_rings(sock.as_fd(), req.bytes()).map_err(err("mmap of the TX ring"))?;
    let ring = TxRingV2::new(mem_of(&map), frame_size as usize, req.frame_nr as usize);
    sock.bind(iface.index, 0).map_err(err("bind"))?;
    Ok(TxPort::Ring {
        ring,
        _map: map,
        sock,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geometry_fits_the_kernel_rules() {
        assert_eq!(frame_size_for_mtu(1500), 2048);
        assert_eq!(frame_size_for_mtu(9000), 16_384);
        let r = v2_request(GSO_FRAME_SIZE, 512);
        assert_eq!(
            (r.block_size, r.block_nr, r.frame_nr),
            (GSO_FRAME_SIZE, 512, 512)
        );
        assert!(GSO_FRAME_SIZE as usize >= GSO_MAX_FRAME + 64 + 10);
        for frames in [64, 4096, 262_144] {
            let r = v2_request(2048, frames);
            assert_eq!(r.block_size % 4096, 0);
            assert_eq!(r.block_nr * (r.block_size / r.frame_size), r.frame_nr);
            let r = v3_request(2048, frames, 1);
            assert_eq!(r.block_size % 4096, 0);
            assert!(r.block_nr >= 2);
            assert!(r.bytes() >= 2048 * frames as usize);
        }
    }
}
