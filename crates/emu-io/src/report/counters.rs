//! Per-direction counters: written only under the direction's lock (one writer at a time,
//! relaxed load + store; the lock orders them), read at any time by [`crate::Bridge::stats`] as a [`DirSnapshot`]
//! (a plain type of `tcplab_results::emulator`, with the accounting identity the integration
//! tests check).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, PoisonError};

use tcplab_emu::Realised;

use crate::report::lateness::LatenessHistogram;
/// Snapshots of these counters (`tcplab_results::emulator`).
pub use tcplab_results::emulator::{DirSnapshot, Drops};

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
    pub(crate) drop_aqm: AtomicU64,
    pub(crate) marked_ce: AtomicU64,
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
                aqm: l(&self.drop_aqm),
            },
            duplicates: l(&self.duplicates),
            corrupted: l(&self.corrupted),
            marked_ce: l(&self.marked_ce),
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
