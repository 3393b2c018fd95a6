//! The AF_XDP route's ports ([`RxRingKind::Xdp`], [`TxKind::Xsk`]): one AF_XDP socket per
//! interface, split into an [`RxPort`] (its RX ring, for the direction receiving there) and a
//! [`TxPort`] (its TX ring, for the direction sending there).

use std::sync::Arc;

use crate::error::IoError;
use crate::io::port::{RxPort, RxSock, TxPort};
use crate::io::sys::batch::{SendBatch, TxSock};
use crate::io::sys::iface::IfaceInfo;
use crate::io::sys::xsk::{XskSocket, XskSpec, frame_size_for_mtu};
use crate::options::{IoOptions, RxRingKind, TxKind};

/// True if `opts` puts an AF_XDP socket on the interfaces.
pub fn uses_xsk(opts: &IoOptions) -> bool {
    opts.rings.rx == RxRingKind::Xdp || opts.effective_tx() == TxKind::Xsk
}

/// Opens `iface`'s AF_XDP socket: RX chunks (and the XDP program) if `opts` receives over
/// AF_XDP, TX chunks if it sends over it. `None` if neither.
pub fn open(iface: &IfaceInfo, opts: &IoOptions) -> Result<Option<Arc<XskSocket>>, IoError> {
    let frames = opts.effective_ring_frames();
    let spec = XskSpec {
        ifindex: iface.index,
        frame_size: frame_size_for_mtu(iface.mtu),
        rx_frames: if opts.rings.rx == RxRingKind::Xdp {
            frames
        } else {
            0
        },
        tx_frames: if opts.effective_tx() == TxKind::Xsk {
            frames
        } else {
            0
        },
    };
    if spec.rx_frames == 0 && spec.tx_frames == 0 {
        return Ok(None);
    }
    if spec.rx_frames > 0 && iface.rx_queues > 1 {
        return Err(IoError::XdpQueues {
            iface: iface.name.clone(),
            queues: iface.rx_queues,
        });
    }
    XskSocket::open(spec)
        .map(|s| Some(Arc::new(s)))
        .map_err(|e| match e.source.raw_os_error() {
            Some(libc::EPERM | libc::EACCES) => IoError::NotPermitted {
                iface: iface.name.clone(),
            },
            _ => IoError::Xdp {
                iface: iface.name.clone(),
                what: e.what,
                source: e.source,
                log: e.log,
            },
        })
}

/// The RX port over `sock`'s RX ring.
pub fn rx_port(iface: &IfaceInfo, sock: &Arc<XskSocket>) -> Result<RxPort, IoError> {
    let ring = sock.rx_side().ok_or_else(|| no_ring(iface, "RX"))?;
    Ok(RxPort {
        ring: Box::new(ring),
        _map: None,
        sock: RxSock::Xsk {
            sock: Arc::clone(sock),
            reported: 0,
        },
    })
}

/// The TX port over `sock`'s TX ring.
pub fn tx_port(
    iface: &IfaceInfo,
    sock: &Arc<XskSocket>,
    opts: &IoOptions,
) -> Result<TxPort, IoError> {
    let ring = sock.tx_side().ok_or_else(|| no_ring(iface, "TX"))?;
    Ok(TxPort::Send {
        max_frame: ring.max_frame(),
        batch: SendBatch::new(opts.tuning.batch as usize),
        sock: TxSock::Xsk {
            ring,
            sock: Arc::clone(sock),
        },
    })
}

fn no_ring(iface: &IfaceInfo, which: &'static str) -> IoError {
    IoError::Xdp {
        iface: iface.name.clone(),
        what: which,
        source: std::io::Error::other("the AF_XDP socket was opened without this ring"),
        log: String::new(),
    }
}
