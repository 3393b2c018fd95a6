//! The host crate's errors in the lab's words: each `tcplab_host::HostError` becomes the
//! [`LabError`] variant of the same name and message, so lab code reads and writes sysctls,
//! addresses and host facts with `?` and its users see what they always saw.

use tcplab_host::HostError;

use crate::error::LabError;

impl From<HostError> for LabError {
    fn from(e: HostError) -> Self {
        match e {
            HostError::Invalid { field, problem } => LabError::Invalid { field, problem },
            HostError::UnknownSysctl { key, path } => LabError::UnknownSysctl { key, path },
            HostError::SysctlRejected {
                key,
                value,
                host,
                reason,
            } => LabError::SysctlRejected {
                key,
                value,
                host,
                reason,
            },
            HostError::Kernel { context, cause } => LabError::Kernel { context, cause },
        }
    }
}
