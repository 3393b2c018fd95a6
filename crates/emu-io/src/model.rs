//! The link-model interface the I/O layer drives, and [`BasicModel`], a small seeded
//! delay + Bernoulli-loss model for tests and for running without `tcplab-emu`'s full chain.
//!
//! The I/O layer is sans-policy: for every received frame it calls [`Model::arrive`] with the
//! wire length and the CLOCK_MONOTONIC receive time, and the model answers with
//! `tcplab_emu`'s [`Verdict`]: drop, or one or two departures computed at arrival. The trait
//! exists so tests can drive the bridge with a model of their own; `tcplab_emu::DirectionModel`
//! implements it by calling its own methods.

use crate::time::Nanos;
use tcplab_emu::deferred::{Decision, Frame};
use tcplab_emu::{DropCause, Verdict};

/// One direction's link model, as the I/O layer sees it.
pub trait Model: Send + 'static {
    /// The configuration [`Model::reconfigure`] accepts.
    type Config: Send + 'static;
    /// A frame of `len` wire bytes arrived at `now`.
    fn arrive(&mut self, len: u32, now: Nanos) -> Verdict;
    /// A GSO super-packet standing for `segments` wire packets of `len` bytes in all arrived
    /// at `now` (GSO mode). The default charges it as one frame of `len` bytes.
    fn arrive_train(&mut self, len: u32, segments: u32, now: Nanos) -> Verdict {
        let _ = segments;
        self.arrive(len, now)
    }
    /// True if departures can come out of arrival order (the I/O then keeps a heap, else a
    /// FIFO).
    fn may_reorder(&self) -> bool;
    /// True if an element acts on single packets (loss, duplicate, reorder, corrupt): GSO
    /// mode then cuts super-packets into their wire segments before [`Model::arrive`]
    /// (`crate::wire::segment`). Default false: super-packets cross whole.
    fn needs_per_packet(&self) -> bool {
        false
    }
    /// Applies a new configuration without dropping what is queued; an error leaves the old
    /// configuration in force and is reported by the bridge.
    fn reconfigure(&mut self, cfg: &Self::Config, now: Nanos) -> Result<(), String>;
    /// True if the model decides departures when its link takes a frame, not when the frame
    /// arrives (a queue discipline at the bottleneck: `tcplab_emu::deferred`). The I/O layer
    /// then stores every frame, gives it to [`Model::offer`] instead of [`Model::arrive`], and
    /// calls [`Model::advance`] at [`Model::next_due`]; each [`Decision`] names the frame.
    fn defers(&self) -> bool {
        false
    }
    /// A deferring model takes a frame arriving at `now`; decisions due so far are appended
    /// to `out`. True if it duplicated the frame (a decision with `copy` set will name it).
    /// Models that do not defer never see it.
    fn offer(&mut self, frame: Frame, now: Nanos, out: &mut Vec<Decision>) -> bool {
        let _ = (frame, now, out);
        false
    }
    /// A deferring model decides what is due by `now`, appended to `out`.
    fn advance(&mut self, now: Nanos, out: &mut Vec<Decision>) {
        let _ = (now, out);
    }
    /// When a deferring model next has a decision to make.
    fn next_due(&self) -> Option<Nanos> {
        None
    }
    /// What the model really did up to `now` (its bottleneck queue, the delay it gave), for
    /// the counters' snapshot. Default: nothing to report.
    fn realised(&self, now: Nanos) -> tcplab_emu::Realised {
        let _ = now;
        tcplab_emu::Realised::default()
    }
}

/// Configuration of [`BasicModel`].
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct BasicConfig {
    /// One-way delay in ns.
    pub delay_ns: Nanos,
    /// Bernoulli loss probability in [0, 1].
    pub loss: f64,
}

/// Fixed delay and Bernoulli loss from a seeded SplitMix64 stream. Never reorders.
#[derive(Debug, Clone)]
pub struct BasicModel {
    cfg: BasicConfig,
    rng: u64,
    last_departure: Nanos,
}

impl BasicModel {
    /// A model with `cfg`, its loss stream seeded by `seed`.
    pub fn new(cfg: BasicConfig, seed: u64) -> Self {
        Self {
            cfg,
            rng: seed,
            last_departure: 0,
        }
    }

    /// SplitMix64 (Steele, Lea, Flood 2014): a full-period 64-bit generator, enough for
    /// Bernoulli draws.
    fn next_u64(&mut self) -> u64 {
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn lost(&mut self) -> bool {
        if self.cfg.loss <= 0.0 {
            return false;
        }
        // 53 random bits → uniform in [0, 1).
        let u = (self.next_u64() >> 11) as f64 / (1_u64 << 53) as f64;
        u < self.cfg.loss
    }
}

impl Model for BasicModel {
    type Config = BasicConfig;

    fn arrive(&mut self, _len: u32, now: Nanos) -> Verdict {
        if self.lost() {
            return Verdict::Drop(DropCause::Loss);
        }
        // A delay decrease takes effect without overtaking frames already scheduled.
        let at = (now + self.cfg.delay_ns).max(self.last_departure);
        self.last_departure = at;
        Verdict::send_at(at)
    }

    fn may_reorder(&self) -> bool {
        false
    }

    fn needs_per_packet(&self) -> bool {
        self.cfg.loss > 0.0
    }

    fn reconfigure(&mut self, cfg: &BasicConfig, _now: Nanos) -> Result<(), String> {
        if !(0.0..=1.0).contains(&cfg.loss) {
            return Err(format!("loss {}: must be between 0 and 1", cfg.loss));
        }
        self.cfg = *cfg;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delay_is_added_and_order_kept_across_a_delay_decrease() {
        let mut m = BasicModel::new(
            BasicConfig {
                delay_ns: 10_000_000,
                loss: 0.0,
            },
            1,
        );
        assert_eq!(m.arrive(100, 5).single_intact(), Some(10_000_005));
        m.reconfigure(
            &BasicConfig {
                delay_ns: 1_000,
                loss: 0.0,
            },
            6,
        )
        .unwrap();
        assert_eq!(
            m.arrive(100, 6).single_intact(),
            Some(10_000_005),
            "held behind the earlier frame"
        );
        assert_eq!(m.arrive(100, 20_000_000).single_intact(), Some(20_001_000));
        assert!(
            m.reconfigure(
                &BasicConfig {
                    delay_ns: 0,
                    loss: 1.5
                },
                0
            )
            .is_err()
        );
    }

    #[test]
    fn bernoulli_loss_is_within_the_99_percent_interval_and_seeded() {
        let n = 200_000_u32;
        let count = |seed| {
            let mut m = BasicModel::new(
                BasicConfig {
                    delay_ns: 0,
                    loss: 0.01,
                },
                seed,
            );
            (0..n)
                .filter(|_| matches!(m.arrive(64, 0), Verdict::Drop(DropCause::Loss)))
                .count()
        };
        let lost = count(42) as f64;
        let (mean, sd) = (f64::from(n) * 0.01, (f64::from(n) * 0.01 * 0.99).sqrt());
        assert!(
            (lost - mean).abs() < 2.576 * sd,
            "lost {lost}, expected {mean} ± {}",
            2.576 * sd
        );
        assert_eq!(count(42), count(42));
        assert_ne!(count(42), count(43));
    }
}
