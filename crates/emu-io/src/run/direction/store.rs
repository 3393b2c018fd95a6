//! Storing: a frame the model keeps is copied into a slab slot (its virtio-net header, a
//! re-inserted VLAN tag, a completed checksum and the model's corruption with it) and put on
//! the schedule under its flow.

use super::Direction;
use crate::io::ring::{RxFrame, TP_STATUS_CSUMNOTREADY};
use crate::model::Model;
use crate::report::counters::DirCounters;
use crate::run::ports::{RecvPort, SendPort};
use crate::wire::flow::flow_key;
use crate::wire::gso::{F_NEEDS_CSUM, VNET_HDR_LEN, VnetHdr};
use crate::wire::segment::Plan;
use tcplab_emu::{Corruption, Departure};

impl<M: Model, R: RecvPort, T: SendPort> Direction<M, R, T> {
    /// Copies the frame (after its virtio-net header in GSO mode) into a slab slot and
    /// schedules it.
    pub(super) fn store(&mut self, f: &RxFrame, dep: Departure, c: &DirCounters) {
        if let Some((slot, len)) = self.write_frame(f, dep.corrupt, c) {
            let prefix = self.prefix();
            let flow = flow_for(self.flow_turns, &self.slab.slot(slot)[prefix..len]);
            self.sched.push(dep.at, slot, len as u32, flow);
        }
    }

    /// Bytes in front of the frame in a slot: the virtio-net header when frames carry one.
    pub(super) fn prefix(&self) -> usize {
        if self.vnet { VNET_HDR_LEN } else { 0 }
    }

    /// Copies the frame into a free slab slot (its virtio-net header, a re-inserted VLAN tag,
    /// a completed checksum and `corrupt` with it); returns the slot and the bytes used, or
    /// None (counted) when no slot is free or the frame does not copy.
    pub(super) fn write_frame(
        &mut self,
        f: &RxFrame,
        corrupt: Option<Corruption>,
        c: &DirCounters,
    ) -> Option<(u32, usize)> {
        let Some(slot) = self.slab.alloc() else {
            DirCounters::add(&c.drop_slab_full, 1);
            return None;
        };
        let prefix = self.prefix();
        let len = f.out_len() + prefix;
        let mem = self.rx.mem();
        let buf = &mut self.slab.slot_mut(slot)[..len];
        let (hdr, frame) = buf.split_at_mut(prefix);
        let hdr_ok = prefix == 0 || mem.copy_out(f.data_off - prefix, hdr);
        if !hdr_ok || !mem.copy_frame(f, frame) {
            DirCounters::add(&c.malformed, 1);
            self.slab.release(slot);
            return None;
        }
        if self.vnet {
            fix_vnet_for_vlan(hdr, f);
        } else if f.status & TP_STATUS_CSUMNOTREADY != 0 {
            crate::wire::csum::complete(frame);
        }
        if let Some(k) = corrupt {
            self.corrupt_slot(slot, len, k, c);
        }
        Some((slot, len))
    }

    /// Flips corruption `k` in the frame in `slot` (`len` bytes with its prefix). Behind a
    /// virtio-net header that asks the egress for a checksum (and is not GSO), the checksum
    /// is completed first so the receiver sees the flipped bits as a bad one.
    pub(super) fn corrupt_slot(&mut self, slot: u32, len: usize, k: Corruption, c: &DirCounters) {
        let prefix = self.prefix();
        let buf = &mut self.slab.slot_mut(slot)[..len];
        let (hdr, frame) = buf.split_at_mut(prefix);
        match VnetHdr::parse(hdr) {
            Some(mut vnet) if !vnet.is_gso() => {
                corrupt_settled(&mut vnet, frame, k, c);
                vnet.write(hdr);
            }
            _ => flip(frame, k, c),
        }
    }

    /// Writes segment `i` of `frame` behind its virtio-net header into a slab slot and
    /// schedules it. A corrupted copy gets its full checksum first (and a header without
    /// `F_NEEDS_CSUM`), so the receiver sees the flipped bits as a bad checksum.
    pub(super) fn store_segment(
        &mut self,
        plan: &Plan,
        frame: &[u8],
        i: u32,
        dep: Departure,
        c: &DirCounters,
    ) {
        if let Some((slot, len)) = self.write_segment(plan, frame, i, dep.corrupt, c) {
            let flow = flow_for(self.flow_turns, &self.slab.slot(slot)[VNET_HDR_LEN..len]);
            self.sched.push(dep.at, slot, len as u32, flow);
        }
    }

    /// Writes segment `i` of `frame` behind its virtio-net header into a free slab slot;
    /// returns the slot and the bytes used (header included), or None (counted).
    pub(super) fn write_segment(
        &mut self,
        plan: &Plan,
        frame: &[u8],
        i: u32,
        corrupt: Option<Corruption>,
        c: &DirCounters,
    ) -> Option<(u32, usize)> {
        let Some(slot) = self.slab.alloc() else {
            DirCounters::add(&c.drop_slab_full, 1);
            return None;
        };
        let (hdr, out) = self.slab.slot_mut(slot).split_at_mut(VNET_HDR_LEN);
        let Some(len) = plan.write(frame, i, out) else {
            DirCounters::add(&c.malformed, 1);
            self.slab.release(slot);
            return None;
        };
        let mut vnet = plan.vnet_hdr();
        if let Some(k) = corrupt {
            corrupt_settled(&mut vnet, &mut out[..len], k, c);
        }
        vnet.write(hdr);
        Some((slot, VNET_HDR_LEN + len))
    }
}

/// The frame's flow key, or one key for all when due frames are served in plain order.
pub(super) fn flow_for(flow_turns: bool, frame: &[u8]) -> u32 {
    if flow_turns { flow_key(frame) } else { 0 }
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
