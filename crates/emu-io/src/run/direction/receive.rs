//! Receiving: up to a batch of frames from the receive port, each through the model (whole,
//! or in GSO mode cut into its wire segments when the model acts per packet), then held for
//! the direct path or stored ([`super::store`]).

use super::{Direction, Held};
use crate::io::ring::{PACKET_OUTGOING, RxFrame, RxNext, TP_STATUS_CSUMNOTREADY};
use crate::model::Model;
use crate::report::counters::DirCounters;
use crate::run::ports::{RecvPort, SendPort};
use crate::sched::worker::leaves_from_ring;
use crate::time::{Clock, Nanos};
use crate::wire::gso::{VNET_HDR_LEN, VnetHdr, WireCost, wire_cost};
use crate::wire::segment::{self, Plan};
use tcplab_emu::{Departure, DropCause, Verdict};

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

/// What [`Direction::admit_segments`] did with a super-packet.
#[derive(Debug, Clone, Copy)]
enum Cut {
    /// Not cuttable: send it whole, charged as a train.
    No,
    /// Cut; every segment's fate is settled.
    Done,
    /// The model left every segment intact: send it whole, leaving at this time.
    Intact(Nanos),
}

impl<M: Model, R: RecvPort, T: SendPort> Direction<M, R, T> {
    /// Drains up to one batch of received frames through the model. Returns frames seen.
    pub fn receive<C: Clock>(&mut self, clock: &C) -> usize {
        let (mut real_now, mut mono_now) = (clock.realtime(), clock.now());
        let c = std::sync::Arc::clone(&self.counters);
        let mut seen = 0;
        while seen < self.batch {
            seen += 1;
            let f = match self.rx.peek() {
                RxNext::Empty => {
                    seen -= 1;
                    break;
                }
                RxNext::Malformed => {
                    DirCounters::add(&c.malformed, 1);
                    None
                }
                RxNext::Frame(f) if f.pkttype == PACKET_OUTGOING => None,
                RxNext::Frame(f) => Some(f),
            };
            if let Some(f) = f {
                if self.ring_timestamps && f.ts_ns > real_now {
                    // The frame landed after the clocks were read (the loop peeks the ring
                    // live): read them again, or its arrival would fall back to the loop's
                    // start and its emulated delay be short by the loop's length so far.
                    (real_now, mono_now) = (clock.realtime(), clock.now());
                }
                let now = if self.ring_timestamps {
                    arrival_time(f.ts_ns, real_now, mono_now)
                } else {
                    mono_now
                };
                if self.admit(&f, now, mono_now, &c) {
                    continue;
                }
            }
            // Held frames must go back before the cursor gives back a later one.
            self.flush_held(clock);
            self.rx.consume();
        }
        self.flush_held(clock);
        DirCounters::set(&c.queued, (self.sched.len() + self.deferred.len()) as u64);
        seen
    }

    /// Runs one frame through the model; true if it was held in the ring for the direct path
    /// (not to be consumed yet).
    fn admit(&mut self, f: &RxFrame, now: Nanos, mono_now: Nanos, c: &DirCounters) -> bool {
        DirCounters::add(&c.frames_in, 1);
        DirCounters::add(&c.bytes_in, u64::from(f.out_wire_len()));
        // A partial checksum is a fidelity problem only without the virtio-net header: in GSO
        // mode the header carries it to the egress, which completes it like any offload.
        if !self.vnet && f.status & TP_STATUS_CSUMNOTREADY != 0 {
            DirCounters::add(&c.csum_partial, 1);
        }
        let prefix = if self.vnet { VNET_HDR_LEN } else { 0 };
        if f.wire_len > f.snaplen || f.out_len() + prefix > self.slab.slot_size() {
            DirCounters::add(&c.drop_oversize, 1);
            return false;
        }
        if self.model.defers() {
            self.admit_deferred(f, now, c);
            return false;
        }
        let cost = self.wire_cost(f);
        let cut = if self.segmenting && cost.segments > 1 {
            self.admit_segments(f, now, c)
        } else {
            Cut::No
        };
        let decision = match cut {
            Cut::Done => return false,
            Cut::Intact(at) => Verdict::send_at(at),
            Cut::No => {
                if self.segmenting && cost.segments > 1 {
                    DirCounters::add(&c.unsegmented, 1);
                }
                self.arrive_whole(cost, now, c)
            }
        };
        match decision {
            Verdict::Drop(DropCause::Loss) => DirCounters::add(&c.drop_loss, 1),
            Verdict::Drop(DropCause::QueueFull) => DirCounters::add(&c.drop_queue_full, 1),
            Verdict::Send(d)
                if d.second().is_none()
                    && self.direct_ok(f, d.first(), mono_now)
                    && self.rx.hold() =>
            {
                self.held.push(Held {
                    off: f.data_off - prefix,
                    len: f.snaplen as usize + prefix,
                    at: d.first().at,
                });
                return true;
            }
            Verdict::Send(d) => {
                self.store(f, d.first(), c);
                if let Some(dup) = d.second() {
                    DirCounters::add(&c.duplicates, 1);
                    self.store(f, dup, c);
                }
            }
        }
        false
    }

    /// The model's decision for a frame charged as `cost`, sent or dropped whole.
    fn arrive_whole(&mut self, cost: WireCost, now: Nanos, c: &DirCounters) -> Verdict {
        DirCounters::add(&c.segments_in, u64::from(cost.segments));
        let d = self.model.arrive_train(cost.bytes, cost.segments, now);
        self.latest = self.latest.max(d.latest());
        d
    }

