//! One direction's chain of elements ([`DirectionModel`]) and a two-way link ([`LinkModel`]).
//!
//! A packet goes through: loss → duplicate → bottleneck (rate, queue) → reorder or delay line
//! (delay, jitter) → corrupt. Its departure time is decided at arrival and returned in the
//! [`Verdict`]; the I/O layer keeps the frame until then.
//!
//! Every enabled element draws a fixed number of random values per arriving packet, whether
//! or not the packet survives earlier elements (a disabled one draws none), so one element's settings never shift another's
//! draws: with the same seed, packet *k* gets the same jitter at 0% and at 5% loss.

use crate::corrupt::{CorruptElement, Corruption};
use crate::delay::DelayLine;
use crate::duplicate::DuplicateElement;
use crate::error::ConfigError;
use crate::jitter::JitterSource;
use crate::loss::LossElement;
use crate::queue_stats::QueueStats;
use crate::rate::Bottleneck;
use crate::realised::Realised;
use crate::reorder::ReorderElement;
use crate::rng::{Direction, Stream, stream};
use crate::{DirectionConfig, LinkConfig, Nanos};

/// Why a packet was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropCause {
    /// The loss model chose it.
    Loss,
    /// The bottleneck queue was full (drop-tail).
    QueueFull,
}

/// When (and how) one copy of a packet leaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Departure {
    /// Absolute departure time, on the caller's clock.
    pub at: Nanos,
    /// A bit to flip before sending, if this copy is corrupted.
    pub corrupt: Option<Corruption>,
}

/// The departures of one accepted packet: the original, then possibly a duplicate.
/// Fixed-size, so deciding a packet never allocates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Departures {
    items: [Departure; 2],
    len: u8,
}

impl Departures {
    /// One copy leaving as `d`.
    pub fn one(d: Departure) -> Self {
        Self {
            items: [d, d],
            len: 1,
        }
    }

    /// The original leaving as `first` and a duplicate as `second`.
    pub fn two(first: Departure, second: Departure) -> Self {
        Self {
            items: [first, second],
            len: 2,
        }
    }

    fn push(&mut self, d: Departure) {
        self.items[1] = d;
        self.len = 2;
    }

    /// The departures, original first.
    pub fn as_slice(&self) -> &[Departure] {
        &self.items[..usize::from(self.len)]
    }

    /// The original's departure.
    pub fn first(&self) -> Departure {
        self.items[0]
    }

    /// The duplicate's departure, if there is one.
    pub fn second(&self) -> Option<Departure> {
        (self.len == 2).then_some(self.items[1])
    }

    /// 1, or 2 with a duplicate.
    pub fn len(&self) -> usize {
        usize::from(self.len)
    }

    /// Always false: an accepted packet departs at least once.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Iterates over the departures, original first.
    pub fn iter(&self) -> impl Iterator<Item = &Departure> {
        self.as_slice().iter()
    }
}

/// What to do with an arriving packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Drop it.
    Drop(DropCause),
    /// Send it (and a duplicate) at these times.
    Send(Departures),
}

impl Verdict {
    /// Send one intact copy at `at`.
    pub fn send_at(at: Nanos) -> Self {
        Verdict::Send(Departures::one(Departure { at, corrupt: None }))
    }

    /// The latest departure it schedules (0 for a drop).
    pub fn latest(&self) -> Nanos {
        match self {
            Verdict::Drop(_) => 0,
            Verdict::Send(d) => d.iter().map(|d| d.at).max().unwrap_or(0),
        }
    }

    /// The departure of a packet sent once and intact, if that is what this is.
    pub fn single_intact(&self) -> Option<Nanos> {
        match self {
            Verdict::Send(d) if d.len() == 1 && d.first().corrupt.is_none() => Some(d.first().at),
            _ => None,
        }
    }
}

/// What one direction has done, for the I/O layer's report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DirectionCounters {
    /// Packets offered to the model.
    pub packets_in: u64,
    /// Their bytes.
    pub bytes_in: u64,
    /// Departures scheduled (duplicates included).
    pub packets_out: u64,
    /// Their bytes.
    pub bytes_out: u64,
    /// Dropped by the loss model.
    pub dropped_loss: u64,
    /// Dropped because the queue was full (originals only).
    pub dropped_queue_full: u64,
    /// Duplicates scheduled.
    pub duplicated: u64,
    /// Duplicates that did not fit in the queue.
    pub duplicates_dropped: u64,
    /// Departures with a flipped bit.
    pub corrupted: u64,
    /// Packets that skipped the delay line.
    pub reordered: u64,
    /// Dropped by a queue discipline (early drop, CoDel, memory limit): [`crate::deferred`].
    pub dropped_aqm: u64,
    /// Departures a queue discipline marked CE instead of dropping.
    pub marked_ce: u64,
    /// Bottleneck queue occupancy (up to the last arrival).
    pub queue: QueueStats,
}

