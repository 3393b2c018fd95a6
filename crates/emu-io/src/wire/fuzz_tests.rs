//! Property tests of everything that reads a frame from the wire: the virtio-net header, the
//! wire cost of a super-packet, segmentation, checksum completion and the flow key. Frames are
//! built valid (Ethernet, an optional VLAN tag, IPv4 or IPv6, TCP or UDP, consistent lengths)
//! and then damaged, or are arbitrary bytes; headers are any ten bytes. Nothing a peer sends
//! may panic the emulator.
//!
//! Cases: `PROPTEST_CASES` or proptest's default of 256 (`benches/fuzz.sh` runs many more).

use proptest::prelude::*;

use super::csum;
use super::flow::flow_key;
use super::gso::{VNET_HDR_LEN, VnetHdr, wire_cost};
use super::segment::plan;

/// A frame: `vlan`, IPv4 or IPv6, TCP (with `doff` words of header) or UDP, `payload` bytes.
fn frame(vlan: bool, v4: bool, tcp: bool, doff: u8, payload: usize) -> Vec<u8> {
    let l3 = if vlan { 18 } else { 14 };
    let l3_len = if v4 { 20 } else { 40 };
    let l4_len = if tcp { usize::from(doff) * 4 } else { 8 };
    let mut f = vec![0u8; l3 + l3_len + l4_len + payload];
    if vlan {
        f[12..14].copy_from_slice(&0x8100u16.to_be_bytes());
        f[16..18].copy_from_slice(&if v4 { 0x0800u16 } else { 0x86dd }.to_be_bytes());
    } else {
        f[12..14].copy_from_slice(&if v4 { 0x0800u16 } else { 0x86dd }.to_be_bytes());
    }
    let proto = if tcp { 6 } else { 17 };
    let ip_payload = (l4_len + payload) as u16;
    if v4 {
        f[l3] = 0x45;
        f[l3 + 2..l3 + 4].copy_from_slice(&(ip_payload.wrapping_add(20)).to_be_bytes());
        f[l3 + 9] = proto;
    } else {
        f[l3] = 0x60;
        f[l3 + 4..l3 + 6].copy_from_slice(&ip_payload.to_be_bytes());
        f[l3 + 6] = proto;
    }
    let l4 = l3 + l3_len;
    if tcp {
        // A data offset below 13 bytes leaves no room for its own field in a frame without
        // payload: that frame is cut short, which is one more damaged frame.
        if let Some(b) = f.get_mut(l4 + 12) {
            *b = doff << 4;
        }
    } else if l4 + 6 <= f.len() {
        f[l4 + 4..l4 + 6].copy_from_slice(&ip_payload.to_be_bytes());
    }
    f
}

/// A frame as built, with up to three bytes (mostly in the headers) changed; or any bytes.
fn any_frame() -> impl Strategy<Value = Vec<u8>> {
    let built = (
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        prop_oneof![Just(5u8), Just(8), 0u8..5, 0u8..16],
        prop_oneof![4 => 0usize..3000, 1 => 60_000usize..70_000, 1 => 200_000usize..300_000],
        prop::collection::vec((0usize..90, any::<u8>()), 0..4),
    )
        .prop_map(|(vlan, v4, tcp, doff, payload, damage)| {
            let mut f = frame(vlan, v4, tcp, doff, payload);
            for (at, b) in damage {
                if let Some(x) = f.get_mut(at) {
                    *x = b;
                }
            }
            f
        });
    prop_oneof![4 => built, 1 => prop::collection::vec(any::<u8>(), 0..200)]
}

/// A virtio-net header: the kernel's usual ones, or any ten bytes.
fn any_hdr() -> impl Strategy<Value = VnetHdr> {
    let usual = (
        0u8..2,
        prop_oneof![
            3 => prop::sample::select(vec![1u8, 4, 5]),
            1 => prop::sample::select(vec![0u8, 3, 0x81, 0x84, 2, 0x7f]),
        ],
        prop_oneof![Just(1448u16), 1u16..16, Just(0u16), any::<u16>()],
        prop_oneof![Just(34u16), Just(54), Just(38), any::<u16>()],
    )
        .prop_map(|(flags, gso_type, gso_size, csum_start)| VnetHdr {
            flags,
            gso_type,
            hdr_len: 0,
            gso_size,
            csum_start,
            csum_offset: 16,
        });
    let raw =
        prop::array::uniform10(any::<u8>()).prop_map(|b| VnetHdr::parse(&b).unwrap_or_default());
    prop_oneof![3 => usual, 1 => raw]
}

