//! The path of a model that decides when its link takes a frame ([`Model::defers`]: a queue
//! discipline at the bottleneck). Every frame is copied into the slab first (each wire segment
//! of a super-packet on its own), offered to the model with its flow and ECN codepoint, and
//! parked; the model's decisions, from the offer or from [`Direction::serve_deferred`] at the
//! model's [`Model::next_due`], put a parked frame on the schedule (marked CE and corrupted as
//! decided) or free its slot. No direct path: nothing leaves before the model has served it.

use std::collections::HashMap;

use super::Direction;
use crate::io::ring::RxFrame;
use crate::model::Model;
use crate::report::counters::DirCounters;
use crate::run::ports::{RecvPort, SendPort};
use crate::time::Nanos;
use crate::wire::segment;
use tcplab_emu::deferred::{Decision, DeferredDrop, Frame};

/// A frame the model holds: where it is and, if the model duplicated it, where its copy is.
#[derive(Debug, Clone, Copy)]
struct Parked {
    slot: u32,
    /// Bytes in the slot (virtio-net header included).
    len: u32,
    flow: u32,
    /// The duplicate's slot: `Some(None)` when there was no free slot for it.
    copy: Option<Option<u32>>,
    /// Decisions still to come (1, or 2 with a duplicate).
    open: u8,
}

/// The deferred path's state (empty and unused for models that do not defer).
#[derive(Debug, Default)]
pub(super) struct Deferred {
    parked: HashMap<u64, Parked>,
    next_id: u64,
    /// The model's decisions (preallocated).
    out: Vec<Decision>,
}

impl Deferred {
    /// Room for `slots` parked frames and a batch of decisions, allocated now.
    pub(super) fn with_capacity(slots: usize) -> Deferred {
        Deferred {
            parked: HashMap::with_capacity(slots),
            next_id: 0,
            out: Vec::with_capacity(256),
        }
    }

    /// Frames the model holds.
    pub(super) fn len(&self) -> usize {
        self.parked.len()
    }
}

impl<M: Model, R: RecvPort, T: SendPort> Direction<M, R, T> {
    /// Copies `f` (or each of its wire segments) into the slab and offers it to the model.
    pub(super) fn admit_deferred(&mut self, f: &RxFrame, now: Nanos, c: &DirCounters) {
        let cost = self.wire_cost(f);
        DirCounters::add(&c.segments_in, u64::from(cost.segments));
        if self.gso && cost.segments > 1 && self.park_segments(f, now, c) {
            return;
        }
        if cost.segments > 1 {
            DirCounters::add(&c.unsegmented, 1);
        }
        if let Some((slot, len)) = self.write_frame(f, None, c) {
            self.offer_parked(slot, len, now, c);
        }
    }

    /// Cuts super-packet `f` and parks and offers each segment; false (nothing done) if it
    /// cannot be cut.
    fn park_segments(&mut self, f: &RxFrame, now: Nanos, c: &DirCounters) -> bool {
        let Some(hdr) = self.vnet_hdr(f) else {
            return false;
        };
        let mem = self.rx.mem();
        let mut scratch = std::mem::take(&mut self.scratch);
        let frame = if f.vlan.is_some() {
            mem.copy_frame(f, &mut scratch)
                .then(|| &scratch[..f.out_len()])
        } else {
            mem.slice(f.data_off, f.snaplen as usize)
        };
        let done = match frame.and_then(|fr| Some((fr, segment::plan(&hdr, fr)?))) {
            Some((frame, plan)) => {
                for i in 0..plan.segments() {
                    if let Some((slot, len)) = self.write_segment(&plan, frame, i, None, c) {
                        self.offer_parked(slot, len, now, c);
                    }
                }
                DirCounters::add(&c.segmented, 1);
                DirCounters::add(&c.segments_made, u64::from(plan.segments()));
                true
            }
            None => false,
        };
        self.scratch = scratch;
        done
    }

