//! User-space segmentation for GSO mode: cutting a TCP (TSO, `gso_type` TCPV4/TCPV6, ECN bit
//! or not) or UDP (USO, `UDP_L4`) super-packet into the wire packets it stands for, so that a
//! link element acting on single packets (loss, duplicate, reorder, corrupt) can act on each.
//!
//! Only directions whose configuration needs per-packet granularity segment; elsewhere
//! super-packets still cross whole (`crate::wire::gso`). Pure and allocation-free: [`plan`] reads
//! the headers once, [`Plan::write`] writes segment `i` into a caller's buffer (a slab slot).
//!
//! Per segment, as the kernel's own GSO (`tcp_gso_segment`, `inet_gso_segment`) does: the
//! L2/L3/L4 headers are copied; IPv4 total length, id (+`i`) and header checksum, or IPv6
//! payload length, are rewritten; TCP sequence number + `i × gso_size`, FIN and PSH only on the
//! last segment, CWR only on the first; UDP length.
//!
//! **Checksums stay partial.** Each segment leaves with `VIRTIO_NET_HDR_F_NEEDS_CSUM` (gso
//! type none) and its L4 checksum field holding the pseudo-header sum for *its* length, which
//! the kernel's egress (veth → the receiving stack, or a NIC) finishes or trusts, exactly as
//! for the super-packet and as the kernel bridge does. The alternative, a full software
//! checksum, reads every payload byte a second time (the copy already read it once) for no
//! gain in fidelity; it is done only for a segment the model corrupts, so that the receiver
//! sees the corruption as a bad checksum (`crate::wire::csum::complete`, then the flip), as it
//! would on a real wire. The pseudo-header sum is recomputed from the addresses, not
//! adjusted from the field the sender left, so GRO-built super-packets (checksum already
//! verified, field complete) are handled the same way.
//!
//! Not segmented (they cross whole, charged as a train; counted as `gso_whole`): UFO
//! (`gso_type` UDP, IP fragmentation; no local Linux stack has produced it since 4.14), IPv6
//! with extension headers, and headers that do not parse.

use crate::wire::csum::{fold, sum16};
use crate::wire::gso::{F_NEEDS_CSUM, VnetHdr};

const GSO_TCPV4: u8 = 1;
const GSO_TCPV6: u8 = 4;
const GSO_UDP_L4: u8 = 5;
const IPPROTO_TCP: u8 = 6;
const IPPROTO_UDP: u8 = 17;
const TCP_FIN: u8 = 0x01;
const TCP_PSH: u8 = 0x08;
const TCP_CWR: u8 = 0x80;

/// The transport a super-packet carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum L4 {
    /// TSO: sequence numbers and flags per segment.
    Tcp,
    /// USO (`UDP_SEGMENT`): one datagram per segment.
    Udp,
}

/// The layout of a super-packet that can be cut into wire segments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// Transport.
    pub l4: L4,
    /// IPv4 (true) or IPv6.
    pub ipv4: bool,
    /// Offset of the IP header.
    pub l3_off: usize,
    /// Offset of the L4 header.
    pub l4_off: usize,
    /// Bytes of L2 + L3 + L4 headers every segment repeats.
    pub hdr_len: usize,
    /// Payload bytes per segment (the last may carry fewer).
    pub mss: usize,
    /// Payload bytes in all.
    pub payload: usize,
}

fn be16(b: &[u8], off: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(off)?, *b.get(off + 1)?]))
}

fn put16(b: &mut [u8], off: usize, v: u16) {
    b[off..off + 2].copy_from_slice(&v.to_be_bytes());
}

/// Reads `frame`'s headers (L2 onwards, as it will leave: a VLAN tag, if any, in place) for
/// the segmentation `hdr` asks for. `None` if it is not a super-packet this module cuts, or
/// if its headers do not parse; the caller then sends it whole.
pub fn plan(hdr: &VnetHdr, frame: &[u8]) -> Option<Plan> {
    if !hdr.is_gso() {
        return None;
    }
    let (l4, want_v4) = match hdr.gso_type & 0x7f {
        GSO_TCPV4 => (L4::Tcp, Some(true)),
        GSO_TCPV6 => (L4::Tcp, Some(false)),
        GSO_UDP_L4 => (L4::Udp, None),
        _ => return None,
    };
    let mut l3_off = 14;
    let mut ethertype = be16(frame, 12)?;
    if ethertype == 0x8100 || ethertype == 0x88a8 {
        ethertype = be16(frame, 16)?;
        l3_off += 4;
    }
    let (ipv4, proto, l4_off) = match ethertype {
        0x0800 => {
            let ihl = usize::from(frame.get(l3_off)? & 0x0f) * 4;
            let frag = be16(frame, l3_off + 6)? & 0x3fff;
            if ihl < 20 || frag != 0 {
                return None;
            }
            (true, *frame.get(l3_off + 9)?, l3_off + ihl)
        }
        // Extension headers (next header not TCP/UDP) are refused below.
        0x86dd => (false, *frame.get(l3_off + 6)?, l3_off + 40),
        _ => return None,
    };
    let l4_hdr = match (l4, proto) {
        (L4::Tcp, IPPROTO_TCP) => usize::from(*frame.get(l4_off + 12)? >> 4) * 4,
        (L4::Udp, IPPROTO_UDP) => 8,
        _ => return None,
    };
    // A TCP header is at least 20 bytes: each segment's sequence number, flags and checksum
    // are written at offsets up to 18, and a data offset below 5 (from a damaged or crafted
    // frame) would put them past the segment's end.
    let min_hdr = match l4 {
        L4::Tcp => 20,
        L4::Udp => 8,
    };
    if want_v4.is_some_and(|v4| v4 != ipv4) || l4_hdr < min_hdr {
        return None;
    }
    let hdr_len = l4_off + l4_hdr;
    let payload = frame.len().checked_sub(hdr_len)?;
    // The IP length must cover exactly the frame (no Ethernet padding on a super-packet).
    let ip_len = if ipv4 {
        usize::from(be16(frame, l3_off + 2)?)
    } else {
        usize::from(be16(frame, l3_off + 4)?) + 40
    };
    if payload == 0 || ip_len != frame.len() - l3_off {
        return None;
    }
    Some(Plan {
        l4,
        ipv4,
        l3_off,
        l4_off,
        hdr_len,
        mss: usize::from(hdr.gso_size),
        payload,
    })
}