fn config() -> proptest::test_runner::Config {
    proptest::test_runner::Config {
        failure_persistence: None,
        ..proptest::test_runner::Config::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn headers_round_trip(b in prop::array::uniform10(any::<u8>()), short in 0usize..VNET_HDR_LEN) {
        let h = VnetHdr::parse(&b).unwrap();
        let mut out = [0u8; VNET_HDR_LEN];
        h.write(&mut out);
        prop_assert_eq!(out, b);
        prop_assert_eq!(VnetHdr::parse(&b[..short]), None);
        h.write(&mut out[..short]);
    }

    /// A super-packet costs at least one wire packet and never less than its bytes.
    #[test]
    fn wire_cost_of_any_frame(hdr in any_hdr(), f in any_frame(), extra in 0u32..8) {
        let c = wire_cost(&hdr, &f, extra);
        prop_assert!(c.segments >= 1);
        prop_assert!(u64::from(c.bytes) >= (f.len() as u64).min(u64::from(u32::MAX)));
    }

    /// Segments cover the payload exactly, each fits its length, and completing a
    /// segment's checksum works on what was written.
    #[test]
    fn segmentation_of_any_frame(hdr in any_hdr(), f in any_frame()) {
        let _ = flow_key(&f);
        let mut whole = f.clone();
        let _ = csum::complete(&mut whole);
        let Some(p) = plan(&hdr, &f) else { return Ok(()) };
        let n = p.segments();
        prop_assert!(n >= 1);
        let mut payload = 0;
        for i in 0..n.min(64) {
            let len = p.segment_len(i);
            let mut out = vec![0u8; len];
            prop_assert_eq!(p.write(&f, i, &mut out), Some(len));
            prop_assert_eq!(p.write(&f, i, &mut out[..len - 1]), None);
            let _ = csum::complete(&mut out);
            let _ = flow_key(&out);
            payload += len - p.hdr_len;
        }
        if n <= 64 {
            prop_assert_eq!(payload, p.payload);
        }
        prop_assert_eq!(p.write(&f, n, &mut vec![0u8; 70_000]), None);
    }
}

/// Found by `segmentation_of_any_frame`: a TCP data offset of 2 words (8 bytes, below the
/// 20 of any TCP header) was accepted, and cutting one-byte segments wrote the flags and the
/// checksum past each segment's end.
#[test]
fn a_tcp_header_shorter_than_20_bytes_is_not_cut() {
    for doff in 0..5 {
        let f = frame(false, true, true, doff, 100);
        let hdr = VnetHdr {
            flags: 0,
            gso_type: 1,
            hdr_len: 0,
            gso_size: 1,
            csum_start: 34,
            csum_offset: 16,
        };
        assert!(plan(&hdr, &f).is_none(), "data offset {doff}");
    }
    let ok = frame(false, true, true, 5, 100);
    let hdr = VnetHdr {
        flags: 0,
        gso_type: 1,
        hdr_len: 0,
        gso_size: 1,
        csum_start: 34,
        csum_offset: 16,
    };
    assert_eq!(plan(&hdr, &ok).map(|p| p.segments()), Some(100));
}

/// A frame far larger than a ring holds, cut in one-byte segments after 64 KiB of headers:
/// the cost's product overflowed a u32 (a panic in a debug build).
#[test]
fn the_cost_of_a_huge_frame_is_held_not_overflowed() {
    let mut f = vec![0u8; 400_000];
    f[65_535 + 12] = 5 << 4;
    let hdr = VnetHdr {
        flags: super::gso::F_NEEDS_CSUM,
        gso_type: 1,
        hdr_len: 0,
        gso_size: 1,
        csum_start: 65_535,
        csum_offset: 16,
    };
    let c = wire_cost(&hdr, &f, 0);
    assert_eq!(c.bytes, u32::MAX);
}
