//! The FIFO every discipline but FQ-CoDel keeps its packets in ([`FifoQueue`]: the limit, the
//! backlog, a mark set at enqueue carried to the dequeue), and drop-tail itself ([`Fifo`]: the
//! limit and nothing else, the reference the other disciplines are compared with on the same
//! server).

use std::collections::VecDeque;

use super::codel::CodelQueue;
use super::{AqmCounters, AqmDrop, Backlog, Dequeued, Dropped, Packet};
use crate::QueueLimit;

/// Packets in arrival order within a packet or byte limit, each with whether it was marked
/// CE on its way in (RED and PIE mark at enqueue).
#[derive(Debug, Clone)]
pub struct FifoQueue {
    limit: QueueLimit,
    queue: VecDeque<(Packet, bool)>,
    backlog: Backlog,
}

impl FifoQueue {
    /// An empty queue of `limit`.
    pub fn new(limit: QueueLimit) -> FifoQueue {
        FifoQueue {
            limit,
            queue: VecDeque::new(),
            backlog: Backlog::default(),
        }
    }

    /// A new limit for what arrives next.
    pub fn set_limit(&mut self, limit: QueueLimit) {
        self.limit = limit;
    }

    /// Whether `len` more bytes fit with `on_wire` on the link.
    pub fn fits(&self, on_wire: Backlog, len: u32) -> bool {
        self.backlog.fits(on_wire, self.limit, len)
    }

    /// Queues `packet` if it fits, else drops it at the limit; false if dropped.
    pub fn push(
        &mut self,
        packet: Packet,
        marked: bool,
        on_wire: Backlog,
        dropped: &mut Vec<Dropped>,
    ) -> bool {
        if !self.fits(on_wire, packet.len) {
            dropped.push(Dropped {
                packet,
                why: AqmDrop::Overlimit,
            });
            return false;
        }
        self.backlog.add(&packet);
        self.queue.push_back((packet, marked));
        true
    }

    /// Takes the head packet.
    pub fn pop(&mut self) -> Option<Dequeued> {
        let (packet, marked) = self.queue.pop_front()?;
        self.backlog.remove(&packet);
        Some(Dequeued { packet, marked })
    }

    /// What it holds.
    pub fn backlog(&self) -> Backlog {
        self.backlog
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
}

impl CodelQueue for FifoQueue {
    fn pop(&mut self) -> Option<Packet> {
        FifoQueue::pop(self).map(|d| d.packet)
    }

    fn backlog_bytes(&self) -> u64 {
        self.backlog.bytes
    }
}

/// Drop-tail.
#[derive(Debug, Clone)]
pub struct Fifo {
    queue: FifoQueue,
    pub(super) counters: AqmCounters,
}

impl Fifo {
    /// An empty FIFO of `limit`.
    pub fn new(limit: QueueLimit) -> Fifo {
        Fifo {
            queue: FifoQueue::new(limit),
            counters: AqmCounters::default(),
        }
    }

    pub(super) fn enqueue(&mut self, packet: Packet, on_wire: Backlog, dropped: &mut Vec<Dropped>) {
        self.queue.push(packet, false, on_wire, dropped);
    }

    pub(super) fn dequeue(&mut self) -> Option<Dequeued> {
        self.queue.pop()
    }

    pub(super) fn backlog(&self) -> Backlog {
        self.queue.backlog()
    }

    pub(super) fn set_limit(&mut self, limit: QueueLimit) {
        self.queue.set_limit(limit);
    }
}
