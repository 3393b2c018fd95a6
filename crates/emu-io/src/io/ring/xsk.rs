//! AF_XDP rings over raw shared memory: the single-producer/single-consumer index protocol
//! ([`XskRing`]), the RX side as an [`RxRing`] ([`XskRx`]: RX ring + fill ring) and the TX
//! side ([`XskTx`]: TX ring + completion ring + the frames it owns).
//!
//! Each ring is a power-of-two array of descriptors plus a producer and a consumer index
//! (free-running u32, masked on use). The producer writes entries, then publishes its index
//! with release ordering; the consumer reads the index with acquire ordering, reads entries,
//! then publishes its own index. RX/completion: the kernel produces, we consume. Fill/TX: we
//! produce, the kernel consumes. Descriptors are `{u64 addr, u32 len, u32 options}` (RX, TX)
//! or a bare `u64 addr` (fill, completion); `addr` is an offset into the UMEM.
//!
//! The UMEM is split once at start: the first `rx_frames` chunks circulate fill → RX → fill
//! (owned by the RX side), the rest are TX frames (free list → TX → completion → free list),
//! so the two sides never share a frame and can run on different threads.

use std::sync::atomic::{AtomicU32, Ordering};

use super::{RingMem, RxFrame, RxNext, RxRing};
use crate::io::sys::clock::{monotonic_ns, realtime_ns};

/// Where a ring's parts lie inside its mapping (`struct xdp_ring_offset`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingLayout {
    /// Offset of the producer index.
    pub producer: usize,
    /// Offset of the consumer index.
    pub consumer: usize,
    /// Offset of the descriptor array.
    pub desc: usize,
}

/// One ring: its memory, layout, size and cached indices.
#[derive(Debug)]
pub struct XskRing {
    mem: RingMem,
    layout: RingLayout,
    mask: u32,
    entry: usize,
    /// Our side's index (producer when we produce, consumer when we consume).
    own: u32,
    /// Last value read of the other side's index.
    cached_other: u32,
}

impl XskRing {
    /// A ring of `size` (power of two) entries of `entry` bytes (8 or 16) laid out as `layout`
    /// says in `mem`. `producer_side`: true if we produce on it (fill, TX).
    pub fn new(
        mem: RingMem,
        layout: RingLayout,
        size: u32,
        entry: usize,
        producer_side: bool,
    ) -> Self {
        let mut r = Self {
            mem,
            layout,
            mask: size.saturating_sub(1),
            entry,
            own: 0,
            cached_other: 0,
        };
        // Pick up where the indices stand (zero on a fresh socket).
        if producer_side {
            r.own = r.load(layout.producer);
            r.cached_other = r.load(layout.consumer);
        } else {
            r.own = r.load(layout.consumer);
            r.cached_other = r.load(layout.producer);
        }
        r
    }

    fn index(&self, off: usize) -> Option<&AtomicU32> {
        self.mem.status(off)
    }

    fn load(&self, off: usize) -> u32 {
        self.index(off).map_or(0, |a| a.load(Ordering::Acquire))
    }

    fn store(&self, off: usize, v: u32) {
        if let Some(a) = self.index(off) {
            a.store(v, Ordering::Release);
        }
    }

    fn size(&self) -> u32 {
        self.mask + 1
    }

    fn desc_off(&self, idx: u32) -> usize {
        self.layout.desc + (idx & self.mask) as usize * self.entry
    }

    // --- consumer side (RX, completion) ---

    /// Entries ready to consume (re-reads the producer when the cached view is exhausted).
    pub fn ready(&mut self) -> u32 {
        let mut n = self.cached_other.wrapping_sub(self.own);
        if n == 0 {
            self.cached_other = self.load(self.layout.producer);
            n = self.cached_other.wrapping_sub(self.own);
        }
        n.min(self.size())
    }

