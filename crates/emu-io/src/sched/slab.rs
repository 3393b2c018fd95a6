//! Preallocated frame storage: fixed-size slots and a free list, so holding a frame for its
//! delay never allocates. Sized once at start (slots × slot size per direction).

/// Fixed-size frame slots.
#[derive(Debug)]
pub struct Slab {
    buf: Vec<u8>,
    slot_size: usize,
    free: Vec<u32>,
}

impl Slab {
    /// `slots` slots of `slot_size` bytes, all free.
    pub fn new(slots: u32, slot_size: usize) -> Self {
        Self {
            buf: vec![0; slots as usize * slot_size],
            slot_size,
            // Popped from the end: hand out low slots first (warmer pages).
            free: (0..slots).rev().collect(),
        }
    }

    /// Bytes per slot (the largest frame it holds).
    pub fn slot_size(&self) -> usize {
        self.slot_size
    }

    #[cfg(test)]
    /// Slots currently free.
    pub fn free_slots(&self) -> usize {
        self.free.len()
    }

    /// Takes a free slot, or `None` when every slot holds a queued frame.
    pub fn alloc(&mut self) -> Option<u32> {
        self.free.pop()
    }

    /// Returns a slot to the free list.
    pub fn release(&mut self, slot: u32) {
        self.free.push(slot);
    }

    /// The slot's bytes.
    pub fn slot(&self, slot: u32) -> &[u8] {
        let start = slot as usize * self.slot_size;
        self.buf.get(start..start + self.slot_size).unwrap_or(&[])
    }

    /// Copies the first `len` bytes of slot `from` into slot `to`.
    pub fn copy(&mut self, from: u32, to: u32, len: usize) {
        let len = len.min(self.slot_size);
        let src = from as usize * self.slot_size;
        let dst = to as usize * self.slot_size;
        if src + len <= self.buf.len() && dst + len <= self.buf.len() {
            self.buf.copy_within(src..src + len, dst);
        }
    }

    /// The slot's bytes, writable.
    pub fn slot_mut(&mut self, slot: u32) -> &mut [u8] {
        let start = slot as usize * self.slot_size;
        self.buf
            .get_mut(start..start + self.slot_size)
            .unwrap_or(&mut [])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_distinct_exhaustible_and_reusable() {
        let mut s = Slab::new(3, 16);
        let a = s.alloc().unwrap();
        let b = s.alloc().unwrap();
        let c = s.alloc().unwrap();
        assert_eq!((a, b, c), (0, 1, 2));
        assert_eq!(s.alloc(), None);
        s.slot_mut(b).copy_from_slice(&[7; 16]);
        assert_eq!(s.slot(a), &[0; 16]);
        assert_eq!(s.slot(b), &[7; 16]);
        s.release(b);
        assert_eq!(s.free_slots(), 1);
        assert_eq!(s.alloc(), Some(b));
    }
}
