//! `AF_PACKET` ring layouts parsed over raw shared memory: TPACKET_V2 RX frames ([`rx_v2`]),
//! TPACKET_V3 RX blocks ([`rx_v3`]), the TPACKET_V2 TX ring ([`tx_v2`]) and the AF_XDP
//! rings ([`xsk`]).
//!
//! No system calls here: a ring is a [`RingMem`] (base pointer + length) plus a cursor, so the
//! tests build rings on synthetic memory exactly as the kernel lays them out and check the
//! hand-over protocol (status words with acquire/release ordering). Offsets are validated
//! against the memory bounds before any read; a malformed entry is reported, not trusted.

pub mod rx_v2;
pub mod rx_v3;
pub mod tx_v2;
pub mod xsk;

use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

/// `TP_STATUS_KERNEL`: the entry belongs to the kernel (RX) / is free (TX, `AVAILABLE`).
pub const TP_STATUS_KERNEL: u32 = 0;
/// `TP_STATUS_USER`: an RX entry holds data for user space.
pub const TP_STATUS_USER: u32 = 1;
#[cfg(test)]
/// `TP_STATUS_LOSING`: the kernel dropped packets since this RX entry was filled.
pub const TP_STATUS_LOSING: u32 = 1 << 2;
/// `TP_STATUS_CSUMNOTREADY`: the frame's L4 checksum is partial (checksum offload still on).
pub const TP_STATUS_CSUMNOTREADY: u32 = 1 << 3;
/// `TP_STATUS_SEND_REQUEST`: a TX frame handed to the kernel.
pub const TP_STATUS_SEND_REQUEST: u32 = 1;
#[cfg(test)]
/// `TP_STATUS_SENDING`: a TX frame the kernel is transmitting.
pub const TP_STATUS_SENDING: u32 = 2;
/// `TP_STATUS_WRONG_FORMAT`: a TX frame the kernel refused (with `PACKET_LOSS` set).
pub const TP_STATUS_WRONG_FORMAT: u32 = 4;
/// `TP_STATUS_VLAN_VALID`: the kernel took an 802.1Q tag out of the frame (`tp_vlan_tci`).
pub const TP_STATUS_VLAN_VALID: u32 = 1 << 4;
/// `TP_STATUS_VLAN_TPID_VALID`: `tp_vlan_tpid` holds the tag's protocol id.
pub const TP_STATUS_VLAN_TPID_VALID: u32 = 1 << 6;
/// The 802.1Q tag protocol id, used when the kernel did not report one.
const ETH_P_8021Q: u16 = 0x8100;
/// Destination + source MAC: where a VLAN tag goes back in.
const MACS: usize = 12;
/// `PACKET_OUTGOING` in `sockaddr_ll.sll_pkttype`: a frame this host sent.
pub const PACKET_OUTGOING: u8 = 4;
/// Offset of `sll_pkttype` inside `sockaddr_ll`.
const SLL_PKTTYPE: usize = 10;

/// A view of ring memory shared with the kernel. Copyable; it does not own the memory.
#[derive(Debug, Clone, Copy)]
pub struct RingMem {
    base: NonNull<u8>,
    len: usize,
}

// Safety: RingMem is a pointer + length; all access goes through atomics or copies of entries
// that the hand-over protocol gives exclusively to user space.
unsafe impl Send for RingMem {}

