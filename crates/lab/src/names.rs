//! The naming rules of labs, hosts and interfaces, and how they make namespace names.
//!
//! Kept apart from [`crate::spec`] because everything that touches a namespace by name (the
//! builder, `gc`, status) needs these and nothing else from the spec.

use crate::error::{LabError, Result};

/// Prefix of every namespace tcplab creates: `tcplab-<lab>-<host>`.
pub const NETNS_PREFIX: &str = "tcplab-";
/// Longest lab name accepted (keeps namespace names readable).
pub const MAX_LAB_NAME: usize = 24;
/// Longest host name accepted: a host's name is also its port name on the middle host, and Linux
/// interface names hold at most 15 bytes.
pub const MAX_HOST_NAME: usize = 15;

/// The namespace name of a host: `tcplab-<lab>-<host>`.
pub fn netns_name(lab: &str, host: &str) -> String {
    format!("{NETNS_PREFIX}{lab}-{host}")
}

/// Lab names: 1..=24 of `[a-z0-9_]`, starting with a letter or digit. No `-`, so that a namespace
/// name splits unambiguously into lab and host.
pub fn validate_lab_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= MAX_LAB_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        && !name.starts_with('_');
    if ok {
        Ok(())
    } else {
        Err(LabError::invalid(
            "--name",
            format!(
                "'{}' is not a valid lab name: use 1-{MAX_LAB_NAME} lower-case letters, digits or _",
                name.escape_debug()
            ),
        ))
    }
}

/// Host names: 1..=15 of `[a-z0-9_]`, starting with a letter (they become interface names).
pub fn validate_host_name(field: &str, name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= MAX_HOST_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        && name.as_bytes()[0].is_ascii_lowercase()
        && name != "all";
    if ok {
        Ok(())
    } else {
        Err(LabError::invalid(
            field,
            format!(
                "'{}' is not a valid host name: use 1-{MAX_HOST_NAME} lower-case letters, digits \
                 or _, starting with a letter ('all' is reserved)",
                name.escape_debug()
            ),
        ))
    }
}

/// Interface names: 1..=15 bytes, no `/`, whitespace or `:`.
pub(crate) fn validate_ifname(field: &str, name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 15
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.');
    if ok {
        Ok(())
    } else {
        Err(LabError::invalid(
            field,
            format!(
                "'{}' is not a valid interface name: use 1-15 letters, digits, _ - .",
                name.escape_debug()
            ),
        ))
    }
}
