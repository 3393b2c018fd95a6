//! The AF_XDP socket of one interface (queue 0, copy mode): its UMEM, its four rings mapped,
//! bound to the interface, and (when it receives) the XDP program that redirects the
//! interface's frames to it ([`super::bpf`]).
//!
//! One socket per interface serves both directions of the bridge: its RX ring (and the fill
//! ring) belong to the direction that receives on the interface, its TX ring (and the
//! completion ring) to the direction that sends out of it. The UMEM is split between them
//! (`io::ring::xsk`), so after set-up the two threads share only the fd.
//!
//! Veth has no zero-copy AF_XDP: in copy mode the kernel copies each received frame from the
//! XDP buffer into the UMEM, and each transmitted one from the UMEM into a new skb (`sendto`
//! runs `xsk_generic_xmit`, at most 32 frames per call).

use std::io;
use std::mem::size_of;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use super::bpf::{AttachError, META_LEN, XdpRedirect};
use super::mmap::Mmap;
use crate::io::ring::RingMem;
use crate::io::ring::xsk::{RingLayout, XskRing, XskRx, XskTx};

/// Where copy mode puts a received frame inside its chunk (`XDP_PACKET_HEADROOM`).
pub const XDP_HEADROOM: u32 = 256;
/// `SOL_XDP`.
const SOL_XDP: libc::c_int = 283;

/// What to open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XskSpec {
    /// Interface index.
    pub ifindex: i32,
    /// UMEM chunk size (2048 or 4096).
    pub frame_size: u32,
    /// Chunks (and RX/fill ring entries) for receiving; 0 = the socket does not receive.
    pub rx_frames: u32,
    /// Chunks (and TX/completion ring entries) for sending; 0 = the socket does not send.
    pub tx_frames: u32,
}

/// Chunk size for an MTU: 2048 if headroom, metadata and the frame fit, else 4096.
pub fn frame_size_for_mtu(mtu: u32) -> u32 {
    if XDP_HEADROOM + META_LEN as u32 + mtu + 18 <= 2048 {
        2048
    } else {
        4096
    }
}

/// Why opening failed: the step and the kernel's error (and the verifier log for the program).
#[derive(Debug)]
pub struct XskError {
    /// The step.
    pub what: &'static str,
    /// The kernel's error.
    pub source: io::Error,
    /// Verifier log, when the program was refused.
    pub log: String,
}

impl From<AttachError> for XskError {
    fn from(e: AttachError) -> Self {
        Self {
            what: e.what,
            source: e.source,
            log: e.log,
        }
    }
}

fn step(what: &'static str) -> impl Fn(io::Error) -> XskError {
    move |source| XskError {
        what,
        source,
        log: String::new(),
    }
}

/// One mapped ring.
#[derive(Debug)]
struct RingMap {
    map: Mmap,
    layout: RingLayout,
    size: u32,
    entry: usize,
}

impl RingMap {
    fn mem(&self) -> RingMem {
        // Safety: page-aligned mapping of `len` bytes owned by the socket, which every ring
        // built on it keeps alive through an Arc.
        unsafe { RingMem::new(self.map.as_ptr(), self.map.len()) }
    }

    fn ring(&self, producer_side: bool) -> XskRing {
        XskRing::new(
            self.mem(),
            self.layout,
            self.size,
            self.entry,
            producer_side,
        )
    }
}

/// An open, bound AF_XDP socket. Dropping it detaches the XDP program first.
#[derive(Debug)]
pub struct XskSocket {
    xdp: Option<XdpRedirect>,
    rx: Option<RingMap>,
    fill: RingMap,
    tx: Option<RingMap>,
    comp: RingMap,
    umem: Mmap,
    /// The TX socket when the interface both receives and sends (shares the UMEM).
    tx_fd: Option<OwnedFd>,
    fd: OwnedFd,
    spec: XskSpec,
}

// Safety: after set-up the mappings are touched only through the rings handed out by
// `rx_side` / `tx_side` (each owned by one thread, disjoint rings and UMEM chunks); the
// socket itself is used only for system calls on its fd, which the kernel serialises.
unsafe impl Sync for XskSocket {}
// Safety: as above; moving the handle moves nothing the kernel relies on.
unsafe impl Send for XskSocket {}

/// `setsockopt(fd, SOL_XDP, name, value)`.
fn setsockopt<T>(fd: &OwnedFd, name: libc::c_int, value: &T) -> io::Result<()> {
    super::socket::setsockopt(fd.as_fd(), SOL_XDP, name, value)
}

