//! The lab's errors. Every message names the field, flag or object at fault and says how to fix it,
//! because these reach users as one-line CLI errors (exit code 2).

use std::io;
use std::path::PathBuf;

use tcplab_results::facts::Rootless;

/// How to get what a lab needs without root, from the machine's verdict on rootless labs.
fn way_without_root(rootless: &Rootless) -> String {
    if rootless.allowed {
        "tcplab's commands join one by themselves (a library calls \
         tcplab_lab::rootless::session::enter first); or run tcplab as root"
            .to_string()
    } else {
        format!(
            "this machine forbids them ({}); or run tcplab as root, e.g. with sudo",
            rootless.why_not.join("; ")
        )
    }
}

/// Everything that can go wrong while describing, building, using or removing a lab.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// The process lacks the privileges namespaces and links need.
    #[error(
        "{action} needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN) or a rootless session: {}",
        way_without_root(rootless)
    )]
    NotRoot {
        /// What was being attempted.
        action: String,
        /// The machine's verdict on rootless labs: the message says how to get a session,
        /// or why this machine forbids one.
        rootless: Rootless,
    },
    /// A rootless lab could not be made or reached.
    #[error("rootless lab: {problem}")]
    Rootless {
        /// What failed, why, and what would allow it.
        problem: String,
    },
    /// A sysctl an unprivileged user's namespace cannot change.
    #[error(
        "sysctl {key}: a rootless lab cannot change it (machine-wide, or read-only in a \
         namespace an unprivileged user owns); run tcplab as root (machine-wide keys also need \
         --allow-host-sysctl) or leave it out"
    )]
    RootlessSysctl {
        /// The key as given.
        key: String,
    },
    /// A user-supplied value is malformed or out of range.
    #[error("{field}: {problem}")]
    Invalid {
        /// The flag or TOML field at fault, e.g. `--topology` or `hosts[2].name`.
        field: String,
        /// What is wrong and how to fix it.
        problem: String,
    },
    /// A lab with this name already exists (registry entry or namespaces).
    #[error(
        "lab '{0}' already exists: pick another --name, or remove it with `tcplab lab down {0}`"
    )]
    AlreadyExists(String),
    /// No lab with this name is registered.
    #[error("no lab named '{0}': `tcplab lab status` lists the labs that exist")]
    NoSuchLab(String),
    /// The lab has no host of this name.
    #[error("lab '{lab}' has no host '{host}'; its hosts are: {known}")]
    NoSuchHost {
        /// The lab searched.
        lab: String,
        /// The name asked for.
        host: String,
        /// The hosts it does have, comma-separated.
        known: String,
    },
    /// A sysctl key does not exist on this kernel at all.
    #[error("sysctl {key}: no such key on this kernel (looked for {path}); check the spelling")]
    UnknownSysctl {
        /// The key as given.
        key: String,
        /// Where it was looked for.
        path: PathBuf,
    },
    /// A host-global sysctl was asked for without the explicit opt-in.
    #[error(
        "sysctl {key} is global to the whole machine (read-only inside a namespace); \
         pass --allow-host-sysctl to change it on the host (the old value is journaled and restored)"
    )]
    GlobalSysctl {
        /// The key as given.
        key: String,
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
    /// A kernel call failed while building or changing the lab.
    #[error("{context}: {cause}")]
    Kernel {
        /// What was being done, naming the object.
        context: String,
        /// The OS error (part of the message, not a separate source, so it prints once).
        cause: io::Error,
    },
    /// The lab description file could not be read or parsed.
    #[error("{path}: {message}")]
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong, with line and column where known.
        message: String,
    },
    /// No nginx binary at /usr/sbin/nginx or on PATH.
    #[error(
        "nginx is not installed (looked for /usr/sbin/nginx and `nginx` on PATH): apt-get install nginx"
    )]
    NginxMissing,
    /// nginx rejected its configuration, exited, or did not start accepting in time.
    #[error("nginx in host {host}: {problem}")]
    Nginx {
        /// The lab host it was started in.
        host: String,
        /// What happened, with nginx's own words (`nginx -t` output or error.log's tail).
        problem: String,
    },
    /// The registry under the state directory is unreadable or corrupt.
    #[error(
        "lab registry {path}: {message}; run `tcplab lab gc --all` to rebuild it from /run/netns"
    )]
    Registry {
        /// The registry file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// `--offloads` as `tcplab_results` parses it, with the same message.
impl From<tcplab_results::facts::OffloadsError> for LabError {
    fn from(e: tcplab_results::facts::OffloadsError) -> Self {
        LabError::invalid("--offloads", e.problem)
    }
}

impl LabError {
    /// Shorthand for [`LabError::Invalid`].
    pub fn invalid(field: impl Into<String>, problem: impl Into<String>) -> Self {
        LabError::Invalid {
            field: field.into(),
            problem: problem.into(),
        }
    }

    /// [`LabError::NotRoot`] for `action`; `rootless` is the machine's verdict on rootless
    /// labs (`crate::privileges`), given by the caller so this module looks nothing up.
    pub fn not_root(action: impl Into<String>, rootless: Rootless) -> Self {
        LabError::NotRoot {
            action: action.into(),
            rootless,
        }
    }

    /// Shorthand for [`LabError::Kernel`].
    pub fn kernel(context: impl Into<String>, source: io::Error) -> Self {
        LabError::Kernel {
            context: context.into(),
            cause: source,
        }
    }
}

/// Result alias for the lab crate.
pub type Result<T, E = LabError> = std::result::Result<T, E>;

/// Adds the "what was being done" context to OS errors.
pub(crate) trait KernelContext<T> {
    /// Wraps an `io::Error` into [`LabError::Kernel`] with a lazily built context.
    fn kernel_context(self, context: impl FnOnce() -> String) -> Result<T>;
}

impl<T> KernelContext<T> for io::Result<T> {
    fn kernel_context(self, context: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|cause| LabError::Kernel {
            context: context(),
            cause,
        })
    }
}
