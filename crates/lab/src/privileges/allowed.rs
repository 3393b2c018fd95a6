//! Whether this machine lets an unprivileged user build a lab: the kernel switches that forbid
//! user namespaces (each with what would allow it), and a probe that tries one for real, since
//! a seccomp filter or a container runtime can forbid what every switch allows.

use std::io;
use std::process::{Command, Stdio};

use tcplab_results::facts::Rootless;

/// What was read from the machine: the switches (absent when this kernel has no such switch)
/// and the probe's outcome.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Inputs {
    /// `user.max_user_namespaces`: 0 forbids user namespaces to everyone but root.
    pub max_user_namespaces: Option<u64>,
    /// `kernel.unprivileged_userns_clone` (Debian's and Arch's switch): 0 forbids them.
    pub unprivileged_userns_clone: Option<u64>,
    /// `kernel.apparmor_restrict_unprivileged_userns` (Ubuntu 24.04): 1 lets the namespace be
    /// made but takes away its capabilities.
    pub apparmor_restrict: Option<u64>,
    /// An unprivileged process's attempt at a user namespace with a network namespace in it.
    pub probe: Probe,
}

/// The live attempt's outcome.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Probe {
    /// The kernel made both namespaces.
    Made,
    /// The kernel refused, with the error.
    Refused(String),
    /// The attempt could not be made (no program to run, out of processes).
    #[default]
    NotRun,
}

/// The verdict from what was read: the probe decides when it ran; the switches explain a
/// refusal (or predict one when the probe could not run).
pub fn judge(inputs: &Inputs) -> Rootless {
    let mut why_not = Vec::new();
    if inputs.max_user_namespaces == Some(0) {
        why_not.push(
            "user.max_user_namespaces is 0: an administrator can allow them with \
             `sysctl -w user.max_user_namespaces=15000`"
                .to_string(),
        );
    }
    if inputs.unprivileged_userns_clone == Some(0) {
        why_not.push(
            "kernel.unprivileged_userns_clone is 0: an administrator can allow them with \
             `sysctl -w kernel.unprivileged_userns_clone=1`"
                .to_string(),
        );
    }
    if inputs.apparmor_restrict == Some(1) {
        why_not.push(
            "AppArmor restricts unprivileged user namespaces \
             (kernel.apparmor_restrict_unprivileged_userns = 1): an administrator can set it \
             to 0, or give the tcplab binary an AppArmor profile with the `userns` permission"
                .to_string(),
        );
    }
    let allowed = match &inputs.probe {
        Probe::Made => true,
        Probe::Refused(error) => {
            if why_not.is_empty() {
                why_not.push(format!(
                    "the kernel refused an unprivileged user namespace ({error}) though no \
                     switch forbids it: a seccomp filter or the container this runs in may; \
                     run tcplab as root there"
                ));
            }
            false
        }
        Probe::NotRun => why_not.is_empty(),
    };
    if allowed {
        why_not.clear();
    }
    Rootless {
        allowed,
        why_not,
        this_process: false,
    }
}

/// Reads the switches and runs the probe.
pub fn read() -> Inputs {
    let number = |path: &str| {
        std::fs::read_to_string(path)
            .ok()
            .and_then(|s| s.trim().parse().ok())
    };
    Inputs {
        max_user_namespaces: number("/proc/sys/user/max_user_namespaces"),
        unprivileged_userns_clone: number("/proc/sys/kernel/unprivileged_userns_clone"),
        apparmor_restrict: number("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"),
        probe: probe(),
    }
}

/// The user the probe becomes when run by root: `nobody`, which owns nothing.
const NOBODY: u32 = 65534;

/// Starts `true` in a child that first drops to an unprivileged user (when root) and then
/// unshares a user and a network namespace: the spawn fails with the kernel's refusal.
fn probe() -> Probe {
    use std::os::unix::process::CommandExt;
    let mut command = Command::new("true");
    command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // Safety: between fork and exec the closure makes only async-signal-safe system calls
    // (setgroups, setgid, setuid, unshare) and allocates nothing.
    unsafe {
        command.pre_exec(|| {
            if libc::geteuid() == 0
                && (libc::setgroups(0, std::ptr::null()) != 0
                    || libc::setgid(NOBODY) != 0
                    || libc::setuid(NOBODY) != 0)
            {
                return Err(io::Error::last_os_error());
            }
            if libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    match command.status() {
        Ok(_) => Probe::Made,
        Err(e) if e.kind() == io::ErrorKind::NotFound => Probe::NotRun,
        Err(e) => match e.raw_os_error() {
            Some(libc::EPERM | libc::EACCES | libc::EINVAL | libc::ENOSPC | libc::EUSERS) => {
                Probe::Refused(e.to_string())
            }
            _ => Probe::NotRun,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs(probe: Probe) -> Inputs {
        Inputs {
            max_user_namespaces: Some(15000),
            unprivileged_userns_clone: None,
            apparmor_restrict: None,
            probe,
        }
    }

    #[test]
    fn a_namespace_made_is_allowed_with_no_reasons() {
        let r = judge(&inputs(Probe::Made));
        assert!(r.allowed);
        assert!(r.why_not.is_empty());
    }

    #[test]
    fn each_switch_that_forbids_is_named_with_its_fix() {
        let i = Inputs {
            max_user_namespaces: Some(0),
            unprivileged_userns_clone: Some(0),
            apparmor_restrict: Some(1),
            probe: Probe::Refused("Operation not permitted".into()),
        };
        let r = judge(&i);
        assert!(!r.allowed);
        assert_eq!(r.why_not.len(), 3, "{:?}", r.why_not);
        assert!(r.why_not[0].contains("user.max_user_namespaces=15000"));
        assert!(r.why_not[1].contains("unprivileged_userns_clone=1"));
        assert!(r.why_not[2].contains("AppArmor"));
    }

    #[test]
    fn a_refusal_no_switch_explains_blames_the_sandbox() {
        let r = judge(&inputs(Probe::Refused("Operation not permitted".into())));
        assert!(!r.allowed);
        assert_eq!(r.why_not.len(), 1);
        assert!(r.why_not[0].contains("seccomp"), "{:?}", r.why_not);
        assert!(r.why_not[0].contains("Operation not permitted"));
    }

    #[test]
    fn without_a_probe_the_switches_decide() {
        assert!(judge(&inputs(Probe::NotRun)).allowed);
        let mut i = inputs(Probe::NotRun);
        i.apparmor_restrict = Some(1);
        assert!(!judge(&i).allowed);
    }

    #[test]
    fn the_probe_overrules_a_switch_it_proved_wrong() {
        let mut i = inputs(Probe::Made);
        i.apparmor_restrict = Some(1);
        let r = judge(&i);
        assert!(r.allowed, "{r:?}");
        assert!(r.why_not.is_empty());
    }
}
