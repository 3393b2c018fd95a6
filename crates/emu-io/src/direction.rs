//! One direction of the bridge: RX ring on the ingress interface → model → slab + schedule →
//! TX ring on the egress interface, with its counters.
//!
//! [`Direction::receive`] drains up to a batch of frames, asks the model for each and stores
//! what it keeps; [`Direction::release`] moves every frame due at `now` into the TX ring and
//! kicks it once. Neither sleeps: waiting is the worker's job.

use std::os::fd::{AsFd, BorrowedFd};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender};

use crate::counters::DirCounters;
use crate::model::{Decision, Departure, Model, ModelDrop};
use crate::port::{RxPort, TxPort};
use crate::ring::tx_v2::TxPush;
use crate::ring::{PACKET_OUTGOING, RxFrame, RxNext, TP_STATUS_CSUMNOTREADY};
use crate::schedule::Schedule;
use crate::slab::Slab;
use crate::sys::clock::{Nanos, monotonic_ns, realtime_ns};

/// A reconfiguration request and where to send the model's answer.
pub type ReconfigRequest<C> = (C, Sender<Result<(), String>>);

/// Converts a kernel CLOCK_REALTIME receive timestamp to CLOCK_MONOTONIC, using a pair of
/// clock readings taken together. Frames waiting in the ring while the worker was busy thus
/// get their true arrival time, so emulator backlog is not added to the configured delay.
/// Falls back to `mono_now` when the stamp is missing, in the future or over a second old
/// (a clock step).
pub fn arrival_time(ts_real: Nanos, real_now: Nanos, mono_now: Nanos) -> Nanos {
    match real_now.checked_sub(ts_real) {
        Some(age) if ts_real != 0 && age <= 1_000_000_000 => mono_now.saturating_sub(age),
        _ => mono_now,
    }
}

/// One direction's state, owned by its worker thread.
#[derive(Debug)]
pub struct Direction<M: Model> {
    /// "a->b" or "b->a".
    pub name: &'static str,
    rx: RxPort,
    tx: TxPort,
    model: M,
    slab: Slab,
    sched: Schedule,
    counters: Arc<DirCounters>,
    reconfig: Receiver<ReconfigRequest<M::Config>>,
    /// Departure times of the frames in the current TX batch (preallocated).
    batch_at: Vec<Nanos>,
    batch: usize,
    /// A due frame found the TX ring full; retry soon instead of sleeping.
    pub tx_blocked: bool,
    ring_timestamps: bool,
}

impl<M: Model> Direction<M> {
    /// Assembles a direction; allocates its slab and schedule now, never on the packet path.
    pub fn new(
        name: &'static str,
        (rx, tx): (RxPort, TxPort),
        model: M,
        (slab_slots, batch, ring_timestamps): (u32, u32, bool),
        counters: Arc<DirCounters>,
        reconfig: Receiver<ReconfigRequest<M::Config>>,
    ) -> Self {
        let slot = tx.ring.max_frame();
        let reorder = model.may_reorder();
        Self {
            name,
            rx,
            tx,
            model,
            slab: Slab::new(slab_slots, slot),
            sched: Schedule::new(slab_slots as usize, reorder),
            counters,
            reconfig,
            batch_at: Vec::with_capacity(batch as usize),
            batch: batch as usize,
            tx_blocked: false,
            ring_timestamps,
        }
    }

