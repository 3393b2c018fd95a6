//! The real link model: `tcplab_emu::DirectionModel` driven by the bridge, and
//! [`EmuBridge`], the bridge built from a `LinkConfig`.
//!
//! `forward` (client → server) runs on frames from interface A to B, `reverse` on B to A.
//! Configurations are validated on the caller's thread before anything changes, so a bad
//! `reconfigure` leaves both directions as they were.

use tcplab_emu::deferred::{Decision, DeferredDirection, Frame};
use tcplab_emu::{
    ConfigError, Direction as Dir, DirectionConfig, DirectionModel, LinkConfig, Verdict,
};

use crate::error::IoError;
use crate::io::sys::clock::{monotonic_ns, realtime_ns};
use crate::model::Model;
use crate::options::IoOptions;
use crate::run::bridge::Bridge;
use crate::time::Nanos;

/// The bridge with `tcplab_emu`'s model in each direction.
pub type EmuBridge = Bridge<EmuDirection>;

/// One direction of the emulator: the chain that decides at arrival, or, when the direction
/// has a queue discipline, the one that decides when the link takes a frame.
#[derive(Debug, Clone)]
#[allow(
    clippy::large_enum_variant,
    reason = "both chains are kilobytes; the one in use lives in place for the link's life, and \
              a box would add an indirection to every packet"
)]
pub enum EmuDirection {
    /// Drop-tail: [`DirectionModel`].
    Arrival(DirectionModel),
    /// A queue discipline: [`DeferredDirection`].
    Deferred(DeferredDirection),
}

impl EmuDirection {
    /// The direction `cfg` describes, drawing from `seed`'s streams for `direction`.
    pub fn new(cfg: &DirectionConfig, seed: u64, direction: Dir) -> Result<Self, ConfigError> {
        Ok(if cfg.defers() {
            EmuDirection::Deferred(DeferredDirection::of(cfg, seed, direction)?)
        } else {
            EmuDirection::Arrival(DirectionModel::with_direction(cfg, seed, direction)?)
        })
    }
}

impl Model for EmuDirection {
    type Config = DirectionConfig;

    fn arrive(&mut self, len: u32, now: Nanos) -> Verdict {
        match self {
            EmuDirection::Arrival(m) => Model::arrive(m, len, now),
            EmuDirection::Deferred(m) => Model::arrive(m, len, now),
        }
    }

    fn arrive_train(&mut self, len: u32, segments: u32, now: Nanos) -> Verdict {
        match self {
            EmuDirection::Arrival(m) => Model::arrive_train(m, len, segments, now),
            EmuDirection::Deferred(m) => Model::arrive_train(m, len, segments, now),
        }
    }

    fn may_reorder(&self) -> bool {
        match self {
            EmuDirection::Arrival(m) => Model::may_reorder(m),
            EmuDirection::Deferred(m) => Model::may_reorder(m),
        }
    }

    fn needs_per_packet(&self) -> bool {
        match self {
            EmuDirection::Arrival(m) => Model::needs_per_packet(m),
            EmuDirection::Deferred(m) => Model::needs_per_packet(m),
        }
    }

    fn reconfigure(&mut self, cfg: &DirectionConfig, now: Nanos) -> Result<(), String> {
        match self {
            EmuDirection::Arrival(m) => Model::reconfigure(m, cfg, now),
            EmuDirection::Deferred(m) => Model::reconfigure(m, cfg, now),
        }
    }

    fn defers(&self) -> bool {
        matches!(self, EmuDirection::Deferred(_))
    }

    fn offer(&mut self, frame: Frame, now: Nanos, out: &mut Vec<Decision>) -> bool {
        match self {
            EmuDirection::Arrival(_) => false,
            EmuDirection::Deferred(m) => Model::offer(m, frame, now, out),
        }
    }

    fn advance(&mut self, now: Nanos, out: &mut Vec<Decision>) {
        if let EmuDirection::Deferred(m) = self {
            Model::advance(m, now, out);
        }
    }

    fn next_due(&self) -> Option<Nanos> {
        match self {
            EmuDirection::Arrival(_) => None,
            EmuDirection::Deferred(m) => Model::next_due(m),
        }
    }

    fn realised(&self, now: Nanos) -> tcplab_emu::Realised {
        match self {
            EmuDirection::Arrival(m) => Model::realised(m, now),
            EmuDirection::Deferred(m) => Model::realised(m, now),
        }
    }
}

impl Model for DirectionModel {
    type Config = DirectionConfig;

    fn arrive(&mut self, len: u32, now: Nanos) -> Verdict {
        DirectionModel::arrive(self, len, now)
    }

    fn arrive_train(&mut self, len: u32, segments: u32, now: Nanos) -> Verdict {
        DirectionModel::arrive_train(self, len, segments, now)
    }

    fn may_reorder(&self) -> bool {
        DirectionModel::may_reorder(self)
    }

    fn needs_per_packet(&self) -> bool {
        self.config().needs_per_packet().is_some()
    }

    fn reconfigure(&mut self, cfg: &DirectionConfig, now: Nanos) -> Result<(), String> {
        DirectionModel::reconfigure(self, cfg, now).map_err(|e| e.to_string())
    }

    fn realised(&self, now: Nanos) -> tcplab_emu::Realised {
        DirectionModel::realised(self, now)
    }
}

/// The chain with a queue discipline at its bottleneck: decisions when the link takes a frame.
impl Model for DeferredDirection {
    type Config = DirectionConfig;

