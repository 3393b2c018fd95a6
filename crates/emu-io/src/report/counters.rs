//! Per-direction counters: written only under the direction's lock (one writer at a time,
//! relaxed load + store; the lock orders them), read at any time by [`crate::Bridge::stats`] as a [`DirSnapshot`].
//!
//! Accounting identity (checked by the integration tests once the schedule drained):
//! `frames_in − segmented + segments_made + duplicates = frames_out + drops.after_arrival() +
//! queued` (a super-packet cut into wire segments in GSO mode leaves as `segments_made`
//! frames; drops and duplicates then count segments).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, PoisonError};

use tcplab_emu::Realised;

use crate::report::lateness::{LatenessHistogram, LatenessSummary};

fn bump(a: &AtomicU64, n: u64) {
    a.store(a.load(Relaxed).wrapping_add(n), Relaxed);
}

/// Live counters of one direction.
#[derive(Debug, Default)]
pub struct DirCounters {
    pub(crate) frames_in: AtomicU64,
    pub(crate) bytes_in: AtomicU64,
    pub(crate) frames_out: AtomicU64,
    pub(crate) bytes_out: AtomicU64,
    pub(crate) drop_loss: AtomicU64,
    pub(crate) drop_queue_full: AtomicU64,
    pub(crate) drop_ring_overflow: AtomicU64,
    pub(crate) drop_slab_full: AtomicU64,
    pub(crate) drop_oversize: AtomicU64,
    pub(crate) drop_tx_failed: AtomicU64,
    pub(crate) duplicates: AtomicU64,
    pub(crate) corrupted: AtomicU64,
    pub(crate) csum_partial: AtomicU64,
    pub(crate) malformed: AtomicU64,
    pub(crate) tx_ring_full: AtomicU64,
    pub(crate) kicks: AtomicU64,
    pub(crate) wakeups: AtomicU64,
    pub(crate) queued: AtomicU64,
    pub(crate) order_clamped: AtomicU64,
    pub(crate) direct: AtomicU64,
    pub(crate) segments_in: AtomicU64,
    pub(crate) segmented: AtomicU64,
    pub(crate) segments_made: AtomicU64,
    pub(crate) unsegmented: AtomicU64,
    pub(crate) kept_whole: AtomicU64,
    pub(crate) helped: AtomicU64,
    pub(crate) lateness: LatenessHistogram,
    /// The lateness of the lone frames alone (see [`DirSnapshot::lone_lateness`]).
    pub(crate) lone_lateness: LatenessHistogram,
    /// The model's own account, as the worker last published it ([`DirSnapshot::realised`]).
    pub(crate) realised: Mutex<Realised>,
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
}

impl Drops {
    /// Drops of frames that were counted in `frames_in` (everything but ring overflow).
    pub fn after_arrival(&self) -> u64 {
        self.loss + self.queue_full + self.slab_full + self.oversize + self.tx_failed
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
    /// into their wire segments in user space (`crate::wire::segment`).
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

impl DirCounters {
    pub(crate) fn add(field: &AtomicU64, n: u64) {
        bump(field, n);
    }

    pub(crate) fn set(field: &AtomicU64, v: u64) {
        field.store(v, Relaxed);
    }

    /// Publishes the model's own account (see [`DirSnapshot::realised`]).
    pub(crate) fn publish_realised(&self, realised: Realised) {
        *self.realised.lock().unwrap_or_else(PoisonError::into_inner) = realised;
    }

    /// Copies every counter.
    pub fn snapshot(&self) -> DirSnapshot {
        let l = |a: &AtomicU64| a.load(Relaxed);
        DirSnapshot {
            frames_in: l(&self.frames_in),
            bytes_in: l(&self.bytes_in),
            frames_out: l(&self.frames_out),
            bytes_out: l(&self.bytes_out),
            drops: Drops {
                loss: l(&self.drop_loss),
                queue_full: l(&self.drop_queue_full),
                ring_overflow: l(&self.drop_ring_overflow),
                slab_full: l(&self.drop_slab_full),
                oversize: l(&self.drop_oversize),
                tx_failed: l(&self.drop_tx_failed),
            },
            duplicates: l(&self.duplicates),
            corrupted: l(&self.corrupted),
            csum_partial: l(&self.csum_partial),
            malformed: l(&self.malformed),
            tx_ring_full: l(&self.tx_ring_full),
            kicks: l(&self.kicks),
            wakeups: l(&self.wakeups),
            queued: l(&self.queued),
            order_clamped: l(&self.order_clamped),
            direct: l(&self.direct),
            segments_in: l(&self.segments_in),
            segmented: l(&self.segmented),
            segments_made: l(&self.segments_made),
            unsegmented: l(&self.unsegmented),
            kept_whole: l(&self.kept_whole),
            helped: l(&self.helped),
            lateness: self.lateness.summary(),
            lone_lateness: self.lone_lateness.summary(),
            realised: *self.realised.lock().unwrap_or_else(PoisonError::into_inner),
        }
    }
}

impl DirSnapshot {
    /// True when every frame that arrived is accounted for: `frames_in − segmented +
    /// segments_made + duplicates == frames_out + drops.after_arrival() + queued`.
    pub fn balanced(&self) -> bool {
        self.frames_in + self.segments_made + self.duplicates
            == self.frames_out + self.drops.after_arrival() + self.queued + self.segmented
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_copies_and_balance_holds_only_when_everything_is_accounted() {
        let c = DirCounters::default();
        DirCounters::add(&c.frames_in, 10);
        DirCounters::add(&c.duplicates, 1);
        DirCounters::add(&c.frames_out, 8);
        DirCounters::add(&c.drop_loss, 2);
        DirCounters::add(&c.drop_ring_overflow, 5);
        DirCounters::set(&c.queued, 1);
        c.lateness.record(500);
        let s = c.snapshot();
        assert_eq!(
            (s.frames_in, s.frames_out, s.drops.loss, s.queued),
            (10, 8, 2, 1)
        );
        assert_eq!(s.lateness.count, 1);
        assert!(
            s.balanced(),
            "10 + 1 = 8 + 2 + 1 (ring overflow never arrived)"
        );
        DirCounters::set(&c.queued, 0);
        assert!(!c.snapshot().balanced());
        // One more frame, a super-packet cut into 3 segments: one lost, two sent.
        DirCounters::add(&c.frames_in, 1);
        DirCounters::add(&c.segmented, 1);
        DirCounters::add(&c.segments_made, 3);
        DirCounters::add(&c.drop_loss, 1);
        DirCounters::add(&c.frames_out, 2);
        DirCounters::set(&c.queued, 1);
        assert!(c.snapshot().balanced(), "11 − 1 + 3 + 1 = 10 + 3 + 1");
    }
}
