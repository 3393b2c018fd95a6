//! [`SendBatch`]: many frames to one egress in one go: a packet socket's `sendmmsg(2)`, or
//! an AF_XDP socket's TX ring and `sendto` kicks ([`TxSock`]).
//!
//! Why not the TX ring: a TPACKET TX-ring skb points into the ring's pages and is marked
//! zero-copy, so when veth hands it to another namespace the kernel copies it again
//! (`skb_copy_ubufs`, 6 % of all CPU in a perf profile of a bulk TCP flow, plus page
//! allocations) after user space already copied it into the ring. `sendmmsg` copies each frame
//! once, from wherever it lies (a slab slot or the RX ring itself), into an ordinary skb.

use std::io;
use std::os::fd::{AsFd, AsRawFd};

use super::socket::PacketSocket;
use super::xsk::XskSocket;
use crate::io::ring::xsk::XskTx;

/// Where a [`SendBatch`] sends.
#[derive(Debug)]
pub enum TxSock {
    /// `sendmmsg` on a packet socket.
    Packet(PacketSocket),
    /// The TX ring of the interface's AF_XDP socket (shared with the direction that receives
    /// on it, which uses only its RX ring).
    Xsk {
        /// The TX ring, completion ring and TX chunks, owned by this direction (declared
        /// first: it points into the socket's mappings).
        ring: XskTx,
        /// The socket (kicks).
        sock: std::sync::Arc<XskSocket>,
    },
}

impl TxSock {
    /// The packet socket, if this is one.
    pub fn packet(&self) -> Option<&PacketSocket> {
        match self {
            Self::Packet(s) => Some(s),
            Self::Xsk { .. } => None,
        }
    }
}

/// What one [`SendBatch::send`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SendOutcome {
    /// Frames the kernel accepted.
    pub sent: u32,
    /// Their bytes (including any virtio-net header prefix).
    pub sent_bytes: u64,
    /// Frames the kernel refused (each one is skipped and the rest still sent).
    pub failed: u32,
    /// `sendmmsg` calls made.
    pub calls: u32,
}

/// Preallocated `iovec` / `mmsghdr` arrays for up to `capacity` frames per call.
#[derive(Debug)]
pub struct SendBatch {
    iov: Vec<libc::iovec>,
    hdr: Vec<libc::mmsghdr>,
    capacity: usize,
}

// Safety: the raw pointers in `iov`/`hdr` are written and used only inside `send`, which
// borrows the frames for its whole duration; between calls they are stale and never read.
unsafe impl Send for SendBatch {}

impl SendBatch {
    /// Room for `capacity` frames per call (allocated now, never on the packet path).
    pub fn new(capacity: usize) -> Self {
        Self {
            iov: Vec::with_capacity(capacity * 2),
            hdr: Vec::with_capacity(capacity),
            capacity,
        }
    }

    /// Most frames per call.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Sends each item (`prefix` then `frame`, gathered into one packet; `prefix` is the
    /// virtio-net header in GSO mode, empty otherwise) on `sock`. Items beyond `capacity` are
    /// ignored. A refused frame is counted and skipped; the rest are still sent.
    pub fn send<'a>(
        &mut self,
        sock: &mut TxSock,
        items: impl Iterator<Item = (&'a [u8], &'a [u8])>,
    ) -> SendOutcome {
        match sock {
            TxSock::Packet(s) => self.send_mmsg(s, items),
            TxSock::Xsk { sock, ring } => send_xsk(sock, ring, items.take(self.capacity)),
        }
    }

    fn send_mmsg<'a>(
        &mut self,
        sock: &PacketSocket,
        items: impl Iterator<Item = (&'a [u8], &'a [u8])>,
    ) -> SendOutcome {
        self.iov.clear();
        self.hdr.clear();
        for (prefix, frame) in items.take(self.capacity) {
            self.iov.push(iovec(prefix));
            self.iov.push(iovec(frame));
        }
        let n = self.iov.len() / 2;
        let base = self.iov.as_mut_ptr();
        for i in 0..n {
            // Safety: zeroed mmsghdr is a valid "no address, no control data" message.
            let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
            // Safety: 2*i+1 < iov.len(); the vector is not resized until the next call.
            h.msg_hdr.msg_iov = unsafe { base.add(2 * i) };
            h.msg_hdr.msg_iovlen = 2;
            self.hdr.push(h);
        }
        let mut out = SendOutcome::default();
        let mut i = 0;
        while i < n {
            out.calls += 1;
            match sendmmsg(sock, &mut self.hdr[i..n]) {
                Ok(k) if k > 0 => {
                    for h in &self.hdr[i..i + k] {
                        out.sent_bytes += u64::from(h.msg_len);
                    }
                    out.sent += k as u32;
                    i += k;
                }
                // The message at `i` failed (no buffer, device busy, bad frame): skip it.
                _ => {
                    out.failed += 1;
                    i += 1;
                }
            }
        }
        out
    }
}

/// Copies the frames into TX chunks, publishes them and kicks until the kernel has taken them
/// all (copy mode takes at most 32 per `sendto`), within a bounded number of calls; what it
/// has not taken by then leaves with the next batch's kicks.
fn send_xsk<'a>(
    sock: &XskSocket,
    ring: &mut XskTx,
    items: impl Iterator<Item = (&'a [u8], &'a [u8])>,
) -> SendOutcome {
    let mut out = SendOutcome::default();
    ring.reclaim();
    for (prefix, frame) in items {
        if ring.push(prefix, frame) {
            out.sent += 1;
            out.sent_bytes += (prefix.len() + frame.len()) as u64;
        } else {
            out.failed += 1;
        }
    }
    ring.publish();
    let limit = 4 + 2 * ring.pending().div_ceil(32);
    while out.calls < limit && ring.pending() > 0 {
        out.calls += 1;
        match sock.kick_tx() {
            Ok(()) => {}
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EAGAIN | libc::EBUSY | libc::ENOBUFS)
                ) => {}
            Err(_) => break,
        }
    }
    out
}

fn iovec(b: &[u8]) -> libc::iovec {
    libc::iovec {
        iov_base: b.as_ptr().cast_mut().cast(),
        iov_len: b.len(),
    }
}

fn sendmmsg(sock: &PacketSocket, msgs: &mut [libc::mmsghdr]) -> io::Result<usize> {
    // Safety: `msgs` holds valid headers whose iovecs point at buffers borrowed by the caller
    // for the duration of this call; the kernel only reads them (and writes msg_len).
    let rc = unsafe {
        libc::sendmmsg(
            sock.as_fd().as_raw_fd(),
            msgs.as_mut_ptr(),
            msgs.len() as libc::c_uint,
            libc::MSG_DONTWAIT,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc as usize)
    }
}