impl DirectionCounters {
    /// Drops for one cause.
    pub fn dropped(&self, cause: DropCause) -> u64 {
        match cause {
            DropCause::Loss => self.dropped_loss,
            DropCause::QueueFull => self.dropped_queue_full,
        }
    }
}

/// One direction's chain of elements.
#[derive(Debug, Clone)]
pub struct DirectionModel {
    cfg: DirectionConfig,
    loss: LossElement,
    duplicate: DuplicateElement,
    bottleneck: Bottleneck,
    reorder: ReorderElement,
    jitter: JitterSource,
    delay: DelayLine,
    corrupt: CorruptElement,
    counters: DirectionCounters,
    last_now: Nanos,
}

impl DirectionModel {
    /// A model of `cfg` whose random streams derive from `seed` (as the forward direction; see
    /// [`Self::with_direction`]).
    pub fn new(cfg: &DirectionConfig, seed: u64) -> Result<Self, ConfigError> {
        Self::with_direction(cfg, seed, Direction::Forward)
    }

    /// A model of `cfg` for `direction`: the two directions of a link draw from different
    /// streams of the same seed.
    pub fn with_direction(
        cfg: &DirectionConfig,
        seed: u64,
        direction: Direction,
    ) -> Result<Self, ConfigError> {
        cfg.validate()?;
        refuse_discipline(cfg)?;
        let rng = |s| stream(seed, direction, s);
        Ok(Self {
            loss: LossElement::new(cfg.loss.as_ref(), rng(Stream::Loss)),
            duplicate: DuplicateElement::new(cfg.duplicate, rng(Stream::Duplicate)),
            bottleneck: Bottleneck::new(cfg.rate_bps, cfg.overhead_bytes, cfg.queue_limit()),
            reorder: ReorderElement::new(cfg.reorder.as_ref(), rng(Stream::Reorder)),
            jitter: JitterSource::new(cfg.jitter.as_ref(), rng(Stream::Jitter)),
            delay: DelayLine::new(cfg.delay_ns, !jitter_reorders(cfg)),
            corrupt: CorruptElement::new(cfg.corrupt, rng(Stream::Corrupt)),
            counters: DirectionCounters::default(),
            last_now: 0,
            cfg: cfg.clone(),
        })
    }

    /// Decides the fate of a frame of `len` bytes (layer 2, as on the wire without FCS)
    /// arriving at `now`. A `now` earlier than a previous call's is taken as that one.
    pub fn arrive(&mut self, len: u32, now: Nanos) -> Verdict {
        self.arrive_train(len, 1, now)
    }

    /// Decides the fate of a GSO super-packet standing for `segments` wire packets of
    /// `total_len` bytes in all (each segment's headers counted) arriving at `now`: the
    /// bottleneck serialises and queues it as `segments` back-to-back packets (queue limits in
    /// packets count segments) and it departs when its last segment would, plus the delay line.
    /// Counters count segments. Loss, duplicate, reorder and corruption draw once and act on
    /// the whole train, which is not what a real link does to its packets: where
    /// [`DirectionConfig::needs_per_packet`] names an element, callers should cut the
    /// super-packet and call [`Self::arrive`] per segment (as `tcplab_emu_io` does in GSO
    /// mode). `segments` 0 is taken as 1.
    pub fn arrive_train(&mut self, len: u32, segments: u32, now: Nanos) -> Verdict {
        let segments = segments.max(1);
        let now = now.max(self.last_now);
        self.last_now = now;
        self.counters.packets_in += u64::from(segments);
        self.counters.bytes_in += u64::from(len);

        // Fixed draws per packet, in a fixed order (see the module docs).
        let lost = self.loss.lose();
        let duplicated = self.duplicate.duplicate();
        let reorder_draw = self.reorder.draw();
        let offset = self.jitter.next_offset();
        let corruption = self.corrupt.draw(len);

        if lost {
            self.counters.dropped_loss += u64::from(segments);
            return Verdict::Drop(DropCause::Loss);
        }
        let Ok(leaves) = self.bottleneck.offer_train(len, segments, now) else {
            self.counters.dropped_queue_full += u64::from(segments);
            self.counters.queue = *self.bottleneck.stats();
            return Verdict::Drop(DropCause::QueueFull);
        };
        let at = if self.reorder.skips(reorder_draw) {
            self.counters.reordered += 1;
            leaves
        } else {
            self.delay.depart(leaves, offset)
        };
        let mut out = Departures::one(self.departure(at, corruption[0], len, segments));
        if duplicated {
            match self.bottleneck.offer_train(len, segments, now) {
                Ok(copy_leaves) => {
                    let copy_at = self.delay.depart(copy_leaves, offset);
                    out.push(self.departure(copy_at, corruption[1], len, segments));
                    self.counters.duplicated += u64::from(segments);
                }
                Err(_) => self.counters.duplicates_dropped += u64::from(segments),
            }
        }
        self.counters.queue = *self.bottleneck.stats();
        Verdict::Send(out)
    }

