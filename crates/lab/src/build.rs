//! The kernel steps of building a lab, in order: namespaces, veth pairs (created from the
//! caller's namespace straight into their targets), then each host's own configuration on a thread
//! entered into it (loopback, addresses, bridges, offloads), all hosts in parallel.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::error::{KernelContext, LabError, Result};
use crate::neighbours::{Neighbour, end_indexes, mac_of, static_neighbours};
use crate::netns::{self, NetNs};
use crate::spec::{LabSpec, Offloads};
use tcplab_host::ethtool;
use tcplab_host::rtnl::{self, Rtnl};

/// Creates every namespace of the spec, in order. On error the ones made so far are returned
/// through `made` so the caller's guard removes them.
pub(crate) fn create_namespaces(
    spec: &LabSpec,
    made: &mut BTreeMap<String, Arc<NetNs>>,
) -> Result<()> {
    for node in &spec.nodes {
        let ns = netns::create(&spec.netns_name(&node.name))?;
        made.insert(node.name.clone(), Arc::new(ns));
    }
    Ok(())
}

/// Creates every veth pair from the calling thread's namespace, each end landing directly in its
/// host, up, with the lab MTU.
pub(crate) fn create_links(spec: &LabSpec, nets: &BTreeMap<String, Arc<NetNs>>) -> Result<()> {
    // From inside the lab (its first host), not the machine's namespace: a rootless session
    // may change only namespaces it owns.
    let Some(inside) = spec.nodes.first().map(|n| &nets[&n.name]) else {
        return Ok(());
    };
    let mut rtnl =
        Rtnl::open_in(inside.fd()).kernel_context(|| "opening rtnetlink in the lab".to_string())?;
    for (i, link) in spec.links.iter().enumerate() {
        let a_ns = &nets[&link.a.host];
        let b_ns = &nets[&link.b.host];
        // Distinct indexes for the two ends (see `Rtnl::add_veth`), unique in the lab; the MACs
        // follow from them, so neighbour entries can be written from the spec.
        let (ia, ib) = end_indexes(i);
        rtnl.add_veth(
            (&link.a.ifname, a_ns.fd()),
            (&link.b.ifname, b_ns.fd()),
            spec.mtu,
            (ia, ib),
            (mac_of(ia), mac_of(ib)),
        )
        .kernel_context(|| {
            format!(
                "creating veth {}:{} ─ {}:{}",
                link.a.host, link.a.ifname, link.b.host, link.b.ifname
            )
        })?;
    }
    Ok(())
}

