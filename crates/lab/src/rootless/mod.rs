//! Labs without root. An unprivileged user's labs live in a *session*: a user namespace the
//! user owns (their UID mapped to root inside it) with a mount namespace of its own, held open
//! by a small holder process. Inside it the process has CAP_SYS_ADMIN and CAP_NET_ADMIN over
//! the network namespaces it makes, so the lab code runs unchanged; only where namespace
//! handles live differs (a tmpfs in the user's state directory, mounted in the session, instead
//! of `/run/netns`). Commands that use labs join the session at start, while the process is
//! still single-threaded, because setns(2) into a user namespace refuses threaded callers.
//!
//! What needs more than a user namespace gives: real-time priority (CAP_SYS_NICE on the host,
//! or RLIMIT_RTPRIO), AF_XDP (loading an XDP program needs CAP_BPF on the host), and every
//! machine-wide sysctl; `Privileges::emulator_fallbacks` and `Lab::build` say so in one line each.
//!
//! Whether this process is in a session, and where its handles live, is `crate::privileges`'s
//! (a leaf the lower modules read); this module makes, joins and leaves sessions.

pub mod session;

use crate::error::{KernelContext, LabError, Result};
use crate::spec::SysctlSetting;

pub use session::Join;

/// Refuses, by name and before anything is built, every sysctl a namespace this user owns
/// cannot change: each key is looked at in a throw-away network namespace made like a lab
/// host's. Unknown keys pass here and fail later with their own error.
pub fn refuse_unchangeable_sysctls(settings: &[SysctlSetting]) -> Result<()> {
    if settings.is_empty() {
        return Ok(());
    }
    let keys: Vec<String> = settings.iter().map(|s| s.key.clone()).collect();
    let looked = std::thread::Builder::new()
        .name("sysctl-probe".into())
        .spawn(move || -> std::io::Result<Vec<String>> {
            // Safety: CLONE_NEWNET changes only this thread's network namespace; no file
            // descriptor table is unshared. The namespace goes when the thread ends.
            unsafe { rustix::thread::unshare_unsafe(rustix::thread::UnshareFlags::NEWNET) }?;
            Ok(keys
                .into_iter()
                .filter(|k| {
                    tcplab_host::sysctl::validate_key(k).is_ok()
                        && tcplab_host::sysctl::writable_here(k) == Some(false)
                })
                .collect())
        })
        .kernel_context(|| "spawning a thread to look at sysctls".to_string())?
        .join()
        .map_err(|_| LabError::kernel("looking at sysctls", std::io::Error::other("panicked")))?
        .kernel_context(|| "making a namespace to look at sysctls in".to_string())?;
    match looked.into_iter().next() {
        Some(key) => Err(LabError::RootlessSysctl { key }),
        None => Ok(()),
    }
}