    /// Counts one departure and builds it.
    fn departure(
        &mut self,
        at: Nanos,
        corrupt: Option<Corruption>,
        len: u32,
        segments: u32,
    ) -> Departure {
        self.counters.packets_out += u64::from(segments);
        self.counters.bytes_out += u64::from(len);
        if corrupt.is_some() {
            self.counters.corrupted += 1;
        }
        Departure { at, corrupt }
    }

    /// Applies new settings at `now` without disturbing packets already decided: queued
    /// packets keep their departures (a smaller queue limit refuses arrivals until it drains,
    /// it never drops what is queued), order is kept across the change, random streams and
    /// loss state continue. On error nothing changes.
    pub fn reconfigure(&mut self, cfg: &DirectionConfig, now: Nanos) -> Result<(), ConfigError> {
        cfg.validate()?;
        refuse_discipline(cfg)?;
        self.last_now = self.last_now.max(now);
        self.loss.reconfigure(cfg.loss.as_ref());
        self.duplicate.reconfigure(cfg.duplicate);
        self.bottleneck
            .reconfigure(cfg.rate_bps, cfg.overhead_bytes, cfg.queue_limit());
        self.reorder.reconfigure(cfg.reorder.as_ref());
        self.jitter.reconfigure(cfg.jitter.as_ref());
        self.delay.reconfigure(cfg.delay_ns, !jitter_reorders(cfg));
        self.corrupt.reconfigure(cfg.corrupt);
        self.cfg = cfg.clone();
        Ok(())
    }

    /// What this direction has done so far.
    pub fn counters(&self) -> &DirectionCounters {
        &self.counters
    }

    /// Queue statistics projected to `now` (the counters' copy stops at the last arrival).
    pub fn queue_stats_at(&self, now: Nanos) -> QueueStats {
        self.bottleneck.stats_at(now.max(self.last_now))
    }

    /// What this direction really did up to `now`: its bottleneck queue and the delay its
    /// delay line gave (for reports; see [`crate::realised`]).
    pub fn realised(&self, now: Nanos) -> Realised {
        Realised::of(&self.cfg, &self.queue_stats_at(now), self.delay.stats())
    }

    /// True if departures can come out of arrival order, so the I/O layer needs a
    /// time-ordered heap; false means a FIFO is enough.
    pub fn may_reorder(&self) -> bool {
        self.cfg.may_reorder()
    }

    /// The settings in force.
    pub fn config(&self) -> &DirectionConfig {
        &self.cfg
    }

    /// The latest departure scheduled through the delay line.
    pub fn last_departure(&self) -> Nanos {
        self.delay.last_departure()
    }
}

/// This model decides departures at arrival: a queue discipline needs the deferred one.
fn refuse_discipline(cfg: &DirectionConfig) -> Result<(), ConfigError> {
    if cfg.defers() {
        return Err(ConfigError::field(
            "queue_discipline",
            crate::error::ValueError::Invalid(
                "a queue discipline decides when a packet is served, not when it arrives: \
                 run this direction as tcplab_emu::deferred::DeferredDirection"
                    .into(),
            ),
        ));
    }
    Ok(())
}

/// Jitter may reorder only when asked to.
fn jitter_reorders(cfg: &DirectionConfig) -> bool {
    cfg.jitter.as_ref().is_some_and(|j| j.allow_reorder)
}

/// Both directions of a link, built from one [`LinkConfig`] and one seed.
#[derive(Debug, Clone)]
pub struct LinkModel {
    /// Client → server.
    pub forward: DirectionModel,
    /// Server → client.
    pub reverse: DirectionModel,
    seed: u64,
}

impl LinkModel {
    /// Builds both directions. The seed is `cfg.seed`, or `fallback_seed` when the config has
    /// none (the caller draws it from its own entropy and prints [`Self::seed`]).
    pub fn new(cfg: &LinkConfig, fallback_seed: u64) -> Result<Self, ConfigError> {
        let seed = cfg.seed.unwrap_or(fallback_seed);
        let forward = DirectionModel::with_direction(&cfg.forward, seed, Direction::Forward)
            .map_err(|e| e.within("forward"))?;
        let reverse = DirectionModel::with_direction(&cfg.reverse, seed, Direction::Reverse)
            .map_err(|e| e.within("reverse"))?;
        Ok(Self {
            forward,
            reverse,
            seed,
        })
    }

    /// The seed in use: print it, and pass it back as `seed` to replay the run.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Applies a new configuration to both directions at `now` (the seed is not changed).
    /// Validates both first, so on error neither direction changes.
    pub fn reconfigure(&mut self, cfg: &LinkConfig, now: Nanos) -> Result<(), ConfigError> {
        cfg.validate()?;
        self.forward.reconfigure(&cfg.forward, now)?;
        self.reverse.reconfigure(&cfg.reverse, now)
    }
}