    /// The descriptor at the consumer position (`ready() > 0` first): addr, len, options.
    pub fn peek_desc(&self) -> (u64, u32, u32) {
        let off = self.desc_off(self.own);
        let addr = read_u64(&self.mem, off);
        if self.entry < 16 {
            return (addr, 0, 0);
        }
        let len = self.mem.read_u32(off + 8).unwrap_or(0);
        let opts = self.mem.read_u32(off + 12).unwrap_or(0);
        (addr, len, opts)
    }

    /// Steps past the current entry and publishes the consumer index.
    pub fn advance(&mut self) {
        self.own = self.own.wrapping_add(1);
        self.store(self.layout.consumer, self.own);
    }

    // --- producer side (fill, TX) ---

    /// Free entries (re-reads the consumer when the cached view says full).
    pub fn free(&mut self) -> u32 {
        let used = self.own.wrapping_sub(self.cached_other);
        if used >= self.size() {
            self.cached_other = self.load(self.layout.consumer);
        }
        self.size()
            .saturating_sub(self.own.wrapping_sub(self.cached_other))
    }

    /// Writes an entry at the producer position (unpublished until [`XskRing::publish`]).
    /// False if the ring is full.
    pub fn push(&mut self, addr: u64, len: u32) -> bool {
        if self.free() == 0 {
            return false;
        }
        let off = self.desc_off(self.own);
        write_u64(&self.mem, off, addr);
        if self.entry >= 16 {
            self.mem.write_u32(off + 8, len);
            self.mem.write_u32(off + 12, 0);
        }
        self.own = self.own.wrapping_add(1);
        true
    }

    /// Publishes the entries pushed so far.
    pub fn publish(&self) {
        self.store(self.layout.producer, self.own);
    }

    /// Entries pushed that the kernel has not consumed yet.
    pub fn in_flight(&mut self) -> u32 {
        self.cached_other = self.load(self.layout.consumer);
        self.own.wrapping_sub(self.cached_other)
    }
}

fn read_u64(mem: &RingMem, off: usize) -> u64 {
    let lo = mem.read_u32(off).unwrap_or(0);
    let hi = mem.read_u32(off + 4).unwrap_or(0);
    u64::from(lo) | (u64::from(hi) << 32)
}

fn write_u64(mem: &RingMem, off: usize, v: u64) {
    mem.write_u32(off, v as u32);
    mem.write_u32(off + 4, (v >> 32) as u32);
}

/// The RX side of one socket: RX ring (kernel → us) and fill ring (us → kernel), over the
/// UMEM. Frames carry the arrival stamp the XDP program wrote in the 8 bytes before them.
#[derive(Debug)]
pub struct XskRx {
    rx: XskRing,
    fill: XskRing,
    umem: RingMem,
    frame_size: u64,
    meta_len: usize,
    /// Chunks stepped past but not yet given back (direct path).
    held: Vec<u64>,
    max_held: usize,
    /// CLOCK_REALTIME − CLOCK_MONOTONIC, refreshed whenever the producer index is re-read.
    real_minus_mono: i64,
    /// True when the current entry's descriptor was read (so `consume` knows its chunk).
    current: Option<u64>,
    /// End of the RX chunks in the UMEM (the TX chunks follow).
    rx_end: u64,
}

impl XskRx {
    /// The RX side; gives the UMEM chunks `0..rx_frames` to the kernel through the fill ring.
    pub fn new(
        rx: XskRing,
        fill: XskRing,
        umem: RingMem,
        frame_size: u32,
        rx_frames: u32,
        meta_len: usize,
    ) -> Self {
        let mut s = Self {
            rx,
            fill,
            umem,
            frame_size: u64::from(frame_size),
            meta_len,
            held: Vec::with_capacity(rx_frames as usize),
            max_held: rx_frames as usize / 2,
            real_minus_mono: 0,
            current: None,
            rx_end: u64::from(rx_frames) * u64::from(frame_size),
        };
        for i in 0..u64::from(rx_frames) {
            s.give_back(i * s.frame_size);
        }
        s.fill.publish();
        s.refresh_clock();
        s
    }

    fn refresh_clock(&mut self) {
        self.real_minus_mono = realtime_ns() as i64 - monotonic_ns() as i64;
    }

