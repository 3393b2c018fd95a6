//! One direction of the bridge: RX ring on the ingress interface → model → slab + schedule →
//! TX ring on the egress interface, with its counters.
//!
//! [`Direction::receive`] drains up to a batch of frames, asks the model for each and stores
//! what it keeps; [`Direction::release`] moves every frame due at `now` to the egress port
//! (TX ring + one kick, or one `sendmmsg`). Neither sleeps: waiting is the worker's job.
//!
//! Direct path (`sendmmsg` egress, V2 RX ring): a frame that is due on arrival with nothing
//! queued ahead of it, needs no rewriting (VLAN tag, checksum, corruption) and is not
//! duplicated is not copied at all: the RX ring entry is held, sent from the ring with the
//! other such frames of the batch in one `sendmmsg`, then given back.
//!
//! GSO mode: each RX entry starts with a virtio-net header ([`crate::wire::gso`]), which travels
//! with the frame (in the slab slot, or straight from the ring) to the egress socket; the
//! model is charged the wire packets a super-packet stands for. When the model needs
//! per-packet granularity ([`Model::needs_per_packet`]), each wire segment of a TCP/USO
//! super-packet goes through the model as one packet. If the model left all of them intact
//! (sent once, uncorrupted, in order), the super-packet still leaves whole, at its last
//! segment's departure; otherwise it is cut ([`crate::wire::segment`]) and each surviving copy is
//! written straight into its own slab slot (no allocation; a preallocated scratch frame only
//! when a VLAN tag must be re-inserted first) and leaves as its own frame.

use std::os::fd::{AsFd, BorrowedFd};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender};

use crate::io::port::{RxPort, TxPort};
use crate::io::ring::tx_v2::TxPush;
use crate::io::ring::{PACKET_OUTGOING, RxFrame, RxNext, TP_STATUS_CSUMNOTREADY};
use crate::io::sys::clock::{Nanos, current_cpu, monotonic_ns, realtime_ns};
use crate::model::Model;
use crate::report::counters::DirCounters;
use crate::sched::lone::LoneSignal;
use crate::sched::schedule::{Entry, Schedule};
use crate::sched::slab::Slab;
use crate::sched::worker::{another_send, leaves_from_ring};
use crate::tuning::Tuning;
use crate::wire::flow::flow_key;
use crate::wire::gso::{F_NEEDS_CSUM, VNET_HDR_LEN, VnetHdr, WireCost, wire_cost};
use crate::wire::segment::{self, Plan};
use tcplab_emu::{Corruption, Departure, DropCause, Verdict};

/// A reconfiguration request and where to send the model's answer.
pub type ReconfigRequest<C> = (C, Sender<Result<(), String>>);

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

/// Most segment decisions held at once (a 64 KiB super-packet at `gso_size` 64).
const MAX_DECISIONS: usize = 1024;

/// A frame held in the RX ring for the direct path.
#[derive(Debug, Clone, Copy)]
struct Held {
    /// Offset of the bytes to send (virtio-net header first in GSO mode).
    off: usize,
    /// Their length.
    len: usize,
    /// Scheduled departure.
    at: Nanos,
}

/// Per-direction settings fixed at start.
#[derive(Debug, Clone, Copy)]
pub struct DirSettings {
    /// Slab slots.
    pub slab_slots: u32,
    /// Virtio-net headers on both sockets (`IoOptions::carries_vnet`: GSO mode or `vnet_hdr`):
    /// each frame's header, partial checksum included, is carried from RX to TX.
    pub vnet: bool,
    /// GSO mode: super-packets may arrive (and are cut when the model needs single packets).
    pub gso: bool,
    /// Batches, flow turns, arrival stamps and which frames are lone (see [`Tuning`]).
    pub tuning: Tuning,
}

