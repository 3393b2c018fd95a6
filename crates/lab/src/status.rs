//! `tcplab lab status`: what each lab is, read back from the kernel rather than from the spec, so
//! it shows what really exists (interfaces, addresses, MTU, offloads, bridge membership).

use serde::Serialize;

use crate::error::{KernelContext, Result};
use crate::lab::Lab;
use crate::spec::{IfAddr, Offloads, Role, Topology};
use crate::state::{Phase, ProcessId, Record};
use tcplab_host::ethtool;
use tcplab_host::rtnl::Rtnl;

/// One interface as the kernel reports it.
#[derive(Debug, Clone, Serialize)]
pub struct InterfaceStatus {
    /// Name.
    pub name: String,
    /// veth, bridge, ...
    pub kind: Option<String>,
    /// MTU.
    pub mtu: u32,
    /// Administratively up.
    pub up: bool,
    /// Carrier present.
    pub carrier: bool,
    /// The bridge it is a port of.
    pub bridge: Option<String>,
    /// Addresses (lab ranges and link-local alike).
    pub addrs: Vec<IfAddr>,
    /// Offloads, where the driver reports them.
    pub offloads: Option<Offloads>,
}

/// One host.
#[derive(Debug, Clone, Serialize)]
pub struct HostStatus {
    /// Host name.
    pub name: String,
    /// Host, middle or switch.
    pub role: Role,
    /// `ip netns` name.
    pub netns: String,
    /// Its interfaces other than loopback.
    pub interfaces: Vec<InterfaceStatus>,
}

/// One lab.
#[derive(Debug, Clone, Serialize)]
pub struct LabStatus {
    /// Lab name.
    pub name: String,
    /// Topology.
    pub topology: Topology,
    /// Building or ready.
    pub phase: Phase,
    /// Owner process (absent for persistent labs).
    pub owner: Option<ProcessId>,
    /// Whether the owner is alive (absent for persistent labs).
    pub owner_alive: Option<bool>,
    /// Creation time, Unix ms.
    pub created_unix_ms: u64,
    /// MTU of lab links.
    pub mtu: u32,
    /// Hosts, with what the kernel reports.
    pub hosts: Vec<HostStatus>,
}

/// Reads a lab's state from its record and, for a ready lab, from inside each host.
pub fn of(record: &Record, lab: Option<&Lab>) -> Result<LabStatus> {
    let mut hosts = Vec::new();
    if let Some(lab) = lab {
        for host in lab.hosts() {
            let interfaces = host.run(read_interfaces)??;
            hosts.push(HostStatus {
                name: host.name().to_string(),
                role: host.role(),
                netns: host.netns_name().to_string(),
                interfaces,
            });
        }
    }
    Ok(LabStatus {
        name: record.spec.name.clone(),
        topology: record.spec.topology,
        phase: record.phase,
        owner: record.owner,
        owner_alive: record.owner.map(|o| o.is_alive()),
        created_unix_ms: record.created_unix_ms,
        mtu: record.spec.mtu,
        hosts,
    })
}

/// Interfaces of the calling thread's namespace, loopback excluded.
pub fn read_interfaces() -> Result<Vec<InterfaceStatus>> {
    let mut rtnl = Rtnl::open().kernel_context(|| "opening rtnetlink".to_string())?;
    let links = rtnl
        .links()
        .kernel_context(|| "listing links".to_string())?;
    let addrs = rtnl
        .addrs()
        .kernel_context(|| "listing addresses".to_string())?;
    let name_of = |index: u32| {
        links
            .iter()
            .find(|l| l.index == index)
            .map(|l| l.name.clone())
    };
    Ok(links
        .iter()
        .filter(|l| l.name != "lo")
        .map(|l| InterfaceStatus {
            name: l.name.clone(),
            kind: l.kind.clone(),
            mtu: l.mtu,
            up: l.up,
            carrier: l.carrier,
            bridge: l.controller.and_then(name_of),
            addrs: addrs
                .iter()
                .filter(|(i, _)| *i == l.index)
                .map(|(_, a)| *a)
                .collect(),
            offloads: ethtool::get_offloads(&l.name).ok(),
        })
        .collect())
}
