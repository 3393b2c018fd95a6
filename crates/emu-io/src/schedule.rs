//! The departure schedule: frames waiting for their absolute departure time.
//!
//! A FIFO when the model never reorders (O(1), the common case), a min-heap keyed by
//! (departure, arrival sequence) when it may. Pure: no clock, `now` is an argument.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use crate::sys::clock::Nanos;

/// A queued frame: where it is stored and when it leaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Entry {
    /// Scheduled departure (CLOCK_MONOTONIC ns).
    pub at: Nanos,
    /// Arrival sequence: keeps equal departure times in arrival order.
    pub seq: u64,
    /// Slab slot holding the frame.
    pub slot: u32,
    /// Frame length in bytes.
    pub len: u32,
}

#[derive(Debug)]
enum Queue {
    Fifo(VecDeque<Entry>),
    Heap(BinaryHeap<Reverse<Entry>>),
}

/// Frames ordered by departure time.
#[derive(Debug)]
pub struct Schedule {
    queue: Queue,
    capacity: usize,
    seq: u64,
    /// FIFO pushes whose departure was earlier than the tail's and were held back to keep
    /// order (a model that claims not to reorder but did).
    clamped: u64,
}

impl Schedule {
    /// A schedule with room for `capacity` entries preallocated; `reorder` picks the heap.
    pub fn new(capacity: usize, reorder: bool) -> Self {
        let queue = if reorder {
            Queue::Heap(BinaryHeap::with_capacity(capacity))
        } else {
            Queue::Fifo(VecDeque::with_capacity(capacity))
        };
        Self {
            queue,
            capacity,
            seq: 0,
            clamped: 0,
        }
    }

    /// Switches to the heap when the model starts reordering (entries move over, none lost).
    /// Switching back is deferred: the heap is correct for in-order departures too.
    pub fn set_reorder(&mut self, reorder: bool) {
        if let (true, Queue::Fifo(fifo)) = (reorder, &mut self.queue) {
            let mut heap = BinaryHeap::with_capacity(self.capacity.max(fifo.len()));
            heap.extend(fifo.drain(..).map(Reverse));
            self.queue = Queue::Heap(heap);
        }
    }

    /// Queues a frame departing at `at`.
    pub fn push(&mut self, at: Nanos, slot: u32, len: u32) {
        self.seq += 1;
        let seq = self.seq;
        match &mut self.queue {
            Queue::Fifo(fifo) => {
                let tail = fifo.back().map_or(0, |e| e.at);
                if at < tail {
                    self.clamped += 1;
                }
                fifo.push_back(Entry {
                    at: at.max(tail),
                    seq,
                    slot,
                    len,
                });
            }
            Queue::Heap(heap) => heap.push(Reverse(Entry { at, seq, slot, len })),
        }
    }

    /// The earliest departure time, if any frame is queued.
    pub fn next_departure(&self) -> Option<Nanos> {
        self.peek().map(|e| e.at)
    }

    fn peek(&self) -> Option<&Entry> {
        match &self.queue {
            Queue::Fifo(fifo) => fifo.front(),
            Queue::Heap(heap) => heap.peek().map(|r| &r.0),
        }
    }

    /// Removes and returns the earliest frame if it is due at `now`.
    pub fn pop_due(&mut self, now: Nanos) -> Option<Entry> {
        if self.peek()?.at > now {
            return None;
        }
        match &mut self.queue {
            Queue::Fifo(fifo) => fifo.pop_front(),
            Queue::Heap(heap) => heap.pop().map(|r| r.0),
        }
    }

    /// Puts back a frame that could not be sent yet (TX ring full); it stays first in line.
    pub fn push_front(&mut self, entry: Entry) {
        match &mut self.queue {
            Queue::Fifo(fifo) => fifo.push_front(entry),
            Queue::Heap(heap) => heap.push(Reverse(entry)),
        }
    }

    /// Frames queued.
    pub fn len(&self) -> usize {
        match &self.queue {
            Queue::Fifo(fifo) => fifo.len(),
            Queue::Heap(heap) => heap.len(),
        }
    }

    /// True if nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// See the field doc: departures held back to keep FIFO order.
    pub fn clamped(&self) -> u64 {
        self.clamped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(s: &mut Schedule, now: Nanos) -> Vec<(Nanos, u32)> {
        std::iter::from_fn(|| s.pop_due(now))
            .map(|e| (e.at, e.slot))
            .collect()
    }

    #[test]
    fn fifo_releases_only_what_is_due_in_order() {
        let mut s = Schedule::new(8, false);
        s.push(100, 0, 60);
        s.push(100, 1, 60);
        s.push(250, 2, 60);
        assert_eq!(s.next_departure(), Some(100));
        assert_eq!(drain(&mut s, 99), vec![]);
        assert_eq!(drain(&mut s, 100), vec![(100, 0), (100, 1)]);
        assert_eq!(s.next_departure(), Some(250));
        assert_eq!(drain(&mut s, 1_000), vec![(250, 2)]);
        assert!(s.is_empty());
    }

    #[test]
    fn fifo_holds_back_an_early_departure_and_counts_it() {
        let mut s = Schedule::new(4, false);
        s.push(500, 0, 60);
        s.push(300, 1, 60);
        assert_eq!(s.clamped(), 1);
        assert_eq!(drain(&mut s, 400), vec![]);
        assert_eq!(drain(&mut s, 500), vec![(500, 0), (500, 1)]);
    }

    #[test]
    fn heap_reorders_by_departure_and_keeps_ties_in_arrival_order() {
        let mut s = Schedule::new(4, true);
        s.push(500, 0, 60);
        s.push(300, 1, 60);
        s.push(300, 2, 60);
        assert_eq!(drain(&mut s, 1_000), vec![(300, 1), (300, 2), (500, 0)]);
    }

    #[test]
    fn switching_to_heap_keeps_every_entry_and_push_front_retries_first() {
        let mut s = Schedule::new(4, false);
        s.push(100, 0, 60);
        s.push(200, 1, 60);
        s.set_reorder(true);
        s.push(150, 2, 60);
        let first = s.pop_due(1_000).unwrap();
        assert_eq!(first.slot, 0);
        s.push_front(first);
        assert_eq!(drain(&mut s, 1_000), vec![(100, 0), (150, 2), (200, 1)]);
    }
}