    /// Never called: the direction offers every frame ([`Model::defers`]).
    fn arrive(&mut self, _len: u32, _now: Nanos) -> Verdict {
        Verdict::Drop(tcplab_emu::DropCause::QueueFull)
    }

    fn defers(&self) -> bool {
        true
    }

    fn offer(&mut self, frame: Frame, now: Nanos, out: &mut Vec<Decision>) -> bool {
        DeferredDirection::offer(self, frame, now, out)
    }

    fn advance(&mut self, now: Nanos, out: &mut Vec<Decision>) {
        DeferredDirection::advance(self, now, out);
    }

    fn next_due(&self) -> Option<Nanos> {
        DeferredDirection::next_due(self)
    }

    fn may_reorder(&self) -> bool {
        DeferredDirection::may_reorder(self)
    }

    /// A discipline acts on single packets: super-packets are cut first.
    fn needs_per_packet(&self) -> bool {
        true
    }

    fn realised(&self, now: Nanos) -> tcplab_emu::Realised {
        DeferredDirection::realised(self, now)
    }

    fn reconfigure(&mut self, cfg: &DirectionConfig, now: Nanos) -> Result<(), String> {
        DeferredDirection::reconfigure(self, cfg, now).map_err(|e| e.to_string())
    }
}

/// A seed for runs whose configuration names none: clock bits and the PID, mixed. Printed via
/// [`Bridge::seed`] so the run can be replayed.
pub fn fresh_seed() -> u64 {
    let x = realtime_ns() ^ monotonic_ns().rotate_left(32) ^ u64::from(std::process::id()) << 48;
    // SplitMix64 finaliser: spread the low-entropy bits over the word.
    let x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    let x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

impl Bridge<EmuDirection> {
    /// Bridges `iface_a` (client side) and `iface_b` (server side) with the link `cfg`. The
    /// seed is `cfg.seed` or a fresh one; read it back with [`Bridge::seed`].
    pub fn start(
        iface_a: &str,
        iface_b: &str,
        cfg: &LinkConfig,
        opts: &IoOptions,
    ) -> Result<Self, IoError> {
        let seed = cfg.seed.unwrap_or_else(fresh_seed);
        let direction = |c: &DirectionConfig, d: Dir, name: &str| {
            EmuDirection::new(c, seed, d).map_err(|e| IoError::Config(e.within(name).to_string()))
        };
        let forward = direction(&cfg.forward, Dir::Forward, "forward")?;
        let reverse = direction(&cfg.reverse, Dir::Reverse, "reverse")?;
        let mut bridge = Self::with_models(iface_a, iface_b, forward, reverse, opts)?;
        bridge.seed = Some(seed);
        Ok(bridge)
    }

    /// Changes the impairments of the running link; queued frames keep their departures.
    pub fn reconfigure_link(&self, cfg: &LinkConfig) -> Result<(), IoError> {
        cfg.validate().map_err(|e| IoError::Config(e.to_string()))?;
        self.reconfigure(cfg.forward.clone(), cfg.reverse.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcplab_emu::LinkModel;

    #[test]
    fn a_transparent_link_sends_every_frame_once_on_arrival() {
        let mut m = DirectionModel::new(&DirectionConfig::default(), 1).unwrap();
        assert!(!Model::may_reorder(&m));
        assert_eq!(
            Model::arrive(&mut m, 1514, 1_000).single_intact(),
            Some(1_000)
        );
    }

    #[test]
    fn per_packet_elements_make_a_direction_segment() {
        let mut cfg = LinkConfig::default();
        cfg.reverse.duplicate = 0.01;
        let link = LinkModel::new(&cfg, 1).unwrap();
        assert!(!Model::needs_per_packet(&link.forward));
        assert!(Model::needs_per_packet(&link.reverse));
        let mut fwd = link.forward;
        cfg.forward.corrupt = 0.001;
        Model::reconfigure(&mut fwd, &cfg.forward, 0).unwrap();
        assert!(
            Model::needs_per_packet(&fwd),
            "a reconfigure switches it on"
        );
    }

    /// A direction with a queue discipline runs deferred, one without runs at arrival; the
    /// discipline of a running direction does not change under it.
    #[test]
    fn a_queue_discipline_makes_a_direction_deferred_and_stays() {
        let flags = tcplab_emu::ImpairmentFlags {
            rate: Some("100mbit".into()),
            queue_discipline: Some("fq_codel/droptail".into()),
            ..Default::default()
        };
        let cfg = flags.to_link_config().unwrap();
        let mut fwd = EmuDirection::new(&cfg.forward, 1, Dir::Forward).unwrap();
        let rev = EmuDirection::new(&cfg.reverse, 1, Dir::Reverse).unwrap();
        assert!(fwd.defers() && fwd.needs_per_packet());
        assert!(!rev.defers());
        let mut other = cfg.forward.clone();
        other.queue_discipline = Some(tcplab_emu::aqm::AqmConfig::named("pie").unwrap());
        let e = fwd.reconfigure(&other, 0).unwrap_err();
        assert!(
            e.contains("queue_discipline") && e.contains("down and up"),
            "{e}"
        );
        let mut faster = cfg.forward.clone();
        faster.rate_bps = Some(200_000_000);
        fwd.reconfigure(&faster, 0).unwrap();
        let e = tcplab_emu::DirectionModel::new(&cfg.forward, 1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("DeferredDirection"), "{e}");
    }

    #[test]
    fn fresh_seeds_differ() {
        assert_ne!(fresh_seed(), fresh_seed());
    }
}
