//! What a lab is, before it exists: hosts, links, bridges, addresses, MTU, offloads and sysctls.
//!
//! Built-in topologies (`pair`, `path`, `dumbbell`, `star`) are generators that expand into the same
//! generic [`LabSpec`] a custom TOML description produces, so the builder, the validator and the
//! registry only ever see one shape. Everything here is pure: no kernel calls.

use std::collections::BTreeSet;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::emulation::EmulationSpec;
use crate::error::{LabError, Result};
use crate::names::validate_ifname;
pub use crate::names::{
    MAX_HOST_NAME, MAX_LAB_NAME, NETNS_PREFIX, netns_name, validate_host_name, validate_lab_name,
};
use tcplab_emu_io::Tuning;
pub use tcplab_host::ifaddr::{IfAddr, in_lab_range};
pub use tcplab_results::facts::{Offloads, OffloadsError};

/// Default MTU of lab links (Ethernet).
pub const DEFAULT_MTU: u32 = 1500;
/// The host name reserved for the star topology's switch namespace.
pub const SWITCH_HOST: &str = "switch";

/// The built-in topologies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Topology {
    /// client ─ server, one veth pair.
    Pair,
    /// client ─ middle ─ server; the middle host bridges its two ports at layer 2 (BalticGrid's lab).
    Path,
    /// c1..cN ─ middle ─ s1..sN; the middle host bridges every port.
    Dumbbell,
    /// h1..hN on one switch (a `switch` namespace holding a bridge), for mesh runs.
    Star,
    /// Hosts, links and bridges listed in a TOML description.
    Custom,
}

impl Topology {
    /// Every accepted name, for error messages.
    pub const NAMES: &'static str = "pair, path, dumbbell, star, custom";

    /// The host names a built-in topology creates, documented and fixed.
    pub fn host_names(self, n: usize) -> Vec<String> {
        match self {
            Topology::Pair => vec!["client".into(), "server".into()],
            Topology::Path => vec!["client".into(), "middle".into(), "server".into()],
            Topology::Dumbbell => {
                let mut names: Vec<String> = (1..=n).map(|i| format!("c{i}")).collect();
                names.push("middle".into());
                names.extend((1..=n).map(|i| format!("s{i}")));
                names
            }
            Topology::Star => (1..=n).map(|i| format!("h{i}")).collect(),
            Topology::Custom => Vec::new(),
        }
    }
}

impl FromStr for Topology {
    type Err = LabError;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "pair" => Ok(Topology::Pair),
            "path" => Ok(Topology::Path),
            "dumbbell" => Ok(Topology::Dumbbell),
            "star" => Ok(Topology::Star),
            "custom" => Ok(Topology::Custom),
            other => Err(LabError::invalid(
                "--topology",
                format!(
                    "unknown topology '{other}'; use one of: {}",
                    Topology::NAMES
                ),
            )),
        }
    }
}

impl fmt::Display for Topology {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            Topology::Pair => "pair",
            Topology::Path => "path",
            Topology::Dumbbell => "dumbbell",
            Topology::Star => "star",
            Topology::Custom => "custom",
        };
        f.write_str(name)
    }
}

/// What a namespace is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// An end host that runs workloads.
    Host,
    /// A host that forwards between its ports (kernel bridge now, the emulator later).
    Middle,
    /// Infrastructure only: the star's switch.
    Switch,
}

/// What forwards frames in the middle host of `path` and `dumbbell`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum BridgeMode {
    /// The emulator when the link has impairments, else the kernel bridge.
    #[default]
    Auto,
    /// Always the kernel bridge (impairments are refused).
    Kernel,
    /// Always tcplab's emulator (with no impairment: how its overhead is measured).
    Emu,
}

impl FromStr for BridgeMode {
    type Err = LabError;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "auto" => Ok(BridgeMode::Auto),
            "kernel" => Ok(BridgeMode::Kernel),
            "emu" => Ok(BridgeMode::Emu),
            other => Err(LabError::invalid(
                "--bridge",
                format!("unknown bridge '{other}'; use auto, kernel or emu"),
            )),
        }
    }
}

/// One namespace of the lab.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeSpec {
    /// The host name, unique in the lab.
    pub name: String,
    /// What it is for.
    pub role: Role,
}

/// One end of a veth link.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndSpec {
    /// The host holding this end.
    pub host: String,
    /// The interface name inside that host.
    pub ifname: String,
    /// Addresses assigned to it (none on bridge ports).
    #[serde(default)]
    pub addrs: Vec<IfAddr>,
}

