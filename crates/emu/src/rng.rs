//! One seed, many independent random streams.
//!
//! Each element of each direction draws from its own ChaCha8 stream: the same 64-bit seed with
//! a different ChaCha stream number. Changing one element's configuration therefore never
//! changes another element's draws, and every enabled element draws a fixed number of values
//! per arriving packet (see [`crate::DirectionModel`]), so packet *k*'s jitter does not depend
//! on whether packet *k − 1* was lost. A disabled element draws nothing.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// The generator every element uses.
pub type Rng = ChaCha8Rng;

/// Which element a stream feeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Stream {
    Loss = 1,
    Duplicate = 2,
    Reorder = 3,
    Jitter = 4,
    Corrupt = 5,
    /// The random disciplines at the bottleneck (RED, PIE).
    Aqm = 6,
}

/// Which direction of a link a model serves; part of the stream number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Client → server.
    Forward,
    /// Server → client.
    Reverse,
}

/// The stream for `element` of `direction` under `seed`.
pub(crate) fn stream(seed: u64, direction: Direction, element: Stream) -> Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let dir = match direction {
        Direction::Forward => 0u64,
        Direction::Reverse => 1u64,
    };
    rng.set_stream((dir << 8) | element as u64);
    rng
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng as _;

    #[test]
    fn streams_differ_by_element_direction_and_seed() {
        let first = |seed, dir, el| stream(seed, dir, el).random::<u64>();
        let a = first(1, Direction::Forward, Stream::Loss);
        assert_eq!(a, first(1, Direction::Forward, Stream::Loss));
        assert_ne!(a, first(1, Direction::Forward, Stream::Jitter));
        assert_ne!(a, first(1, Direction::Reverse, Stream::Loss));
        assert_ne!(a, first(2, Direction::Forward, Stream::Loss));
    }
}