fn getsockopt<T>(fd: &OwnedFd, name: libc::c_int, value: &mut T) -> io::Result<()> {
    let mut len = size_of::<T>() as libc::socklen_t;
    // Safety: value is writable for len bytes; the kernel writes at most len bytes.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            SOL_XDP,
            name,
            (value as *mut T).cast(),
            &mut len,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn layout(o: &libc::xdp_ring_offset) -> RingLayout {
    RingLayout {
        producer: o.producer as usize,
        consumer: o.consumer as usize,
        desc: o.desc as usize,
    }
}

fn map_ring(
    fd: &OwnedFd,
    o: &libc::xdp_ring_offset,
    size: u32,
    entry: usize,
    pgoff: u64,
    what: &'static str,
) -> Result<RingMap, XskError> {
    let len = o.desc as usize + size as usize * entry;
    let map = Mmap::socket_at(fd.as_fd(), len, pgoff).map_err(step(what))?;
    Ok(RingMap {
        map,
        layout: layout(o),
        size,
        entry,
    })
}

fn new_socket() -> Result<OwnedFd, XskError> {
    // Safety: plain socket(2); the fd is checked and then owned.
    let raw = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return Err(step("socket(AF_XDP)")(io::Error::last_os_error()));
    }
    // Safety: fresh valid fd.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// `XDP_TX_RING`, and a send buffer with room for the skbs veth has not orphaned yet (the
/// default holds ~90 frames).
fn set_tx_ring(fd: &OwnedFd, entries: u32) -> Result<(), XskError> {
    setsockopt(fd, libc::XDP_TX_RING, &entries).map_err(step("XDP_TX_RING"))?;
    let bytes: libc::c_int = 16 << 20;
    // Best effort (capped by net.core.wmem_max), so a failure is not an error.
    let _ = super::socket::setsockopt(fd.as_fd(), libc::SOL_SOCKET, libc::SO_SNDBUF, &bytes);
    Ok(())
}

fn mmap_offsets(fd: &OwnedFd) -> Result<libc::xdp_mmap_offsets, XskError> {
    // Safety: all-zero is a valid xdp_mmap_offsets (plain integers).
    let mut off: libc::xdp_mmap_offsets = unsafe { std::mem::zeroed() };
    getsockopt(fd, libc::XDP_MMAP_OFFSETS, &mut off).map_err(step("XDP_MMAP_OFFSETS"))?;
    Ok(off)
}

/// Binds to queue 0 of `ifindex` (`flags`: `XDP_COPY`, or `XDP_SHARED_UMEM` with the UMEM
/// owner's fd).
fn bind(fd: &OwnedFd, ifindex: i32, flags: u16, shared_fd: u32) -> io::Result<()> {
    let sxdp = libc::sockaddr_xdp {
        sxdp_family: libc::AF_XDP as u16,
        sxdp_flags: flags,
        sxdp_ifindex: ifindex as u32,
        sxdp_queue_id: 0,
        sxdp_shared_umem_fd: shared_fd,
    };
    // Safety: sxdp is a valid sockaddr_xdp and the length passed is its size.
    let rc = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sxdp as *const libc::sockaddr_xdp).cast(),
            size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Ring entries for `frames` chunks (a power of two, at least 64: the kernel wants both UMEM
/// rings even on a socket that only receives or only sends).
fn ring_entries(frames: u32) -> u32 {
    frames.max(64).next_power_of_two()
}

impl XskSocket {
    /// Opens, maps and binds the socket to queue 0 of `spec.ifindex` in copy mode; when it
    /// receives, attaches the redirect program (native XDP) and points queue 0 at it.
    ///
    /// A socket that both receives and sends is two sockets sharing one UMEM
    /// (`XDP_SHARED_UMEM`, same queue): one with the RX ring, one with the TX ring. With one
    /// socket, every `ppoll` of the receiving direction also runs copy-mode transmission of
    /// the other direction's TX ring (`xsk_poll` → `__xsk_generic_xmit`), and the two threads
    /// fight over the socket's mutex (`mutex_spin_on_owner` 5.9 % of all CPU in a profile).
    pub fn open(spec: XskSpec) -> Result<Self, XskError> {
        let fd = new_socket()?;
        let (rx_n, tx_n) = (ring_entries(spec.rx_frames), ring_entries(spec.tx_frames));
        let (receives, sends) = (spec.rx_frames > 0, spec.tx_frames > 0);
        let chunks = u64::from(spec.rx_frames) + u64::from(spec.tx_frames);
        let umem = Mmap::anonymous((chunks * u64::from(spec.frame_size)) as usize)
            .map_err(step("mmap of the UMEM"))?;
        let reg = libc::xdp_umem_reg {
            addr: umem.as_ptr().as_ptr() as u64,
            len: umem.len() as u64,
            chunk_size: spec.frame_size,
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        };
        setsockopt(&fd, libc::XDP_UMEM_REG, &reg).map_err(step("XDP_UMEM_REG"))?;
        setsockopt(&fd, libc::XDP_UMEM_FILL_RING, &rx_n).map_err(step("XDP_UMEM_FILL_RING"))?;
        setsockopt(&fd, libc::XDP_UMEM_COMPLETION_RING, &tx_n)
            .map_err(step("XDP_UMEM_COMPLETION_RING"))?;
        if receives {
            setsockopt(&fd, libc::XDP_RX_RING, &rx_n).map_err(step("XDP_RX_RING"))?;
        } else {
            set_tx_ring(&fd, tx_n)?;
        }
        let off = mmap_offsets(&fd)?;
        let desc = size_of::<libc::xdp_desc>();
        let fill = map_ring(
            &fd,
            &off.fr,
            rx_n,
            8,
            libc::XDP_UMEM_PGOFF_FILL_RING,
            "mmap of the fill ring",
        )?;
        let comp = map_ring(
            &fd,
            &off.cr,
            tx_n,
            8,
            libc::XDP_UMEM_PGOFF_COMPLETION_RING,
            "mmap of the completion ring",
        )?;
        let rx = receives
            .then(|| {
                map_ring(
                    &fd,
                    &off.rx,
                    rx_n,
                    desc,
                    libc::XDP_PGOFF_RX_RING as u64,
                    "mmap of the RX ring",
                )
            })
            .transpose()?;
        let mut tx = (!receives)
            .then(|| {
                map_ring(
                    &fd,
                    &off.tx,
                    tx_n,
                    desc,
                    libc::XDP_PGOFF_TX_RING as u64,
                    "mmap of the TX ring",
                )
            })
            .transpose()?;
        bind(&fd, spec.ifindex, libc::XDP_COPY, 0)
            .map_err(step("bind(AF_XDP, queue 0, copy mode)"))?;
        let tx_fd = if receives && sends {
            let t = new_socket()?;
            set_tx_ring(&t, tx_n)?;
            let toff = mmap_offsets(&t)?;
            tx = Some(map_ring(
                &t,
                &toff.tx,
                tx_n,
                desc,
                libc::XDP_PGOFF_TX_RING as u64,
                "mmap of the TX ring",
            )?);
            bind(
                &t,
                spec.ifindex,
                libc::XDP_SHARED_UMEM,
                fd.as_raw_fd() as u32,
            )
            .map_err(step("bind(AF_XDP, queue 0, shared UMEM)"))?;
            Some(t)
        } else {
            None
        };
        let xdp = if receives {
            let x = XdpRedirect::attach(spec.ifindex, 1)?;
            x.insert(0, fd.as_fd())
                .map_err(step("BPF_MAP_UPDATE_ELEM (XSKMAP)"))?;
            Some(x)
        } else {
            None
        };
        Ok(Self {
            xdp,
            rx,
            fill,
            tx,
            comp,
            umem,
            tx_fd,
            fd,
            spec,
        })
    }

    fn umem_mem(&self) -> RingMem {
        // Safety: page-aligned anonymous mapping owned by the socket, kept alive by the Arc
        // every ring side holds.
        unsafe { RingMem::new(self.umem.as_ptr(), self.umem.len()) }
    }

    /// The RX side (RX + fill rings, chunks `0..rx_frames`). Call once: two RX sides would
    /// both consume the same ring.
    pub fn rx_side(&self) -> Option<XskRx> {
        let rx = self.rx.as_ref()?;
        Some(XskRx::new(
            rx.ring(false),
            self.fill.ring(true),
            self.umem_mem(),
            self.spec.frame_size,
            self.spec.rx_frames,
            // Frames carry a stamp only where the kernel took the stamping program.
            if self.xdp.as_ref().is_some_and(XdpRedirect::stamped) {
                META_LEN
            } else {
                0
            },
        ))
    }

    /// The TX side (TX + completion rings, the chunks after the RX ones). Call once.
    pub fn tx_side(&self) -> Option<XskTx> {
        let tx = self.tx.as_ref()?;
        Some(XskTx::new(
            tx.ring(true),
            self.comp.ring(false),
            self.umem_mem(),
            self.spec.frame_size,
            self.spec.rx_frames,
            self.spec.tx_frames,
        ))
    }

    /// Asks the kernel to transmit what the TX ring holds (copy mode sends at most 32 frames
    /// per call and answers `EAGAIN` when more remain).
    pub fn kick_tx(&self) -> io::Result<()> {
        // Safety: a zero-length sendto with no buffer and no address is the AF_XDP TX trigger.
        let rc = unsafe {
            libc::sendto(
                self.tx_fd.as_ref().unwrap_or(&self.fd).as_raw_fd(),
                std::ptr::null(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null(),
                0,
            )
        };
        if rc < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    /// Frames the kernel dropped before our RX ring since the socket opened: no free fill
    /// chunk (`rx_dropped`) or RX ring full (`rx_ring_full`). Cumulative.
    pub fn rx_drops(&self) -> io::Result<u64> {
        // Safety: plain integers; all-zero is valid.
        let mut st: libc::xdp_statistics = unsafe { std::mem::zeroed() };
        getsockopt(&self.fd, libc::XDP_STATISTICS, &mut st)?;
        Ok(st.rx_dropped + st.rx_ring_full)
    }

    /// True if the redirect program is attached (the socket receives).
    pub fn receives(&self) -> bool {
        self.xdp.is_some()
    }
}

impl AsFd for XskSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_sizes_fit_headroom_stamp_and_frame() {
        assert_eq!(frame_size_for_mtu(1500), 2048);
        assert_eq!(frame_size_for_mtu(1766), 2048);
        assert_eq!(frame_size_for_mtu(1767), 4096);
        assert_eq!(ring_entries(0), 64);
        assert_eq!(ring_entries(4096), 4096);
        assert_eq!(ring_entries(100), 128);
    }
}
