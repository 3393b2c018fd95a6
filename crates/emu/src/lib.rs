//! `tcplab-emu`: the link model of the tcplab emulator, sans-IO.
//!
//! This crate decides, for each frame that arrives at one end of an emulated link, whether it
//! is dropped and when (and how often, and with which bit flipped) it leaves the other end.
//! It never reads a clock, a socket or a file: time comes in as [`Nanos`] (CLOCK_MONOTONIC ns
//! from the caller), file contents come in as `&str`, and decisions go out as values. So every
//! rule is tested exactly in virtual time, and a run is replayable from its seed.
//! `tcplab-emu-io` moves the frames; `tcplab` parses the flags with [`ImpairmentFlags`].
//!
//! # The map
//! ```text
//! ImpairmentFlags ──(spec: "10ms", "1gbit", "0.1%", "A/B")──► LinkConfig (serde)
//!                                                              │ forward, reverse, seed
//!                                                              ▼
//! LinkModel { forward: DirectionModel, reverse: DirectionModel, seed }
//!
//! DirectionModel::arrive(len, now) -> Verdict       (arrive_train(len, segments, now) for a
//!                                                     GSO super-packet: `segments` wire packets)
//!   loss ─► duplicate ─► bottleneck (rate + drop-tail queue) ─► reorder? ─► delay line ─► corrupt
//!   loss.rs  duplicate.rs  rate.rs, queue_stats.rs           reorder.rs   delay.rs,     corrupt.rs
//!   pattern.rs                                                            jitter.rs, dist.rs
//! ```
//! * Queue management (RED, CoDel, FQ-CoDel, PIE) lives in [`aqm`]: disciplines with
//!   `enqueue`/`dequeue` and the rate server that dequeues at the instants the link frees,
//!   since their decisions (a packet's sojourn, which flow goes next) are only known then.
//! * Loss happens at the entry, so a lost packet takes no queue space.
//! * The bottleneck queue is separate from the propagation delay (dummynet's model): it fills
//!   only when arrivals outpace the rate. Its limit counts the packet being serialised: a
//!   64-packet queue holds the one on the wire and 63 waiting. Serialisation time is exact to
//!   the sub-ns (the remainder is carried), so long runs do not drift.
//! * The delay line adds delay + jitter after the bottleneck and, unless reordering is asked
//!   for, never lets a packet leave before the one ahead of it.
//! * A GSO super-packet ([`DirectionModel::arrive_train`]) is queued and serialised as its
//!   wire packets (queue limits in packets count segments) and departs when its last one
//!   would. Loss, duplicate, reorder and corrupt cannot act on single packets of a train:
//!   where [`LinkConfig::needs_per_packet`] names one, the I/O layer cuts super-packets into
//!   their wire segments first (`tcplab_emu_io::segment`) and calls [`DirectionModel::arrive`]
//!   per segment.
//! * A reordered packet skips the delay line; a duplicate takes its own place in the queue;
//!   corruption names one bit ([`Corruption`]) that the I/O layer flips.
//! * Each element draws from its own ChaCha8 stream of the one seed ([`rng`]) a fixed number
//!   of values per packet, so changing one element never changes another's draws.
//!
//! # Calling it (the I/O layer)
//! ```
//! use tcplab_emu::{ImpairmentFlags, LinkModel, Verdict};
//! let flags = ImpairmentFlags {
//!     delay: Some("10ms".into()),
//!     rate: Some("100mbit".into()),
//!     queue: Some("64".into()),
//!     ..Default::default()
//! };
//! let cfg = flags.to_link_config()?;
//! let mut link = LinkModel::new(&cfg, 0x5eed)?; // print link.seed() so the run can be replayed
//! match link.forward.arrive(1500, 1_000_000) {
//!     Verdict::Send(departures) => {
//!         // 120 us of serialisation at 100 Mbit/s, then 10 ms of propagation.
//!         assert_eq!(departures.first().at, 1_000_000 + 120_000 + 10_000_000);
//!     }
//!     Verdict::Drop(cause) => unreachable!("{cause:?}"),
//! }
//! assert!(!link.forward.may_reorder()); // a FIFO of departures is enough
//! # Ok::<(), tcplab_emu::ConfigError>(())
//! ```
//! Departure times are absolute; if `may_reorder()` is true they can be earlier than a
//! previous packet's, so the caller needs a time-ordered heap. [`DirectionModel::reconfigure`]
//! changes settings on a live link without dropping or re-timing what is already decided.

pub mod aqm;
mod config;
pub mod corrupt;
pub mod deferred;
pub mod delay;
pub mod describe;
pub mod dist;
pub mod duplicate;
pub mod error;
pub mod flags;
pub mod jitter;
pub mod limits;
pub mod loss;
pub(crate) mod model;
pub mod pattern;
pub mod queue_stats;
pub mod rate;
pub mod realised;
pub mod reorder;
pub mod rng;
pub mod spec;

/// Time in ns on the caller's clock (CLOCK_MONOTONIC in the I/O layer, virtual in tests).
pub type Nanos = u64;

pub use config::{
    DEFAULT_QUEUE_PACKETS, DirectionConfig, Distribution, Jitter, LinkConfig, Loss, QueueLimit,
    Reorder,
};
pub use corrupt::Corruption;
pub use dist::{DistTable, FittedTable};
pub use error::{ConfigError, ValueError};
pub use flags::ImpairmentFlags;
pub use model::{
    Departure, Departures, DirectionCounters, DirectionModel, DropCause, LinkModel, Verdict,
};
pub use pattern::LossPattern;
pub use queue_stats::QueueStats;
pub use realised::{DelaySummary, QueueSummary, Realised, RunRealised};
pub use rng::Direction;
