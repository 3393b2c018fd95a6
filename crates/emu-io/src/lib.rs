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
//! * [`sys`] — kernel objects, one module each (socket, mmap, iface, clock, wake, `batch`:
//!   `sendmmsg` or an AF_XDP TX ring; `xsk`: the AF_XDP socket; `bpf`: the XDP program, built
//!   by hand and attached through a BPF link). The only place with system calls; every
//!   `unsafe` block says why it is sound.
//! * [`ring`] — TPACKET_V2/V3 RX and V2 TX ring layouts and the AF_XDP rings parsed over raw
//!   memory; tested on synthetic memory without root. Re-inserts VLAN tags the kernel moved
//!   into metadata.
//! * `port`, `xsk_port` — opening each direction's RX and TX ends: packet sockets, or (the
//!   AF_XDP route, [`RxRingKind::Xdp`] / [`TxKind::Xsk`]) one AF_XDP socket per interface
//!   whose RX side serves one direction and TX side the other.
//! * [`csum`] — completes partial TCP/UDP checksums of frames sent with checksum offload on.
//! * [`gso`] — GSO mode: the virtio-net header carried with each frame, and the wire
//!   packets (segments, bytes) a TSO/GSO super-packet stands for. Pure.
//! * [`segment`] — GSO mode where the model needs per-packet granularity
//!   ([`Model::needs_per_packet`]: loss, duplicate, reorder, corrupt): cuts a TCP/USO
//!   super-packet into its wire segments (headers, lengths, ids, sequence numbers, flags,
//!   partial checksums), each then a packet of its own for the model and the egress. Pure.
//! * [`slab`], [`schedule`] — preallocated frame storage and the departure queue (FIFO, or a
//!   heap when the model may reorder); frames once due wait in per-flow queues served in
//!   turn ([`due`], keyed by [`flow`]), so an overdue burst does not hold other flows. Pure.
//! * [`lateness`], [`counters`] — atomic counters written under the direction's lock and a log-linear lateness
//!   histogram, readable while running ([`Bridge::stats`]).
//! * [`need`] — what a run measures ([`Need`]: latency, or throughput over a known RTT) and
//!   how late its frames may leave for that, judged over the frames between two snapshots.
//!   Pure.
//! * [`model`] — the [`Model`] trait the I/O drives (`arrive(len, now) -> tcplab_emu::Verdict`,
//!   `may_reorder`, `reconfigure`) and [`BasicModel`] (fixed delay + seeded Bernoulli loss).
//!   `tcplab_emu::DirectionModel` implements it (departures computed at arrival).
//! * `direction`, `worker` — the packet path and the wait loop (ppoll with an absolute
//!   deadline minus a spin margin, then spin, within a spin budget of 25 % of each 10 ms so
//!   a SCHED_FIFO worker never runs into RT throttling; or busy-poll). Workers run SCHED_FIFO
//!   by default, one per direction ([`IoOptions`] documents each default and its measurement),
//!   except while light: [`policy`] lets a worker that holds no frame for later and receives
//!   few frames (the ACKs of an unimpaired bulk flow) run SCHED_OTHER;
//!   each direction sits behind a lock its worker lets go of only to sleep, and an awake
//!   worker can send the other direction's overdue frames when that lock is free
//!   ([`IoOptions::help_due`]), so a frame need not wait for its own
//!   worker's late wake-up.
//!   Egress is `sendmmsg` by default ([`TxKind`]): one copy per frame instead of the TX ring's
//!   two (the kernel re-copies zero-copy ring skbs that veth hands to another namespace).
//! * [`awake`] — keep-awake: `SCHED_IDLE` spinners keep the CPUs from halting while a frame
//!   waits for its departure (a halted vCPU wakes up to a tick late).
//! * [`Bridge`] — start / stats / reconfigure / stop; [`Report::verdict`] judges fidelity
//!   against [`Thresholds`]. [`EmuBridge`] ([`emu`]) is the bridge with `tcplab_emu`'s
//!   `DirectionModel` per direction: `EmuBridge::start(a, b, &LinkConfig, &IoOptions)`,
//!   `reconfigure_link(&LinkConfig)`; `Bridge::with_models` takes any [`Model`].
//!
//! # Clocks
//! `now` is CLOCK_MONOTONIC ns, shared by all namespaces of the machine. A frame's arrival
//! time is the kernel's receive timestamp (CLOCK_REALTIME, converted per batch), so time spent
//! waiting in the RX ring is not added to the configured delay. Lateness = when the frame was
//! handed to the kernel − its scheduled departure. Inside a batch call (`sendmmsg`, a TX-ring
//! kick) a frame's hand-off is its share of the call's duration ([`lateness::handoff_time`],
//! via `LatenessHistogram::record_batch`): on veth each hand-off runs the receiver's stack
//! before the next frame goes.
//!
//! # Performance
//! `docs/BENCHMARKS.md` and `BENCH.md` beside this crate (`benches/emu.sh`, `bench.sh`): offloads
//! off on a quiet 2-vCPU machine, a median 0.88-1.02x the kernel bridge's TCP throughput over
//! three sets of 12 alternating rounds (on a second VM whose kernel bridge is faster, 0.82-0.89x,
//! and 0.92x once light workers run SCHED_OTHER; 0.81-1.03x per run on a busy one;
//! AF_XDP on veth lost or tied: veth must copy TCP's cloned skbs before XDP, so receiving costs
//! two copies instead of one). GSO mode with offloads on reaches 0.64-0.72x the kernel bridge with
//! offloads on, 2.3-2.9x the offloads-off kernel bridge. With `--loss 0.1%` (segmenting) it keeps
//! most of that: 2.1-4.6x the offloads-off emulator with the same loss (BENCH.md, "segmentation"). Idle lateness
//! is 1-12 µs at p99. Under a bulk TCP flow it is 41-47 µs at p50 and 90-139 µs at p99 when the
//! flow is paced at 1 Gbit/s, and 0.7-2.4 ms at p99 unpaced. veth runs the receiver's TCP stack
//! inside each `sendmmsg` (2.7 µs per frame), so a sender's micro-bursts leave over three times
//! their arrival span; the verdict says so.
//!
//! # Requirements
//! Root (CAP_NET_RAW; CAP_SYS_NICE for the default SCHED_FIFO), both interfaces up.
//! Either segmentation offloads off on the emulated path (GRO/TSO super-frames larger than a
//! ring slot are dropped and counted as `oversize`; frames with a partial checksum cross with
//! it under [`IoOptions::vnet_hdr`], else are completed in software and counted as
//! `csum_partial`), or [`IoOptions::gso`] with offloads
//! on: then TSO, GSO and TX checksum must be on on the bridge's own two interfaces too (a
//! super-packet sent to a port without TSO is segmented in software there). A direction with
//! loss, duplicate, reorder or corrupt cuts super-packets into wire segments in user space
//! ([`segment`]); the others carry them whole.

pub mod awake;
mod bridge;
pub mod counters;
pub mod csum;
mod direction;
pub mod due;
pub mod emu;
pub mod error;
pub mod flow;
pub mod gso;
pub mod lateness;
pub mod lone;
pub mod model;
pub mod need;
pub mod options;
pub mod policy;
mod port;
pub mod ring;
pub mod schedule;
pub mod segment;
pub mod slab;
pub mod summary;
pub mod sys;
pub mod verdict;
mod worker;
mod xsk_port;

pub use bridge::{Bridge, Snapshot};
pub use counters::{DirSnapshot, Drops};
pub use emu::EmuBridge;
pub use error::IoError;
pub use lateness::LatenessSummary;
pub use model::{BasicConfig, BasicModel, Model};
pub use need::Need;
pub use options::{GSO_RING_FRAMES, GSO_SLAB_SLOTS, IoOptions, RxRingKind, Threads, TxKind};
pub use sys::clock::Nanos;
pub use verdict::{Fidelity, Report, ThreadUsage, Thresholds};
