//! A frame's ECN codepoint (RFC 3168: the low two bits of IPv4's TOS byte, of IPv6's traffic
//! class), read for the queue disciplines and set to CE where one marks instead of dropping.
//! IPv4's header checksum is updated incrementally (RFC 1624), so a marked frame stays valid.

use tcplab_emu::aqm::Ecn;

use super::flow::{ETH_IPV4, ETH_IPV6, payload};

/// The IP header of an Ethernet frame: its version and its offset in the frame.
fn ip_header(frame: &[u8]) -> Option<(u16, usize)> {
    let (ethertype, l3) = payload(frame)?;
    Some((ethertype, frame.len() - l3.len()))
}

/// The ECN codepoint of `frame` (not ECN-capable when it is not IP).
pub fn ecn_of(frame: &[u8]) -> Ecn {
    let bits = match ip_header(frame) {
        Some((ETH_IPV4, at)) => frame.get(at + 1).map(|tos| tos & 0b11),
        Some((ETH_IPV6, at)) => frame.get(at + 1).map(|b| (b >> 4) & 0b11),
        _ => None,
    };
    bits.map_or(Ecn::NotEct, Ecn::from_bits)
}

/// Sets CE on an ECN-capable IP frame; false (frame untouched) if it is not one.
pub fn set_ce(frame: &mut [u8]) -> bool {
    match ip_header(frame) {
        Some((ETH_IPV4, at)) => set_ce_v4(frame, at),
        Some((ETH_IPV6, at)) => match frame.get_mut(at + 1) {
            Some(b) if (*b >> 4) & 0b11 != 0 => {
                *b |= 0b11 << 4;
                true
            }
            _ => false,
        },
        _ => false,
    }
}

/// IPv4: the TOS byte's ECN bits to 11, the header checksum adjusted for the changed 16-bit
/// word (RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m')).
fn set_ce_v4(frame: &mut [u8], at: usize) -> bool {
    let Some(ip) = frame.get_mut(at..at + 20) else {
        return false;
    };
    if ip[1] & 0b11 == 0 {
        return false;
    }
    let old = u16::from_be_bytes([ip[0], ip[1]]);
    ip[1] |= 0b11;
    let new = u16::from_be_bytes([ip[0], ip[1]]);
    let hc = u16::from_be_bytes([ip[10], ip[11]]);
    let sum = u32::from(!hc) + u32::from(!old) + u32::from(new);
    let sum = (sum & 0xffff) + (sum >> 16);
    let sum = (sum & 0xffff) + (sum >> 16);
    ip[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal Ethernet + IPv4 header with `tos`, its checksum computed from scratch.
    fn v4(tos: u8, vlan: bool) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        if vlan {
            f.extend_from_slice(&[0x81, 0x00, 0x00, 0x05]);
        }
        f.extend_from_slice(&[0x08, 0x00]);
        let mut ip = vec![
            0x45, tos, 0, 40, 0x12, 0x34, 0x40, 0, 64, 6, 0, 0, 198, 18, 0, 1, 198, 18, 0, 2,
        ];
        let c = checksum(&ip);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        f.extend_from_slice(&ip);
        f.extend_from_slice(&[0; 20]);
        f
    }

    fn checksum(ip: &[u8]) -> u16 {
        let mut sum: u32 = ip
            .chunks(2)
            .enumerate()
            .filter(|(i, _)| *i != 5)
            .map(|(_, w)| u32::from(u16::from_be_bytes([w[0], w[1]])))
            .sum();
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        !(sum as u16)
    }

    #[test]
    fn ipv4_ect_is_read_marked_and_its_checksum_stays_valid() {
        for vlan in [false, true] {
            for tos in [0x02u8, 0x01, 0xba, 0xfe] {
                let mut f = v4(tos, vlan);
                let at = if vlan { 18 } else { 14 };
                assert!(ecn_of(&f).capable(), "tos {tos:#x}");
                assert!(set_ce(&mut f));
                assert_eq!(ecn_of(&f), Ecn::Ce);
                assert_eq!(f[at + 1] >> 2, tos >> 2, "the DSCP is kept");
                let stored = u16::from_be_bytes([f[at + 10], f[at + 11]]);
                assert_eq!(
                    stored,
                    checksum(&f[at..at + 20]),
                    "tos {tos:#x} vlan {vlan}"
                );
            }
        }
    }

    #[test]
    fn a_not_ect_or_non_ip_frame_is_left_alone() {
        let mut f = v4(0x00, false);
        let before = f.clone();
        assert_eq!(ecn_of(&f), Ecn::NotEct);
        assert!(!set_ce(&mut f));
        assert_eq!(f, before);
        let mut arp = vec![0u8; 12];
        arp.extend_from_slice(&[0x08, 0x06]);
        arp.extend_from_slice(&[0; 28]);
        assert_eq!(ecn_of(&arp), Ecn::NotEct);
        assert!(!set_ce(&mut arp));
        assert!(!set_ce(&mut [0u8; 5]));
    }

    #[test]
    fn ipv6_ect_is_marked_in_the_traffic_class() {
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&[0x86, 0xdd]);
        // Version 6, traffic class 0x02 (ECT(0)): 0x60 0x20 ...
        f.extend_from_slice(&[0x60, 0x20, 0, 0, 0, 20, 6, 64]);
        f.extend_from_slice(&[0; 32]);
        assert_eq!(ecn_of(&f), Ecn::Ect0);
        assert!(set_ce(&mut f));
        assert_eq!(ecn_of(&f), Ecn::Ce);
        assert_eq!(f[14], 0x60);
        assert_eq!(f[15], 0x30);
    }
}
