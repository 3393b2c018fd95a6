//! The departure schedule: frames waiting for their absolute departure time.
//!
//! Frames not yet due wait in a FIFO when the model never reorders (O(1), the common case),
//! or a min-heap keyed by (departure, arrival sequence) when it may. Once due they move to
//! per-flow queues served in turn ([`crate::sched::due`]), so a frame late because the emulator is
//! behind does not also wait for other flows' overdue frames. Pure: no clock, `now` is an
//! argument.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use crate::sched::due::{BUCKETS, DueQueues, bucket};
use crate::time::Nanos;

/// A frame is lone ([`Entry::lone`]) when its flow's previous one departs at least this far
/// from it. A ping or a request/response (one frame per flow every few ms) is lone, also in
/// the middle of a bulk flow, while a bulk flow's own frames are not: a TCP flow paced at
/// 1 Gbit/s arrived in bursts 0.5-1 ms apart and its ACKs 20-50 µs apart (emu-io-bench.md, "spin
/// only to frames alone in their flow"). Flows are those of `Tuning::flow_turns` (one per
/// direction when that is off).
pub const LONE_GAP: Nanos = 2_000_000;

/// A queued frame: where it is stored and when it leaves.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Entry {
    /// Scheduled departure (CLOCK_MONOTONIC ns).
    pub at: Nanos,
    /// Arrival sequence: keeps equal departure times in arrival order.
    pub seq: u64,
    /// Slab slot holding the frame.
    pub slot: u32,
    /// Frame length in bytes.
    pub len: u32,
    /// Flow key ([`crate::wire::flow::flow_key`]): frames of one flow leave in schedule order.
    pub flow: u32,
    /// No earlier frame of its flow was scheduled within [`LONE_GAP`] of it: a ping, a
    /// request or reply of a request/response, not a frame in the middle of a bulk flow. The
    /// one classification the worker's spins, the lone pauses, a release's early stop and the
    /// fidelity verdict's lone-frame lateness all read. Flows are
    /// told apart by [`crate::sched::due`]'s buckets, so a probe whose key shares a bucket with a
    /// bulk flow's (1 in 1024) counts as part of it and leaves on the timer's wake-up.
    pub lone: bool,
}

#[derive(Debug)]
enum Queue {
    Fifo(VecDeque<Entry>),
    Heap(BinaryHeap<Reverse<Entry>>),
}

/// Frames ordered by departure time.
#[derive(Debug)]
pub struct Schedule {
    /// Frames not yet due.
    queue: Queue,
    /// Frames due, per flow.
    due: DueQueues,
    capacity: usize,
    seq: u64,
    /// FIFO pushes whose departure was earlier than the tail's and were held back to keep
    /// order (a model that claims not to reorder but did).
    clamped: u64,
    /// Latest departure scheduled per flow bucket (0: none yet), for [`Entry::lone`].
    flow_last: Vec<Nanos>,
    /// A frame is lone if its flow's previous one departs at least this far from it
    /// ([`LONE_GAP`]; 0 in tests: every frame is).
    lone_gap: Nanos,
    /// Lone frames queued ([`Self::holds_lone`]).
    lone_held: usize,
}

impl Schedule {
    /// A schedule with room for `capacity` entries preallocated; `reorder` picks the heap.
    pub fn new(capacity: usize, reorder: bool) -> Self {
        Self::with_lone_gap(capacity, reorder, LONE_GAP)
    }

