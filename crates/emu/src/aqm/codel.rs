//! CoDel (RFC 8289): drop (or mark) at dequeue when packets have spent more than `target` in
//! the queue for at least an `interval`, at a rate that grows with the square root of the drops
//! so far (the control law: the next drop `interval / sqrt(count)` after the last).
//!
//! The state machine is [`CodelVars`] with [`CodelVars::dequeue`], generic over the queue it
//! drains, so FQ-CoDel runs the same code on each of its flow queues. The structure follows the
//! RFC's pseudocode (section 5) and Linux's `codel_dequeue` for ECN: a packet that may be
//! marked is marked and sent instead of dropped, and the control law advances as for a drop.

use super::fifo::FifoQueue;
use super::{AqmCounters, AqmDrop, Backlog, Dequeued, Dropped, Packet};
use crate::aqm::config::CodelParams;
use crate::{Nanos, QueueLimit};

/// CoDel's state for one queue (RFC 8289's `first_above_time_`, `drop_next_`, `count_`,
/// `lastcount_`, `dropping_`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CodelVars {
    /// When the sojourn time will have been above target for an interval (0: it is not above).
    pub first_above_time: Nanos,
    /// When the next drop is due while dropping.
    pub drop_next: Nanos,
    /// Drops (and marks) since dropping began.
    pub count: u32,
    /// `count` when the last dropping state ended.
    pub lastcount: u32,
    /// In the dropping state.
    pub dropping: bool,
}

/// The queue CoDel drains: its packets in order and the backlog CoDel's "under one MTU" test
/// reads (for FQ-CoDel, the whole discipline's).
pub trait CodelQueue {
    /// Takes the head packet.
    fn pop(&mut self) -> Option<Packet>;
    /// Bytes still queued (after the pop).
    fn backlog_bytes(&self) -> u64;
}

/// The RFC's control law: the time of the next drop.
pub fn control_law(t: Nanos, interval: Nanos, count: u32) -> Nanos {
    let step = interval as f64 / f64::from(count.max(1)).sqrt();
    t.saturating_add(step as Nanos)
}

impl CodelVars {
    /// The RFC's `dodequeue`: the head packet and whether CoDel may drop it.
    fn dodequeue(
        &mut self,
        q: &mut dyn CodelQueue,
        now: Nanos,
        p: &CodelParams,
    ) -> (Option<Packet>, bool) {
        let Some(packet) = q.pop() else {
            self.first_above_time = 0;
            return (None, false);
        };
        let sojourn = now.saturating_sub(packet.enqueued_at);
        let mut ok_to_drop = false;
        if sojourn < p.target_ns || q.backlog_bytes() <= u64::from(p.mtu_bytes) {
            self.first_above_time = 0;
        } else if self.first_above_time == 0 {
            self.first_above_time = now.saturating_add(p.interval_ns);
        } else if now >= self.first_above_time {
            ok_to_drop = true;
        }
        (Some(packet), ok_to_drop)
    }

    /// Marks `packet` if ECN allows, else drops it (appended to `dropped`). True when marked.
    fn drop_or_mark(packet: Packet, p: &CodelParams, dropped: &mut Vec<Dropped>) -> bool {
        if p.ecn && packet.ecn.capable() {
            return true;
        }
        dropped.push(Dropped {
            packet,
            why: AqmDrop::Codel,
        });
        false
    }

    /// The RFC's `dequeue` at `now`: the packet for the link (marked or not), the packets
    /// dropped on the way appended to `dropped`.
    pub fn dequeue(
        &mut self,
        q: &mut dyn CodelQueue,
        now: Nanos,
        p: &CodelParams,
        dropped: &mut Vec<Dropped>,
    ) -> Option<Dequeued> {
        let (mut packet, ok_to_drop) = self.dodequeue(q, now, p);
        let Some(mut head) = packet else {
            self.dropping = false;
            return None;
        };
        if self.dropping {
            if !ok_to_drop {
                // Sojourn time below target: leave the dropping state.
                self.dropping = false;
            }
            while self.dropping && now >= self.drop_next {
                self.count = self.count.saturating_add(1);
                if Self::drop_or_mark(head, p, dropped) {
                    self.drop_next = control_law(self.drop_next, p.interval_ns, self.count);
                    return Some(Dequeued {
                        packet: head,
                        marked: true,
                    });
                }
                let (next, ok) = self.dodequeue(q, now, p);
                packet = next;
                let Some(n) = packet else {
                    self.dropping = false;
                    return None;
                };
                head = n;
                if ok {
                    self.drop_next = control_law(self.drop_next, p.interval_ns, self.count);
                } else {
                    self.dropping = false;
                }
            }
        } else if ok_to_drop {
            let marked = Self::drop_or_mark(head, p, dropped);
            self.dropping = true;
            // Drop faster if dropping ended only recently: resume near the last rate.
            let delta = self.count.saturating_sub(self.lastcount);
            self.count = if delta > 1 && now.saturating_sub(self.drop_next) < 16 * p.interval_ns {
                delta
            } else {
                1
            };
            self.drop_next = control_law(now, p.interval_ns, self.count);
            self.lastcount = self.count;
            if marked {
                return Some(Dequeued {
                    packet: head,
                    marked: true,
                });
            }
            let (next, _) = self.dodequeue(q, now, p);
            head = next?;
        }
        Some(Dequeued {
            packet: head,
            marked: false,
        })
    }
}

/// A FIFO drained by CoDel.
#[derive(Debug, Clone)]
pub struct Codel {
    params: CodelParams,
    queue: FifoQueue,
    vars: CodelVars,
    pub(super) counters: AqmCounters,
}

impl Codel {
    /// An empty CoDel queue of `limit`.
    pub fn new(params: CodelParams, limit: QueueLimit) -> Codel {
        Codel {
            params,
            queue: FifoQueue::new(limit),
            vars: CodelVars::default(),
            counters: AqmCounters::default(),
        }
    }

    pub(super) fn enqueue(&mut self, packet: Packet, on_wire: Backlog, dropped: &mut Vec<Dropped>) {
        self.queue.push(packet, false, on_wire, dropped);
    }

    pub(super) fn dequeue(&mut self, now: Nanos, dropped: &mut Vec<Dropped>) -> Option<Dequeued> {
        self.vars
            .dequeue(&mut self.queue, now, &self.params, dropped)
    }

    pub(super) fn backlog(&self) -> Backlog {
        self.queue.backlog()
    }

    pub(super) fn set_limit(&mut self, limit: QueueLimit) {
        self.queue.set_limit(limit);
    }

    /// CoDel's state (for tests and the emulator's account).
    pub fn vars(&self) -> &CodelVars {
        &self.vars
    }
}
