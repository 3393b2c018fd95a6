//! The facts that explain a measurement, read from this machine: kernel, timer frequency,
//! congestion control, CPUs, scheduling, and the calling thread's network namespace as a host
//! (its relevant sysctls and interface settings). Every result carries them, so a figure read
//! months later still says what produced it. A lab adds its hosts and whether rootless labs are
//! possible here (`tcplab_lab::facts`); an agent answers with these (`Ask::Facts`).

use std::collections::BTreeMap;
use std::sync::OnceLock;

use crate::error::{HostError, Result};
use crate::rtnl::Rtnl;
use crate::{ethtool, sysctl};
pub use tcplab_results::facts::*;

/// The build that runs, as the binary names it (set once by the binary at start).
static BUILD: OnceLock<&'static str> = OnceLock::new();

/// Names the build in every fact set from now on: the binary's version with its commit and
/// whether the tree was modified (`0.1.0 (1e274bd0c3a2, modified)`, from its build script), so a
/// result says which code produced it. Without it (a library's own tests) the package version.
pub fn set_build(stamp: &'static str) {
    let _ = BUILD.set(stamp);
}

/// The build that runs: the stamp given to [`set_build`], else the package version.
pub fn build() -> &'static str {
    BUILD.get().copied().unwrap_or(env!("CARGO_PKG_VERSION"))
}

/// Facts about the machine alone. Whether unprivileged users may build labs here (`rootless`)
/// is left at its default: the lab's probe says (`tcplab_lab::facts::machine`).
pub fn machine() -> Facts {
    let uname = rustix::system::uname();
    Facts {
        tcplab_version: build().to_string(),
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
        scheduling: scheduling(
            &uname.release().to_string_lossy(),
            &uname.version().to_string_lossy(),
        ),
        hosts: BTreeMap::new(),
        rootless: Rootless::default(),
        emulator_override: None,
    }
}

/// The calling thread's network namespace as a host: its per-namespace sysctls
/// ([`HOST_SYSCTLS`] and `extra`, those this kernel has) and interfaces. What an agent reports
/// of the host it serves from, and what a lab reports of each of its hosts.
pub fn this_host(extra: &[String]) -> Result<HostFacts> {
    let keys = HOST_SYSCTLS
        .iter()
        .copied()
        .chain(extra.iter().map(String::as_str));
    Ok(HostFacts {
        sysctls: read_keys(keys),
        interfaces: interfaces()?,
    })
}

/// The calling thread's namespace's interfaces, loopback excluded, in the kernel's order: name,
/// MTU and offloads (where the driver reports them).
fn interfaces() -> Result<Vec<InterfaceFacts>> {
    let kernel = |context: &str| {
        let context = context.to_string();
        move |e| HostError::kernel(context, e)
    };
    let links = Rtnl::open()
        .map_err(kernel("opening rtnetlink"))?
        .links()
        .map_err(kernel("listing links"))?;
    Ok(links
        .into_iter()
        .filter(|l| l.name != "lo")
        .map(|l| InterfaceFacts {
            offloads: ethtool::get_offloads(&l.name).ok(),
            name: l.name,
            mtu: l.mtu,
        })
        .collect())
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

/// CONFIG_HZ from the kernel's configuration, when a readable copy exists.
fn configured_hz(release: &str) -> Option<u32> {
    kernel_config(release)?
        .lines()
        .find_map(|l| l.strip_prefix("CONFIG_HZ="))
        .and_then(|v| v.trim().parse().ok())
}

/// The kernel's build configuration: /boot/config-RELEASE as distributions ship it, else the
/// kernel's own gzipped copy in /proc/config.gz (CONFIG_IKCONFIG_PROC).
fn kernel_config(release: &str) -> Option<String> {
    use std::io::Read;
    if let Ok(text) = std::fs::read_to_string(format!("/boot/config-{release}")) {
        return Some(text);
    }
    let gz = std::fs::File::open("/proc/config.gz").ok()?;
    let mut text = String::new();
    flate2::read::GzDecoder::new(gz)
        .read_to_string(&mut text)
        .ok()?;
    Some(text)
}

/// The preemption model a kernel built with `text` boots in (a dynamic kernel's default,
/// before any `preempt=` option or debugfs change). Pure.
pub fn config_preemption(text: &str) -> Option<&'static str> {
    let set = |key: &str| text.lines().any(|l| l == format!("{key}=y"));
    [
        ("CONFIG_PREEMPT_RT", "rt"),
        ("CONFIG_PREEMPT_NONE", "none"),
        ("CONFIG_PREEMPT_VOLUNTARY", "voluntary"),
        ("CONFIG_PREEMPT_LAZY", "lazy"),
        ("CONFIG_PREEMPT", "full"),
    ]
    .into_iter()
    .find_map(|(key, mode)| set(key).then_some(mode))
}

