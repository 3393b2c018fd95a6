//! Exact tests of [`super`] on synthetic super-packets. Checksums are verified with the
//! straightforward RFC 1071 sum below, written independently of the module's.

use super::*;
use crate::wire::gso::VnetHdr;

/// RFC 1071, the textbook way: 32-bit accumulator, carries folded at the end.
fn rfc1071(chunks: &[&[u8]]) -> u16 {
    let mut bytes = Vec::new();
    for c in chunks {
        bytes.extend_from_slice(c);
    }
    if bytes.len() % 2 == 1 {
        bytes.push(0);
    }
    let mut sum: u32 = 0;
    for w in bytes.chunks(2) {
        sum += u32::from(w[0]) << 8 | u32::from(w[1]);
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// The pseudo header of a segment, built byte by byte.
fn pseudo(seg: &[u8], l3: usize, ipv4: bool, l4_len: usize) -> Vec<u8> {
    let mut p = Vec::new();
    if ipv4 {
        p.extend_from_slice(&seg[l3 + 12..l3 + 20]);
        p.extend_from_slice(&[0, seg[l3 + 9]]);
        p.extend_from_slice(&(l4_len as u16).to_be_bytes());
    } else {
        p.extend_from_slice(&seg[l3 + 8..l3 + 40]);
        p.extend_from_slice(&(l4_len as u32).to_be_bytes());
        p.extend_from_slice(&[0, 0, 0, seg[l3 + 6]]);
    }
    p
}

/// What the egress device does with a partial checksum: sum from `csum_start` (the field
/// holding the pseudo-header sum), complement, store. Then checks the result the way a
/// receiver does: pseudo header + L4 bytes sum to 0xffff.
fn finish_and_verify(seg: &mut [u8], h: &VnetHdr, l3: usize, ipv4: bool) {
    let start = usize::from(h.csum_start);
    let field = start + usize::from(h.csum_offset);
    let l4_len = seg.len() - start;
    assert_eq!(
        u16::from_be_bytes([seg[field], seg[field + 1]]),
        rfc1071(&[&pseudo(seg, l3, ipv4, l4_len)]),
        "partial field = pseudo-header sum for this segment's length"
    );
    let c = !rfc1071(&[&seg[start..]]);
    seg[field..field + 2].copy_from_slice(&c.to_be_bytes());
    assert_eq!(
        rfc1071(&[&pseudo(seg, l3, ipv4, l4_len), &seg[start..]]),
        0xffff
    );
}

const MACS: [u8; 12] = [2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2];

fn payload(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i % 251) as u8).collect()
}

/// Ethernet + IPv4 (id, DF) + TCP with 12 bytes of options, `flags`, `seq`.
fn tcp4(n: usize, id: u16, seq: u32, flags: u8) -> Vec<u8> {
    let mut f = MACS.to_vec();
    f.extend_from_slice(&0x0800_u16.to_be_bytes());
    let total = (20 + 32 + n) as u16;
    f.extend_from_slice(&[0x45, 0]);
    f.extend_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&id.to_be_bytes());
    f.extend_from_slice(&[0x40, 0, 64, 6, 0xde, 0xad]); // checksum left stale
    f.extend_from_slice(&[198, 18, 0, 1, 198, 19, 0, 2]);
    f.extend_from_slice(&[0x13, 0x88, 0xc3, 0x50]);
    f.extend_from_slice(&seq.to_be_bytes());
    f.extend_from_slice(&0x0102_0304_u32.to_be_bytes());
    f.extend_from_slice(&[8 << 4, flags, 0x01, 0xf5, 0x12, 0x34, 0, 0]);
    f.extend_from_slice(&[1, 1, 8, 10, 0, 0, 0, 7, 0, 0, 0, 9]);
    f.extend_from_slice(&payload(n));
    f
}

fn tso(gso_type: u8, gso_size: u16, csum_start: u16) -> VnetHdr {
    VnetHdr {
        flags: F_NEEDS_CSUM,
        gso_type,
        hdr_len: 0,
        gso_size,
        csum_start,
        csum_offset: 16,
    }
}

fn ip4_header_ok(seg: &[u8], l3: usize) -> bool {
    rfc1071(&[&seg[l3..l3 + 20]]) == 0xffff
}