/// One direction's state, owned by its worker thread.
#[derive(Debug)]
pub struct Direction<M: Model> {
    /// "a->b" or "b->a".
    pub name: &'static str,
    rx: RxPort,
    tx: TxPort,
    model: M,
    slab: Slab,
    sched: Schedule,
    counters: Arc<DirCounters>,
    reconfig: Receiver<ReconfigRequest<M::Config>>,
    /// Departure times of the frames in the current TX-ring batch, each with whether it is
    /// lone (preallocated).
    batch_at: Vec<(Nanos, bool)>,
    /// Schedule entries of the current `sendmmsg` batch (preallocated).
    due: Vec<Entry>,
    /// Frames held in the RX ring for the direct path (preallocated).
    held: Vec<Held>,
    batch: usize,
    /// Most frames per send from the schedule (see `Tuning::due_batch`).
    due_batch: usize,
    flow_turns: bool,
    /// A due frame found the TX ring full; retry soon instead of sleeping.
    pub tx_blocked: bool,
    ring_timestamps: bool,
    /// Frames carry a virtio-net header ([`DirSettings::vnet`]).
    vnet: bool,
    gso: bool,
    /// GSO mode and the model needs per-packet granularity: cut super-packets.
    segmenting: bool,
    /// A super-packet with its VLAN tag re-inserted, to cut from (GSO mode only; allocated
    /// once).
    scratch: Vec<u8>,
    /// The model's decisions for the segments of one super-packet (preallocated).
    decisions: Vec<Verdict>,
    /// The latest departure the model has given in this direction (GSO mode).
    latest: Nanos,
    /// Counts sends that carried a lone frame (`Tuning::lone_pause_ns`; off by default).
    lone: LoneSignal,
}

impl<M: Model> Direction<M> {
    /// Assembles a direction; allocates its slab and schedule now, never on the packet path.
    pub fn new(
        name: &'static str,
        (rx, tx): (RxPort, TxPort),
        model: M,
        settings: DirSettings,
        counters: Arc<DirCounters>,
        reconfig: Receiver<ReconfigRequest<M::Config>>,
    ) -> Self {
        let slot = tx.max_frame();
        let reorder = model.may_reorder();
        let t = settings.tuning;
        let batch = t.batch as usize;
        let segmenting = settings.gso && model.needs_per_packet();
        let scratch = if settings.gso {
            vec![0; slot]
        } else {
            Vec::new()
        };
        Self {
            name,
            rx,
            tx,
            model,
            slab: Slab::new(settings.slab_slots, slot),
            sched: Schedule::new(settings.slab_slots as usize, reorder),
            counters,
            reconfig,
            batch_at: Vec::with_capacity(batch),
            due: Vec::with_capacity(batch),
            held: Vec::with_capacity(batch),
            batch,
            due_batch: t.due_batch.clamp(1, t.batch) as usize,
            flow_turns: t.flow_turns,
            tx_blocked: false,
            ring_timestamps: t.ring_timestamps,
            vnet: settings.vnet,
            gso: settings.gso,
            segmenting,
            scratch,
            decisions: Vec::with_capacity(if settings.gso { MAX_DECISIONS } else { 0 }),
            latest: 0,
            lone: LoneSignal::off(),
        }
    }

    /// Shares `lone` with the other direction and the workers: sends of lone frames are
    /// counted there by the CPU they were made on, and a release stops between sends when
    /// any count changes.
    pub fn with_lone_signal(mut self, lone: LoneSignal) -> Self {
        self.lone = lone;
        self
    }

