//! Link-layer addresses fixed at build time, and the neighbour entries of hosts on a wide
//! switch. A star or dumbbell of many hosts is one layer-2 segment through a software bridge:
//! every ARP request or IPv6 neighbour solicitation is flooded from one CPU to every port, and
//! when many hosts start talking at once (a mesh step of 32 pairs among 64 hosts: ~2,000 copies)
//! the flood overflows the receiving CPU's backlog (`net.core.netdev_max_backlog`, 1,000, and
//! read-only inside a namespace). ARP replies and SYNs are then lost: connections wait for
//! retransmits or fail with "no route to host" — the emulation's artefact, not the network's
//! under study (a hardware switch floods in hardware). So every veth end gets a MAC derived
//! from its interface index, and the end hosts of a star or dumbbell are told each other's
//! addresses as permanent neighbour entries: no resolution traffic at all. Pair and path labs
//! (two end hosts, no fan-out) and custom labs (whose segments the file defines) resolve as
//! usual. Pure: the spec in, the entries out.

use std::collections::BTreeMap;
use std::net::IpAddr;

use crate::spec::{LabSpec, Topology};

/// Interface index of the first veth end; fresh namespaces only hold `lo` (index 1) below it.
pub const FIRST_LINK_INDEX: u32 = 100;

/// The interface indexes of link `i`'s two ends (distinct, unique in the lab).
pub fn end_indexes(i: usize) -> (u32, u32) {
    let a = FIRST_LINK_INDEX + 2 * i as u32;
    (a, a + 1)
}

/// The MAC of the veth end with interface index `index`: locally administered, unicast, and
/// unique within a lab (labs never share a segment).
pub fn mac_of(index: u32) -> [u8; 6] {
    let b = index.to_be_bytes();
    [0x02, 0x74, b[0], b[1], b[2], b[3]]
}

/// One permanent neighbour entry: on `ifname`, `ip` is at `mac`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Neighbour {
    /// The interface of the host that holds the entry.
    pub ifname: String,
    /// The other host's address.
    pub ip: IpAddr,
    /// The other host's MAC.
    pub mac: [u8; 6],
}

/// The permanent neighbour entries each host gets: for a star or dumbbell, every end host
/// learns every other end host's addresses (IPv4 and IPv6); otherwise none.
pub fn static_neighbours(spec: &LabSpec) -> BTreeMap<String, Vec<Neighbour>> {
    let mut out: BTreeMap<String, Vec<Neighbour>> = BTreeMap::new();
    if !matches!(spec.topology, Topology::Star | Topology::Dumbbell) {
        return out;
    }
    let ends: Vec<(&str, &str, &[crate::spec::IfAddr], [u8; 6])> = spec
        .links
        .iter()
        .enumerate()
        .flat_map(|(i, l)| {
            let (ia, ib) = end_indexes(i);
            [(&l.a, ia), (&l.b, ib)]
        })
        .filter(|(e, _)| !e.addrs.is_empty() && spec.end_hosts().any(|n| n.name == e.host))
        .map(|(e, index)| {
            (
                e.host.as_str(),
                e.ifname.as_str(),
                e.addrs.as_slice(),
                mac_of(index),
            )
        })
        .collect();
    for (host, ifname, _, _) in &ends {
        let entries =
            ends.iter()
                .filter(|(other, ..)| other != host)
                .flat_map(|(_, _, addrs, mac)| {
                    addrs.iter().map(move |a| Neighbour {
                        ifname: ifname.to_string(),
                        ip: a.addr,
                        mac: *mac,
                    })
                });
        out.entry(host.to_string()).or_default().extend(entries);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::BuiltinOptions;

    fn spec(topology: Topology, hosts: usize) -> LabSpec {
        LabSpec::builtin(&BuiltinOptions {
            name: "nb".into(),
            topology,
            hosts,
            ..BuiltinOptions::default()
        })
        .expect("spec")
    }

    #[test]
    fn every_star_host_knows_every_other_hosts_two_addresses() {
        let s = spec(Topology::Star, 5);
        let n = static_neighbours(&s);
        assert_eq!(n.len(), 5);
        for (host, entries) in &n {
            assert_eq!(entries.len(), 8, "{host}: 4 others x (IPv4, IPv6)");
            assert!(entries.iter().all(|e| e.ifname == "eth0"));
        }
        // h1's entry for h2 carries the MAC h2's own interface is given.
        let h2_index = s
            .links
            .iter()
            .enumerate()
            .find_map(|(i, l)| {
                let (ia, ib) = end_indexes(i);
                (l.a.host == "h2")
                    .then_some(ia)
                    .or((l.b.host == "h2").then_some(ib))
            })
            .expect("h2's link");
        let h2_ip = s
            .links
            .iter()
            .flat_map(|l| [&l.a, &l.b])
            .find(|e| e.host == "h2")
            .map(|e| e.addrs[0].addr)
            .expect("h2's address");
        let entry = n["h1"].iter().find(|e| e.ip == h2_ip).expect("h1 knows h2");
        assert_eq!(entry.mac, mac_of(h2_index));
    }

    #[test]
    fn a_dumbbell_joins_clients_and_servers_in_one_segment() {
        let n = static_neighbours(&spec(Topology::Dumbbell, 3));
        assert_eq!(n.len(), 6);
        assert!(n.values().all(|e| e.len() == 10));
    }

    #[test]
    fn pair_and_path_labs_resolve_as_usual() {
        assert!(static_neighbours(&spec(Topology::Pair, 2)).is_empty());
        assert!(static_neighbours(&spec(Topology::Path, 2)).is_empty());
    }

    #[test]
    fn macs_are_unicast_locally_administered_and_distinct() {
        let s = spec(Topology::Star, 64);
        let mut seen = std::collections::BTreeSet::new();
        for i in 0..s.links.len() {
            let (a, b) = end_indexes(i);
            for m in [mac_of(a), mac_of(b)] {
                assert_eq!(m[0] & 0x03, 0x02, "{m:?}");
                assert!(seen.insert(m));
            }
        }
    }
}
