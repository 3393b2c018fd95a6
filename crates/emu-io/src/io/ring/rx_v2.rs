//! TPACKET_V2 RX ring: fixed-size frames, one status word each. The kernel wakes `poll` for
//! every frame, which is what a latency emulator needs (V3 wakes only when a block retires:
//! up to `tp_retire_blk_tov` ms rounded to jiffies, 4 ms at HZ=250, see `rx_v3`).
//!
//! Frame layout (`struct tpacket2_hdr`, then `sockaddr_ll` at `TPACKET_ALIGN(32)`):
//! `tp_status@0 tp_len@4 tp_snaplen@8 tp_mac@12(u16) tp_net@14(u16) ... sll_pkttype@42`.

use super::{
    RingMem, RxFrame, RxNext, RxRing, SLL_PKTTYPE, TP_STATUS_KERNEL, TP_STATUS_USER, VlanTag,
};

const LEN: usize = 4;
const SNAPLEN: usize = 8;
const MAC: usize = 12;
const SEC: usize = 16;
const NSEC: usize = 20;
const VLAN_TCI: usize = 24;
const VLAN_TPID: usize = 26;
/// `TPACKET_ALIGN(sizeof(struct tpacket2_hdr))`: where `sockaddr_ll` starts.
pub const SLL_OFFSET: usize = 32;

/// Cursor over a V2 RX ring of `frame_nr` frames of `frame_size` bytes.
#[derive(Debug)]
pub struct RxRingV2 {
    mem: RingMem,
    frame_size: usize,
    frame_nr: usize,
    head: usize,
    /// Frames held (stepped past, not yet given back), ending just before `head`.
    held: usize,
}

impl RxRingV2 {
    /// A ring over `mem` (which must hold `frame_nr * frame_size` bytes, frames contiguous:
    /// block size a multiple of frame size).
    pub fn new(mem: RingMem, frame_size: usize, frame_nr: usize) -> Self {
        let frame_nr = frame_nr.min(mem.len() / frame_size.max(1));
        Self {
            mem,
            frame_size,
            frame_nr,
            head: 0,
            held: 0,
        }
    }

    fn frame_off(&self) -> usize {
        self.head * self.frame_size
    }

    fn parse(&self, off: usize, status: u32) -> Option<RxFrame> {
        let wire_len = self.mem.read_u32(off + LEN)?;
        let snaplen = self.mem.read_u32(off + SNAPLEN)?;
        let mac = usize::from(self.mem.read_u16(off + MAC)?);
        let pkttype = self.mem.read_u8(off + SLL_OFFSET + SLL_PKTTYPE)?;
        let ts_ns = u64::from(self.mem.read_u32(off + SEC)?) * 1_000_000_000
            + u64::from(self.mem.read_u32(off + NSEC)?);
        let vlan = VlanTag::from_status(
            status,
            self.mem.read_u16(off + VLAN_TCI)?,
            self.mem.read_u16(off + VLAN_TPID)?,
        );
        let end = mac.checked_add(snaplen as usize)?;
        if mac < SLL_OFFSET || end > self.frame_size {
            return None;
        }
        Some(RxFrame {
            data_off: off + mac,
            snaplen,
            wire_len,
            pkttype,
            vlan,
            ts_ns,
            status,
        })
    }
}

impl RxRing for RxRingV2 {
    fn peek(&mut self) -> RxNext {
        if self.frame_nr == 0 {
            return RxNext::Empty;
        }
        let off = self.frame_off();
        let status = self.mem.load_status(off);
        if status & TP_STATUS_USER == 0 {
            return RxNext::Empty;
        }
        self.parse(off, status)
            .map_or(RxNext::Malformed, RxNext::Frame)
    }

    fn consume(&mut self) {
        if self.frame_nr == 0 {
            return;
        }
        self.mem.store_status(self.frame_off(), TP_STATUS_KERNEL);
        self.head = (self.head + 1) % self.frame_nr;
    }

    fn mem(&self) -> RingMem {
        self.mem
    }

    fn hold(&mut self) -> bool {
        if self.frame_nr == 0 || self.held + 1 >= self.frame_nr {
            return false;
        }
        self.held += 1;
        self.head = (self.head + 1) % self.frame_nr;
        true
    }