    /// Clears the stamp slot (so a frame without metadata reads 0) and puts the chunk on the
    /// fill ring (unpublished). An address outside the RX chunks (a malformed descriptor) is
    /// not given back: it may name a TX chunk.
    fn give_back(&mut self, addr: u64) {
        let chunk = addr - addr % self.frame_size.max(1);
        if chunk >= self.rx_end {
            return;
        }
        if let Some(stamp_off) = (addr as usize).checked_sub(self.meta_len) {
            if stamp_off as u64 >= chunk {
                write_u64(&self.umem, stamp_off, 0);
            }
        }
        // The fill ring has as many entries as there are RX chunks, so it cannot be full.
        let _ = self.fill.push(chunk, 0);
    }

    fn frame(&self, addr: u64, len: u32) -> Option<RxFrame> {
        let data_off = usize::try_from(addr).ok()?;
        if !self.umem.in_bounds(data_off, len as usize) {
            return None;
        }
        let stamp = if self.meta_len == 8 && data_off >= 8 {
            read_u64(&self.umem, data_off - 8)
        } else {
            0
        };
        let ts_ns = if stamp == 0 {
            0
        } else {
            stamp.saturating_add_signed(self.real_minus_mono)
        };
        Some(RxFrame {
            data_off,
            snaplen: len,
            wire_len: len,
            pkttype: 0,
            vlan: None,
            ts_ns,
            status: 0,
        })
    }
}

impl RxRing for XskRx {
    fn peek(&mut self) -> RxNext {
        if self.rx.cached_other == self.rx.own {
            self.refresh_clock();
        }
        if self.rx.ready() == 0 {
            self.current = None;
            return RxNext::Empty;
        }
        let (addr, len, _) = self.rx.peek_desc();
        self.current = Some(addr);
        self.frame(addr, len)
            .map_or(RxNext::Malformed, RxNext::Frame)
    }

    fn consume(&mut self) {
        let Some(addr) = self.current.take() else {
            return;
        };
        self.rx.advance();
        self.give_back(addr);
        self.fill.publish();
    }

    fn mem(&self) -> RingMem {
        self.umem
    }

    fn hold(&mut self) -> bool {
        if self.held.len() >= self.max_held {
            return false;
        }
        let Some(addr) = self.current.take() else {
            return false;
        };
        self.rx.advance();
        self.held.push(addr);
        true
    }

    fn release_held(&mut self) {
        if self.held.is_empty() {
            return;
        }
        let held = std::mem::take(&mut self.held);
        for &addr in &held {
            self.give_back(addr);
        }
        self.held = held;
        self.held.clear();
        self.fill.publish();
    }
}

/// The TX side of one socket: TX ring (us → kernel), completion ring (kernel → us), and the
/// free TX chunks.
#[derive(Debug)]
pub struct XskTx {
    tx: XskRing,
    comp: XskRing,
    umem: RingMem,
    free: Vec<u64>,
    frame_size: usize,
}

impl XskTx {
    /// The TX side owning UMEM chunks `first..first + frames`.
    pub fn new(
        tx: XskRing,
        comp: XskRing,
        umem: RingMem,
        frame_size: u32,
        first: u32,
        frames: u32,
    ) -> Self {
        let fs = u64::from(frame_size);
        Self {
            tx,
            comp,
            umem,
            free: (u64::from(first)..u64::from(first) + u64::from(frames))
                .rev()
                .map(|i| i * fs)
                .collect(),
            frame_size: frame_size as usize,
        }
    }

    /// Largest frame one chunk holds.
    pub fn max_frame(&self) -> usize {
        self.frame_size
    }

    /// Takes completed chunks back into the free list.
    pub fn reclaim(&mut self) {
        let fs = self.frame_size as u64;
        while self.comp.ready() > 0 {
            let (addr, _, _) = self.comp.peek_desc();
            self.free.push(addr - addr % fs.max(1));
            self.comp.advance();
        }
    }

