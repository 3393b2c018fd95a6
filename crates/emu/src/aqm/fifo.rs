//! Drop-tail in the dequeue model: the queue's limit and nothing else (the reference the
//! other disciplines are compared with on the same server).

use std::collections::VecDeque;

use super::{AqmCounters, AqmDrop, Backlog, Dequeued, Dropped, Packet};
use crate::QueueLimit;

/// A FIFO with a packet or byte limit.
#[derive(Debug, Clone)]
pub struct Fifo {
    limit: QueueLimit,
    queue: VecDeque<Packet>,
    backlog: Backlog,
    pub(super) counters: AqmCounters,
}

impl Fifo {
    /// An empty FIFO of `limit`.
    pub fn new(limit: QueueLimit) -> Fifo {
        Fifo {
            limit,
            queue: VecDeque::new(),
            backlog: Backlog::default(),
            counters: AqmCounters::default(),
        }
    }

    pub(super) fn enqueue(&mut self, packet: Packet, on_wire: Backlog, dropped: &mut Vec<Dropped>) {
        if !self.backlog.fits(on_wire, self.limit, packet.len) {
            dropped.push(Dropped {
                packet,
                why: AqmDrop::Overlimit,
            });
            return;
        }
        self.backlog.add(&packet);
        self.queue.push_back(packet);
    }

    pub(super) fn dequeue(&mut self) -> Option<Dequeued> {
        let packet = self.queue.pop_front()?;
        self.backlog.remove(&packet);
        Some(Dequeued {
            packet,
            marked: false,
        })
    }

    pub(super) fn backlog(&self) -> Backlog {
        self.backlog
    }
}
