//! FQ-CoDel (RFC 8290): flows hashed into buckets, each bucket a queue with its own CoDel,
//! served by deficit round robin with a quantum; a bucket that becomes active joins the
//! new-flows list and is served before the old flows, so a sparse flow (a ping, a DNS query,
//! an ACK stream) waits behind at most a quantum per active flow, not behind a bulk flow's
//! standing queue. Over the memory or packet limit, packets are dropped from the head of the
//! fattest flow (by bytes), up to `drop_batch` at a time until it is down to half (Linux's
//! `fq_codel_drop`), so one flow's overload does not cost the others their packets.

use std::collections::VecDeque;

use super::codel::{CodelQueue, CodelVars};
use super::{AqmCounters, AqmDrop, Backlog, Dequeued, Dropped, Packet};
use crate::aqm::config::FqCodelParams;
use crate::{Nanos, QueueLimit};

/// Which list a bucket is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum List {
    #[default]
    None,
    New,
    Old,
}

#[derive(Debug, Clone, Default)]
struct Flow {
    queue: VecDeque<Packet>,
    bytes: u64,
    deficit: i64,
    codel: CodelVars,
    list: List,
    seen: bool,
}

/// FQ-CoDel.
#[derive(Debug, Clone)]
pub struct FqCodel {
    params: FqCodelParams,
    limit: QueueLimit,
    flows: Vec<Flow>,
    new_flows: VecDeque<usize>,
    old_flows: VecDeque<usize>,
    backlog: Backlog,
    pub(super) counters: AqmCounters,
}

/// One bucket as CoDel drains it, with the whole discipline's backlog (Linux passes the
/// qdisc's backlog to CoDel's "under one MTU" test).
struct Bucket<'a> {
    flow: &'a mut Flow,
    backlog: &'a mut Backlog,
}

impl CodelQueue for Bucket<'_> {
    fn pop(&mut self) -> Option<Packet> {
        let p = self.flow.queue.pop_front()?;
        self.flow.bytes = self.flow.bytes.saturating_sub(u64::from(p.len));
        self.backlog.remove(&p);
        Some(p)
    }

    fn backlog_bytes(&self) -> u64 {
        self.backlog.bytes
    }
}

impl FqCodel {
    /// An empty FQ-CoDel with `limit` (packets or bytes, besides the memory limit).
    pub fn new(params: FqCodelParams, limit: QueueLimit) -> FqCodel {
        FqCodel {
            params,
            limit,
            flows: vec![Flow::default(); params.flows.max(1) as usize],
            new_flows: VecDeque::new(),
            old_flows: VecDeque::new(),
            backlog: Backlog::default(),
            counters: AqmCounters::default(),
        }
    }

    /// The bucket of a flow hash.
    pub fn bucket_of(&self, flow: u32) -> usize {
        (flow % self.params.flows.max(1)) as usize
    }

    fn over_limit(&self, on_wire: Backlog) -> bool {
        let over_limit = match self.limit {
            QueueLimit::Packets(n) => self.backlog.packets + on_wire.packets > u64::from(n),
            QueueLimit::Bytes(b) => self.backlog.bytes + on_wire.bytes > b,
        };
        over_limit || self.backlog.bytes > self.params.memory_limit_bytes
    }

    pub(super) fn enqueue(&mut self, packet: Packet, on_wire: Backlog, dropped: &mut Vec<Dropped>) {
        let idx = self.bucket_of(packet.flow);
        let flow = &mut self.flows[idx];
        flow.queue.push_back(packet);
        flow.bytes += u64::from(packet.len);
        self.backlog.add(&packet);
        if !flow.seen {
            flow.seen = true;
            self.counters.flows_seen += 1;
        }
        if flow.list == List::None {
            flow.list = List::New;
            flow.deficit = i64::from(self.params.quantum);
            self.new_flows.push_back(idx);
        }
        if self.over_limit(on_wire) {
            self.drop_from_fattest(dropped);
        }
    }

    /// Linux's `fq_codel_drop`: from the head of the flow holding the most bytes, until it
    /// holds half of what it did or `drop_batch` packets are gone.
    fn drop_from_fattest(&mut self, dropped: &mut Vec<Dropped>) {
        let Some(fat) =
            (0..self.flows.len()).max_by_key(|i| (self.flows[*i].bytes, usize::MAX - i))
        else {
            return;
        };
        let threshold = self.flows[fat].bytes / 2;
        let mut n = 0;
        while n < self.params.drop_batch.max(1) && self.flows[fat].bytes > threshold {
            let Some(p) = self.flows[fat].queue.pop_front() else {
                break;
            };
            self.flows[fat].bytes = self.flows[fat].bytes.saturating_sub(u64::from(p.len));
            self.backlog.remove(&p);
            dropped.push(Dropped {
                packet: p,
                why: AqmDrop::Memory,
            });
            n += 1;
        }
    }

    pub(super) fn dequeue(&mut self, now: Nanos, dropped: &mut Vec<Dropped>) -> Option<Dequeued> {
        let quantum = i64::from(self.params.quantum);
        loop {
            let (idx, from_new) = match self.new_flows.front() {
                Some(&i) => (i, true),
                None => (*self.old_flows.front()?, false),
            };
            let flow = &mut self.flows[idx];
            if flow.deficit <= 0 {
                // Its turn's bytes are spent: more credit, to the back of the old flows.
                flow.deficit += quantum;
                self.pop_list(from_new);
                self.flows[idx].list = List::Old;
                self.old_flows.push_back(idx);
                continue;
            }
            let mut bucket = Bucket {
                flow: &mut self.flows[idx],
                backlog: &mut self.backlog,
            };
            let mut codel = bucket.flow.codel;
            let out = codel.dequeue(&mut bucket, now, &self.params.codel, dropped);
            self.flows[idx].codel = codel;
            match out {
                None => {
                    // Empty: a new flow goes to the old list once (so it cannot regain
                    // priority by emptying at once), an old one leaves the lists.
                    self.pop_list(from_new);
                    if from_new && !self.old_flows.is_empty() {
                        self.flows[idx].list = List::Old;
                        self.old_flows.push_back(idx);
                    } else {
                        self.flows[idx].list = List::None;
                    }
                }
                Some(d) => {
                    self.flows[idx].deficit -= i64::from(d.packet.len);
                    return Some(d);
                }
            }
        }
    }

    fn pop_list(&mut self, from_new: bool) {
        if from_new {
            self.new_flows.pop_front();
        } else {
            self.old_flows.pop_front();
        }
    }

    pub(super) fn backlog(&self) -> Backlog {
        self.backlog
    }

    pub(super) fn set_limit(&mut self, limit: QueueLimit) {
        self.limit = limit;
    }

    /// Buckets on the new and old lists now.
    pub fn active(&self) -> (usize, usize) {
        (self.new_flows.len(), self.old_flows.len())
    }
}
