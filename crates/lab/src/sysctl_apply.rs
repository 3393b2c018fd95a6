//! Applying sysctl settings to a lab: per-namespace keys on each target host, host-global keys
//! (only with the opt-in) through the journal, so the machine's own values come back on teardown
//! or `gc` even after a crash.

use crate::error::{LabError, Result};
use crate::host::Host;
use crate::spec::SysctlSetting;
use crate::state::{JournalEntry, StateDir, StateLock};
use tcplab_host::sysctl::{self, Scope};

/// Applies settings in order. `all` targets every host of the lab.
pub(crate) fn apply(
    state: &StateDir,
    lock: &StateLock,
    lab: &str,
    hosts: &[Host],
    settings: &[SysctlSetting],
    allow_host_sysctl: bool,
) -> Result<()> {
    for setting in settings {
        match classify(hosts, &setting.key)? {
            Scope::Namespace => {
                for host in hosts
                    .iter()
                    .filter(|h| setting.host == "all" || h.name == setting.host)
                {
                    let (name, key, value) = (
                        host.name.clone(),
                        setting.key.clone(),
                        setting.value.clone(),
                    );
                    host.run(move || sysctl::write_verified(&name, &key, &value))??;
                }
            }
            Scope::Global if !allow_host_sysctl => {
                return Err(LabError::GlobalSysctl {
                    key: setting.key.clone(),
                });
            }
            Scope::Global => apply_host(state, lock, lab, &setting.key, &setting.value)?,
        }
    }
    Ok(())
}

/// Decides where a key lives by looking at it from inside a lab host and from the caller's
/// (the host machine's) namespace.
fn classify(hosts: &[Host], key: &str) -> Result<Scope> {
    sysctl::validate_key(key)?;
    let inside = match hosts.first() {
        Some(h) => {
            let k = key.to_string();
            h.run(move || sysctl::writable_here(&k))?
        }
        None => None,
    };
    if inside == Some(true) {
        return Ok(Scope::Namespace);
    }
    match sysctl::writable_here(key) {
        Some(_) => Ok(Scope::Global),
        None => Err(LabError::UnknownSysctl {
            key: key.into(),
            path: sysctl::key_path(key),
        }),
    }
}

/// Changes a host-global key for `lab`: the value before the first change is journaled (and
/// synced to disk) before the kernel is touched.
fn apply_host(
    state: &StateDir,
    _lock: &StateLock,
    lab: &str,
    key: &str,
    value: &str,
) -> Result<()> {
    let mut journal = state.journal()?;
    let original = match journal.get(key) {
        Some(entry) => entry.original.clone(),
        None => sysctl::read(key)?,
    };
    let entry = journal.entry(key.to_string()).or_insert(JournalEntry {
        original,
        value: sysctl::normalize(value),
        holders: Vec::new(),
    });
    if !entry.holders.iter().any(|h| h == lab) {
        entry.holders.push(lab.to_string());
    }
    entry.value = sysctl::normalize(value);
    state.write_journal(&journal)?;
    sysctl::write_verified("the host machine", key, value)?;
    Ok(())
}

/// Drops `lab` from every journal entry; a key whose last holder went is restored to its
/// original value. Returns the keys restored.
pub(crate) fn release_host(state: &StateDir, _lock: &StateLock, lab: &str) -> Result<Vec<String>> {
    let mut journal = state.journal()?;
    let mut restored = Vec::new();
    let mut first_error = None;
    journal.retain(|key, entry| {
        entry.holders.retain(|h| h != lab);
        if !entry.holders.is_empty() {
            return true;
        }
        match sysctl::write_verified("the host machine", key, &entry.original) {
            Ok(_) => {
                restored.push(key.clone());
                false
            }
            Err(e) => {
                first_error.get_or_insert(e);
                true
            }
        }
    });
    state.write_journal(&journal)?;
    match first_error {
        Some(e) => Err(e.into()),
        None => Ok(restored),
    }
}

/// Restores every journal entry none of whose holders is registered any more (`gc`).
pub(crate) fn release_orphaned(state: &StateDir, lock: &StateLock) -> Result<Vec<String>> {
    let registered: Vec<String> = state.list()?.into_iter().map(|r| r.spec.name).collect();
    let journal = state.journal()?;
    let mut restored = Vec::new();
    for entry in journal.values() {
        for holder in &entry.holders {
            if !registered.contains(holder) {
                restored.extend(release_host(state, lock, holder)?);
            }
        }
    }
    restored.sort();
    restored.dedup();
    Ok(restored)
}
