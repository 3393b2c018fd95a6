//! TPACKET_V2 TX ring: user space fills frames in order, marks them `SEND_REQUEST`, and one
//! zero-length `send` transmits every marked frame (a batch per wake-up). The kernel sets a
//! frame back to `AVAILABLE` once the driver is done with it (for veth: when the peer's IP
//! layer orphans the skb), or to `WRONG_FORMAT` if it refused it (`PACKET_LOSS` is set).
//!
//! Frame layout: `tp_status@0 tp_len@4 tp_snaplen@8`, data at
//! `TPACKET2_HDRLEN - sizeof(sockaddr_ll)` = 32 (the kernel's default without
//! `PACKET_TX_HAS_OFF`).

use super::{RingMem, TP_STATUS_KERNEL, TP_STATUS_SEND_REQUEST, TP_STATUS_WRONG_FORMAT};

const LEN: usize = 4;
const SNAPLEN: usize = 8;
/// Where frame data starts inside a TX slot.
pub const DATA_OFFSET: usize = 32;

/// Result of [`TxRingV2::push`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxPush {
    /// Copied and marked; transmitted at the next kick.
    Queued,
    /// The next slot is still owned by the kernel: kick, and retry later.
    Full,
    /// The frame does not fit a slot; it can never be sent through this ring.
    TooBig,
}

/// Cursor over a V2 TX ring of `frame_nr` frames of `frame_size` bytes.
#[derive(Debug)]
pub struct TxRingV2 {
    mem: RingMem,
    frame_size: usize,
    frame_nr: usize,
    head: usize,
    /// Frames marked since the last kick.
    pending: u32,
    /// Frames the kernel refused (`WRONG_FORMAT`), found when their slot came round again.
    refused: u64,
}

impl TxRingV2 {
    /// A ring over `mem` holding `frame_nr * frame_size` bytes, frames contiguous.
    pub fn new(mem: RingMem, frame_size: usize, frame_nr: usize) -> Self {
        let frame_nr = frame_nr.min(mem.len() / frame_size.max(1));
        Self {
            mem,
            frame_size,
            frame_nr,
            head: 0,
            pending: 0,
            refused: 0,
        }
    }

    /// Largest frame a slot holds.
    pub fn max_frame(&self) -> usize {
        self.frame_size.saturating_sub(DATA_OFFSET)
    }

    /// Copies `frame` into the next slot and marks it for sending.
    pub fn push(&mut self, frame: &[u8]) -> TxPush {
        if frame.len() > self.max_frame() || self.frame_nr == 0 {
            return TxPush::TooBig;
        }
        let off = self.head * self.frame_size;
        match self.mem.load_status(off) {
            TP_STATUS_KERNEL => {}
            TP_STATUS_WRONG_FORMAT => self.refused += 1,
            _ => return TxPush::Full,
        }
        self.mem.copy_in(off + DATA_OFFSET, frame);
        self.mem.write_u32(off + LEN, frame.len() as u32);
        self.mem.write_u32(off + SNAPLEN, frame.len() as u32);
        self.mem.store_status(off, TP_STATUS_SEND_REQUEST);
        self.head = (self.head + 1) % self.frame_nr;
        self.pending += 1;
        TxPush::Queued
    }

    #[cfg(test)]
    /// Frames marked since the last [`TxRingV2::take_pending`].
    pub fn pending(&self) -> u32 {
        self.pending
    }

    /// Returns and clears the count of marked frames (call right before the kick).
    pub fn take_pending(&mut self) -> u32 {
        std::mem::take(&mut self.pending)
    }

    /// Returns and clears the count of frames the kernel refused.
    pub fn take_refused(&mut self) -> u64 {
        std::mem::take(&mut self.refused)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::ring::TP_STATUS_SENDING;
    use crate::io::ring::testmem::TestMem;

    const FS: usize = 128;

    #[test]
    fn fills_slots_in_order_and_stops_at_a_kernel_owned_slot() {
        let mut t = TestMem::new(FS * 2);
        let mut ring = TxRingV2::new(t.mem(), FS, 2);
        assert_eq!(ring.max_frame(), FS - 32);
        assert_eq!(ring.push(b"abc"), TxPush::Queued);
        assert_eq!(ring.push(b"defg"), TxPush::Queued);
        assert_eq!(ring.push(b"h"), TxPush::Full, "slot 0 still SEND_REQUEST");
        assert_eq!(ring.take_pending(), 2);
        assert_eq!(t.get_u32(0), TP_STATUS_SEND_REQUEST);
        assert_eq!((t.get_u32(LEN), t.get_u32(SNAPLEN)), (3, 3));
        assert_eq!(&t.bytes()[DATA_OFFSET..DATA_OFFSET + 3], b"abc");
        assert_eq!(&t.bytes()[FS + DATA_OFFSET..FS + DATA_OFFSET + 4], b"defg");
        // The kernel is still sending slot 0.
        t.put_u32(0, TP_STATUS_SENDING);
        assert_eq!(ring.push(b"h"), TxPush::Full);
        // Sent: slot 0 is free again.
        t.put_u32(0, TP_STATUS_KERNEL);
        assert_eq!(ring.push(b"h"), TxPush::Queued);
        assert_eq!(&t.bytes()[DATA_OFFSET..DATA_OFFSET + 1], b"h");
        assert_eq!(ring.take_refused(), 0);
    }

    #[test]
    fn refused_frames_are_counted_and_their_slot_reused() {
        let mut t = TestMem::new(FS);
        let mut ring = TxRingV2::new(t.mem(), FS, 1);
        assert_eq!(ring.push(b"bad"), TxPush::Queued);
        t.put_u32(0, TP_STATUS_WRONG_FORMAT);
        assert_eq!(ring.push(b"good"), TxPush::Queued);
        assert_eq!(ring.take_refused(), 1);
        assert_eq!(ring.take_refused(), 0);
    }

    #[test]
    fn oversized_frames_are_rejected_without_writing() {
        let mut t = TestMem::new(FS);
        let mut ring = TxRingV2::new(t.mem(), FS, 1);
        assert_eq!(ring.push(&[0; FS]), TxPush::TooBig);
        assert_eq!(t.get_u32(0), TP_STATUS_KERNEL);
        assert_eq!(ring.pending(), 0);
    }
}