/// Configures every host in parallel, one thread per host entered into its namespace.
pub(crate) fn configure_hosts(spec: &LabSpec, nets: &BTreeMap<String, Arc<NetNs>>) -> Result<()> {
    let neighbours = static_neighbours(spec);
    let neighbours = &neighbours;
    std::thread::scope(|s| {
        let handles: Vec<_> = spec
            .nodes
            .iter()
            .map(|node| {
                let ns = Arc::clone(&nets[&node.name]);
                let name = node.name.as_str();
                s.spawn(move || {
                    netns::enter(ns.fd()).kernel_context(|| format!("entering host {name}"))?;
                    configure_host(spec, name)?;
                    add_neighbours(name, neighbours.get(name).map_or(&[], Vec::as_slice))
                })
            })
            .collect();
        let mut first_error = None;
        for h in handles {
            let r = h.join().unwrap_or_else(|_| {
                Err(LabError::kernel(
                    "configuring a host",
                    std::io::Error::other("configuration thread panicked"),
                ))
            });
            if let Err(e) = r {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    })
}

/// One host's configuration, on a thread already inside its namespace.
fn configure_host(spec: &LabSpec, host: &str) -> Result<()> {
    let mut rtnl = Rtnl::open().kernel_context(|| format!("opening rtnetlink in host {host}"))?;
    let lo = rtnl::ifindex("lo").kernel_context(|| format!("finding lo in host {host}"))?;
    rtnl.set_link(lo, true, None, None)
        .kernel_context(|| format!("bringing lo up in host {host}"))?;
    let ends = spec
        .links
        .iter()
        .flat_map(|l| [&l.a, &l.b])
        .filter(|e| e.host == host);
    let is_end = spec.end_hosts().any(|n| n.name == host);
    let mtu = spec.end_mtu.filter(|_| is_end);
    for end in ends {
        let index = rtnl::ifindex(&end.ifname)
            .kernel_context(|| format!("finding {}:{}", host, end.ifname))?;
        rtnl.set_link(index, true, None, mtu)
            .kernel_context(|| format!("bringing {host}:{} up", end.ifname))?;
        for addr in &end.addrs {
            rtnl.add_addr(index, addr)
                .kernel_context(|| format!("adding {addr} to {host}:{}", end.ifname))?;
        }
        ethtool::set_offloads(&end.ifname, offloads_of(spec, host))
            .kernel_context(|| format!("setting offloads on {host}:{}", end.ifname))?;
        // An emulator without the virtio-net header (AF_XDP, the TX ring) sends frames on as
        // they are, so they need complete checksums. With the header (the default, and GSO
        // mode) partial checksums cross it as they cross a kernel bridge.
        if spec.emulation.is_some() && !crate::emulation::tx_checksum_stays_on(spec.offloads)? {
            ethtool::disable_tx_checksum(&end.ifname).kernel_context(|| {
                format!("turning checksum offload off on {host}:{}", end.ifname)
            })?;
        }
    }
    for bridge in spec.bridges.iter().filter(|b| b.host == host) {
        rtnl.add_bridge(&bridge.name)
            .kernel_context(|| format!("creating bridge {host}:{}", bridge.name))?;
        let br = rtnl::ifindex(&bridge.name)
            .kernel_context(|| format!("finding bridge {host}:{}", bridge.name))?;
        for port in &bridge.ports {
            let index =
                rtnl::ifindex(port).kernel_context(|| format!("finding port {host}:{port}"))?;
            rtnl.set_link(index, true, Some(br), None)
                .kernel_context(|| format!("adding {host}:{port} to bridge {}", bridge.name))?;
        }
        // A bridge has no segmentation of its own worth keeping when its ports have none; GRO on
        // the bridge would re-merge what the ports split. Best effort: not every kernel allows it.
        let _ = ethtool::set_offloads(&bridge.name, spec.offloads);
    }
    Ok(())
}

/// Writes `host`'s permanent neighbour entries (`crate::neighbours` says why), on a thread
/// inside its namespace.
fn add_neighbours(host: &str, entries: &[Neighbour]) -> Result<()> {
    if entries.is_empty() {
        return Ok(());
    }
    let mut rtnl = Rtnl::open().kernel_context(|| format!("opening rtnetlink in host {host}"))?;
    for e in entries {
        let index =
            rtnl::ifindex(&e.ifname).kernel_context(|| format!("finding {host}:{}", e.ifname))?;
        rtnl.add_neighbour(index, e.ip, e.mac)
            .kernel_context(|| format!("adding the neighbour {} to {host}:{}", e.ip, e.ifname))?;
    }
    Ok(())
}

/// Offloads for `host`'s link ends: the lab's, except that an emulator carrying super-packets
/// needs segmentation on both of its ports to send them on whole, and that an end host with a
/// larger MTU than the path (`--end-mtu`) sends no super-packets: the kernel forwards a
/// super-packet across a link of smaller MTU without checking its segments' size, so the
/// mismatch would not be the black hole it is on a real path.
pub(crate) fn offloads_of(spec: &LabSpec, host: &str) -> Offloads {
    let is_end = spec.end_hosts().any(|n| n.name == host);
    match &spec.emulation {
        Some(emu) if emu.host == host && spec.offloads.segments() => Offloads {
            tso: true,
            gso: true,
            ..spec.offloads
        },
        _ if is_end && spec.end_mtu.is_some_and(|m| m > spec.mtu) => Offloads {
            tso: false,
            gso: false,
            ..spec.offloads
        },
        _ => spec.offloads,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{BridgeMode, BuiltinOptions, Topology};

    fn path(end_mtu: Option<u32>) -> LabSpec {
        LabSpec::builtin(&BuiltinOptions {
            name: "mtu".into(),
            topology: Topology::Path,
            end_mtu,
            offloads: Offloads::ALL_ON,
            bridge: BridgeMode::Emu,
            ..BuiltinOptions::default()
        })
        .expect("spec")
    }

    #[test]
    fn end_hosts_of_a_larger_mtu_send_no_super_packets_and_the_emulator_keeps_its() {
        let spec = path(Some(9000));
        for host in ["client", "server"] {
            let o = offloads_of(&spec, host);
            assert!(!o.tso && !o.gso && o.gro, "{host}: {o:?}");
        }
        assert_eq!(offloads_of(&spec, "middle"), Offloads::ALL_ON);
        let same = path(None);
        assert_eq!(offloads_of(&same, "client"), Offloads::ALL_ON);
    }
}
