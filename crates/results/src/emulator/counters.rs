//! The emulator's counters as a snapshot carries them: per direction ([`DirSnapshot`]: frames,
//! bytes, drops by cause, lateness, what the model really did) and both ([`Snapshot`]). The
//! live counters that fill them are `tcplab_emu_io`'s (atomics under each direction's lock).
//!
//! Accounting identity (checked by emu-io's integration tests once the schedule drained):
//! `frames_in − segmented + segments_made + duplicates = frames_out + drops.after_arrival() +
//! queued` (a super-packet cut into wire segments in GSO mode leaves as `segments_made`
//! frames; drops and duplicates then count segments).

use tcplab_emu::Realised;

/// Lateness past which a frame counts as late in [`LatenessSummary::late_count`]: the
/// delay-accuracy target (an RTT within 0.1 ms of the configured one), and the default limit of
/// the fidelity verdict ([`crate::emulator::Thresholds`]).
pub const LATE_LIMIT_NS: u64 = 100_000;

/// A point-in-time summary of emu-io's lateness histogram (`LatenessHistogram`), in ns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LatenessSummary {
    /// Frames recorded.
    pub count: u64,
    /// Mean lateness.
    pub mean_ns: u64,
    /// Median (bucket upper bound).
    pub p50_ns: u64,
    /// 99th percentile (bucket upper bound).
    pub p99_ns: u64,
    /// 99.9th percentile (bucket upper bound).
    pub p999_ns: u64,
    /// Exact maximum.
    pub max_ns: u64,
    /// Frames more than [`LATE_LIMIT_NS`] late (exact). Between two summaries, more than 1 % of
    /// the frames late means the p99 of those frames was above the limit.
    #[serde(default)]
    pub late_count: u64,
    /// Exact sum of every frame's lateness. It subtracts between two summaries, so the frames
    /// of one run have an exact mean lateness: the figure a throughput measurement is distorted
    /// by ([`crate::emulator::need`]), which no count of frames over one limit gives.
    #[serde(default)]
    pub sum_ns: u64,
}

/// Drops by cause.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Drops {
    /// The model's loss process.
    pub loss: u64,
    /// The model's bottleneck queue was full.
    pub queue_full: u64,
    /// The kernel dropped frames because our RX ring was full (`PACKET_STATISTICS`
    /// `tp_drops`): the emulator fell behind. These never reached the model, so they are
    /// not in `frames_in`.
    pub ring_overflow: u64,
    /// Every slab slot held a queued frame (raise `IoOptions::slab_slots`).
    pub slab_full: u64,
    /// Frame longer than a ring slot (GRO/TSO super-frames: turn offloads off).
    pub oversize: u64,
    /// The kernel refused or failed to transmit the frame.
    pub tx_failed: u64,
    /// A queue discipline dropped it (RED's or PIE's early drop, CoDel, FQ-CoDel's memory
    /// limit); absent before queue disciplines existed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub aqm: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Drops {
    /// Drops of frames that were counted in `frames_in` (everything but ring overflow).
    pub fn after_arrival(&self) -> u64 {
        self.loss + self.queue_full + self.slab_full + self.oversize + self.tx_failed + self.aqm
    }
}

/// A point-in-time copy of one direction's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DirSnapshot {
    /// Frames received from the ingress interface and given to the model.
    pub frames_in: u64,
    /// Their bytes (L2).
    pub bytes_in: u64,
    /// Frames handed to the egress interface.
    pub frames_out: u64,
    /// Their bytes (L2).
    pub bytes_out: u64,
    /// Drops by cause.
    pub drops: Drops,
    /// Extra copies made by the model's duplication.
    pub duplicates: u64,
    /// Copies with bits flipped by the model.
    pub corrupted: u64,
    /// Frames a queue discipline marked CE (ECN) instead of dropping; absent before queue
    /// disciplines existed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub marked_ce: u64,
    /// Frames received with a partial checksum (checksum offload on at a local sender); their
    /// TCP/UDP checksum was completed in software before forwarding.
    pub csum_partial: u64,
    /// Ring entries with impossible offsets (skipped).
    pub malformed: u64,
    /// Times a due frame found the TX ring full and waited.
    pub tx_ring_full: u64,
    /// TX kicks (`send` calls), i.e. release batches.
    pub kicks: u64,
    /// Worker wake-ups from poll.
    pub wakeups: u64,
    /// Frames queued right now.
    pub queued: u64,
    /// Departures held back to keep FIFO order (model said it never reorders, but did).
    pub order_clamped: u64,
    /// Frames sent straight from the RX ring (due on arrival, nothing queued ahead): no
    /// user-space copy.
    pub direct: u64,
    /// Wire packets the model was charged for `frames_in` (more than `frames_in` only in GSO
    /// mode, where a super-packet counts its segments).
    pub segments_in: u64,
    /// GSO mode, a direction with an element acting on single packets: super-packets cut
    /// into their wire segments in user space (emu-io's `wire::segment`).
    pub segmented: u64,
    /// The wire segments those super-packets were cut into (each then went through the
    /// model, and left, as its own frame).
    pub segments_made: u64,
    /// Super-packets that crossed whole although the direction needed per-packet
    /// granularity (UFO, IPv6 extension headers, unparsable headers): the model's per-packet
    /// elements acted on each as one unit. Should stay 0 for TCP.
    pub unsegmented: u64,
    /// GSO mode, a direction with per-packet elements: super-packets whose segments the model
    /// all left intact (each sent once, uncorrupted, in order), so they left whole, at their
    /// last segment's departure (not counted in `segmented`).
    pub kept_whole: u64,
    /// Frames sent by the other direction's worker because they were overdue and this
    /// direction's worker was not running (`Tuning::help_due`).
    #[serde(default)]
    pub helped: u64,
    /// Lateness of released frames.
    pub lateness: LatenessSummary,
    /// Lateness of the lone frames among them: those alone in their flow (no earlier frame of
    /// the flow within the lone gap, `Schedule`'s `Entry::lone`), such as a ping, an rr
    /// request or reply, a handshake. Under a bulk flow they are a fraction of a per cent of
    /// the frames, so `lateness` says nothing about them, yet they are what a latency probe
    /// measures. Frames sent straight from the RX ring (due on arrival) are not classified.
    #[serde(default)]
    pub lone_lateness: LatenessSummary,
    /// What the model really did: its bottleneck queue (how full, how long packets stayed)
    /// and the delay its delay line gave beside the configured one. Published by the worker
    /// every 50 ms and when it stops, so it may trail the counters above by that much.
    #[serde(default)]
    pub realised: Realised,
}

impl DirSnapshot {
    /// True when every frame that arrived is accounted for: `frames_in − segmented +
    /// segments_made + duplicates == frames_out + drops.after_arrival() + queued`.
    pub fn balanced(&self) -> bool {
        self.frames_in + self.segments_made + self.duplicates
            == self.frames_out + self.drops.after_arrival() + self.queued + self.segmented
    }
}

/// Live counters of both directions.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Snapshot {
    /// Interface A → interface B.
    pub forward: DirSnapshot,
    /// Interface B → interface A.
    pub reverse: DirSnapshot,
    /// ns since start.
    pub elapsed_ns: u64,
}