/// A veth pair between two hosts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkSpec {
    /// One end.
    pub a: EndSpec,
    /// The other end.
    pub b: EndSpec,
}

/// A kernel bridge inside one host joining some of its interfaces.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BridgeSpec {
    /// The host holding the bridge.
    pub host: String,
    /// The bridge's interface name.
    pub name: String,
    /// The interfaces enslaved to it.
    pub ports: Vec<String>,
}

/// Which hosts a sysctl setting applies to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SysctlSetting {
    /// A host name, or `all` for every host of the lab.
    pub host: String,
    /// The key in dotted form, e.g. `net.ipv4.tcp_rmem`.
    pub key: String,
    /// The value as written to /proc/sys.
    pub value: String,
}

impl SysctlSetting {
    /// Parses `HOST:KEY=VALUE` (the `--sysctl` flag).
    pub fn parse(flag: &str, text: &str) -> Result<Self> {
        let usage = "use HOST:KEY=VALUE, e.g. client:net.ipv4.tcp_rmem='4096 131072 8738000' or all:KEY=VALUE";
        let (host, rest) = text
            .split_once(':')
            .ok_or_else(|| LabError::invalid(flag, format!("'{text}' has no host; {usage}")))?;
        let (key, value) = rest
            .split_once('=')
            .ok_or_else(|| LabError::invalid(flag, format!("'{text}' has no value; {usage}")))?;
        if host.is_empty() || key.is_empty() {
            return Err(LabError::invalid(flag, format!("'{text}': {usage}")));
        }
        Ok(SysctlSetting {
            host: host.to_string(),
            key: key.trim().to_string(),
            value: value.trim().to_string(),
        })
    }
}

/// A complete, validated description of a lab.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabSpec {
    /// The lab's name; namespaces are `tcplab-<name>-<host>`.
    pub name: String,
    /// Which topology generated it.
    pub topology: Topology,
    /// Every namespace.
    pub nodes: Vec<NodeSpec>,
    /// Every veth pair.
    pub links: Vec<LinkSpec>,
    /// Every bridge.
    pub bridges: Vec<BridgeSpec>,
    /// MTU of every link.
    pub mtu: u32,
    /// MTU of the end hosts' interfaces when it differs from the links' (`--end-mtu`): an MTU
    /// mismatch. The middle's ports keep `mtu`, so a frame larger than it is dropped silently
    /// on its way in (a veth drops what exceeds its MTU, and layer 2 sends no ICMP): a path-MTU
    /// black hole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_mtu: Option<u32>,
    /// Offloads on every lab interface.
    pub offloads: Offloads,
    /// Sysctls to set at creation, in order.
    pub sysctls: Vec<SysctlSetting>,
    /// Whether host-global sysctls may be changed (journaled, restored on teardown).
    pub allow_host_sysctl: bool,
    /// The emulated link, when the middle host runs the emulator instead of a kernel bridge.
    #[serde(default)]
    pub emulation: Option<EmulationSpec>,
}

/// Options of the built-in topologies, as the flags give them.
#[derive(Debug, Clone)]
pub struct BuiltinOptions {
    /// Lab name.
    pub name: String,
    /// Which topology.
    pub topology: Topology,
    /// Clients/servers of a dumbbell, hosts of a star.
    pub hosts: usize,
    /// Link MTU.
    pub mtu: u32,
    /// MTU of the end hosts' interfaces, when it differs (an MTU mismatch).
    pub end_mtu: Option<u32>,
    /// Offloads.
    pub offloads: Offloads,
    /// Sysctls.
    pub sysctls: Vec<SysctlSetting>,
    /// Opt-in for host-global sysctls.
    pub allow_host_sysctl: bool,
    /// Kernel bridge or emulator in the middle.
    pub bridge: BridgeMode,
    /// Impairments of the middle link (path and dumbbell only).
    pub link: Option<tcplab_emu::LinkConfig>,
    /// The emulator's scheduling knobs, when it runs (the lab file's `[emulator.tuning]`).
    pub tuning: Tuning,
}

impl Default for BuiltinOptions {
    fn default() -> Self {
        BuiltinOptions {
            name: "lab".into(),
            topology: Topology::Pair,
            hosts: 2,
            mtu: DEFAULT_MTU,
            end_mtu: None,
            offloads: Offloads::default(),
            sysctls: Vec::new(),
            allow_host_sysctl: false,
            bridge: BridgeMode::Auto,
            link: None,
            tuning: Tuning::default(),
        }
    }
}

