//! GSO mode's view of a frame: the `struct virtio_net_hdr` the kernel puts before each frame
//! on a `PACKET_VNET_HDR` socket, and how many wire packets a super-packet stands for.
//!
//! The header is carried from RX to TX unchanged (so the egress stack segments, or passes
//! whole to a TSO-capable device, exactly what the sender built); the model is charged the
//! wire packets: `n = ceil(payload / gso_size)` segments, each with its own copy of the
//! headers. Pure: tested on byte arrays.

/// Size of `struct virtio_net_hdr` (no `num_buffers`): what `PACKET_VNET_HDR` uses.
pub const VNET_HDR_LEN: usize = 10;
/// `VIRTIO_NET_HDR_F_NEEDS_CSUM`: `csum_start`/`csum_offset` are valid, the L4 checksum is
/// partial.
pub const F_NEEDS_CSUM: u8 = 1;
/// `VIRTIO_NET_HDR_GSO_*` values (low 7 bits of `gso_type`; 0x80 is the ECN flag).
const GSO_NONE: u8 = 0;
const GSO_TCPV4: u8 = 1;
const GSO_UDP: u8 = 3;
const GSO_TCPV6: u8 = 4;
const GSO_UDP_L4: u8 = 5;
const ETH_HLEN: usize = 14;

/// The fields of a virtio-net header (little-endian on the wire, as `PACKET_VNET_HDR` uses
/// on little-endian hosts).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct VnetHdr {
    /// `VIRTIO_NET_HDR_F_*`.
    pub flags: u8,
    /// `VIRTIO_NET_HDR_GSO_*`, ECN bit included.
    pub gso_type: u8,
    /// Header length hint (the kernel fills in the linear length; not trusted here).
    pub hdr_len: u16,
    /// Payload bytes per segment.
    pub gso_size: u16,
    /// Offset of the L4 header from the first L2 byte (when `F_NEEDS_CSUM`).
    pub csum_start: u16,
    /// Offset of the checksum field from `csum_start`.
    pub csum_offset: u16,
}

impl VnetHdr {
    /// Parses the first [`VNET_HDR_LEN`] bytes; `None` if shorter.
    pub fn parse(b: &[u8]) -> Option<Self> {
        let b = b.get(..VNET_HDR_LEN)?;
        let u16_at = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
        Some(Self {
            flags: b[0],
            gso_type: b[1],
            hdr_len: u16_at(2),
            gso_size: u16_at(4),
            csum_start: u16_at(6),
            csum_offset: u16_at(8),
        })
    }

    /// Writes the header into the first [`VNET_HDR_LEN`] bytes of `b` (no-op if shorter).
    pub fn write(&self, b: &mut [u8]) {
        let Some(b) = b.get_mut(..VNET_HDR_LEN) else {
            return;
        };
        b[0] = self.flags;
        b[1] = self.gso_type;
        b[2..4].copy_from_slice(&self.hdr_len.to_le_bytes());
        b[4..6].copy_from_slice(&self.gso_size.to_le_bytes());
        b[6..8].copy_from_slice(&self.csum_start.to_le_bytes());
        b[8..10].copy_from_slice(&self.csum_offset.to_le_bytes());
    }

    /// True for a super-packet (a GSO type other than none, with a segment size).
    pub fn is_gso(&self) -> bool {
        self.gso_type & 0x7f != GSO_NONE && self.gso_size > 0
    }
}

/// What the model is charged for one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WireCost {
    /// Wire packets the frame stands for (1 for an ordinary frame).
    pub segments: u32,
    /// Their bytes, each segment's headers counted.
    pub bytes: u32,
}

/// The wire packets `frame` (L2 onwards, as it will leave; `extra_l2` bytes of VLAN tag
/// re-inserted in front of the L3 header that `frame` does not contain yet) stands for.
/// A frame that is not a super-packet, or whose headers cannot be parsed, costs itself.
pub fn wire_cost(hdr: &VnetHdr, frame: &[u8], extra_l2: u32) -> WireCost {
    let one = WireCost {
        segments: 1,
        bytes: frame.len() as u32 + extra_l2,
    };
    if !hdr.is_gso() {
        return one;
    }
    let Some(headers) = header_len(hdr, frame) else {
        return one;
    };
    let payload = frame.len().saturating_sub(headers);
    let segments = payload.div_ceil(usize::from(hdr.gso_size)).max(1) as u64;
    let per_segment = headers as u64 + u64::from(extra_l2);
    // In u64, then held to u32: a frame larger than any ring holds (BIG TCP's 512 KiB cut in
    // one-byte segments after 64 KiB of headers) would overflow a u32 product.
    let clamp = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
    WireCost {
        segments: clamp(segments),
        bytes: clamp(payload as u64 + segments * per_segment),
    }
}

