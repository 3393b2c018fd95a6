//! Corruption: with some probability one random bit of a departing frame is flipped.
//!
//! The model only says which bit ([`Corruption`]); the I/O layer flips it in the frame it
//! sends. The bit is chosen past the 14-byte Ethernet header when the frame is longer than
//! that, so the frame still reaches its receiver and the receiver's checksums are what catch
//! it (a corrupted MAC address would just be dropped by the next bridge). While enabled, every
//! packet draws the same number of values (two slots: original and copy), corrupted or not.

use rand::Rng as _;

use crate::rng::Rng;

/// Bytes of Ethernet header left intact when the frame is longer than this.
pub const ETHERNET_HEADER: u32 = 14;

/// One flipped bit: `frame[offset] ^= mask`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Corruption {
    /// Byte offset in the frame.
    pub offset: u32,
    /// Single-bit mask to XOR into that byte.
    pub mask: u8,
}

impl Corruption {
    /// Applies the flip to `frame` (a no-op if the offset is past its end).
    pub fn apply(&self, frame: &mut [u8]) {
        if let Some(b) = frame.get_mut(self.offset as usize) {
            *b ^= self.mask;
        }
    }
}

/// Decides which departures are corrupted and where.
#[derive(Debug, Clone)]
pub struct CorruptElement {
    probability: f64,
    rng: Rng,
}

impl CorruptElement {
    /// An element corrupting with `probability`, drawing from `rng`.
    pub(crate) fn new(probability: f64, rng: Rng) -> Self {
        Self { probability, rng }
    }

    /// New probability; the stream continues.
    pub(crate) fn reconfigure(&mut self, probability: f64) {
        self.probability = probability;
    }

    /// Decisions for the original and a possible copy of a `len`-byte frame.
    pub fn draw(&mut self, len: u32) -> [Option<Corruption>; 2] {
        if self.probability <= 0.0 {
            return [None, None];
        }
        [self.one(len), self.one(len)]
    }

    fn one(&mut self, len: u32) -> Option<Corruption> {
        let hit = self.rng.random::<f64>() < self.probability;
        let where_: u64 = self.rng.random();
        if !hit || len == 0 {
            return None;
        }
        let (first, span) = if len > ETHERNET_HEADER {
            (ETHERNET_HEADER, len - ETHERNET_HEADER)
        } else {
            (0, len)
        };
        let offset = first + ((where_ >> 3) % u64::from(span)) as u32;
        Some(Corruption {
            offset,
            mask: 1 << (where_ & 7),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{Direction, Stream, stream};

    #[test]
    fn corruption_is_one_bit_past_the_header() {
        let mut c = CorruptElement::new(1.0, stream(3, Direction::Forward, Stream::Corrupt));
        for _ in 0..10_000 {
            for d in c.draw(60) {
                let d = d.expect("probability 1 always corrupts");
                assert!((14..60).contains(&d.offset));
                assert_eq!(d.mask.count_ones(), 1);
            }
        }
        let mut frame = [0u8; 20];
        Corruption {
            offset: 15,
            mask: 4,
        }
        .apply(&mut frame);
        assert_eq!(frame[15], 4);
        Corruption {
            offset: 99,
            mask: 4,
        }
        .apply(&mut frame);
    }

    #[test]
    fn zero_probability_never_corrupts() {
        let mut c = CorruptElement::new(0.0, stream(3, Direction::Forward, Stream::Corrupt));
        assert!((0..10_000).all(|_| c.draw(1500) == [None, None]));
    }
}
