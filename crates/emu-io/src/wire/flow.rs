//! Which flow a frame belongs to, for serving overdue frames flow by flow ([`crate::sched::due`]).
//!
//! The key is a hash of the IPv4/IPv6 addresses, the protocol and, for TCP, UDP, UDP-Lite
//! and SCTP, the ports; frames that are not IP (or are IP fragments past the first, which
//! carry no ports) hash their addresses only, so every frame of one connection gets the same
//! key and keeps its order. Pure: bytes in, a number out.

/// Ethertypes of 802.1Q and 802.1ad tags, skipped to reach the payload's type.
const VLAN_TAGS: [u16; 2] = [0x8100, 0x88a8];
pub(crate) const ETH_IPV4: u16 = 0x0800;
pub(crate) const ETH_IPV6: u16 = 0x86dd;
/// IP protocols whose first four payload bytes are the source and destination ports.
const PORTED: [u8; 4] = [6, 17, 132, 136];

/// The flow key of an Ethernet frame (no virtio-net header in front).
pub fn flow_key(frame: &[u8]) -> u32 {
    let mut h = Hasher::new();
    let Some((ethertype, l3)) = payload(frame) else {
        h.bytes(frame.get(..14).unwrap_or(frame));
        return h.finish();
    };
    let parsed = match ethertype {
        ETH_IPV4 => ipv4(&mut h, l3),
        ETH_IPV6 => ipv6(&mut h, l3),
        _ => None,
    };
    if parsed.is_none() {
        // Not IP, or a truncated header: the MAC addresses and type still separate hosts.
        h = Hasher::new();
        h.bytes(&frame[..12]);
        h.bytes(&ethertype.to_be_bytes());
    }
    h.finish()
}

/// The innermost ethertype and the bytes after it, past any VLAN tags.
pub(crate) fn payload(frame: &[u8]) -> Option<(u16, &[u8])> {
    let mut at = 12;
    loop {
        let t = u16::from_be_bytes([*frame.get(at)?, *frame.get(at + 1)?]);
        if VLAN_TAGS.contains(&t) {
            at += 4;
            continue;
        }
        return Some((t, frame.get(at + 2..)?));
    }
}

fn ipv4(h: &mut Hasher, ip: &[u8]) -> Option<()> {
    let ihl = usize::from(ip.first()? & 0x0f) * 4;
    let proto = *ip.get(9)?;
    h.bytes(ip.get(12..20)?);
    h.bytes(&[4, proto]);
    let later_fragment = u16::from_be_bytes([*ip.get(6)?, *ip.get(7)?]) & 0x1fff != 0;
    if !later_fragment && ihl >= 20 {
        ports(h, proto, ip.get(ihl..));
    }
    Some(())
}

fn ipv6(h: &mut Hasher, ip: &[u8]) -> Option<()> {
    let next = *ip.get(6)?;
    h.bytes(ip.get(8..40)?);
    h.bytes(&[6, next]);
    ports(h, next, ip.get(40..));
    Some(())
}

fn ports(h: &mut Hasher, proto: u8, l4: Option<&[u8]>) {
    if let Some(p) = l4
        .and_then(|l4| l4.get(..4))
        .filter(|_| PORTED.contains(&proto))
    {
        h.bytes(p);
    }
}

/// FNV-1a, 32 bits: a few dozen bytes per frame, no key needed (the key only spreads flows
/// over queues; a collision makes two flows share one, never reorders either).
struct Hasher(u32);

impl Hasher {
    fn new() -> Self {
        Self(0x811c_9dc5)
    }

    fn bytes(&mut self, b: &[u8]) {
        for &x in b {
            self.0 = (self.0 ^ u32::from(x)).wrapping_mul(0x0100_0193);
        }
    }

    fn finish(&self) -> u32 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An Ethernet + IPv4 + TCP header with the given ports and fragment field, padded.
    fn tcp4(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16, frag: u16) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&ETH_IPV4.to_be_bytes());
        let mut ip = vec![0x45, 0, 0, 40, 0, 0];
        ip.extend_from_slice(&frag.to_be_bytes());
        ip.extend_from_slice(&[64, 6, 0, 0]);
        ip.extend_from_slice(&src);
        ip.extend_from_slice(&dst);
        f.extend_from_slice(&ip);
        f.extend_from_slice(&sport.to_be_bytes());
        f.extend_from_slice(&dport.to_be_bytes());
        f.extend_from_slice(&[0xaa; 16]);
        f
    }

    const C: [u8; 4] = [198, 18, 0, 1];
    const S: [u8; 4] = [198, 18, 0, 101];

    #[test]
    fn ports_separate_connections_and_payload_does_not() {
        let a = tcp4(C, S, 40000, 5201, 0);
        let mut a2 = a.clone();
        a2[40] = 0x55; // payload byte
        assert_eq!(flow_key(&a), flow_key(&a2));
        assert_ne!(flow_key(&a), flow_key(&tcp4(C, S, 40001, 5201, 0)));
        assert_ne!(flow_key(&a), flow_key(&tcp4(S, C, 5201, 40000, 0)));
    }

    #[test]
    fn a_vlan_tag_does_not_change_the_key() {
        let plain = tcp4(C, S, 1, 2, 0);
        let mut tagged = plain[..12].to_vec();
        tagged.extend_from_slice(&[0x81, 0x00, 0x00, 0x07]);
        tagged.extend_from_slice(&plain[12..]);
        assert_eq!(flow_key(&plain), flow_key(&tagged));
    }

    #[test]
    fn later_fragments_share_a_key_by_address_and_truncated_frames_do_not_panic() {
        let f1 = tcp4(C, S, 1, 2, 0x00b9); // offset 185 x 8: no ports in it
        let f2 = tcp4(C, S, 3, 4, 0x00b9);
        assert_eq!(flow_key(&f1), flow_key(&f2));
        for n in 0..f1.len() {
            let _ = flow_key(&f1[..n]);
        }
    }

    #[test]
    fn ipv6_uses_addresses_and_ports() {
        let v6 = |sport: u16| {
            let mut f = vec![0u8; 12];
            f.extend_from_slice(&ETH_IPV6.to_be_bytes());
            let mut ip = vec![0x60, 0, 0, 0, 0, 20, 17, 64];
            ip.extend_from_slice(&[0xfd; 16]);
            ip.extend_from_slice(&[0xfd; 15]);
            ip.push(2);
            f.extend_from_slice(&ip);
            f.extend_from_slice(&sport.to_be_bytes());
            f.extend_from_slice(&[0, 9, 0, 20, 0, 0]);
            f
        };
        assert_eq!(flow_key(&v6(7)), flow_key(&v6(7)));
        assert_ne!(flow_key(&v6(7)), flow_key(&v6(8)));
    }

    #[test]
    fn non_ip_frames_are_keyed_by_their_addresses() {
        let mut arp = vec![1u8; 6];
        arp.extend_from_slice(&[2u8; 6]);
        arp.extend_from_slice(&[0x08, 0x06]);
        arp.extend_from_slice(&[0u8; 28]);
        let mut other = arp.clone();
        other[0] = 3;
        assert_ne!(flow_key(&arp), flow_key(&other));
        let before = flow_key(&arp);
        arp[20] = 9; // ARP body
        assert_eq!(flow_key(&arp), before);
    }
}