/// Reads the scheduling facts; each one is optional (debugfs is often unmounted or locked).
fn scheduling(release: &str, uname_version: &str) -> Scheduling {
    let read = |p: &str| std::fs::read_to_string(p).ok();
    let (mut preemption, mut preemption_source) = preemption(
        read("/sys/kernel/debug/sched/preempt").as_deref(),
        read("/proc/cmdline").as_deref().unwrap_or(""),
        uname_version,
    );
    if preemption.starts_with("dynamic") {
        if let Some(mode) = kernel_config(release)
            .as_deref()
            .and_then(config_preemption)
        {
            preemption = mode.to_string();
            preemption_source = "kernel config default (no preempt= option)".into();
        }
    }
    Scheduling {
        preemption,
        preemption_source,
        cpuidle_driver: read("/sys/devices/system/cpu/cpuidle/current_driver")
            .map(|s| s.trim().to_string()),
        rt_runtime_us: read("/proc/sys/kernel/sched_rt_runtime_us")
            .and_then(|s| s.trim().parse().ok()),
        autogroup: read("/proc/sys/kernel/sched_autogroup_enabled").map(|s| s.trim() == "1"),
    }
}

/// The preemption model and where it was read: debugfs names the active mode in parentheses
/// (`none voluntary (full) lazy`); else a `preempt=` boot option; else `uname -v`, which tells
/// RT and non-dynamic builds apart but not a dynamic kernel's mode. Pure.
pub fn preemption(debugfs: Option<&str>, cmdline: &str, uname_version: &str) -> (String, String) {
    let active = debugfs.and_then(|s| {
        let start = s.find('(')? + 1;
        let end = start + s[start..].find(')')?;
        Some(s[start..end].to_string())
    });
    if let Some(mode) = active {
        return (mode, "debugfs sched/preempt".into());
    }
    if let Some(mode) = cmdline
        .split_whitespace()
        .find_map(|w| w.strip_prefix("preempt="))
    {
        return (mode.to_string(), "boot option preempt=".into());
    }
    let words: Vec<&str> = uname_version.split_whitespace().collect();
    let mode = if words.contains(&"PREEMPT_RT") {
        "rt"
    } else if words.contains(&"PREEMPT_DYNAMIC") {
        "dynamic (mode unreadable)"
    } else if words.contains(&"PREEMPT") {
        "full"
    } else {
        "none or voluntary"
    };
    (mode.to_string(), "uname -v".into())
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

#[cfg(test)]
mod tests {
    use super::{config_preemption, preemption};

    #[test]
    fn a_dynamic_kernel_boots_in_its_configured_model() {
        let cfg = "CONFIG_PREEMPT_BUILD=y\nCONFIG_PREEMPT_NONE=y\n# CONFIG_PREEMPT is not set\nCONFIG_PREEMPT_DYNAMIC=y\n";
        assert_eq!(config_preemption(cfg), Some("none"));
        assert_eq!(
            config_preemption("CONFIG_PREEMPT=y\nCONFIG_PREEMPT_DYNAMIC=y"),
            Some("full")
        );
        assert_eq!(
            config_preemption("CONFIG_PREEMPT_RT=y\nCONFIG_PREEMPT=y"),
            Some("rt")
        );
        assert_eq!(config_preemption("# nothing"), None);
    }

    #[test]
    fn the_preemption_model_comes_from_the_best_source_there_is() {
        let (m, src) = preemption(
            Some("none voluntary (full) lazy\n"),
            "preempt=none",
            "#1 SMP",
        );
        assert_eq!(
            (m.as_str(), src.as_str()),
            ("full", "debugfs sched/preempt")
        );
        let (m, src) = preemption(None, "quiet preempt=voluntary ro", "#1 SMP PREEMPT_DYNAMIC");
        assert_eq!(
            (m.as_str(), src.as_str()),
            ("voluntary", "boot option preempt=")
        );
        let (m, _) = preemption(None, "quiet", "#1 SMP PREEMPT_DYNAMIC @0");
        assert_eq!(m, "dynamic (mode unreadable)");
        assert_eq!(preemption(None, "", "#1 SMP PREEMPT_RT").0, "rt");
        assert_eq!(preemption(None, "", "#1 SMP PREEMPT Tue").0, "full");
        assert_eq!(preemption(None, "", "#1 SMP").0, "none or voluntary");
        assert_eq!(
            preemption(Some("garbage"), "", "#1 SMP").0,
            "none or voluntary"
        );
    }
}