impl RingMem {
    /// # Safety
    /// `base` must be valid for reads and writes of `len` bytes, 16-byte aligned, for as long
    /// as this value or any ring built on it is used.
    pub unsafe fn new(base: NonNull<u8>, len: usize) -> Self {
        Self { base, len }
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn in_bounds(&self, off: usize, n: usize) -> bool {
        off.checked_add(n).is_some_and(|end| end <= self.len)
    }

    /// The status word at `off` (4-byte aligned, in bounds) as an atomic.
    fn status(&self, off: usize) -> Option<&AtomicU32> {
        if !self.in_bounds(off, 4) || off % 4 != 0 {
            return None;
        }
        // Safety: in bounds and 4-byte aligned (base is 16-aligned); the word is shared with
        // the kernel, which is why it is only accessed atomically.
        Some(unsafe { &*self.base.as_ptr().add(off).cast::<AtomicU32>() })
    }

    fn load_status(&self, off: usize) -> u32 {
        self.status(off)
            .map_or(u32::MAX, |s| s.load(Ordering::Acquire))
    }

    fn store_status(&self, off: usize, value: u32) {
        if let Some(s) = self.status(off) {
            s.store(value, Ordering::Release);
        }
    }

    /// Reads a plain field (only after the status word handed the entry to us).
    fn read_u32(&self, off: usize) -> Option<u32> {
        if !self.in_bounds(off, 4) {
            return None;
        }
        // Safety: in bounds; unaligned read is fine; the entry is owned by user space now.
        Some(unsafe { self.base.as_ptr().add(off).cast::<u32>().read_unaligned() })
    }

    fn read_u16(&self, off: usize) -> Option<u16> {
        if !self.in_bounds(off, 2) {
            return None;
        }
        // Safety: as read_u32.
        Some(unsafe { self.base.as_ptr().add(off).cast::<u16>().read_unaligned() })
    }

    fn read_u8(&self, off: usize) -> Option<u8> {
        if !self.in_bounds(off, 1) {
            return None;
        }
        // Safety: in bounds.
        Some(unsafe { self.base.as_ptr().add(off).read() })
    }

    fn write_u32(&self, off: usize, value: u32) {
        if self.in_bounds(off, 4) {
            // Safety: in bounds; the entry is owned by user space (status not yet handed over).
            unsafe {
                self.base
                    .as_ptr()
                    .add(off)
                    .cast::<u32>()
                    .write_unaligned(value)
            }
        }
    }

    /// Copies `dst.len()` bytes from `off`; false (nothing copied) if out of bounds.
    pub fn copy_out(&self, off: usize, dst: &mut [u8]) -> bool {
        if !self.in_bounds(off, dst.len()) {
            return false;
        }
        // Safety: source in bounds and owned by user space; dst is a distinct Rust buffer.
        unsafe {
            std::ptr::copy_nonoverlapping(self.base.as_ptr().add(off), dst.as_mut_ptr(), dst.len())
        }
        true
    }

    /// The bytes `off..off + len`, borrowed; `None` if out of bounds. Only for an entry the
    /// hand-over protocol gave to user space (the kernel does not write it until released).
    pub fn slice(&self, off: usize, len: usize) -> Option<&[u8]> {
        if !self.in_bounds(off, len) {
            return None;
        }
        // Safety: in bounds of a mapping valid for the ring's lifetime; the entry belongs to
        // user space until its status is handed back, and callers give it back only after
        // the borrow ends (`RxRing::release_held` after the send that used it).
        Some(unsafe { std::slice::from_raw_parts(self.base.as_ptr().add(off), len) })
    }

    /// Copies `src` to `off`; false (nothing copied) if out of bounds.
    pub fn copy_in(&self, off: usize, src: &[u8]) -> bool {
        if !self.in_bounds(off, src.len()) {
            return false;
        }
        // Safety: destination in bounds and owned by user space; src is a distinct buffer.
        unsafe {
            std::ptr::copy_nonoverlapping(src.as_ptr(), self.base.as_ptr().add(off), src.len())
        }
        true
    }
}

/// One received frame, located inside ring memory and valid until the ring's `consume`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RxFrame {
    /// Offset of the first L2 byte in the ring memory.
    pub data_off: usize,
    /// Bytes captured (≤ frame size).
    pub snaplen: u32,
    /// Bytes on the wire; `> snaplen` means the frame did not fit the ring slot (GRO/TSO
    /// super-frames when offloads are on).
    pub wire_len: u32,
    /// `sll_pkttype` (`PACKET_HOST`, `PACKET_OTHERHOST`, `PACKET_OUTGOING`, ...).
    pub pkttype: u8,
    /// The VLAN tag the kernel stripped (hardware-offloaded tag), to be put back on egress.
    pub vlan: Option<VlanTag>,
    /// Kernel receive timestamp, CLOCK_REALTIME ns (0 if absent).
    pub ts_ns: u64,
    /// The entry's status word (`TP_STATUS_LOSING`, `TP_STATUS_CSUMNOTREADY`, ... bits).
    pub status: u32,
}

