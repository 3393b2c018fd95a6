//! Duplication: with some probability a packet is sent twice. One draw per packet while enabled.
//!
//! The copy is made at the link entry, after loss, so it takes its own place in the
//! bottleneck queue and its own serialisation time, like a duplicating device upstream of the
//! bottleneck would; if the queue has no room for it only the copy is dropped.

use rand::Rng as _;

use crate::rng::Rng;

/// Decides which packets are duplicated.
#[derive(Debug, Clone)]
pub struct DuplicateElement {
    probability: f64,
    rng: Rng,
}

impl DuplicateElement {
    /// An element duplicating with `probability`, drawing from `rng`.
    pub(crate) fn new(probability: f64, rng: Rng) -> Self {
        Self { probability, rng }
    }

    /// New probability; the stream continues.
    pub(crate) fn reconfigure(&mut self, probability: f64) {
        self.probability = probability;
    }

    /// Whether the next packet is duplicated.
    pub fn duplicate(&mut self) -> bool {
        if self.probability <= 0.0 {
            return false;
        }
        self.rng.random::<f64>() < self.probability
    }
}
