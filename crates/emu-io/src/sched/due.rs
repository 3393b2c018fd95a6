//! Frames whose departure time has come, served flow by flow.
//!
//! Why: on veth the emulator's hand-off of a frame runs the receiving host's whole stack
//! before the next frame goes (about 2.7 µs per 1500-byte TCP segment here), so a burst of a
//! bulk flow leaves over about three times the span it arrived in. With one FIFO, a frame of
//! another flow that falls due inside the burst (a ping, a request/response reply) waits for
//! every overdue frame of the burst ahead of it and inherits their lateness. Served in turn
//! (one frame per flow per round, like a multi-queue NIC spreading flows over its queues),
//! it leaves with the next send instead, and the bulk flow's frames are later by one frame.
//!
//! Only frames that are already due are reordered, and only across flows: each flow's frames
//! leave in the order the schedule gave them, so no connection sees reordering the model did
//! not ask for. On time, at most one frame is due at once and nothing changes.
//!
//! Queues are [`BUCKETS`] lists indexed by flow key (a collision shares a list and keeps
//! FIFO between the two flows), linked through a node arena allocated once. Pure.

use std::collections::VecDeque;

use crate::sched::schedule::Entry;

/// Per-flow queues (a power of two).
pub const BUCKETS: usize = 1024;
const NIL: u32 = u32::MAX;

#[derive(Debug, Clone, Copy)]
struct Node {
    entry: Entry,
    next: u32,
}

#[derive(Debug, Clone, Copy)]
struct List {
    head: u32,
    tail: u32,
}

const EMPTY: List = List {
    head: NIL,
    tail: NIL,
};

/// Due frames in per-flow FIFO lists, served round-robin.
#[derive(Debug)]
pub struct DueQueues {
    nodes: Vec<Node>,
    free: Vec<u32>,
    lists: Vec<List>,
    /// Non-empty lists in service order.
    active: VecDeque<u16>,
    len: usize,
}

impl DueQueues {
    /// Room for `capacity` frames preallocated (more grows the arena).
    pub fn new(capacity: usize) -> Self {
        let blank = Node {
            entry: Entry::default(),
            next: NIL,
        };
        Self {
            nodes: vec![blank; capacity],
            free: (0..capacity as u32).rev().collect(),
            lists: vec![EMPTY; BUCKETS],
            active: VecDeque::with_capacity(BUCKETS),
            len: 0,
        }
    }

    /// Queues a due frame behind the earlier frames of its flow.
    pub fn push_back(&mut self, entry: Entry) {
        let b = bucket(entry.flow);
        let n = self.alloc(entry);
        let list = &mut self.lists[b];
        if list.head == NIL {
            list.head = n;
            self.active.push_back(b as u16);
        } else {
            self.nodes[list.tail as usize].next = n;
        }
        list.tail = n;
        self.len += 1;
    }

    /// Puts back a frame taken by [`DueQueues::pop`] but not sent: first in its flow again,
    /// and first in service if its flow had nothing else due.
    pub fn push_front(&mut self, entry: Entry) {
        let b = bucket(entry.flow);
        let n = self.alloc(entry);
        let list = &mut self.lists[b];
        self.nodes[n as usize].next = list.head;
        if list.head == NIL {
            list.tail = n;
            self.active.push_front(b as u16);
        }
        list.head = n;
        self.len += 1;
    }

    /// The next frame in service order: the first of the flow whose turn it is.
    pub fn pop(&mut self) -> Option<Entry> {
        let b = usize::from(self.active.pop_front()?);
        let list = &mut self.lists[b];
        let n = list.head;
        let Node { entry, next } = self.nodes[n as usize];
        list.head = next;
        if next == NIL {
            list.tail = NIL;
        } else {
            self.active.push_back(b as u16);
        }
        self.free.push(n);
        self.len -= 1;
        Some(entry)
    }

    /// The frame [`DueQueues::pop`] would return.
    pub fn peek(&self) -> Option<&Entry> {
        let b = usize::from(*self.active.front()?);
        Some(&self.nodes[self.lists[b].head as usize].entry)
    }

    /// Frames queued.
    pub fn len(&self) -> usize {
        self.len
    }

    #[cfg(test)]
    /// True if nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn alloc(&mut self, entry: Entry) -> u32 {
        let node = Node { entry, next: NIL };
        match self.free.pop() {
            Some(n) => {
                self.nodes[n as usize] = node;
                n
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        }
    }
}

/// The list a flow key maps to.
pub fn bucket(flow: u32) -> usize {
    flow as usize & (BUCKETS - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(slot: u32, flow: u32) -> Entry {
        Entry {
            at: 100,
            seq: u64::from(slot),
            slot,
            len: 60,
            flow,
            lone: false,
        }
    }

    fn drain(q: &mut DueQueues) -> Vec<u32> {
        std::iter::from_fn(|| q.pop()).map(|e| e.slot).collect()
    }

    #[test]
    fn flows_take_turns_and_each_keeps_its_order() {
        let mut q = DueQueues::new(4);
        for s in 0..5 {
            q.push_back(e(s, 7)); // a burst of flow 7
        }
        q.push_back(e(10, 9)); // one frame of flow 9 behind it
        q.push_back(e(5, 7));
        assert_eq!(q.len(), 7);
        assert_eq!(q.peek().map(|x| x.slot), Some(0));
        assert_eq!(drain(&mut q), vec![0, 10, 1, 2, 3, 4, 5]);
        assert!(q.is_empty());
    }

    #[test]
    fn a_single_flow_is_plain_fifo_and_the_arena_grows_past_its_capacity() {
        let mut q = DueQueues::new(2);
        for s in 0..6 {
            q.push_back(e(s, 3));
        }
        assert_eq!(drain(&mut q), vec![0, 1, 2, 3, 4, 5]);
        q.push_back(e(8, 3));
        assert_eq!(drain(&mut q), vec![8]);
    }

    #[test]
    fn colliding_keys_share_a_list_in_arrival_order() {
        let mut q = DueQueues::new(8);
        q.push_back(e(0, 5));
        q.push_back(e(1, 5 + BUCKETS as u32));
        q.push_back(e(2, 6));
        q.push_back(e(3, 5));
        assert_eq!(drain(&mut q), vec![0, 2, 1, 3]);
    }

    #[test]
    fn a_frame_put_back_leaves_first_in_its_flow() {
        let mut q = DueQueues::new(8);
        q.push_back(e(0, 1));
        q.push_back(e(1, 1));
        q.push_back(e(2, 2));
        let first = q.pop().unwrap();
        assert_eq!(first.slot, 0);
        q.push_front(first);
        // Flow 1's turn came round again after flow 2's, but 0 still precedes 1.
        assert_eq!(drain(&mut q), vec![2, 0, 1]);
        let mut q = DueQueues::new(8);
        q.push_back(e(4, 1));
        q.push_back(e(5, 2));
        let x = q.pop().unwrap();
        q.push_front(x);
        assert_eq!(
            drain(&mut q),
            vec![4, 5],
            "an emptied flow goes back to the front"
        );
    }
}