/// An 802.1Q/802.1ad tag the kernel moved out of a frame into ring metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VlanTag {
    /// Tag protocol id (0x8100 or 0x88a8).
    pub tpid: u16,
    /// Tag control information (priority, DEI, VLAN id).
    pub tci: u16,
}

impl VlanTag {
    /// The tag from a status word and the raw `tp_vlan_tci` / `tp_vlan_tpid` fields.
    pub fn from_status(status: u32, tci: u16, tpid: u16) -> Option<Self> {
        if status & TP_STATUS_VLAN_VALID == 0 {
            return None;
        }
        let tpid = if status & TP_STATUS_VLAN_TPID_VALID != 0 && tpid != 0 {
            tpid
        } else {
            ETH_P_8021Q
        };
        Some(Self { tpid, tci })
    }
}

impl RxFrame {
    /// Length of the frame as it leaves: the captured bytes plus a re-inserted tag.
    pub fn out_len(&self) -> usize {
        self.snaplen as usize + if self.vlan.is_some() { 4 } else { 0 }
    }

    /// Wire length as it leaves (what the link model is charged).
    pub fn out_wire_len(&self) -> u32 {
        self.wire_len + if self.vlan.is_some() { 4 } else { 0 }
    }
}

impl RingMem {
    /// Copies `f` into `dst[..f.out_len()]`, putting a stripped VLAN tag back after the MAC
    /// addresses. False (nothing usable) if `dst` is too small or `f` is out of bounds.
    pub fn copy_frame(&self, f: &RxFrame, dst: &mut [u8]) -> bool {
        let Some(dst) = dst.get_mut(..f.out_len()) else {
            return false;
        };
        let Some(tag) = f.vlan else {
            return self.copy_out(f.data_off, dst);
        };
        if (f.snaplen as usize) < MACS {
            return false;
        }
        let (macs, rest) = dst.split_at_mut(MACS);
        let (tag_bytes, payload) = rest.split_at_mut(4);
        tag_bytes[..2].copy_from_slice(&tag.tpid.to_be_bytes());
        tag_bytes[2..].copy_from_slice(&tag.tci.to_be_bytes());
        self.copy_out(f.data_off, macs) && self.copy_out(f.data_off + MACS, payload)
    }
}

/// What an RX ring yields next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RxNext {
    /// Nothing ready.
    Empty,
    /// A frame; call `consume` when done with it.
    Frame(RxFrame),
    /// A ready entry whose offsets point outside its slot; `consume` skips it.
    Malformed,
}

/// The RX-ring interface the worker drives (V2 frames or V3 blocks).
pub trait RxRing: Send + std::fmt::Debug {
    /// The next ready frame without consuming it.
    fn peek(&mut self) -> RxNext;
    /// Gives the current frame (or malformed entry) back to the kernel and advances.
    fn consume(&mut self);
    /// The memory frames point into.
    fn mem(&self) -> RingMem;
    /// Steps past the current frame *without* giving it back, so it can be sent straight
    /// from the ring; it stays valid until [`RxRing::release_held`]. False (nothing done) if
    /// the ring cannot hold frames (V3) or holding one more would let the cursor wrap onto a
    /// held frame. Call `release_held` before the next `consume`.
    fn hold(&mut self) -> bool {
        false
    }
    /// Gives every held frame back to the kernel.
    fn release_held(&mut self) {}
}

#[cfg(test)]
mod tests {
    use super::testmem::TestMem;
    use super::*;

