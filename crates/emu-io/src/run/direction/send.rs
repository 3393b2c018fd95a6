//! Sending: due frames from their slab slots to the send port (batches, or the TX ring and a
//! kick), frames held for the direct path straight from the RX ring, and what each send did
//! in the counters and the lateness histograms.

use std::sync::Arc;

use super::Direction;
use crate::io::ring::tx_v2::TxPush;
use crate::io::sys::batch::SendOutcome;
use crate::model::Model;
use crate::report::counters::DirCounters;
use crate::run::ports::{RecvPort, SendPort};
use crate::sched::worker::another_send;
use crate::time::{Clock, Nanos};
use crate::wire::gso::VNET_HDR_LEN;

impl<M: Model, R: RecvPort, T: SendPort> Direction<M, R, T> {
    /// Sends the held frames from the RX ring in one batch and gives them back.
    pub(super) fn flush_held<C: Clock>(&mut self, clock: &C) {
        if self.held.is_empty() {
            return;
        }
        let c = &self.counters;
        let sent_at = clock.now();
        let mem = self.rx.mem();
        let out = self.tx.send(
            self.held
                .iter()
                .map(|h| (mem.slice(h.off, h.len).unwrap_or(&[]), h.at)),
        );
        count_sent(c, self.vnet, &out);
        DirCounters::add(&c.direct, u64::from(out.sent));
        c.lateness
            .record_batch(sent_at, clock.now(), self.held.iter().map(|h| h.at));
        self.held.clear();
        self.rx.release_held();
    }

    /// Moves frames due at `now` to the egress port: sends of at most `due_batch`, at most
    /// `batch` frames in all, and no further send once a frame waits in the RX ring. This
    /// sends the worker back to its ring: behind a backlog of overdue frames, a newly arrived
    /// frame of another flow must reach the schedule to get its turn ([`crate::sched::due`]) rather
    /// than wait in the ring until the backlog is gone. What remains due makes the worker's
    /// next wait end at once. Each send after the first reads the clock again, so frames that
    /// fell due during a send (which runs the receivers' stacks) join the next one.
    /// Returns the frames moved.
    pub fn release<C: Clock>(&mut self, clock: &C, now: Nanos) -> usize {
        self.release_up_to(clock, now, self.batch)
    }

    /// [`Direction::release`], at most `limit` frames in all.
    fn release_up_to<C: Clock>(&mut self, clock: &C, mut now: Nanos, limit: usize) -> usize {
        self.tx_blocked = false;
        self.serve_deferred(now);
        let mut released = 0;
        let lone_epoch = self.lone.epoch();
        while released < limit {
            let moved = if self.tx.queues() {
                let moved = self.fill_tx_batch(now);
                if moved > 0 {
                    self.kick(clock);
                }
                moved
            } else {
                self.send_due(clock, now)
            };
            released += moved;
            let lone = &self.lone;
            let (rx, blocked) = (&mut self.rx, self.tx_blocked);
            if !another_send(
                moved,
                self.due_batch,
                blocked,
                || rx.peek() != crate::io::ring::RxNext::Empty,
                || lone.epoch() != lone_epoch,
            ) {
                break;
            }
            now = clock.now();
        }
        DirCounters::set(&self.counters.queued, self.sched.len() as u64);
        DirCounters::set(&self.counters.order_clamped, self.sched.clamped());
        released
    }

    /// Releases frames overdue at `now` on behalf of the other direction's worker (see
    /// `Tuning::help_due`): one send of at most `due_batch`, so that the helper goes back
    /// to its own direction's ring and departures between sends (its own frames, a probe's
    /// request among them, would otherwise wait behind up to `batch` of this direction's,
    /// ~0.2 ms). Returns true if more are overdue and the last send was not blocked: the
    /// helper should come back at once rather than sleep.
    pub fn release_overdue<C: Clock>(&mut self, clock: &C, now: Nanos) -> bool {
        if self.next_departure().is_none_or(|t| t > now) {
            return false;
        }
        let n = self.release_up_to(clock, now, self.due_batch);
        DirCounters::add(&self.counters.helped, n as u64);
        !self.tx_blocked && self.next_departure().is_some_and(|t| t <= clock.now())
    }

    /// Batch egress (`sendmmsg`): sends up to `due_batch` due frames from their slab slots.
    fn send_due<C: Clock>(&mut self, clock: &C, now: Nanos) -> usize {
        self.due.clear();
        while self.due.len() < self.due_batch {
            let Some(e) = self.sched.pop_due(now) else {
                break;
            };
            self.due.push(e);
        }
        if self.due.is_empty() {
            return 0;
        }
        let lone = self.due.iter().any(|e| e.lone);
        let c = &self.counters;
        let sent_at = clock.now();
        let slab = &self.slab;
        let out = self.tx.send(
            self.due
                .iter()
                .map(|e| (slab.slot(e.slot).get(..e.len as usize).unwrap_or(&[]), e.at)),
        );
        count_sent(c, self.vnet, &out);
        c.lateness.record_batch_marked(
            Some(&c.lone_lateness),
            sent_at,
            clock.now(),
            self.due.iter().map(|e| (e.at, e.lone)),
        );
        for e in &self.due {
            self.slab.release(e.slot);
        }
        if lone {
            self.note_lone(clock);
        }
        self.due.len()
    }

    /// TX-ring egress: queues up to `due_batch` due frames in the ring (a full ring puts the
    /// frame back and marks the direction blocked). Returns the frames queued.
    fn fill_tx_batch(&mut self, now: Nanos) -> usize {
        let c = Arc::clone(&self.counters);
        self.batch_at.clear();
        while self.batch_at.len() < self.due_batch {
            let Some(e) = self.sched.pop_due(now) else {
                break;
            };
            let frame = self.slab.slot(e.slot).get(..e.len as usize).unwrap_or(&[]);
            match self.tx.push(frame) {
                TxPush::Queued => {
                    DirCounters::add(&c.bytes_out, u64::from(e.len));
                    self.batch_at.push((e.at, e.lone));
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

    /// Transmits the queued TX-ring frames and records each one's lateness against the kick.
    fn kick<C: Clock>(&mut self, clock: &C) {
        let c = &self.counters;
        let sent_at = clock.now();
        let k = self.tx.kick();
        if k.failed {
            // The kernel stops at the frame it failed on and drops it; the rest stay marked
            // and go with the next kick.
            DirCounters::add(&c.drop_tx_failed, 1);
            DirCounters::add(&c.frames_out, u64::from(k.queued.saturating_sub(1)));
        } else {
            DirCounters::add(&c.frames_out, u64::from(k.queued));
        }
        DirCounters::add(&c.drop_tx_failed, k.refused);
        DirCounters::add(&c.kicks, 1);
        c.lateness.record_batch_marked(
            Some(&c.lone_lateness),
            sent_at,
            clock.now(),
            self.batch_at.iter().copied(),
        );
        if self.batch_at.iter().any(|&(_, lone)| lone) {
            self.note_lone(clock);
        }
    }
}

/// Counts what one batch send did in `c` (its bytes without the virtio-net headers, when the
/// frames carry them).
fn count_sent(c: &DirCounters, vnet: bool, out: &SendOutcome) {
    let prefix = if vnet { VNET_HDR_LEN as u64 } else { 0 };
    DirCounters::add(&c.frames_out, u64::from(out.sent));
    DirCounters::add(&c.bytes_out, out.sent_bytes - prefix * u64::from(out.sent));
    DirCounters::add(&c.drop_tx_failed, u64::from(out.failed));
    DirCounters::add(&c.kicks, u64::from(out.calls));
}