fn cut(plan: &Plan, frame: &[u8]) -> Vec<Vec<u8>> {
    (0..plan.segments())
        .map(|i| {
            let mut out = vec![0xee; 2048];
            let n = plan.write(frame, i, &mut out).expect("segment fits");
            assert_eq!(n, plan.segment_len(i));
            out.truncate(n);
            out
        })
        .collect()
}

#[test]
fn tcp_over_ipv4_cuts_into_exact_segments() {
    // 2500 bytes at 1000 per segment: 1000, 1000, 500. id and seq wrap on the way.
    let (id, seq) = (0xfffe, 0xffff_fc00);
    let flags = TCP_CWR | 0x10 | TCP_PSH | TCP_FIN; // CWR ACK PSH FIN
    let f = tcp4(2500, id, seq, flags);
    let h = tso(GSO_TCPV4 | 0x80, 1000, 34);
    let plan = plan(&h, &f).expect("cuttable");
    assert_eq!((plan.segments(), plan.hdr_len, plan.l4_off), (3, 66, 34));
    let segs = cut(&plan, &f);
    let lens: Vec<usize> = segs.iter().map(Vec::len).collect();
    assert_eq!(lens, [1066, 1066, 566]);
    let data = payload(2500);
    for (i, mut s) in segs.into_iter().enumerate() {
        let be16 = |o: usize| u16::from_be_bytes([s[o], s[o + 1]]);
        assert_eq!(usize::from(be16(16)), s.len() - 14, "IPv4 total length");
        assert_eq!(be16(18), id.wrapping_add(i as u16), "IPv4 id");
        assert!(ip4_header_ok(&s, 14), "IPv4 header checksum, segment {i}");
        let seg_seq = u32::from_be_bytes(s[38..42].try_into().unwrap());
        assert_eq!(seg_seq, seq.wrapping_add(1000 * i as u32));
        let expected_flags = match i {
            0 => TCP_CWR | 0x10,
            1 => 0x10,
            _ => 0x10 | TCP_PSH | TCP_FIN,
        };
        assert_eq!(s[47], expected_flags, "flags of segment {i}");
        assert_eq!(&s[66..], &data[1000 * i..(1000 * (i + 1)).min(2500)]);
        assert_eq!(&s[54..66], &f[54..66], "TCP options copied");
        assert_eq!(&s[..14], &f[..14]);
        finish_and_verify(&mut s, &plan.vnet_hdr(), 14, true);
    }
    assert_eq!(
        plan.vnet_hdr(),
        VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: 0,
            hdr_len: 66,
            gso_size: 0,
            csum_start: 34,
            csum_offset: 16
        }
    );
}

#[test]
fn a_segment_completed_in_software_verifies_for_corruption_to_show() {
    let f = tcp4(3000, 7, 1, 0x18);
    let plan = plan(&tso(GSO_TCPV4, 1448, 34), &f).unwrap();
    for mut s in cut(&plan, &f) {
        assert!(crate::wire::csum::complete(&mut s));
        let l4_len = s.len() - 34;
        assert_eq!(
            rfc1071(&[&pseudo(&s, 14, true, l4_len), &s[34..]]),
            0xffff,
            "full checksum"
        );
    }
}

/// Ethernet + 802.1Q tag + IPv6 + TCP (20 bytes, no options).
fn tcp6_vlan(n: usize, seq: u32, flags: u8) -> Vec<u8> {
    let mut f = MACS.to_vec();
    f.extend_from_slice(&[0x81, 0x00, 0x00, 0x05, 0x86, 0xdd]);
    f.extend_from_slice(&[0x60, 0, 0, 0]);
    f.extend_from_slice(&((20 + n) as u16).to_be_bytes());
    f.extend_from_slice(&[6, 64]);
    f.extend_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    f.extend_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    f.extend_from_slice(&[0x13, 0x88, 0xc3, 0x50]);
    f.extend_from_slice(&seq.to_be_bytes());
    f.extend_from_slice(&[0, 0, 0, 1, 5 << 4, flags, 0x01, 0xf5, 0xab, 0xcd, 0, 0]);
    f.extend_from_slice(&payload(n));
    f
}

