//! The facts that explain a measurement: kernel, timer frequency, congestion control, CPUs, and
//! each lab host's relevant sysctls and interface settings. Every result carries them, so a figure
//! read months later still says what produced it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::lab::Lab;
use crate::spec::Offloads;
use crate::sysctl;

/// Per-namespace TCP/IP sysctls that change what workloads measure; recorded for every host.
pub const HOST_SYSCTLS: &[&str] = &[
    "net.ipv4.tcp_congestion_control",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
    "net.ipv4.tcp_autocorking",
    "net.ipv4.tcp_rto_min_us",
    "net.ipv4.tcp_notsent_lowat",
    "net.ipv4.tcp_no_metrics_save",
    "net.ipv4.tcp_slow_start_after_idle",
    "net.ipv4.tcp_timestamps",
    "net.ipv4.tcp_sack",
    "net.ipv4.tcp_window_scaling",
    "net.ipv4.tcp_ecn",
    "net.ipv4.tcp_tw_reuse",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_syn_retries",
    "net.ipv4.tcp_max_syn_backlog",
    "net.ipv4.ip_local_port_range",
    "net.core.somaxconn",
];

/// Machine-wide sysctls (read-only inside namespaces) that bound what hosts can ask for.
pub const MACHINE_SYSCTLS: &[&str] = &[
    "net.core.rmem_max",
    "net.core.wmem_max",
    "net.core.rmem_default",
    "net.core.wmem_default",
    "net.ipv4.tcp_mem",
    "net.core.netdev_max_backlog",
    "net.core.default_qdisc",
];

/// How the timer frequency was found.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Hz {
    /// Ticks per second.
    pub hz: u32,
    /// The measured tick length in nanoseconds.
    pub tick_ns: u64,
    /// How: `clock_getres(CLOCK_MONOTONIC_COARSE)`, whose resolution is one jiffy.
    pub method: String,
    /// CONFIG_HZ from the kernel config, when a readable copy exists.
    pub configured: Option<u32>,
}

/// CPUs.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Cpu {
    /// Online CPUs.
    pub count: usize,
    /// Model name from /proc/cpuinfo.
    pub model: String,
}

/// Congestion control as the host machine offers it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct CongestionControl {
    /// Algorithms available.
    pub available: Vec<String>,
    /// The host machine's default (a new namespace inherits it).
    pub default: String,
}

/// One interface of a lab host.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct InterfaceFacts {
    /// Name.
    pub name: String,
    /// MTU.
    pub mtu: u32,
    /// Offloads, where readable.
    pub offloads: Option<Offloads>,
}

/// One lab host.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct HostFacts {
    /// [`HOST_SYSCTLS`] (those this kernel has) plus any key set on the lab.
    pub sysctls: BTreeMap<String, String>,
    /// Interfaces other than loopback.
    pub interfaces: Vec<InterfaceFacts>,
}

/// Everything recorded.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Facts {
    /// tcplab's version.
    pub tcplab_version: String,
    /// `uname -r`.
    pub kernel_release: String,
    /// `uname -v`.
    pub kernel_version: String,
    /// Machine architecture.
    pub machine: String,
    /// Timer frequency.
    pub hz: Hz,
    /// CPUs.
    pub cpu: Cpu,
    /// Congestion control.
    pub congestion_control: CongestionControl,
    /// [`MACHINE_SYSCTLS`] as the host machine has them.
    pub machine_sysctls: BTreeMap<String, String>,
    /// Lab hosts by name (empty when measuring without a lab).
    pub hosts: BTreeMap<String, HostFacts>,
}

impl Facts {
    /// Facts about the machine alone.
    pub fn machine() -> Facts {
        let uname = rustix::system::uname();
        Facts {
            tcplab_version: env!("CARGO_PKG_VERSION").to_string(),
            kernel_release: uname.release().to_string_lossy().into_owned(),
            kernel_version: uname.version().to_string_lossy().into_owned(),
            machine: uname.machine().to_string_lossy().into_owned(),
            hz: measure_hz(&uname.release().to_string_lossy()),
            cpu: cpu(),
            congestion_control: CongestionControl {
                available: sysctl::read("net.ipv4.tcp_available_congestion_control")
                    .map(|s| s.split_whitespace().map(str::to_string).collect())
                    .unwrap_or_default(),
                default: sysctl::read("net.ipv4.tcp_congestion_control").unwrap_or_default(),
            },
            machine_sysctls: read_keys(MACHINE_SYSCTLS.iter().copied()),
            hosts: BTreeMap::new(),
        }
    }

    /// Facts about the machine and every host of a lab.
    pub fn collect(lab: &Lab) -> Result<Facts> {
        let mut facts = Facts::machine();
        let extra: Vec<String> = lab.spec().sysctls.iter().map(|s| s.key.clone()).collect();
        for host in lab.hosts() {
            let extra = extra.clone();
            let host_facts = host.run(move || -> Result<HostFacts> {
                let keys = HOST_SYSCTLS
                    .iter()
                    .copied()
                    .chain(extra.iter().map(String::as_str));
                let interfaces = crate::status::read_interfaces()?
                    .into_iter()
                    .map(|i| InterfaceFacts {
                        name: i.name,
                        mtu: i.mtu,
                        offloads: i.offloads,
                    })
                    .collect();
                Ok(HostFacts {
                    sysctls: read_keys(keys),
                    interfaces,
                })
            })??;
            facts.hosts.insert(host.name().to_string(), host_facts);
        }
        Ok(facts)
    }
}

/// Reads the keys this kernel has, skipping the rest (the facts list is a superset).
fn read_keys<'a>(keys: impl Iterator<Item = &'a str>) -> BTreeMap<String, String> {
    keys.filter_map(|k| sysctl::read(k).ok().map(|v| (k.to_string(), v)))
        .collect()
}

/// The jiffy length is the resolution of CLOCK_MONOTONIC_COARSE, which advances once per tick.
fn measure_hz(release: &str) -> Hz {
    let res = rustix::time::clock_getres(rustix::time::ClockId::MonotonicCoarse);
    let tick_ns = (res.tv_sec as u64) * 1_000_000_000 + res.tv_nsec as u64;
    let hz = (1_000_000_000 + tick_ns / 2)
        .checked_div(tick_ns)
        .map_or(0, |hz| hz as u32);
    Hz {
        hz,
        tick_ns,
        method: "clock_getres(CLOCK_MONOTONIC_COARSE)".into(),
        configured: configured_hz(release),
    }
}

/// CONFIG_HZ from /boot/config-RELEASE when the distribution ships it uncompressed.
fn configured_hz(release: &str) -> Option<u32> {
    let text = std::fs::read_to_string(format!("/boot/config-{release}")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("CONFIG_HZ="))
        .and_then(|v| v.trim().parse().ok())
}

fn cpu() -> Cpu {
    let count = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    Cpu { count, model }
}