    /// Copies `prefix` + `frame` into a free chunk and queues it on the TX ring (unpublished).
    /// False if no chunk or ring slot is free or the frame does not fit a chunk.
    pub fn push(&mut self, prefix: &[u8], frame: &[u8]) -> bool {
        let len = prefix.len() + frame.len();
        if len > self.frame_size || len == 0 {
            return false;
        }
        if self.free.is_empty() {
            self.reclaim();
        }
        let Some(addr) = self.free.pop() else {
            return false;
        };
        let off = addr as usize;
        let queued = self.umem.copy_in(off, prefix)
            && self.umem.copy_in(off + prefix.len(), frame)
            && self.tx.push(addr, len as u32);
        if !queued {
            self.free.push(addr);
            return false;
        }
        true
    }

    /// Publishes what was pushed.
    pub fn publish(&self) {
        self.tx.publish();
    }

    /// Descriptors the kernel has not taken yet.
    pub fn pending(&mut self) -> u32 {
        self.tx.in_flight()
    }

    /// Free chunks right now (for tests and diagnostics).
    pub fn free_chunks(&self) -> usize {
        self.free.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::ring::testmem::TestMem;

    const LAYOUT: RingLayout = RingLayout {
        producer: 0,
        consumer: 64,
        desc: 128,
    };

    /// Kernel-side helpers on a ring's raw memory.
    fn prod(t: &mut TestMem, base: usize) -> u32 {
        t.get_u32(base + LAYOUT.producer)
    }
    fn cons(t: &mut TestMem, base: usize) -> u32 {
        t.get_u32(base + LAYOUT.consumer)
    }

    #[test]
    fn rx_frames_flow_through_and_chunks_return_to_the_fill_ring() {
        // One buffer: RX ring at 0, fill ring at 1024, UMEM at 4096 (4 chunks of 2048).
        let mut t = TestMem::new(4096 + 4 * 2048);
        let (rxm, fillm, umem) = (t.sub(0, 1024), t.sub(1024, 1024), t.sub(4096, 4 * 2048));
        let rx_ring = XskRing::new(rxm, LAYOUT, 4, 16, false);
        let fill_ring = XskRing::new(fillm, LAYOUT, 4, 8, true);
        let mut rx = XskRx::new(rx_ring, fill_ring, umem, 2048, 4, 8);
        // The kernel got all four chunks.
        assert_eq!(prod(&mut t, 1024), 4);
        let fill_addrs: Vec<u32> = (0..4).map(|i| t.get_u32(1024 + 128 + 8 * i)).collect();
        assert_eq!(fill_addrs, [0, 2048, 4096, 6144]);
        assert_eq!(rx.peek(), RxNext::Empty);
        // Kernel: consumes two fill entries, writes frames at chunk + 256 with stamps.
        t.put_u32(1024 + LAYOUT.consumer, 2);
        for (i, (chunk, len)) in [(0_u32, 60_u32), (2048, 1514)].into_iter().enumerate() {
            let data = 4096 + chunk as usize + 256;
            t.put_u32(data - 8, 1_000 + i as u32); // stamp (low word)
            t.put_u32(data - 4, 0);
            t.bytes()[data] = 0xa0 + i as u8;
            let d = 128 + 16 * i;
            t.put_u32(d, chunk + 256);
            t.put_u32(d + 4, 0);
            t.put_u32(d + 8, len);
        }
        t.put_u32(LAYOUT.producer, 2);
        let RxNext::Frame(f) = rx.peek() else {
            panic!("frame expected")
        };
        assert_eq!((f.data_off, f.snaplen, f.wire_len), (256, 60, 60));
        assert_eq!(rx.mem().slice(f.data_off, 1), Some(&[0xa0][..]));
        // Stamp 1000 ns monotonic, converted to realtime: within a second of realtime - mono.
        let off = realtime_ns() as i64 - monotonic_ns() as i64;
        assert!(
            (f.ts_ns as i64 - 1_000 - off).abs() < 1_000_000_000,
            "{}",
            f.ts_ns
        );
        // Hold the first (direct path), consume the second.
        assert!(rx.hold());
        assert_eq!(cons(&mut t, 0), 1);
        let RxNext::Frame(g) = rx.peek() else {
            panic!("second frame expected")
        };
        assert_eq!(g.snaplen, 1514);
        rx.consume();
        assert_eq!(cons(&mut t, 0), 2);
        // The consumed chunk went back (fill producer 5), its stamp cleared; the held one not yet.
        assert_eq!(prod(&mut t, 1024), 5);
        assert_eq!(
            t.get_u32(1024 + 128),
            2048,
            "fill slot 4 = chunk 1 (masked index 0)"
        );
        assert_eq!(t.get_u32(4096 + 2048 + 256 - 8), 0, "stamp cleared");
        rx.release_held();
        assert_eq!(prod(&mut t, 1024), 6);
        assert_eq!(t.get_u32(1024 + 128 + 8), 0, "held chunk 0 returned");
        assert_eq!(rx.peek(), RxNext::Empty);
    }

    #[test]
    fn a_descriptor_outside_the_umem_is_malformed_and_still_consumed() {
        let mut t = TestMem::new(4096 + 2 * 2048);
        let mut rx = XskRx::new(
            XskRing::new(t.sub(0, 1024), LAYOUT, 2, 16, false),
            XskRing::new(t.sub(1024, 1024), LAYOUT, 2, 8, true),
            t.sub(4096, 2 * 2048),
            2048,
            2,
            8,
        );
        // The kernel took both fill entries and returned an address past the UMEM.
        t.put_u32(1024 + LAYOUT.consumer, 2);
        t.put_u32(128, 5000);
        t.put_u32(128 + 8, 200);
        t.put_u32(LAYOUT.producer, 1);
        assert_eq!(rx.peek(), RxNext::Malformed);
        rx.consume();
        assert_eq!(cons(&mut t, 0), 1);
        assert_eq!(
            prod(&mut t, 1024),
            2,
            "an address outside the RX chunks is not refilled"
        );
        assert_eq!(rx.peek(), RxNext::Empty);
    }

    #[test]
    fn tx_chunks_cycle_through_the_completion_ring() {
        // TX ring at 0, completion ring at 1024, UMEM at 4096: chunks 2 and 3 are TX chunks.
        let mut t = TestMem::new(4096 + 4 * 2048);
        let mut tx = XskTx::new(
            XskRing::new(t.sub(0, 1024), LAYOUT, 4, 16, true),
            XskRing::new(t.sub(1024, 1024), LAYOUT, 4, 8, false),
            t.sub(4096, 4 * 2048),
            2048,
            2,
            2,
        );
        assert_eq!(tx.free_chunks(), 2);
        assert!(tx.push(&[1, 2], &[3, 4, 5]));
        assert!(tx.push(&[], &[9; 100]));
        assert!(!tx.push(&[], &[9; 100]), "both chunks in flight");
        assert!(!tx.push(&[], &[0; 2049]), "larger than a chunk");
        assert_eq!(prod(&mut t, 0), 0, "not published yet");
        tx.publish();
        assert_eq!(prod(&mut t, 0), 2);
        assert_eq!((t.get_u32(128), t.get_u32(128 + 8)), (4096, 5));
        assert_eq!(&t.bytes()[4096 + 4096..4096 + 4096 + 5], &[1, 2, 3, 4, 5]);
        assert_eq!((t.get_u32(144), t.get_u32(144 + 8)), (6144, 100));
        assert_eq!(tx.pending(), 2);
        // Kernel: takes both, completes the first.
        t.put_u32(LAYOUT.consumer, 2);
        assert_eq!(tx.pending(), 0);
        t.put_u32(1024 + 128, 4096);
        t.put_u32(1024 + LAYOUT.producer, 1);
        assert!(tx.push(&[], &[7; 60]), "the completed chunk is reused");
        assert_eq!(cons(&mut t, 1024), 1);
        assert_eq!(t.get_u32(128 + 2 * 16), 4096);
    }
}