    fn frame(vlan: Option<VlanTag>) -> RxFrame {
        RxFrame {
            data_off: 16,
            snaplen: 16,
            wire_len: 16,
            pkttype: 0,
            vlan,
            ts_ns: 0,
            status: 1,
        }
    }

    #[test]
    fn copy_frame_reinserts_a_stripped_vlan_tag() {
        let mut t = TestMem::new(64);
        let src: Vec<u8> = (0..16).collect();
        t.bytes()[16..32].copy_from_slice(&src);
        let mem = t.mem();
        let mut out = [0xee_u8; 24];
        assert!(mem.copy_frame(&frame(None), &mut out));
        assert_eq!(&out[..16], &src[..]);
        let tag = VlanTag::from_status(TP_STATUS_VLAN_VALID, 0x2064, 0).unwrap();
        assert_eq!(
            tag,
            VlanTag {
                tpid: 0x8100,
                tci: 0x2064
            }
        );
        let f = frame(Some(tag));
        assert_eq!((f.out_len(), f.out_wire_len()), (20, 20));
        assert!(mem.copy_frame(&f, &mut out));
        assert_eq!(&out[..12], &src[..12]);
        assert_eq!(&out[12..16], &[0x81, 0x00, 0x20, 0x64]);
        assert_eq!(&out[16..20], &src[12..16]);
        assert!(!mem.copy_frame(&f, &mut [0; 19]), "destination too small");
        let qinq =
            VlanTag::from_status(TP_STATUS_VLAN_VALID | TP_STATUS_VLAN_TPID_VALID, 5, 0x88a8);
        assert_eq!(
            qinq,
            Some(VlanTag {
                tpid: 0x88a8,
                tci: 5
            })
        );
        assert_eq!(VlanTag::from_status(0, 5, 0x8100), None);
    }
}

#[cfg(test)]
pub(crate) mod testmem {
    //! Synthetic, 16-byte aligned ring memory for tests.
    use super::RingMem;
    use std::ptr::NonNull;

    /// Owned aligned buffer standing in for a kernel mapping.
    pub struct TestMem {
        buf: Vec<u128>,
    }

    impl TestMem {
        pub fn new(len: usize) -> Self {
            Self {
                buf: vec![0; len.div_ceil(16)],
            }
        }
        pub fn mem(&mut self) -> RingMem {
            let len = self.buf.len() * 16;
            let base = NonNull::new(self.buf.as_mut_ptr().cast::<u8>()).unwrap();
            // Safety: the Vec outlives every use in the test that created it.
            unsafe { RingMem::new(base, len) }
        }
        /// `len` bytes at `off` of the buffer as ring memory (several rings in one buffer).
        pub fn sub(&mut self, off: usize, len: usize) -> RingMem {
            assert!(
                off + len <= self.buf.len() * 16,
                "sub-ring outside the test buffer"
            );
            let base = NonNull::new(self.buf.as_mut_ptr().cast::<u8>()).unwrap();
            // Safety: in bounds (asserted); the Vec outlives every use in the test.
            unsafe { RingMem::new(base.add(off), len) }
        }
        pub fn bytes(&mut self) -> &mut [u8] {
            let len = self.buf.len() * 16;
            // Safety: reinterpreting owned u128s as bytes.
            unsafe { std::slice::from_raw_parts_mut(self.buf.as_mut_ptr().cast::<u8>(), len) }
        }
        pub fn put_u32(&mut self, off: usize, v: u32) {
            self.bytes()[off..off + 4].copy_from_slice(&v.to_ne_bytes());
        }
        pub fn put_u16(&mut self, off: usize, v: u16) {
            self.bytes()[off..off + 2].copy_from_slice(&v.to_ne_bytes());
        }
        pub fn get_u32(&mut self, off: usize) -> u32 {
            u32::from_ne_bytes(self.bytes()[off..off + 4].try_into().unwrap())
        }
    }
}