    /// The RX socket, for `poll`.
    pub fn rx_fd(&self) -> BorrowedFd<'_> {
        self.rx.sock.as_fd()
    }

    /// Earliest queued departure.
    pub fn next_departure(&self) -> Option<Nanos> {
        self.sched.next_departure()
    }

    /// Whether the next frame to leave is lone in its flow (the worker may spin to it).
    pub fn next_is_lone(&self) -> bool {
        self.sched.next_is_lone()
    }

    /// Whether any frame held for departure is lone (see `Schedule::holds_lone`).
    pub fn holds_lone(&self) -> bool {
        self.sched.holds_lone()
    }

    /// True if the RX ring has a frame ready (no system call).
    pub fn rx_ready(&mut self) -> bool {
        self.rx.ring.peek() != RxNext::Empty
    }

    /// Applies a pending reconfiguration, if any, and answers the caller.
    pub fn apply_reconfig(&mut self, now: Nanos) {
        while let Ok((cfg, answer)) = self.reconfig.try_recv() {
            let result = self.model.reconfigure(&cfg, now);
            self.sched.set_reorder(self.model.may_reorder());
            self.segmenting = self.gso && self.model.needs_per_packet();
            // The caller may have given up waiting; the change applied either way.
            let _ = answer.send(result);
        }
    }

    /// Drains up to one batch of received frames through the model. Returns frames seen.
    pub fn receive(&mut self) -> usize {
        let (real_now, mono_now) = (realtime_ns(), monotonic_ns());
        let c = Arc::clone(&self.counters);
        let mut seen = 0;
        while seen < self.batch {
            seen += 1;
            let f = match self.rx.ring.peek() {
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
            self.flush_held();
            self.rx.ring.consume();
        }
        self.flush_held();
        DirCounters::set(&c.queued, self.sched.len() as u64);
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
                    && self.rx.ring.hold() =>
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
    fn vnet_hdr(&self, f: &RxFrame) -> Option<VnetHdr> {
        let mem = self.rx.ring.mem();
        f.data_off
            .checked_sub(VNET_HDR_LEN)
            .and_then(|off| mem.slice(off, VNET_HDR_LEN))
            .and_then(VnetHdr::parse)
    }

    /// What the model is charged for `f`: itself, or in GSO mode the wire packets it stands
    /// for.
    fn wire_cost(&self, f: &RxFrame) -> WireCost {
        let own = WireCost {
            segments: 1,
            bytes: f.out_wire_len(),
        };
        if !self.gso {
            return own;
        }
        let mem = self.rx.ring.mem();
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
        let mem = self.rx.ring.mem();
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

    /// Writes segment `i` of `frame` behind its virtio-net header into a slab slot and
    /// schedules it. A corrupted copy gets its full checksum first (and a header without
    /// `F_NEEDS_CSUM`), so the receiver sees the flipped bits as a bad checksum.
    fn store_segment(
        &mut self,
        plan: &Plan,
        frame: &[u8],
        i: u32,
        dep: Departure,
        c: &DirCounters,
    ) {
        let Some(slot) = self.slab.alloc() else {
            DirCounters::add(&c.drop_slab_full, 1);
            return;
        };
        let (hdr, out) = self.slab.slot_mut(slot).split_at_mut(VNET_HDR_LEN);
        let Some(len) = plan.write(frame, i, out) else {
            DirCounters::add(&c.malformed, 1);
            self.slab.release(slot);
            return;
        };
        let mut vnet = plan.vnet_hdr();
        if let Some(k) = dep.corrupt {
            corrupt_settled(&mut vnet, &mut out[..len], k, c);
        }
        vnet.write(hdr);
        let flow = flow_for(self.flow_turns, &out[..len]);
        self.sched
            .push(dep.at, slot, (VNET_HDR_LEN + len) as u32, flow);
    }

    /// True if `f`, sent once at `dep`, can leave straight from the RX ring
    /// ([`leaves_from_ring`]).
    fn direct_ok(&self, f: &RxFrame, dep: Departure, mono_now: Nanos) -> bool {
        let from_ring = matches!(self.tx, TxPort::Send { .. })
            && dep.corrupt.is_none()
            && f.vlan.is_none()
            && (self.vnet || f.status & TP_STATUS_CSUMNOTREADY == 0);
        let held = (self.held.len(), self.batch);
        leaves_from_ring(dep.at, mono_now, self.sched.is_empty(), held, from_ring)
    }

    /// Sends the held frames from the RX ring in one `sendmmsg` and gives them back.
    fn flush_held(&mut self) {
        if self.held.is_empty() {
            return;
        }
        let c = &self.counters;
        let sent_at = monotonic_ns();
        if let TxPort::Send { batch, sock, .. } = &mut self.tx {
            let mem = self.rx.ring.mem();
            let out = batch.send(
                sock,
                self.held
                    .iter()
                    .map(|h| (&[][..], mem.slice(h.off, h.len).unwrap_or(&[]))),
            );
            let prefix = if self.vnet { VNET_HDR_LEN as u64 } else { 0 };
            DirCounters::add(&c.frames_out, u64::from(out.sent));
            DirCounters::add(&c.direct, u64::from(out.sent));
            DirCounters::add(&c.bytes_out, out.sent_bytes - prefix * u64::from(out.sent));
            DirCounters::add(&c.drop_tx_failed, u64::from(out.failed));
            DirCounters::add(&c.kicks, u64::from(out.calls));
        }
        c.lateness
            .record_batch(sent_at, monotonic_ns(), self.held.iter().map(|h| h.at));
        self.held.clear();
        self.rx.ring.release_held();
    }

    /// Copies the frame (after its virtio-net header in GSO mode) into a slab slot and
    /// schedules it.
    fn store(&mut self, f: &RxFrame, dep: Departure, c: &DirCounters) {
        let Some(slot) = self.slab.alloc() else {
            DirCounters::add(&c.drop_slab_full, 1);
            return;
        };
        let prefix = if self.vnet { VNET_HDR_LEN } else { 0 };
        let len = f.out_len() + prefix;
        let mem = self.rx.ring.mem();
        let buf = &mut self.slab.slot_mut(slot)[..len];
        let (hdr, frame) = buf.split_at_mut(prefix);
        let hdr_ok = prefix == 0 || mem.copy_out(f.data_off - prefix, hdr);
        if !hdr_ok || !mem.copy_frame(f, frame) {
            DirCounters::add(&c.malformed, 1);
            self.slab.release(slot);
            return;
        }
        if self.vnet {
            fix_vnet_for_vlan(hdr, f);
        } else if f.status & TP_STATUS_CSUMNOTREADY != 0 {
            crate::wire::csum::complete(frame);
        }
        if let Some(k) = dep.corrupt {
            match VnetHdr::parse(hdr) {
                // A partial checksum would hide the corruption from the receiver.
                Some(mut vnet) if !vnet.is_gso() => {
                    corrupt_settled(&mut vnet, frame, k, c);
                    vnet.write(hdr);
                }
                _ => flip(frame, k, c),
            }
        }
        let flow = flow_for(self.flow_turns, frame);
        self.sched.push(dep.at, slot, len as u32, flow);
    }

    /// Moves frames due at `now` to the egress port: sends of at most `due_batch`, at most
    /// `batch` frames in all, and no further send once a frame waits in the RX ring. This
    /// sends the worker back to its ring: behind a backlog of overdue frames, a newly arrived
    /// frame of another flow must reach the schedule to get its turn ([`crate::sched::due`]) rather
    /// than wait in the ring until the backlog is gone. What remains due makes the worker's
    /// next wait end at once. Each send after the first reads the clock again, so frames that
    /// fell due during a send (which runs the receivers' stacks) join the next one.
    /// Returns the frames moved.
    pub fn release(&mut self, now: Nanos) -> usize {
        self.release_up_to(now, self.batch)
    }

    /// [`Direction::release`], at most `limit` frames in all.
    fn release_up_to(&mut self, mut now: Nanos, limit: usize) -> usize {
        self.tx_blocked = false;
        let mut released = 0;
        let lone_epoch = self.lone.epoch();
        while released < limit {
            let moved = match self.tx {
                TxPort::Ring { .. } => {
                    let moved = self.fill_tx_batch(now);
                    if moved > 0 {
                        self.kick();
                    }
                    moved
                }
                TxPort::Send { .. } => self.send_due(now),
            };
            released += moved;
            let lone = &self.lone;
            let (rx, blocked) = (&mut self.rx, self.tx_blocked);
            if !another_send(
                moved,
                self.due_batch,
                blocked,
                || rx.ring.peek() != RxNext::Empty,
                || lone.epoch() != lone_epoch,
            ) {
                break;
            }
            now = monotonic_ns();
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
    pub fn release_overdue(&mut self, now: Nanos) -> bool {
        if self.next_departure().is_none_or(|t| t > now) {
            return false;
        }
        let n = self.release_up_to(now, self.due_batch);
        DirCounters::add(&self.counters.helped, n as u64);
        !self.tx_blocked && self.next_departure().is_some_and(|t| t <= monotonic_ns())
    }

    /// `sendmmsg` egress: sends up to a batch of due frames from their slab slots.
    fn send_due(&mut self, now: Nanos) -> usize {
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
        let sent_at = monotonic_ns();
        if let TxPort::Send { batch, sock, .. } = &mut self.tx {
            let slab = &self.slab;
            let out = batch.send(
                sock,
                self.due.iter().map(|e| {
                    (
                        &[][..],
                        slab.slot(e.slot).get(..e.len as usize).unwrap_or(&[]),
                    )
                }),
            );
            let prefix = if self.vnet { VNET_HDR_LEN as u64 } else { 0 };
            DirCounters::add(&c.frames_out, u64::from(out.sent));
            DirCounters::add(&c.bytes_out, out.sent_bytes - prefix * u64::from(out.sent));
            DirCounters::add(&c.drop_tx_failed, u64::from(out.failed));
            DirCounters::add(&c.kicks, u64::from(out.calls));
        }
        c.lateness.record_batch_marked(
            Some(&c.lone_lateness),
            sent_at,
            monotonic_ns(),
            self.due.iter().map(|e| (e.at, e.lone)),
        );
        for e in &self.due {
            self.slab.release(e.slot);
        }
        if lone {
            self.lone.note(current_cpu());
        }
        self.due.len()
    }

    fn fill_tx_batch(&mut self, now: Nanos) -> usize {
        let c = Arc::clone(&self.counters);
        self.batch_at.clear();
        let TxPort::Ring { ring, .. } = &mut self.tx else {
            return 0;
        };
        while self.batch_at.len() < self.due_batch {
            let Some(e) = self.sched.pop_due(now) else {
                break;
            };
            let frame = self.slab.slot(e.slot).get(..e.len as usize).unwrap_or(&[]);
            match ring.push(frame) {
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

    /// Transmits the marked TX-ring frames and records each one's lateness against the kick.
    fn kick(&mut self) {
        let c = &self.counters;
        let sent_at = monotonic_ns();
        let TxPort::Ring { ring, sock, .. } = &mut self.tx else {
            return;
        };
        let n = ring.take_pending();
        if sock.kick_tx().is_err() {
            // The kernel stops at the frame it failed on and drops it; the rest stay marked
            // and go with the next kick.
            DirCounters::add(&c.drop_tx_failed, 1);
            DirCounters::add(&c.frames_out, u64::from(n.saturating_sub(1)));
        } else {
            DirCounters::add(&c.frames_out, u64::from(n));
        }
        DirCounters::add(&c.drop_tx_failed, ring.take_refused());
        DirCounters::add(&c.kicks, 1);
        c.lateness.record_batch_marked(
            Some(&c.lone_lateness),
            sent_at,
            monotonic_ns(),
            self.batch_at.iter().copied(),
        );
        if self.batch_at.iter().any(|&(_, lone)| lone) {
            self.lone.note(current_cpu());
        }
    }

    /// Adds the kernel's RX-ring drop count (read and reset) to the counters.
    pub fn poll_ring_stats(&mut self) {
        if let Ok(st) = self.rx.sock.take_stats() {
            DirCounters::add(&self.counters.drop_ring_overflow, st.drops);
        }
    }

    /// Publishes the model's own account up to `now` (`DirSnapshot::realised`).
    pub fn publish_realised(&self, now: Nanos) {
        self.counters.publish_realised(self.model.realised(now));
    }

    /// Counts a wake-up from poll.
    pub fn count_wakeup(&self) {
        DirCounters::add(&self.counters.wakeups, 1);
    }
}

/// The frame's flow key, or one key for all when due frames are served in plain order.
fn flow_for(flow_turns: bool, frame: &[u8]) -> u32 {
    if flow_turns { flow_key(frame) } else { 0 }
}

/// The departure of a super-packet whose segments got the decisions `ds`, if the model left
/// it intact: every segment sent once and uncorrupted, none leaving before the segment ahead
/// of it or before `latest` (the latest departure given to anything earlier), so that sending
/// it whole at its last segment's departure changes no order on the wire. `None` otherwise
/// (it must be cut).
fn intact_departure(ds: &[Verdict], latest: Nanos) -> Option<Nanos> {
    ds.iter()
        .try_fold(latest, |prev, d| d.single_intact().filter(|at| *at >= prev))
}

/// Flips the corruption's bits in `frame`.
fn flip(frame: &mut [u8], k: Corruption, c: &DirCounters) {
    if let Some(b) = frame.get_mut(k.offset as usize) {
        *b ^= k.mask;
        DirCounters::add(&c.corrupted, 1);
    }
}

/// Corrupts a GSO-mode frame whose virtio-net header is `vnet`: a partial checksum is
/// completed in software first and the header's `F_NEEDS_CSUM` cleared, so the egress does
/// not compute a checksum over the flipped bits (which would make them look valid).
fn corrupt_settled(vnet: &mut VnetHdr, frame: &mut [u8], k: Corruption, c: &DirCounters) {
    if vnet.flags & F_NEEDS_CSUM != 0 && crate::wire::csum::complete(frame) {
        vnet.flags &= !F_NEEDS_CSUM;
    }
    flip(frame, k, c);
}

/// A VLAN tag re-inserted after the MAC addresses moves the L4 header 4 bytes on: so must the
/// header's checksum start (the kernel measured it on the untagged frame).
fn fix_vnet_for_vlan(hdr: &mut [u8], f: &RxFrame) {
    if f.vlan.is_none() {
        return;
    }
    if let Some(mut h) = VnetHdr::parse(hdr) {
        if h.flags & F_NEEDS_CSUM != 0 {
            h.csum_start += 4;
            h.write(hdr);
        }
    }
}

#[cfg(test)]
#[path = "direction_tests.rs"]
mod tests;
