//! Reordering: a chosen packet skips the delay line and so overtakes the packets ahead of it
//! (netem's `reorder P gap N`).
//!
//! With a gap N ≥ 2, a packet is a candidate only after N−1 packets in a row went through the
//! delay line; a candidate skips with the configured probability (100% makes it exactly every
//! N-th packet). With gap 0 or 1 every packet is a candidate. One draw per packet while enabled.

use rand::Rng as _;

use crate::Reorder;
use crate::rng::Rng;

/// Chooses the packets that skip the delay line.
#[derive(Debug, Clone)]
pub struct ReorderElement {
    probability: f64,
    gap: u32,
    /// Packets delayed since the last one that skipped.
    delayed_run: u32,
    rng: Rng,
}

impl ReorderElement {
    /// An element for `cfg` drawing from `rng`.
    pub(crate) fn new(cfg: Option<&Reorder>, rng: Rng) -> Self {
        let mut s = Self {
            probability: 0.0,
            gap: 0,
            delayed_run: 0,
            rng,
        };
        s.reconfigure(cfg);
        s
    }

    /// New settings; the run of delayed packets is kept.
    pub(crate) fn reconfigure(&mut self, cfg: Option<&Reorder>) {
        self.probability = cfg.map_or(0.0, |r| r.probability);
        self.gap = cfg.map_or(0, |r| r.gap);
    }

    /// Draws this packet's random value; call once per arriving packet.
    pub fn draw(&mut self) -> f64 {
        if self.probability <= 0.0 {
            // Disabled: 1.0 never skips, and no draw is spent.
            return 1.0;
        }
        self.rng.random::<f64>()
    }

    /// Whether an accepted packet with draw `u` skips the delay line.
    pub fn skips(&mut self, u: f64) -> bool {
        let candidate = self.gap <= 1 || self.delayed_run >= self.gap - 1;
        if candidate && u < self.probability {
            self.delayed_run = 0;
            true
        } else {
            self.delayed_run = self.delayed_run.saturating_add(1);
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{Direction, Stream, stream};

    #[test]
    fn gap_with_certainty_is_every_nth() {
        let cfg = Reorder {
            probability: 1.0,
            gap: 5,
        };
        let mut r = ReorderElement::new(Some(&cfg), stream(1, Direction::Forward, Stream::Reorder));
        let skipped: Vec<usize> = (1..=20)
            .filter(|_| {
                let u = r.draw();
                r.skips(u)
            })
            .collect();
        assert_eq!(skipped, [5, 10, 15, 20]);
    }

    #[test]
    fn off_never_skips() {
        let mut r = ReorderElement::new(None, stream(1, Direction::Forward, Stream::Reorder));
        assert!((0..1000).all(|_| {
            let u = r.draw();
            !r.skips(u)
        }));
    }
}