impl Plan {
    /// Wire segments: `ceil(payload / mss)`.
    pub fn segments(&self) -> u32 {
        self.payload.div_ceil(self.mss) as u32
    }

    /// Payload bytes of segment `i`.
    fn seg_payload(&self, i: u32) -> usize {
        let start = i as usize * self.mss;
        self.mss.min(self.payload.saturating_sub(start))
    }

    /// Bytes (L2 onwards) of segment `i`.
    pub fn segment_len(&self, i: u32) -> usize {
        self.hdr_len + self.seg_payload(i)
    }

    /// The virtio-net header every segment leaves with: no GSO, checksum partial from the L4
    /// header (the egress finishes it).
    pub fn vnet_hdr(&self) -> VnetHdr {
        VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: 0,
            hdr_len: self.hdr_len as u16,
            gso_size: 0,
            csum_start: self.l4_off as u16,
            csum_offset: match self.l4 {
                L4::Tcp => 16,
                L4::Udp => 6,
            },
        }
    }

    /// Writes segment `i` of `frame` (the super-packet [`plan`] read) into
    /// `out[..segment_len(i)]`; returns that length, or `None` if `out` is too short or `i`
    /// is past the last segment.
    pub fn write(&self, frame: &[u8], i: u32, out: &mut [u8]) -> Option<usize> {
        if i >= self.segments() {
            return None;
        }
        let n = self.seg_payload(i);
        let len = self.hdr_len + n;
        let out = out.get_mut(..len)?;
        let start = self.hdr_len + i as usize * self.mss;
        out[..self.hdr_len].copy_from_slice(frame.get(..self.hdr_len)?);
        out[self.hdr_len..].copy_from_slice(frame.get(start..start + n)?);
        let l4_len = len - self.l4_off;
        self.fix_l3(out, i, l4_len);
        let last = i + 1 == self.segments();
        let check = match self.l4 {
            L4::Tcp => {
                let th = self.l4_off;
                let seq = u32::from_be_bytes(out[th + 4..th + 8].try_into().ok()?);
                let seq = seq.wrapping_add((i as usize * self.mss) as u32);
                out[th + 4..th + 8].copy_from_slice(&seq.to_be_bytes());
                if !last {
                    out[th + 13] &= !(TCP_FIN | TCP_PSH);
                }
                if i > 0 {
                    out[th + 13] &= !TCP_CWR;
                }
                th + 16
            }
            L4::Udp => {
                put16(out, self.l4_off + 4, l4_len as u16);
                self.l4_off + 6
            }
        };
        put16(out, check, self.pseudo_sum(out, l4_len));
        Some(len)
    }

    /// IPv4: total length, id + `i`, header checksum; IPv6: payload length.
    fn fix_l3(&self, out: &mut [u8], i: u32, l4_len: usize) {
        let ip = self.l3_off;
        if self.ipv4 {
            let ihl = self.l4_off - ip;
            put16(out, ip + 2, (ihl + l4_len) as u16);
            let id = u16::from_be_bytes([out[ip + 4], out[ip + 5]]).wrapping_add(i as u16);
            put16(out, ip + 4, id);
            put16(out, ip + 10, 0);
            let sum = !fold(sum16(&out[ip..ip + ihl], 0));
            put16(out, ip + 10, sum);
        } else {
            put16(out, ip + 4, l4_len as u16);
        }
    }

    /// The folded (not complemented) pseudo-header sum for an L4 length of `l4_len`: what a
    /// partial checksum field holds.
    fn pseudo_sum(&self, out: &[u8], l4_len: usize) -> u16 {
        let ip = self.l3_off;
        let (addrs, proto) = if self.ipv4 {
            (&out[ip + 12..ip + 20], out[ip + 9])
        } else {
            (&out[ip + 8..ip + 40], out[ip + 6])
        };
        fold(sum16(addrs, u64::from(proto) + l4_len as u64))
    }
}

#[cfg(test)]
#[path = "segment_tests.rs"]
mod tests;