    /// The virtio-net header in front of `f` (GSO mode).
    pub(super) fn vnet_hdr(&self, f: &RxFrame) -> Option<VnetHdr> {
        let mem = self.rx.mem();
        f.data_off
            .checked_sub(VNET_HDR_LEN)
            .and_then(|off| mem.slice(off, VNET_HDR_LEN))
            .and_then(VnetHdr::parse)
    }

    /// What the model is charged for `f`: itself, or in GSO mode the wire packets it stands
    /// for.
    pub(super) fn wire_cost(&self, f: &RxFrame) -> WireCost {
        let own = WireCost {
            segments: 1,
            bytes: f.out_wire_len(),
        };
        if !self.gso {
            return own;
        }
        let mem = self.rx.mem();
        match (self.vnet_hdr(f), mem.slice(f.data_off, f.snaplen as usize)) {
            (Some(h), Some(frame)) => wire_cost(&h, frame, f.out_len() as u32 - f.snaplen),
            _ => own,
        }
    }

    /// Runs each wire segment of super-packet `f` through the model as one packet. If the
    /// model left every segment intact (sent once, uncorrupted, in order), the super-packet
    /// leaves whole at its last segment's departure ([`Cut::Intact`], as a train would);
    /// otherwise it is cut and each surviving copy leaves as its own frame. [`Cut::No`]
    /// (nothing done) if [`segment::plan`] cannot cut it: the caller sends it whole.
    fn admit_segments(&mut self, f: &RxFrame, now: Nanos, c: &DirCounters) -> Cut {
        let Some(hdr) = self.vnet_hdr(f) else {
            return Cut::No;
        };
        let mem = self.rx.mem();
        // Taken out for the loop (no allocation) so segments can be stored through `self`.
        let mut scratch = std::mem::take(&mut self.scratch);
        let frame = if f.vlan.is_some() {
            mem.copy_frame(f, &mut scratch)
                .then(|| &scratch[..f.out_len()])
        } else {
            mem.slice(f.data_off, f.snaplen as usize)
        };
        let out = match frame.and_then(|fr| Some((fr, segment::plan(&hdr, fr)?))) {
            Some((frame, plan)) => self.decide_segments(&plan, frame, now, c),
            None => Cut::No,
        };
        self.scratch = scratch;
        out
    }

    /// The model's decision for each segment of `plan`, then either the whole frame's
    /// departure or the segments stored one by one.
    fn decide_segments(&mut self, plan: &Plan, frame: &[u8], now: Nanos, c: &DirCounters) -> Cut {
        let n = plan.segments();
        DirCounters::add(&c.segments_in, u64::from(n));
        self.decisions.clear();
        let latest = self.latest;
        // More segments than preallocated decisions (a tiny gso_size): cut as they come.
        let keep = n as usize <= self.decisions.capacity();
        for i in 0..n {
            let d = self.model.arrive(plan.segment_len(i) as u32, now);
            self.latest = self.latest.max(d.latest());
            if keep {
                self.decisions.push(d);
            } else {
                self.act_on_segment(plan, frame, i, d, c);
            }
        }
        if let Some(at) = intact_departure(&self.decisions, latest).filter(|_| keep) {
            DirCounters::add(&c.kept_whole, 1);
            return Cut::Intact(at);
        }
        for i in 0..self.decisions.len() {
            let d = self.decisions[i];
            self.act_on_segment(plan, frame, i as u32, d, c);
        }
        DirCounters::add(&c.segmented, 1);
        DirCounters::add(&c.segments_made, u64::from(n));
        Cut::Done
    }

    /// Carries out the model's decision `d` for segment `i`.
    fn act_on_segment(&mut self, plan: &Plan, frame: &[u8], i: u32, d: Verdict, c: &DirCounters) {
        match d {
            Verdict::Drop(DropCause::Loss) => DirCounters::add(&c.drop_loss, 1),
            Verdict::Drop(DropCause::QueueFull) => DirCounters::add(&c.drop_queue_full, 1),
            Verdict::Send(d) => {
                self.store_segment(plan, frame, i, d.first(), c);
                if let Some(dup) = d.second() {
                    DirCounters::add(&c.duplicates, 1);
                    self.store_segment(plan, frame, i, dup, c);
                }
            }
        }
    }

    /// True if `f`, sent once at `dep`, can leave straight from the RX ring
    /// ([`leaves_from_ring`]).
    fn direct_ok(&self, f: &RxFrame, dep: Departure, mono_now: Nanos) -> bool {
        let from_ring = !self.tx.queues()
            && dep.corrupt.is_none()
            && f.vlan.is_none()
            && (self.vnet || f.status & TP_STATUS_CSUMNOTREADY == 0);
        let held = (self.held.len(), self.batch);
        leaves_from_ring(dep.at, mono_now, self.sched.is_empty(), held, from_ring)
    }
}

/// The departure of a super-packet whose segments got the decisions `ds`, if the model left
/// it intact: every segment sent once and uncorrupted, none leaving before the segment ahead
/// of it or before `latest` (the latest departure given to anything earlier), so that sending
/// it whole at its last segment's departure changes no order on the wire. `None` otherwise
/// (it must be cut).
pub(super) fn intact_departure(ds: &[Verdict], latest: Nanos) -> Option<Nanos> {
    ds.iter()
        .try_fold(latest, |prev, d| d.single_intact().filter(|at| *at >= prev))
}