/// The IPv4 address of the `i`-th address slot on the lab's one L2 segment.
fn v4(i: usize) -> IfAddr {
    let [hi, lo] = u16::try_from(i).unwrap_or(u16::MAX).to_be_bytes();
    IfAddr {
        addr: IpAddr::V4(Ipv4Addr::new(198, 18, hi, lo)),
        prefix: 16,
    }
}

/// The IPv6 address of the `i`-th slot: fd00::i.
fn v6(i: usize) -> IfAddr {
    let i = u16::try_from(i).unwrap_or(u16::MAX);
    IfAddr {
        addr: IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, i)),
        prefix: 64,
    }
}

/// A host end `eth0` with the slot's v4 and v6 addresses.
fn host_end(host: &str, slot: usize) -> EndSpec {
    EndSpec {
        host: host.into(),
        ifname: "eth0".into(),
        addrs: vec![v4(slot), v6(slot)],
    }
}

/// A bridge-port end on `hub`, named after the host it leads to.
fn port_end(hub: &str, towards: &str) -> EndSpec {
    EndSpec {
        host: hub.into(),
        ifname: towards.into(),
        addrs: Vec::new(),
    }
}

/// Largest N for dumbbell and star: keeps every address slot in one /16 and the run time sane.
pub const MAX_HOSTS: usize = 64;

impl LabSpec {
    /// Expands a built-in topology. Addresses: all hosts share one L2 segment, 198.18.0.0/16 and
    /// fd00::/64; client/c1..cN/h1..hN take slots 1.., servers take slots 101.. (so `server` is
    /// 198.18.0.101 and `s2` 198.18.0.102), middle and switch have none.
    pub fn builtin(opts: &BuiltinOptions) -> Result<LabSpec> {
        let n = opts.hosts;
        if matches!(opts.topology, Topology::Dumbbell | Topology::Star)
            && !(1..=MAX_HOSTS).contains(&n)
        {
            return Err(LabError::invalid(
                "--hosts",
                format!(
                    "{n} is out of range: a {} needs 1..={MAX_HOSTS} hosts",
                    opts.topology
                ),
            ));
        }
        let nodes_of = |names: Vec<String>| -> Vec<NodeSpec> {
            names
                .into_iter()
                .map(|name| {
                    let role = match name.as_str() {
                        "middle" => Role::Middle,
                        SWITCH_HOST => Role::Switch,
                        _ => Role::Host,
                    };
                    NodeSpec { name, role }
                })
                .collect()
        };
        let emulate = wants_emulator(opts)?;
        let (nodes, mut links, mut bridges) = match opts.topology {
            Topology::Pair => (
                nodes_of(Topology::Pair.host_names(0)),
                vec![LinkSpec {
                    a: host_end("client", 1),
                    b: host_end("server", 101),
                }],
                Vec::new(),
            ),
            Topology::Path => hub_topology(
                nodes_of(Topology::Path.host_names(0)),
                "middle",
                &[("client", 1), ("server", 101)],
            ),
            Topology::Dumbbell => {
                let ends: Vec<(String, usize)> = (1..=n)
                    .map(|i| (format!("c{i}"), i))
                    .chain((1..=n).map(|i| (format!("s{i}"), 100 + i)))
                    .collect();
                let ends: Vec<(&str, usize)> = ends.iter().map(|(h, s)| (h.as_str(), *s)).collect();
                hub_topology(nodes_of(Topology::Dumbbell.host_names(n)), "middle", &ends)
            }
            Topology::Star => {
                let mut names = Topology::Star.host_names(n);
                let ends: Vec<(String, usize)> = names.iter().cloned().zip(1..).collect();
                names.push(SWITCH_HOST.into());
                let ends: Vec<(&str, usize)> = ends.iter().map(|(h, s)| (h.as_str(), *s)).collect();
                hub_topology(nodes_of(names), SWITCH_HOST, &ends)
            }
            Topology::Custom => {
                return Err(LabError::invalid(
                    "--topology",
                    "custom topologies come from a TOML file: use --file FILE",
                ));
            }
        };
        if !emulate && opts.tuning != Tuning::default() {
            return Err(LabError::invalid(
                "emulator.tuning",
                "this lab forwards with the kernel bridge, so no emulator takes the tuning: \
                 set bridge = \"emu\" (or give impairments), or remove [emulator.tuning]",
            ));
        }
        let emulation = emulate.then(|| {
            let link = opts.link.clone().unwrap_or_default();
            let mut emu = split_for_emulator(opts.topology, &mut links, &mut bridges, link);
            emu.tuning = opts.tuning;
            emu
        });
        let spec = LabSpec {
            name: opts.name.clone(),
            topology: opts.topology,
            nodes,
            links,
            bridges,
            mtu: opts.mtu,
            end_mtu: opts.end_mtu,
            offloads: opts.offloads,
            sysctls: opts.sysctls.clone(),
            allow_host_sysctl: opts.allow_host_sysctl,
            emulation,
        };
        spec.validate()?;
        Ok(spec)
    }