    fn release_held(&mut self) {
        let first = (self.head + self.frame_nr - self.held) % self.frame_nr;
        for k in 0..self.held {
            let idx = (first + k) % self.frame_nr;
            self.mem
                .store_status(idx * self.frame_size, TP_STATUS_KERNEL);
        }
        self.held = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::ring::testmem::TestMem;
    use crate::io::ring::{PACKET_OUTGOING, TP_STATUS_LOSING};

    const FS: usize = 256;

    fn fill(t: &mut TestMem, idx: usize, payload: &[u8], wire_len: u32, pkttype: u8, status: u32) {
        let off = idx * FS;
        let mac = 48_usize;
        t.put_u32(off + LEN, wire_len);
        t.put_u32(off + SNAPLEN, payload.len() as u32);
        t.put_u16(off + MAC, mac as u16);
        t.put_u32(off + SEC, 7);
        t.put_u32(off + NSEC, idx as u32);
        t.bytes()[off + SLL_OFFSET + SLL_PKTTYPE] = pkttype;
        t.bytes()[off + mac..off + mac + payload.len()].copy_from_slice(payload);
        t.put_u32(off, status);
    }

    #[test]
    fn yields_frames_in_order_and_hands_them_back() {
        let mut t = TestMem::new(FS * 4);
        let mut ring = RxRingV2::new(t.mem(), FS, 4);
        assert_eq!(ring.peek(), RxNext::Empty);
        fill(&mut t, 0, b"hello", 5, 0, TP_STATUS_USER);
        fill(
            &mut t,
            1,
            b"world!",
            6,
            PACKET_OUTGOING,
            TP_STATUS_USER | TP_STATUS_LOSING,
        );
        let RxNext::Frame(f) = ring.peek() else {
            panic!("frame 0 ready")
        };
        assert_eq!(
            (f.data_off, f.snaplen, f.wire_len, f.pkttype),
            (48, 5, 5, 0)
        );
        assert_eq!(f.ts_ns, 7_000_000_000);
        let mut buf = [0_u8; 5];
        assert!(ring.mem().copy_out(f.data_off, &mut buf));
        assert_eq!(&buf, b"hello");
        ring.consume();
        assert_eq!(
            t.get_u32(0),
            TP_STATUS_KERNEL,
            "frame 0 returned to the kernel"
        );
        let RxNext::Frame(f) = ring.peek() else {
            panic!("frame 1 ready")
        };
        assert_eq!(
            (f.data_off, f.snaplen, f.pkttype),
            (FS + 48, 6, PACKET_OUTGOING)
        );
        assert_ne!(f.status & TP_STATUS_LOSING, 0);
        ring.consume();
        assert_eq!(ring.peek(), RxNext::Empty);
    }

    #[test]
    fn a_stripped_vlan_tag_is_reported() {
        use crate::io::ring::{TP_STATUS_VLAN_TPID_VALID, TP_STATUS_VLAN_VALID, VlanTag};
        let mut t = TestMem::new(FS);
        let mut ring = RxRingV2::new(t.mem(), FS, 1);
        let status = TP_STATUS_USER | TP_STATUS_VLAN_VALID | TP_STATUS_VLAN_TPID_VALID;
        fill(&mut t, 0, &[0; 20], 20, 0, status);
        t.put_u16(VLAN_TCI, 100);
        t.put_u16(VLAN_TPID, 0x8100);
        let RxNext::Frame(f) = ring.peek() else {
            panic!("ready")
        };
        assert_eq!(
            f.vlan,
            Some(VlanTag {
                tpid: 0x8100,
                tci: 100
            })
        );
        assert_eq!(f.out_len(), 24);
    }

    #[test]
    fn wraps_around_after_last_frame() {
        let mut t = TestMem::new(FS * 2);
        let mut ring = RxRingV2::new(t.mem(), FS, 2);
        for round in 0..3_u8 {
            for idx in 0..2 {
                fill(&mut t, idx, &[round, idx as u8], 2, 0, TP_STATUS_USER);
                let RxNext::Frame(f) = ring.peek() else {
                    panic!("ready")
                };
                let mut b = [0_u8; 2];
                ring.mem().copy_out(f.data_off, &mut b);
                assert_eq!(b, [round, idx as u8]);
                ring.consume();
            }
        }
    }

    #[test]
    fn held_frames_stay_readable_until_released_and_never_wrap() {
        let mut t = TestMem::new(FS * 3);
        let mut ring = RxRingV2::new(t.mem(), FS, 3);
        for idx in 0..3 {
            fill(&mut t, idx, &[idx as u8 + 1], 1, 0, TP_STATUS_USER);
        }
        let RxNext::Frame(a) = ring.peek() else {
            panic!("ready")
        };
        assert!(ring.hold());
        let RxNext::Frame(b) = ring.peek() else {
            panic!("ready")
        };
        assert_ne!(a.data_off, b.data_off);
        assert!(ring.hold());
        assert!(
            !ring.hold(),
            "a third hold would let the cursor reach a held frame"
        );
        assert_eq!(ring.mem().slice(a.data_off, 1), Some(&[1_u8][..]));
        assert_eq!(t.get_u32(0), TP_STATUS_USER, "held: still user space's");
        ring.release_held();
        assert_eq!(
            (t.get_u32(0), t.get_u32(FS)),
            (TP_STATUS_KERNEL, TP_STATUS_KERNEL)
        );
        assert_eq!(
            t.get_u32(2 * FS),
            TP_STATUS_USER,
            "the next frame is untouched"
        );
        ring.consume();
        // Wrapped: holds start again at frame 0.
        fill(&mut t, 0, &[9], 1, 0, TP_STATUS_USER);
        assert!(ring.hold());
        ring.release_held();
        assert_eq!(t.get_u32(0), TP_STATUS_KERNEL);
    }

    #[test]
    fn offsets_outside_the_slot_are_malformed_not_read() {
        let mut t = TestMem::new(FS * 2);
        let mut ring = RxRingV2::new(t.mem(), FS, 2);
        t.put_u32(LEN, 9999);
        t.put_u32(SNAPLEN, 9999);
        t.put_u16(MAC, 48);
        t.put_u32(0, TP_STATUS_USER);
        assert_eq!(ring.peek(), RxNext::Malformed);
        ring.consume();
        assert_eq!(ring.peek(), RxNext::Empty);
    }
}