    /// The RX socket, for `poll`.
    pub fn rx_fd(&self) -> BorrowedFd<'_> {
        self.rx.sock.as_fd()
    }

    /// Earliest queued departure.
    pub fn next_departure(&self) -> Option<Nanos> {
        self.sched.next_departure()
    }

    /// True if the RX ring has a frame ready (no system call).
    pub fn rx_ready(&mut self) -> bool {
        self.rx.ring.peek() != RxNext::Empty
    }

    /// Applies a pending reconfiguration, if any, and answers the caller.
    pub fn apply_reconfig(&mut self, now: Nanos) {
        while let Ok((cfg, answer)) = self.reconfig.try_recv() {
            let result = self.model.reconfigure(&cfg, now);
            self.sched.set_reorder(self.model.may_reorder());
            // The caller may have given up waiting; the change applied either way.
            let _ = answer.send(result);
        }
    }

    /// Drains up to one batch of received frames through the model. Returns frames seen.
    pub fn receive(&mut self) -> usize {
        let (real_now, mono_now) = (realtime_ns(), monotonic_ns());
        let c = Arc::clone(&self.counters);
        let mut seen = 0;
        while seen < self.batch {
            match self.rx.ring.peek() {
                RxNext::Empty => break,
                RxNext::Malformed => DirCounters::add(&c.malformed, 1),
                RxNext::Frame(f) => {
                    if f.pkttype != PACKET_OUTGOING {
                        let now = if self.ring_timestamps {
                            arrival_time(f.ts_ns, real_now, mono_now)
                        } else {
                            mono_now
                        };
                        self.admit(&f, now, &c);
                    }
                }
            }
            self.rx.ring.consume();
            seen += 1;
        }
        DirCounters::set(&c.queued, self.sched.len() as u64);
        seen
    }

    fn admit(&mut self, f: &RxFrame, now: Nanos, c: &DirCounters) {
        DirCounters::add(&c.frames_in, 1);
        DirCounters::add(&c.bytes_in, u64::from(f.out_wire_len()));
        if f.status & TP_STATUS_CSUMNOTREADY != 0 {
            DirCounters::add(&c.csum_partial, 1);
        }
        if f.wire_len > f.snaplen || f.out_len() > self.slab.slot_size() {
            DirCounters::add(&c.drop_oversize, 1);
            return;
        }
        match self.model.arrive(f.out_wire_len(), now) {
            Decision::Drop(ModelDrop::Loss) => DirCounters::add(&c.drop_loss, 1),
            Decision::Drop(ModelDrop::QueueFull) => DirCounters::add(&c.drop_queue_full, 1),
            Decision::Send { first, second } => {
                self.store(f, first, c);
                if let Some(dup) = second {
                    DirCounters::add(&c.duplicates, 1);
                    self.store(f, dup, c);
                }
            }
        }
    }

    /// Copies the frame into a slab slot and schedules it.
    fn store(&mut self, f: &RxFrame, dep: Departure, c: &DirCounters) {
        let Some(slot) = self.slab.alloc() else {
            DirCounters::add(&c.drop_slab_full, 1);
            return;
        };
        let len = f.out_len();
        let buf = &mut self.slab.slot_mut(slot)[..len];
        if !self.rx.ring.mem().copy_frame(f, buf) {
            DirCounters::add(&c.malformed, 1);
            self.slab.release(slot);
            return;
        }
        if f.status & TP_STATUS_CSUMNOTREADY != 0 {
            crate::csum::complete(buf);
        }
        if let Some(k) = dep.corrupt {
            if let Some(b) = buf.get_mut(k.offset as usize) {
                *b ^= k.mask;
                DirCounters::add(&c.corrupted, 1);
            }
        }
        self.sched.push(dep.at, slot, len as u32);
    }

    /// Moves every frame due at `now` into the TX ring (batches of at most `batch`) and kicks.
    pub fn release(&mut self, now: Nanos) {
        self.tx_blocked = false;
        loop {
            let moved = self.fill_tx_batch(now);
            if moved == 0 {
                break;
            }
            self.kick();
            if moved < self.batch || self.tx_blocked {
                break;
            }
        }
        DirCounters::set(&self.counters.queued, self.sched.len() as u64);
        DirCounters::set(&self.counters.order_clamped, self.sched.clamped());
    }

    fn fill_tx_batch(&mut self, now: Nanos) -> usize {
        let c = Arc::clone(&self.counters);
        self.batch_at.clear();
        while self.batch_at.len() < self.batch {
            let Some(e) = self.sched.pop_due(now) else {
                break;
            };
            let frame = self.slab.slot(e.slot).get(..e.len as usize).unwrap_or(&[]);
            match self.tx.ring.push(frame) {
                TxPush::Queued => {
                    DirCounters::add(&c.bytes_out, u64::from(e.len));
                    self.batch_at.push(e.at);
                    self.slab.release(e.slot);
                }
                TxPush::Full => {
                    self.sched.push_front(e);
                    DirCounters::add(&c.tx_ring_full, 1);
                    self.tx_blocked = true;
                    break;
                }
                TxPush::TooBig => {
                    DirCounters::add(&c.drop_tx_failed, 1);
                    self.slab.release(e.slot);
                }
            }
        }
        self.batch_at.len()
    }

    /// Transmits the marked frames and records each one's lateness against the kick time.
    fn kick(&mut self) {
        let c = &self.counters;
        let sent_at = monotonic_ns();
        let n = self.tx.ring.take_pending();
        if self.tx.sock.kick_tx().is_err() {
            // The kernel stops at the frame it failed on and drops it; the rest stay marked
            // and go with the next kick.
            DirCounters::add(&c.drop_tx_failed, 1);
            DirCounters::add(&c.frames_out, u64::from(n.saturating_sub(1)));
        } else {
            DirCounters::add(&c.frames_out, u64::from(n));
        }
        DirCounters::add(&c.drop_tx_failed, self.tx.ring.take_refused());
        DirCounters::add(&c.kicks, 1);
        for &at in &self.batch_at {
            c.lateness.record(sent_at.saturating_sub(at));
        }
    }

    /// Adds the kernel's RX-ring drop count (read and reset) to the counters.
    pub fn poll_ring_stats(&mut self) {
        if let Ok(st) = self.rx.sock.take_stats() {
            DirCounters::add(&self.counters.drop_ring_overflow, st.drops);
        }
    }

    /// Counts a wake-up from poll.
    pub fn count_wakeup(&self) {
        DirCounters::add(&self.counters.wakeups, 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrival_time_subtracts_the_ring_wait_and_rejects_bad_stamps() {
        let (real, mono) = (1_700_000_000_000_000_000, 5_000_000_000);
        assert_eq!(arrival_time(real - 30_000, real, mono), mono - 30_000);
        assert_eq!(arrival_time(real, real, mono), mono);
        assert_eq!(arrival_time(0, real, mono), mono, "missing stamp");
        assert_eq!(
            arrival_time(real + 5, real, mono),
            mono,
            "stamp in the future"
        );
        assert_eq!(
            arrival_time(real - 2_000_000_000, real, mono),
            mono,
            "clock step"
        );
    }
}
