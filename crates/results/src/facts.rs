//! The facts that explain a measurement: kernel, timer frequency, congestion control, CPUs, and
//! each lab host's relevant sysctls and interface settings. Every result carries them, so a figure
//! read months later still says what produced it. `tcplab_lab::facts` reads them from the
//! machine and the lab's hosts.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

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

/// What decides how late a woken thread runs: the emulator's schedule and every latency tail
/// depend on it (docs/lab.md, keep-awake).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Scheduling {
    /// The kernel's preemption model: `none`, `voluntary`, `full`, `lazy` or `rt` when known,
    /// else what can be told (`dynamic (mode unreadable)`). Under `none` a woken real-time
    /// thread waits for the running task to leave the kernel.
    pub preemption: String,
    /// How it was found (debugfs `sched/preempt`, the `preempt=` boot option, or `uname -v`).
    pub preemption_source: String,
    /// The cpuidle driver (`none`: idle CPUs halt, and a VM's halted vCPU wakes late).
    pub cpuidle_driver: Option<String>,
    /// `kernel.sched_rt_runtime_us` (RT throttling: real-time threads get this much per second).
    pub rt_runtime_us: Option<i64>,
    /// `kernel.sched_autogroup_enabled` (CPU shared per session first, then per task).
    pub autogroup: Option<bool>,
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
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
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
    /// Preemption, idle and CPU-sharing settings (absent in results stored before they were
    /// recorded).
    #[serde(default)]
    pub scheduling: Scheduling,
    /// Lab hosts by name (empty when measuring without a lab).
    pub hosts: BTreeMap<String, HostFacts>,
    /// Whether labs can be built without root here, and whether this one was (absent in
    /// results stored before it was recorded).
    #[serde(default)]
    pub rootless: Rootless,
    /// `TCPLAB_EMU_IO` as it was set: an override of the emulator's I/O options (docs/lab.md,
    /// "The emulator's tuning") that changes what every emulated lab measures, so a result made
    /// under one says so. Absent when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emulator_override: Option<String>,
}

/// Rootless labs: an unprivileged user's labs live in a user namespace it owns, where the
/// emulator has no real-time priority unless RLIMIT_RTPRIO grants it (docs/rootless.md).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Rootless {
    /// An unprivileged user may create a user namespace with network namespaces in it.
    pub allowed: bool,
    /// Why not, one reason per setting or refusal found, each with what would allow it.
    pub why_not: Vec<String>,
    /// This process ran inside such a user namespace (its labs were rootless).
    pub this_process: bool,
}

/// Segmentation and receive offloads on lab links. Off by default so that what crosses a link (and
/// later the emulator) is real MTU-sized packets, not 64 KB super-frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Offloads {
    /// TCP segmentation offload.
    #[serde(default)]
    pub tso: bool,
    /// Generic segmentation offload.
    #[serde(default)]
    pub gso: bool,
    /// Generic receive offload.
    #[serde(default)]
    pub gro: bool,
}

impl Offloads {
    /// Whether super-packets (TSO/GSO) can cross the lab's links: the emulator then runs in
    /// its GSO-aware mode.
    pub fn segments(&self) -> bool {
        self.tso || self.gso
    }

    /// Every offload on.
    pub const ALL_ON: Offloads = Offloads {
        tso: true,
        gso: true,
        gro: true,
    };

    /// Parses `--offloads`: `on`, `off`, or a list such as `tso=on,gro=off` applied over `off`.
    /// What is echoed back is escaped and cut ([`tcplab_emu::error::shown`]): the text may come
    /// from a file.
    pub fn parse(text: &str) -> Result<Self, OffloadsError> {
        use tcplab_emu::error::shown;
        match text {
            "on" => return Ok(Offloads::ALL_ON),
            "off" => return Ok(Offloads::default()),
            _ => {}
        }
        let mut out = Offloads::default();
        for item in text.split(',') {
            let (name, value) = item.split_once('=').ok_or_else(|| OffloadsError {
                problem: format!("'{}': use on, off or tso=on,gso=off,gro=on", shown(item)),
            })?;
            let value = match value {
                "on" | "true" | "1" => true,
                "off" | "false" | "0" => false,
                _ => {
                    return Err(OffloadsError {
                        problem: format!("'{}' for {}: use on or off", shown(value), shown(name)),
                    });
                }
            };
            match name {
                "tso" => out.tso = value,
                "gso" => out.gso = value,
                "gro" => out.gro = value,
                _ => {
                    return Err(OffloadsError {
                        problem: format!("unknown offload '{}'; use tso, gso or gro", shown(name)),
                    });
                }
            }
        }
        Ok(out)
    }
}

/// `--offloads` that [`Offloads::parse`] cannot read (the lab's `LabError::Invalid` for the
/// flag).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--offloads: {problem}")]
pub struct OffloadsError {
    /// What is wrong and how to fix it.
    pub problem: String,
}