#[test]
fn tcp_over_ipv6_with_a_vlan_tag_cuts_into_exact_segments() {
    // 2 × 1428 + 1 byte (odd tail in the checksum).
    let f = tcp6_vlan(2857, 1_000_000, 0x18);
    let plan = plan(&tso(GSO_TCPV6, 1428, 58), &f).expect("cuttable");
    assert_eq!((plan.l3_off, plan.l4_off, plan.hdr_len), (18, 58, 78));
    let segs = cut(&plan, &f);
    let lens: Vec<usize> = segs.iter().map(Vec::len).collect();
    assert_eq!(lens, [78 + 1428, 78 + 1428, 78 + 1]);
    for (i, mut s) in segs.into_iter().enumerate() {
        assert_eq!(
            usize::from(u16::from_be_bytes([s[22], s[23]])),
            s.len() - 58,
            "IPv6 payload length"
        );
        let seg_seq = u32::from_be_bytes(s[62..66].try_into().unwrap());
        assert_eq!(seg_seq, 1_000_000 + 1428 * i as u32);
        assert_eq!(
            s[71],
            if i == 2 { 0x18 } else { 0x10 },
            "PSH on the last only"
        );
        assert_eq!(&s[..18], &f[..18], "tag kept");
        finish_and_verify(&mut s, &plan.vnet_hdr(), 18, false);
    }
}

#[test]
fn udp_l4_over_ipv4_cuts_into_datagrams() {
    let mut f = tcp4(0, 100, 0, 0);
    f.truncate(34);
    f[23] = 17;
    let n = 3000;
    f[16..18].copy_from_slice(&((20 + 8 + n) as u16).to_be_bytes());
    f.extend_from_slice(&[0x30, 0x39, 0x30, 0x3a]);
    f.extend_from_slice(&((8 + n) as u16).to_be_bytes());
    f.extend_from_slice(&[0x55, 0x66]);
    f.extend_from_slice(&payload(n));
    let mut h = tso(GSO_UDP_L4, 1400, 34);
    h.csum_offset = 6;
    let plan = plan(&h, &f).expect("cuttable");
    assert_eq!((plan.l4, plan.segments(), plan.hdr_len), (L4::Udp, 3, 42));
    assert_eq!(plan.vnet_hdr().csum_offset, 6);
    for (i, mut s) in cut(&plan, &f).into_iter().enumerate() {
        let udp_len = usize::from(u16::from_be_bytes([s[38], s[39]]));
        assert_eq!(udp_len, s.len() - 34);
        assert_eq!(udp_len - 8, if i == 2 { 200 } else { 1400 });
        assert_eq!(u16::from_be_bytes([s[18], s[19]]), 100 + i as u16);
        assert!(ip4_header_ok(&s, 14));
        finish_and_verify(&mut s, &plan.vnet_hdr(), 14, true);
    }
}

#[test]
fn frames_it_does_not_cut_are_refused_whole() {
    let f = tcp4(3000, 1, 1, 0x10);
    // Not a super-packet; UFO; a TCPv6 type on an IPv4 frame.
    assert_eq!(plan(&VnetHdr::default(), &f), None);
    assert_eq!(plan(&tso(3, 1448, 34), &f), None);
    assert_eq!(plan(&tso(GSO_TCPV6, 1448, 34), &f), None);
    // An IP length that disagrees with the frame.
    let mut short = f.clone();
    short.truncate(f.len() - 1);
    assert_eq!(plan(&tso(GSO_TCPV4, 1448, 34), &short), None);
    // A fragment.
    let mut frag = f.clone();
    frag[20] |= 0x20;
    assert_eq!(plan(&tso(GSO_TCPV4, 1448, 34), &frag), None);
    // IPv6 with a hop-by-hop extension header.
    let mut ext = tcp6_vlan(3000, 1, 0x10);
    ext[24] = 0;
    assert_eq!(plan(&tso(GSO_TCPV6, 1428, 58), &ext), None);
    // Headers only.
    let bare = tcp4(0, 1, 1, 0x10);
    assert_eq!(plan(&tso(GSO_TCPV4, 1448, 34), &bare), None);
}

#[test]
fn write_refuses_a_short_buffer_and_a_segment_past_the_end() {
    let f = tcp4(3000, 1, 1, 0x10);
    let plan = plan(&tso(GSO_TCPV4, 1448, 34), &f).unwrap();
    assert_eq!(plan.segments(), 3);
    let mut small = [0_u8; 1000];
    assert_eq!(plan.write(&f, 0, &mut small), None);
    let mut big = [0_u8; 2048];
    assert_eq!(plan.write(&f, 3, &mut big), None);
    assert_eq!(plan.write(&f, 2, &mut big), Some(66 + 3000 - 2 * 1448));
}
