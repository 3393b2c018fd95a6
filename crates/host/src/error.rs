//! The host's errors. Their messages are the lab's own words for the same faults (the lab
//! turns each into its `LabError` variant of the same name), because both reach users as
//! one-line CLI errors that name the key or field at fault and say how to fix it.

use std::io;
use std::path::PathBuf;

/// What can go wrong reading or changing this host's kernel settings.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// A user-supplied value is malformed or out of range (a sysctl key, an address).
    #[error("{field}: {problem}")]
    Invalid {
        /// The flag or field at fault, e.g. `sysctl key` or `hosts[2].addrs`.
        field: String,
        /// What is wrong and how to fix it.
        problem: String,
    },
    /// A sysctl key does not exist on this kernel at all.
    #[error("sysctl {key}: no such key on this kernel (looked for {path}); check the spelling")]
    UnknownSysctl {
        /// The key as given.
        key: String,
        /// Where it was looked for.
        path: PathBuf,
    },
    /// The kernel refused a sysctl value, or stored something else.
    #[error("sysctl {key}={value} on {host}: {reason}")]
    SysctlRejected {
        /// The key.
        key: String,
        /// The value that was written.
        value: String,
        /// The host (or `host machine` for global ones).
        host: String,
        /// The kernel's reason.
        reason: String,
    },
    /// A kernel call failed.
    #[error("{context}: {cause}")]
    Kernel {
        /// What was being done, naming the object.
        context: String,
        /// The OS error (part of the message, not a separate source, so it prints once).
        cause: io::Error,
    },
}

impl HostError {
    /// Shorthand for [`HostError::Invalid`].
    pub fn invalid(field: impl Into<String>, problem: impl Into<String>) -> Self {
        HostError::Invalid {
            field: field.into(),
            problem: problem.into(),
        }
    }

    /// Shorthand for [`HostError::Kernel`].
    pub fn kernel(context: impl Into<String>, source: io::Error) -> Self {
        HostError::Kernel {
            context: context.into(),
            cause: source,
        }
    }
}

/// Result alias for the host crate.
pub type Result<T, E = HostError> = std::result::Result<T, E>;