    /// The namespace name of one of this lab's hosts.
    pub fn netns_name(&self, host: &str) -> String {
        netns_name(&self.name, host)
    }

    /// Hosts that run workloads (not the middle or the switch).
    pub fn end_hosts(&self) -> impl Iterator<Item = &NodeSpec> {
        self.nodes.iter().filter(|n| n.role == Role::Host)
    }

    /// Checks names, references, addresses and MTU; every error names the field and the fix.
    pub fn validate(&self) -> Result<()> {
        validate_lab_name(&self.name)?;
        for (flag, mtu) in [("--mtu", Some(self.mtu)), ("--end-mtu", self.end_mtu)] {
            if let Some(mtu) = mtu.filter(|m| !(68..=65535).contains(m)) {
                return Err(LabError::invalid(
                    flag,
                    format!("{mtu} is out of range: use 68..=65535 (1500 for Ethernet)"),
                ));
            }
        }
        let mut names = BTreeSet::new();
        for (i, node) in self.nodes.iter().enumerate() {
            validate_host_name(&format!("host[{i}].name"), &node.name)?;
            if !names.insert(node.name.as_str()) {
                return Err(LabError::invalid(
                    format!("host[{i}].name"),
                    format!(
                        "duplicate host name '{}': every host needs its own name",
                        node.name
                    ),
                ));
            }
        }
        let mut ifnames = BTreeSet::new();
        let mut addrs = BTreeSet::new();
        for (i, link) in self.links.iter().enumerate() {
            for (side, end) in [("a", &link.a), ("b", &link.b)] {
                let field = format!("link[{i}].{side}");
                if !names.contains(end.host.as_str()) {
                    return Err(LabError::invalid(
                        format!("{field}.host"),
                        format!(
                            "no host named '{}' in this lab; add it as a [[host]] or use one of: {}",
                            end.host,
                            names.iter().copied().collect::<Vec<_>>().join(", ")
                        ),
                    ));
                }
                validate_ifname(&format!("{field}.ifname"), &end.ifname)?;
                if !ifnames.insert((end.host.clone(), end.ifname.clone())) {
                    return Err(LabError::invalid(
                        format!("{field}.ifname"),
                        format!(
                            "host '{}' already has an interface '{}'; give each end its own ifname",
                            end.host, end.ifname
                        ),
                    ));
                }
                for a in &end.addrs {
                    if !in_lab_range(a.addr) {
                        return Err(LabError::invalid(
                            format!("{field}.addrs"),
                            format!("{a} is outside the lab ranges; use 198.18.0.0/15 or fd00::/8"),
                        ));
                    }
                    if !addrs.insert(a.addr) {
                        return Err(LabError::invalid(
                            format!("{field}.addrs"),
                            format!("address {} is used twice; give each end its own", a.addr),
                        ));
                    }
                }
            }
        }
        for (i, bridge) in self.bridges.iter().enumerate() {
            let field = format!("bridge[{i}]");
            if !names.contains(bridge.host.as_str()) {
                return Err(LabError::invalid(
                    format!("{field}.host"),
                    format!(
                        "no host named '{}' in this lab; add it as a [[host]] or use one of: {}",
                        bridge.host,
                        names.iter().copied().collect::<Vec<_>>().join(", ")
                    ),
                ));
            }
            validate_ifname(&format!("{field}.name"), &bridge.name)?;
            for port in &bridge.ports {
                if !ifnames.contains(&(bridge.host.clone(), port.clone())) {
                    return Err(LabError::invalid(
                        format!("{field}.ports"),
                        format!(
                            "host '{}' has no link interface '{port}'; use the ifname of one of its link ends",
                            bridge.host
                        ),
                    ));
                }
            }
        }
        if let Some(emu) = &self.emulation {
            for port in &emu.ports {
                if !ifnames.contains(&(emu.host.clone(), port.clone())) {
                    return Err(LabError::invalid(
                        "emulation.ports",
                        format!(
                            "host '{}' has no link interface '{port}'; use the ifname of one of its link ends",
                            emu.host
                        ),
                    ));
                }
            }
            // Any impairment goes with offloads on too: where an element acts on single
            // packets (loss, duplicate, reorder, corrupt), the emulator cuts TSO/GSO
            // super-packets into their wire segments (tcplab_emu_io::segment).
            emu.link
                .validate()
                .map_err(|e| LabError::invalid("impairments", e.to_string()))?;
        }
        for (i, s) in self.sysctls.iter().enumerate() {
            if s.host != "all" && !names.contains(s.host.as_str()) {
                return Err(LabError::invalid(
                    format!("sysctl[{i}]"),
                    format!(
                        "no host '{}' in this lab; use one of: all, {}",
                        s.host,
                        names.iter().copied().collect::<Vec<_>>().join(", ")
                    ),
                ));
            }
            tcplab_host::sysctl::validate_key(&s.key)?;
        }
        Ok(())
    }
}