/// Bytes of L2 + L3 + L4 headers that each segment repeats.
fn header_len(hdr: &VnetHdr, frame: &[u8]) -> Option<usize> {
    let l4 = if hdr.flags & F_NEEDS_CSUM != 0 {
        usize::from(hdr.csum_start)
    } else {
        l4_offset(frame)?
    };
    let l4_len = match hdr.gso_type & 0x7f {
        GSO_TCPV4 | GSO_TCPV6 => usize::from(*frame.get(l4 + 12)? >> 4) * 4,
        GSO_UDP | GSO_UDP_L4 => 8,
        _ => return None,
    };
    let end = l4 + l4_len;
    (l4_len >= 8 && end <= frame.len()).then_some(end)
}

/// L4 offset from the Ethernet and IP headers (one VLAN tag, IPv4 options, IPv6 without
/// extension headers).
fn l4_offset(frame: &[u8]) -> Option<usize> {
    let mut l3 = ETH_HLEN;
    let mut ethertype = u16::from_be_bytes([*frame.get(12)?, *frame.get(13)?]);
    if ethertype == 0x8100 || ethertype == 0x88a8 {
        ethertype = u16::from_be_bytes([*frame.get(16)?, *frame.get(17)?]);
        l3 += 4;
    }
    match ethertype {
        0x0800 => Some(l3 + usize::from(frame.get(l3)? & 0x0f) * 4),
        0x86dd => Some(l3 + 40),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An Ethernet + IPv4 (20) + TCP (32, timestamps) frame with `payload` bytes.
    fn tcp4(payload: usize) -> Vec<u8> {
        let mut f = vec![0_u8; 14 + 20 + 32 + payload];
        f[12..14].copy_from_slice(&0x0800_u16.to_be_bytes());
        f[14] = 0x45;
        f[14 + 20 + 12] = 8 << 4;
        f
    }

    fn tso(gso_size: u16, csum: bool) -> VnetHdr {
        VnetHdr {
            flags: if csum { F_NEEDS_CSUM } else { 0 },
            gso_type: GSO_TCPV4,
            hdr_len: 0,
            gso_size,
            csum_start: 34,
            csum_offset: 16,
        }
    }

    #[test]
    fn header_round_trips_little_endian() {
        let h = tso(1448, true);
        let mut b = [0_u8; 12];
        h.write(&mut b);
        assert_eq!(&b[..10], &[1, 1, 0, 0, 0xa8, 0x05, 34, 0, 16, 0]);
        assert_eq!(VnetHdr::parse(&b), Some(h));
        assert_eq!(VnetHdr::parse(&b[..9]), None);
    }

    #[test]
    fn a_tso_frame_costs_its_segments_with_their_headers() {
        // 44 full segments of 1448 + one of 100: 45 wire packets of 66 header bytes each.
        let f = tcp4(44 * 1448 + 100);
        for csum in [true, false] {
            let c = wire_cost(&tso(1448, csum), &f, 0);
            assert_eq!(c.segments, 45);
            assert_eq!(c.bytes, (44 * 1448 + 100) + 45 * 66);
        }
        // A re-inserted VLAN tag goes on every segment.
        assert_eq!(
            wire_cost(&tso(1448, true), &f, 4).bytes,
            (44 * 1448 + 100) + 45 * 70
        );
        // Exactly two segments.
        assert_eq!(wire_cost(&tso(1448, true), &tcp4(2896), 0).segments, 2);
    }

    #[test]
    fn ordinary_or_unparsable_frames_cost_themselves() {
        let f = tcp4(1448);
        assert_eq!(
            wire_cost(&VnetHdr::default(), &f, 0),
            WireCost {
                segments: 1,
                bytes: f.len() as u32
            }
        );
        let mut arp = f.clone();
        arp[12..14].copy_from_slice(&0x0806_u16.to_be_bytes());
        assert_eq!(wire_cost(&tso(1448, false), &arp, 0).segments, 1);
        let short = &f[..40];
        assert_eq!(wire_cost(&tso(1448, true), short, 0).segments, 1);
    }
}