    /// [`Self::new`] with another gap deciding [`Entry::lone`] (tests).
    pub(crate) fn with_lone_gap(capacity: usize, reorder: bool, lone_gap: Nanos) -> Self {
        let queue = if reorder {
            Queue::Heap(BinaryHeap::with_capacity(capacity))
        } else {
            Queue::Fifo(VecDeque::with_capacity(capacity))
        };
        Self {
            queue,
            due: DueQueues::new(capacity),
            capacity,
            seq: 0,
            clamped: 0,
            flow_last: vec![0; BUCKETS],
            lone_gap,
            lone_held: 0,
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

    /// Queues a frame of flow `flow` departing at `at`.
    pub fn push(&mut self, at: Nanos, slot: u32, len: u32, flow: u32) {
        self.seq += 1;
        let seq = self.seq;
        let at = match &self.queue {
            Queue::Fifo(fifo) => {
                let tail = fifo.back().map_or(0, |e| e.at);
                if at < tail {
                    self.clamped += 1;
                }
                at.max(tail)
            }
            Queue::Heap(_) => at,
        };
        let last = &mut self.flow_last[bucket(flow)];
        let lone = self.lone_gap == 0 || *last == 0 || at.abs_diff(*last) >= self.lone_gap;
        *last = at;
        self.lone_held += usize::from(lone);
        let e = Entry {
            at,
            seq,
            slot,
            len,
            flow,
            lone,
        };
        match &mut self.queue {
            Queue::Fifo(fifo) => fifo.push_back(e),
            Queue::Heap(heap) => heap.push(Reverse(e)),
        }
    }

    /// Whether the next frame to leave is lone ([`Entry::lone`]); false if none is queued.
    pub fn next_is_lone(&self) -> bool {
        self.due
            .peek()
            .or_else(|| self.peek())
            .is_some_and(|e| e.lone)
    }

    /// Whether any queued frame is lone: someone's probe, request or reply, which a lone
    /// pause must never make late (`Tuning::lone_pause_late_ns`).
    pub fn holds_lone(&self) -> bool {
        self.lone_held > 0
    }

    /// When the next frame leaves: a due frame's (past) departure if any is due, else the
    /// earliest future one.
    pub fn next_departure(&self) -> Option<Nanos> {
        self.due.peek().or_else(|| self.peek()).map(|e| e.at)
    }

    fn peek(&self) -> Option<&Entry> {
        match &self.queue {
            Queue::Fifo(fifo) => fifo.front(),
            Queue::Heap(heap) => heap.peek().map(|r| &r.0),
        }
    }

    /// Removes and returns the next frame to send, if any is due at `now`: flows take turns
    /// among the due frames, each flow's in schedule order.
    pub fn pop_due(&mut self, now: Nanos) -> Option<Entry> {
        while let Some(e) = self.pop_future_due(now) {
            self.due.push_back(e);
        }
        let e = self.due.pop()?;
        self.lone_held -= usize::from(e.lone);
        Some(e)
    }

    fn pop_future_due(&mut self, now: Nanos) -> Option<Entry> {
        if self.peek()?.at > now {
            return None;
        }
        match &mut self.queue {
            Queue::Fifo(fifo) => fifo.pop_front(),
            Queue::Heap(heap) => heap.pop().map(|r| r.0),
        }
    }

    /// Puts back a frame that could not be sent yet (TX ring full); it stays first in its
    /// flow.
    pub fn push_front(&mut self, entry: Entry) {
        self.lone_held += usize::from(entry.lone);
        self.due.push_front(entry);
    }

    /// Frames queued.
    pub fn len(&self) -> usize {
        self.due.len()
            + match &self.queue {
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
        let mut s = Schedule::with_lone_gap(8, false, 0);
        s.push(100, 0, 60, 0);
        s.push(100, 1, 60, 0);
        s.push(250, 2, 60, 0);
        assert_eq!(s.next_departure(), Some(100));
        assert_eq!(drain(&mut s, 99), vec![]);
        assert_eq!(drain(&mut s, 100), vec![(100, 0), (100, 1)]);
        assert_eq!(s.next_departure(), Some(250));
        assert_eq!(drain(&mut s, 1_000), vec![(250, 2)]);
        assert!(s.is_empty());
    }

    #[test]
    fn fifo_holds_back_an_early_departure_and_counts_it() {
        let mut s = Schedule::with_lone_gap(4, false, 0);
        s.push(500, 0, 60, 0);
        s.push(300, 1, 60, 0);
        assert_eq!(s.clamped(), 1);
        assert_eq!(drain(&mut s, 400), vec![]);
        assert_eq!(drain(&mut s, 500), vec![(500, 0), (500, 1)]);
    }

    #[test]
    fn due_frames_of_two_flows_take_turns_and_later_ones_wait() {
        let mut s = Schedule::with_lone_gap(8, false, 0);
        for (at, slot) in [(100, 0), (101, 1), (102, 2)] {
            s.push(at, slot, 1514, 7);
        }
        s.push(102, 3, 64, 9);
        s.push(103, 4, 1514, 7);
        s.push(500, 5, 1514, 9);
        assert_eq!(s.len(), 6);
        assert_eq!(s.next_departure(), Some(100));
        let got = drain(&mut s, 200);
        assert_eq!(got, vec![(100, 0), (102, 3), (101, 1), (102, 2), (103, 4)]);
        assert_eq!(s.next_departure(), Some(500));
        assert_eq!(drain(&mut s, 499), vec![]);
        assert_eq!(drain(&mut s, 500), vec![(500, 5)]);
    }

    #[test]
    fn a_due_frame_put_back_is_the_next_departure() {
        let mut s = Schedule::with_lone_gap(4, false, 0);
        s.push(100, 0, 60, 1);
        s.push(900, 1, 60, 1);
        let e = s.pop_due(150).unwrap();
        assert_eq!(s.next_departure(), Some(900));
        s.push_front(e);
        assert_eq!(s.next_departure(), Some(100));
        assert_eq!(s.len(), 2);
    }

    #[test]
    fn heap_reorders_by_departure_and_keeps_ties_in_arrival_order() {
        let mut s = Schedule::with_lone_gap(4, true, 0);
        s.push(500, 0, 60, 0);
        s.push(300, 1, 60, 0);
        s.push(300, 2, 60, 0);
        assert_eq!(drain(&mut s, 1_000), vec![(300, 1), (300, 2), (500, 0)]);
    }

    #[test]
    fn switching_to_heap_keeps_every_entry_and_push_front_retries_first() {
        let mut s = Schedule::with_lone_gap(4, false, 0);
        s.push(100, 0, 60, 0);
        s.push(200, 1, 60, 0);
        s.set_reorder(true);
        s.push(150, 2, 60, 0);
        let first = s.pop_due(1_000).unwrap();
        assert_eq!(first.slot, 0);
        s.push_front(first);
        assert_eq!(drain(&mut s, 1_000), vec![(100, 0), (150, 2), (200, 1)]);
    }

    #[test]
    fn a_frame_is_lone_only_if_its_flow_had_none_within_the_gap() {
        let gap = 2_000_000;
        let mut s = Schedule::with_lone_gap(16, false, gap);
        // A bulk flow (7), frames 12 µs apart, and a probe (9) in the middle of it.
        s.push(10_000_000, 0, 1514, 7);
        s.push(10_012_000, 1, 1514, 7);
        s.push(10_020_000, 2, 64, 9);
        s.push(10_024_000, 3, 1514, 7);
        assert!(s.next_is_lone(), "the flow's first frame");
        let _ = s.pop_due(10_000_000);
        assert!(
            !s.next_is_lone(),
            "12 µs after the previous one of its flow"
        );
        // The probe's next frame 20 ms later, then two more at and just inside the gap.
        s.push(30_020_000, 4, 64, 9);
        s.push(32_020_000, 5, 64, 9);
        s.push(34_019_999, 6, 64, 9);
        let mut lone: Vec<(u32, bool)> = std::iter::from_fn(|| s.pop_due(u64::MAX))
            .map(|e| (e.slot, e.lone))
            .collect();
        lone.sort_unstable();
        assert_eq!(
            lone,
            vec![
                (1, false),
                (2, true),
                (3, false),
                (4, true),
                (5, true),
                (6, false)
            ]
        );
        assert!(!s.next_is_lone(), "nothing queued");
        assert!(!s.holds_lone(), "and no lone frame held");
        let mut every = Schedule::with_lone_gap(4, false, 0);
        every.push(100, 0, 60, 7);
        every.push(101, 1, 60, 7);
        assert!(
            std::iter::from_fn(|| every.pop_due(200)).all(|e| e.lone),
            "a gap of 0: every frame is spun to"
        );
    }

    /// `pop_due`, checking that a lone frame was counted as held until it left.
    fn pop_checking_lone(
        s: &mut Schedule,
        now: Nanos,
    ) -> Result<Option<Entry>, proptest::test_runner::TestCaseError> {
        let held = s.holds_lone();
        let e = s.pop_due(now);
        if let Some(e) = &e {
            proptest::prop_assert!(held || !e.lone, "lone frame {:?} left uncounted", e);
        }
        Ok(e)
    }

    #[test]
    fn holds_lone_until_the_last_lone_frame_leaves_or_while_one_is_put_back() {
        let mut s = Schedule::with_lone_gap(8, false, 2_000_000);
        assert!(!s.holds_lone(), "empty");
        // A bulk flow (7): only its first frame is lone.
        s.push(1_000_000, 0, 1514, 7);
        s.push(1_012_000, 1, 1514, 7);
        assert!(s.holds_lone());
        let first = s.pop_due(1_000_000).expect("due");
        assert!(
            first.lone && !s.holds_lone(),
            "the rest of a flow is not lone"
        );
        s.push_front(first);
        assert!(s.holds_lone(), "a lone frame put back is held again");
        let _ = s.pop_due(1_000_000);
        // A probe (9) 20 µs after the bulk frame.
        s.push(1_032_000, 2, 64, 9);
        assert!(s.holds_lone());
        assert_eq!(s.pop_due(1_020_000).map(|e| e.slot), Some(1));
        assert!(s.holds_lone(), "the probe is still queued");
        assert_eq!(s.pop_due(1_032_000).map(|e| e.slot), Some(2));
        assert!(!s.holds_lone() && s.is_empty());
    }

    proptest::proptest! {
        /// Whatever the pushes, pops and put-backs: every frame leaves exactly once, never
        /// before its departure, and each flow's frames leave in the order the schedule gave
        /// them (push order, or departure order when the heap may reorder).
        #[test]
        fn every_frame_leaves_once_when_due_and_each_flow_keeps_its_order(
            ops in proptest::collection::vec((0u64..40, 0u32..4, 0u8..3), 1..300),
            reorder: bool,
            lone_gap in 0u64..60,
        ) {
            let mut s = Schedule::with_lone_gap(8, reorder, lone_gap);
            let mut now = 0;
            let mut out: Vec<Entry> = Vec::new();
            for (i, &(gap, flow, op)) in ops.iter().enumerate() {
                match op {
                    0 => s.push(now + gap * 3, i as u32, 60, flow),
                    1 => {
                        now += gap;
                        while let Some(e) = pop_checking_lone(&mut s, now)? {
                            proptest::prop_assert!(e.at <= now);
                            out.push(e);
                        }
                    }
                    _ => {
                        if let Some(e) = pop_checking_lone(&mut s, now)? {
                            s.push_front(e);
                        }
                    }
                }
                if lone_gap == 0 {
                    // Every frame is lone.
                    proptest::prop_assert_eq!(s.holds_lone(), !s.is_empty());
                }
            }
            while let Some(e) = pop_checking_lone(&mut s, u64::MAX)? {
                out.push(e);
            }
            proptest::prop_assert!(s.is_empty());
            proptest::prop_assert!(!s.holds_lone(), "nothing queued, nothing lone held");
            let mut slots: Vec<u32> = out.iter().map(|e| e.slot).collect();
            slots.sort_unstable();
            let pushed: Vec<u32> = ops
                .iter()
                .enumerate()
                .filter(|(_, op)| op.2 == 0)
                .map(|(i, _)| i as u32)
                .collect();
            proptest::prop_assert_eq!(slots, pushed);
            for flow in 0..4 {
                let keys: Vec<(Nanos, u64)> = out
                    .iter()
                    .filter(|e| e.flow == flow)
                    .map(|e| if reorder { (e.at, e.seq) } else { (0, e.seq) })
                    .collect();
                proptest::prop_assert!(keys.windows(2).all(|w| w[0] < w[1]), "flow {}: {:?}", flow, keys);
            }
        }
    }
}