    /// Offers the frame in `slot` (`len` bytes with its prefix) to the model, keeps a copy if
    /// the model duplicated it, and carries out what the model decided.
    fn offer_parked(&mut self, slot: u32, len: usize, now: Nanos, c: &DirCounters) {
        let prefix = self.prefix();
        let bytes = &self.slab.slot(slot)[prefix..len];
        let frame = Frame {
            id: self.deferred.next_id,
            len: bytes.len() as u32,
            flow: crate::wire::flow::flow_key(bytes),
            ecn: crate::wire::ecn::ecn_of(bytes),
        };
        self.deferred.next_id += 1;
        let mut out = std::mem::take(&mut self.deferred.out);
        let duplicated = self.model.offer(frame, now, &mut out);
        let copy = duplicated.then(|| self.copy_slot(slot, len, c));
        self.deferred.parked.insert(
            frame.id,
            Parked {
                slot,
                len: len as u32,
                flow: frame.flow,
                copy,
                open: 1 + u8::from(duplicated),
            },
        );
        self.act_on(&mut out, c);
        self.deferred.out = out;
    }

    /// A free slot holding the same bytes as `slot`, or None (counted) if none is free.
    fn copy_slot(&mut self, slot: u32, len: usize, c: &DirCounters) -> Option<u32> {
        let Some(copy) = self.slab.alloc() else {
            DirCounters::add(&c.drop_slab_full, 1);
            return None;
        };
        self.slab.copy(slot, copy, len);
        Some(copy)
    }

    /// Lets the model decide what is due by `now` and carries it out.
    pub(super) fn serve_deferred(&mut self, now: Nanos) {
        if !self.model.defers() {
            return;
        }
        let c = std::sync::Arc::clone(&self.counters);
        let mut out = std::mem::take(&mut self.deferred.out);
        self.model.advance(now, &mut out);
        self.act_on(&mut out, &c);
        self.deferred.out = out;
    }

    /// Carries out the model's decisions (and empties `out`).
    fn act_on(&mut self, out: &mut Vec<Decision>, c: &DirCounters) {
        for d in out.drain(..) {
            let (id, copy) = match d {
                Decision::Depart { id, copy, .. } | Decision::Drop { id, copy, .. } => (id, copy),
            };
            let Some(p) = self.deferred.parked.get_mut(&id) else {
                continue;
            };
            let p_now = *p;
            p.open = p.open.saturating_sub(1);
            if p.open == 0 {
                self.deferred.parked.remove(&id);
            }
            // The copy that found no free slot has nothing to send or free.
            let Some(slot) = (if copy {
                p_now.copy.flatten()
            } else {
                Some(p_now.slot)
            }) else {
                continue;
            };
            match d {
                Decision::Depart {
                    departure, mark_ce, ..
                } => {
                    let len = p_now.len as usize;
                    if mark_ce {
                        let prefix = self.prefix();
                        let frame = &mut self.slab.slot_mut(slot)[prefix..len];
                        if crate::wire::ecn::set_ce(frame) {
                            DirCounters::add(&c.marked_ce, 1);
                        }
                    }
                    if let Some(k) = departure.corrupt {
                        self.corrupt_slot(slot, len, k, c);
                    }
                    if copy {
                        DirCounters::add(&c.duplicates, 1);
                    }
                    let flow = if self.flow_turns { p_now.flow } else { 0 };
                    self.sched.push(departure.at, slot, p_now.len, flow);
                }
                Decision::Drop { cause, .. } => {
                    self.slab.release(slot);
                    let counter = match cause {
                        DeferredDrop::Loss => &c.drop_loss,
                        DeferredDrop::QueueFull => &c.drop_queue_full,
                        DeferredDrop::Aqm(_) => &c.drop_aqm,
                    };
                    DirCounters::add(counter, 1);
                }
            }
        }
    }
}
