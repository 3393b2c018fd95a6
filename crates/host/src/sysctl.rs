//! Sysctls of the calling thread's network namespace: keys checked, read, written and read
//! back. Which may be changed, and how a change is undone, is the caller's: a lab sets
//! per-namespace keys per host and journals host-global ones (net.core.rmem_max and friends are
//! read-only inside a namespace on 6.x) before changing them; an agent holds keys under a lease.
//!
//! All reads and writes act on the *calling thread's* network namespace: procfs resolves
//! /proc/sys/net against the current task's namespace, so a thread entered into a host sees that
//! host's values.

use std::io;
use std::path::PathBuf;

use crate::error::{HostError, Result};

/// Whether a key can be set inside a namespace or only on the whole machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Present and writable inside the namespace: changing it affects that host only.
    Namespace,
    /// Absent or read-only inside a namespace but present on the host: machine-wide.
    Global,
}

/// Checks a key's spelling: dotted (`net.ipv4.tcp_rmem`) or slashed (`net/ipv4/tcp_rmem`, for
/// interface names containing dots), no `..`, no leading `/`.
pub fn validate_key(key: &str) -> Result<()> {
    let ok = !key.is_empty()
        && !key.starts_with(['/', '.'])
        && !key.contains("..")
        && !key.contains("//")
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'/'));
    if ok {
        Ok(())
    } else {
        Err(HostError::invalid(
            "sysctl key",
            format!("'{key}' is not a sysctl key; write it like net.ipv4.tcp_rmem"),
        ))
    }
}

/// The /proc/sys path of a key.
pub fn key_path(key: &str) -> PathBuf {
    let rel = if key.contains('/') {
        key.to_string()
    } else {
        key.replace('.', "/")
    };
    PathBuf::from("/proc/sys").join(rel)
}

/// Whitespace-insensitive form of a value, for comparing what was written with what reads back
/// (`tcp_rmem` reads back tab-separated).
pub fn normalize(value: &str) -> String {
    value.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Reads a key in the calling thread's namespace.
pub fn read(key: &str) -> Result<String> {
    validate_key(key)?;
    let path = key_path(key);
    match std::fs::read_to_string(&path) {
        Ok(v) => Ok(normalize(&v)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(HostError::UnknownSysctl {
            key: key.into(),
            path,
        }),
        Err(e) => Err(HostError::kernel(format!("reading sysctl {key}"), e)),
    }
}

/// The per-namespace congestion control key, whose refusals have causes of their own.
const CONGESTION_KEY: &str = "net.ipv4.tcp_congestion_control";
/// What a namespace other than the host's may choose (host-global, read-only in a namespace).
const ALLOWED_CC: &str = "net.ipv4.tcp_allowed_congestion_control";
/// What the kernel has (built in or loaded).
const AVAILABLE_CC: &str = "net.ipv4.tcp_available_congestion_control";

/// A space-separated list sysctl, empty when unreadable.
fn read_list(key: &str) -> Vec<String> {
    read(key)
        .map(|v| v.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

/// Why the kernel refused `wanted` as a namespace's congestion control, with the fixes: a
/// namespace other than the host's may only pick one listed in the host's
/// tcp_allowed_congestion_control (EPERM), and none the kernel lacks (ENOENT).
pub fn congestion_refusal(wanted: &str, allowed: &[String], available: &[String]) -> String {
    let list = |v: &[String]| {
        if v.is_empty() {
            "unknown".to_string()
        } else {
            v.join(" ")
        }
    };
    if !available.is_empty() && !available.iter().any(|a| a == wanted) {
        return format!(
            "this kernel has no congestion control '{wanted}' (available: {}); load its module on the host (modprobe tcp_{wanted}) or pick an available one",
            list(available)
        );
    }
    let mut widened = allowed.to_vec();
    widened.push(wanted.to_string());
    format!(
        "a network namespace may only choose a congestion control listed in the host's {ALLOWED_CC} ({}), and '{wanted}' is not; set it per socket instead with TCP_CONGESTION (root; tcplab --cc {wanted}), or allow it on the host: sysctl -w {ALLOWED_CC}=\"{}\" (host-wide)",
        list(allowed),
        widened.join(" ")
    )
}

/// Whether `key` is writable in the calling thread's namespace. `None` when it does not exist.
pub fn writable_here(key: &str) -> Option<bool> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(key_path(key)).ok()?;
    Some(meta.permissions().mode() & 0o200 != 0)
}

/// Writes a value in the calling thread's namespace and reads it back; returns the old value.
/// `host` only labels errors.
pub fn write_verified(host: &str, key: &str, value: &str) -> Result<String> {
    let old = read(key)?;
    let path = key_path(key);
    let rejected = |reason: String| HostError::SysctlRejected {
        key: key.into(),
        value: value.into(),
        host: host.into(),
        reason,
    };
    std::fs::write(&path, value).map_err(|e| match e.raw_os_error() {
        Some(libc::EPERM | libc::ENOENT) if key == CONGESTION_KEY => rejected(congestion_refusal(
            value,
            &read_list(ALLOWED_CC),
            &read_list(AVAILABLE_CC),
        )),
        Some(libc::EINVAL) => {
            rejected("the kernel rejected the value (EINVAL); check its range and format".into())
        }
        Some(libc::EPERM) | Some(libc::EACCES) => {
            rejected("not writable here (read-only in a namespace, or not root)".into())
        }
        Some(libc::ENOENT) => {
            rejected("the kernel rejected the value (ENOENT: no such algorithm or module?)".into())
        }
        _ => rejected(format!("write failed: {e}")),
    })?;
    let now = read(key)?;
    if now != normalize(value) {
        return Err(rejected(format!(
            "wrote '{value}' but the kernel now reports '{now}'"
        )));
    }
    Ok(old)
}

#[cfg(test)]
mod congestion_tests {
    use super::congestion_refusal;

    fn v(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn a_cc_the_host_does_not_allow_names_the_list_and_both_fixes() {
        let m = congestion_refusal("cubic", &v("reno bbr"), &v("reno bbr cubic"));
        assert!(
            m.contains("tcp_allowed_congestion_control (reno bbr)"),
            "{m}"
        );
        assert!(
            m.contains("TCP_CONGESTION") && m.contains("tcplab --cc cubic"),
            "{m}"
        );
        assert!(m.contains("=\"reno bbr cubic\""), "{m}");
    }

    #[test]
    fn a_cc_the_kernel_lacks_names_the_module() {
        let m = congestion_refusal("vegas", &v("reno bbr"), &v("reno bbr cubic"));
        assert!(m.contains("no congestion control 'vegas'"), "{m}");
        assert!(m.contains("modprobe tcp_vegas"), "{m}");
    }
}
