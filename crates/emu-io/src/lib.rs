//! tcplab's link-emulator packet I/O: a layer-2 bridge between two interfaces that runs every
//! frame through a link model and releases it on an absolute schedule, counting everything
//! needed to tell whether the emulation itself can be trusted.
//!
//! # Map
//! ```text
//!  iface A ──RX ring (V2|V3)──► Direction a->b ──► model.arrive_train(bytes, segments, now)
//!                               │                   ├─► Drop(cause)
//!                               │                   ├─► due now, nothing queued: hold the RX
//!                               │                   │   entry, sendmmsg straight from the ring
//!                               │                   └─► Send{at}: copy into slab, schedule
//!                               └── release(now): due frames ─► one sendmmsg on B
//!                                                               (or TX ring + one kick)
//!  iface B ──RX ring──► Direction b->a ── … ──► A
//! ```
//! The folders are the layers:
//! * `wire/` (pure) — a frame's flow, the virtio-net header and what a GSO super-packet stands
//!   for, cutting it into wire segments where the model acts per packet
//!   ([`Model::needs_per_packet`]: loss, duplicate, reorder, corrupt), partial checksums.
//! * `sched/` (pure, time as an argument) — frame storage, the departure schedule (FIFO, or a
//!   heap when the model may reorder), overdue frames served flow by flow, the pauses after a
//!   lone frame leaves, and when a light worker gives up SCHED_FIFO.
//! * `io/` — the kernel: [`sys`] (every system call, one module per kernel object, each
//!   `unsafe` block says why it is sound), the ring layouts parsed over shared memory (tested on
//!   synthetic memory without root), the packet-socket and AF_XDP ports.
//! * `time` (pure) — [`Nanos`], and the `Clock` a turn reads (the machine's, or the
//!   scheduling harness's virtual one).
//! * `run/` — the one layer that reads the clock and calls into `io/`: each direction's packet
//!   path (generic over its ports: the packet sockets' rings here, simulated ones in `sim/`),
//!   the turn every worker takes (`run::turn`, written once: the harness runs it too), the
//!   worker threads (the wait loop: ppoll to an
//!   absolute deadline minus a spin margin, then spin within a budget of 25 % of each 10 ms so
//!   a SCHED_FIFO worker never meets RT throttling; an awake worker may send the other
//!   direction's overdue frames, `Tuning::help_due`), the keep-awake spinners (a halted
//!   vCPU wakes up to a tick late), and [`Bridge`]: start / stats / reconfigure / stop.
//!   [`EmuBridge`] is the bridge with `tcplab_emu`'s `DirectionModel` in each direction;
//!   `Bridge::with_models` takes any [`Model`].
//! * [`report`] — counters written under each direction's lock, the lateness histogram, what
//!   a run's figure needs ([`Need`]), the end-of-run [`Report`] and its verdict against
//!   [`Thresholds`], and their one-line human forms.
//! * [`model`] — the [`Model`] trait the I/O drives (`arrive(len, now) -> tcplab_emu::Verdict`)
//!   and [`BasicModel`] (fixed delay + seeded Bernoulli loss) for tests.
//!
//! Egress is `sendmmsg` by default ([`TxKind`]): one copy per frame instead of the TX ring's two
//! (the kernel re-copies zero-copy ring skbs that veth hands to another namespace).
//!
//! # Clocks
//! `now` is CLOCK_MONOTONIC ns, shared by all namespaces of the machine. A frame's arrival
//! time is the kernel's receive timestamp (CLOCK_REALTIME, converted per batch), so time spent
//! waiting in the RX ring is not added to the configured delay. Lateness = when the frame was
//! handed to the kernel − its scheduled departure. Inside a batch call (`sendmmsg`, a TX-ring
//! kick) a frame's hand-off is its share of the call's duration (`lateness::handoff_time`,
//! via `LatenessHistogram::record_batch`): on veth each hand-off runs the receiver's stack
//! before the next frame goes.
//!
//! # Performance
//! `docs/BENCHMARKS.md` and docs/notebook/emu-io-bench.md (`benches/emu.sh`, `bench.sh`): offloads
//! off on a quiet 2-vCPU machine, a median 0.88-1.02x the kernel bridge's TCP throughput over
//! three sets of 12 alternating rounds (on a second VM whose kernel bridge is faster, 0.82-0.89x,
//! and 0.92x once light workers run SCHED_OTHER; 0.81-1.03x per run on a busy one;
//! AF_XDP on veth lost or tied: veth must copy TCP's cloned skbs before XDP, so receiving costs
//! two copies instead of one). GSO mode with offloads on reaches 0.64-0.72x the kernel bridge with
//! offloads on, 2.3-2.9x the offloads-off kernel bridge. With `--loss 0.1%` (segmenting) it keeps
//! most of that: 2.1-4.6x the offloads-off emulator with the same loss (emu-io-bench.md, "segmentation"). Idle lateness
//! is 1-12 µs at p99. Under a bulk TCP flow it is 41-47 µs at p50 and 90-139 µs at p99 when the
//! flow is paced at 1 Gbit/s, and 0.7-2.4 ms at p99 unpaced. veth runs the receiver's TCP stack
//! inside each `sendmmsg` (2.7 µs per frame), so a sender's micro-bursts leave over three times
//! their arrival span; the verdict says so.
//!
//! # Requirements
//! Root (CAP_NET_RAW; CAP_SYS_NICE for the default SCHED_FIFO), both interfaces up.
//! Either segmentation offloads off on the emulated path (GRO/TSO super-frames larger than a
//! ring slot are dropped and counted as `oversize`; frames with a partial checksum cross with
//! it under [`Vnet::Header`], else are completed in software and counted as
//! `csum_partial`), or [`Vnet::Gso`] with offloads
//! on: then TSO, GSO and TX checksum must be on on the bridge's own two interfaces too (a
//! super-packet sent to a port without TSO is segmented in software there). A direction with
//! loss, duplicate, reorder or corrupt cuts super-packets into wire segments in user space
//! (`wire::segment`); the others carry them whole.

pub mod error;
pub(crate) mod io;
pub mod model;
pub mod options;
pub mod report;
pub(crate) mod run;
pub(crate) mod sched;
#[cfg(test)]
pub(crate) mod sim;
pub(crate) mod time;
pub mod tuning;
pub(crate) mod wire;

pub use error::{IoError, WorkerError};
pub use io::sys;
pub use io::sys::clock::monotonic_ns;
pub use model::{BasicConfig, BasicModel, Model};
pub use options::{
    GSO_RING_FRAMES, GSO_SLAB_SLOTS, IoOptions, Rings, RxRingKind, Threads, TxKind, Vnet,
};
pub use report::counters::{DirSnapshot, Drops};
pub use report::lateness::LatenessSummary;
pub use report::need::{self, Need};
pub use report::verdict::{Fidelity, Report, ThreadUsage, Thresholds};
pub use report::{lateness, summary};
pub use run::bridge::{Bridge, Snapshot};
pub use run::emu::{EmuBridge, fresh_seed};
pub use time::Nanos;
pub use tuning::Tuning;