/// Decides between the kernel bridge and the emulator, refusing impairments where nothing can
/// apply them.
fn wants_emulator(opts: &BuiltinOptions) -> Result<bool> {
    let impaired = opts.link.as_ref().is_some_and(|l| !l.is_transparent());
    let has_middle = matches!(opts.topology, Topology::Path | Topology::Dumbbell);
    match opts.bridge {
        _ if (impaired || opts.bridge == BridgeMode::Emu) && !has_middle => Err(LabError::invalid(
            if impaired {
                "--delay/--loss/--rate"
            } else {
                "--bridge"
            },
            format!(
                "the {} topology has no middle host to emulate a link in; use --topology path or dumbbell",
                opts.topology
            ),
        )),
        BridgeMode::Kernel if impaired => Err(LabError::invalid(
            "--bridge",
            "the kernel bridge cannot apply impairments (this kernel has no netem); use --bridge emu or auto",
        )),
        BridgeMode::Kernel => Ok(false),
        BridgeMode::Emu => Ok(true),
        BridgeMode::Auto => Ok(impaired),
    }
}

/// Rewires the middle host for the emulator. Path: the emulator joins the `client` and `server`
/// ports directly (no kernel bridge). Dumbbell: clients share bridge `brl`, servers `brr`, and
/// two internal veth pairs (`brl`'s port `left` ─ `emul`, `brr`'s port `right` ─ `emur`) hand every
/// frame crossing the middle to the emulator between `emul` and `emur`: the bottleneck link.
fn split_for_emulator(
    topology: Topology,
    links: &mut Vec<LinkSpec>,
    bridges: &mut Vec<BridgeSpec>,
    link: tcplab_emu::LinkConfig,
) -> EmulationSpec {
    bridges.clear();
    if topology != Topology::Dumbbell {
        return EmulationSpec {
            host: "middle".into(),
            ports: ["client".into(), "server".into()],
            link,
            tuning: Tuning::default(),
        };
    }
    let (mut left, mut right): (Vec<String>, Vec<String>) = links
        .iter()
        .map(|l| l.a.host.clone())
        .partition(|h| h.starts_with('c'));
    let internal = |a: &str, b: &str| LinkSpec {
        a: port_end("middle", a),
        b: port_end("middle", b),
    };
    links.push(internal("left", "emul"));
    links.push(internal("right", "emur"));
    left.push("left".into());
    right.push("right".into());
    bridges.push(BridgeSpec {
        host: "middle".into(),
        name: "brl".into(),
        ports: left,
    });
    bridges.push(BridgeSpec {
        host: "middle".into(),
        name: "brr".into(),
        ports: right,
    });
    EmulationSpec {
        host: "middle".into(),
        ports: ["emul".into(), "emur".into()],
        link,
        tuning: Tuning::default(),
    }
}

/// Builds a hub-and-spoke topology: each `(host, slot)` gets a link to `hub`, whose ports are
/// bridged together in `br0`.
fn hub_topology(
    nodes: Vec<NodeSpec>,
    hub: &str,
    ends: &[(&str, usize)],
) -> (Vec<NodeSpec>, Vec<LinkSpec>, Vec<BridgeSpec>) {
    let links: Vec<LinkSpec> = ends
        .iter()
        .map(|(host, slot)| LinkSpec {
            a: host_end(host, *slot),
            b: port_end(hub, host),
        })
        .collect();
    let bridge = BridgeSpec {
        host: hub.into(),
        name: "br0".into(),
        ports: ends.iter().map(|(h, _)| h.to_string()).collect(),
    };
    (nodes, links, vec![bridge])
}
