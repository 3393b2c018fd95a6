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
//! machine-wide sysctl; [`emulator_fallbacks`] and `Lab::build` say so in one line each.

pub mod allowed;
pub mod session;

use std::path::PathBuf;
use std::sync::OnceLock;

use tcplab_emu_io::{IoOptions, RxRingKind, TxKind};
use tcplab_results::facts::Rootless;

use crate::error::{KernelContext, LabError, Result};
use crate::spec::SysctlSetting;

pub use session::Join;

/// Set by a session for itself and its children: where the lab's namespace handles live.
pub const NETNS_DIR_ENV: &str = "TCPLAB_NETNS_DIR";

/// The namespace-handle directory a session chose, if this process is in one.
pub fn session_netns_dir() -> Option<PathBuf> {
    std::env::var_os(NETNS_DIR_ENV).map(PathBuf::from)
}

/// Whether this process runs in a user namespace other than the machine's: its UID map is not
/// the identity over every UID.
pub fn in_user_namespace() -> bool {
    std::fs::read_to_string("/proc/self/uid_map").is_ok_and(|map| !is_initial_uid_map(&map))
}

/// The initial user namespace maps every UID to itself: `0 0 4294967295`.
pub fn is_initial_uid_map(map: &str) -> bool {
    let lines: Vec<Vec<&str>> = map
        .lines()
        .map(|l| l.split_whitespace().collect())
        .filter(|f: &Vec<&str>| !f.is_empty())
        .collect();
    matches!(lines.as_slice(), [only] if only.as_slice() == ["0", "0", "4294967295"])
}

/// Whether the real user is root on the machine (not merely mapped to root in a namespace).
/// It cannot change during a process's life (joining a session makes an unprivileged user
/// root inside it, not on the machine), so it is looked at once.
pub fn machine_root() -> bool {
    static ROOT: OnceLock<bool> = OnceLock::new();
    *ROOT.get_or_init(|| rustix::process::getuid().is_root() && !in_user_namespace())
}

/// Prints each notice on stderr the first time this process gives it (a sweep or the demo
/// starts many emulators, each with the same fallbacks).
pub fn tell_once(notices: &[String]) {
    static TOLD: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut told = TOLD.lock().unwrap_or_else(|e| e.into_inner());
    for notice in notices {
        if !told.contains(notice) {
            eprintln!("tcplab: {notice}");
            told.push(notice.clone());
        }
    }
}

/// What [`emulator_fallbacks`] would change in a lab's emulator run from this process, one
/// line each (none outside a session).
pub fn emulator_notices(offloads: crate::spec::Offloads) -> Result<Vec<String>> {
    let opts = crate::emulation::io_options(offloads)?;
    Ok(emulator_fallbacks(opts, in_user_namespace(), rtprio_limit()).1)
}

/// An unprivileged process not in a session: for a lab command, no session of its user runs.
pub fn outside_session() -> bool {
    !in_user_namespace() && !rustix::process::getuid().is_root()
}

/// The machine's verdict on rootless labs (probed once per process) and whether this process
/// is in a session.
pub fn facts() -> Rootless {
    static VERDICT: OnceLock<Rootless> = OnceLock::new();
    let mut facts = VERDICT
        .get_or_init(|| allowed::judge(&allowed::read()))
        .clone();
    facts.this_process = in_user_namespace();
    facts
}

/// The highest real-time priority this process may take without CAP_SYS_NICE
/// (RLIMIT_RTPRIO's soft limit).
pub fn rtprio_limit() -> u64 {
    rustix::process::getrlimit(rustix::process::Resource::Rtprio)
        .current
        .unwrap_or(u64::MAX)
}

/// Changes the emulator options a rootless session cannot honour into ones it can, with one
/// line per change saying what was given up and what would allow it. `rtprio_limit` is
/// RLIMIT_RTPRIO; the options are returned unchanged outside a session.
pub fn emulator_fallbacks(
    mut opts: IoOptions,
    in_session: bool,
    rtprio_limit: u64,
) -> (IoOptions, Vec<String>) {
    let mut notices = Vec::new();
    if !in_session {
        return (opts, notices);
    }
    if let Some(p) = opts.rt_priority.filter(|p| u64::from(*p) > rtprio_limit) {
        opts.rt_priority = None;
        notices.push(format!(
            "rootless: the emulator runs without real-time priority (SCHED_FIFO {p} needs \
             CAP_SYS_NICE on the host, or an RLIMIT_RTPRIO of {p}: an `rtprio` line in \
             /etc/security/limits.conf); its lateness tail is longer on a busy machine"
        ));
    }
    if opts.rings.rx == RxRingKind::Xdp {
        opts.rings.rx = RxRingKind::V2;
        notices.push(
            "rootless: the emulator reads with TPACKET_V2 instead of AF_XDP (loading an XDP \
             program needs CAP_BPF and CAP_NET_ADMIN on the host: run as root for AF_XDP)"
                .to_string(),
        );
    }
    if opts.rings.tx == TxKind::Xsk {
        opts.rings.tx = TxKind::Sendmmsg;
        notices.push(
            "rootless: the emulator sends with sendmmsg instead of an AF_XDP TX ring (its \
             UMEM is locked memory beyond an unprivileged RLIMIT_MEMLOCK: run as root for \
             AF_XDP)"
                .to_string(),
        );
    }
    (opts, notices)
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_machine_map_is_initial_and_a_session_map_is_not() {
        assert!(is_initial_uid_map("         0          0 4294967295\n"));
        assert!(!is_initial_uid_map("         0       1000          1\n"));
        assert!(!is_initial_uid_map(""));
        assert!(!is_initial_uid_map("0 0 4294967295\n1 1 1\n"));
    }

    #[test]
    fn outside_a_session_the_options_stay_as_given() {
        let opts = IoOptions::default();
        let (same, notices) = emulator_fallbacks(opts.clone(), false, 0);
        assert_eq!(same, opts);
        assert!(notices.is_empty());
    }

    #[test]
    fn a_session_without_rtprio_drops_real_time_priority_and_says_so() {
        let opts = IoOptions {
            rt_priority: Some(10),
            ..IoOptions::default()
        };
        let (changed, notices) = emulator_fallbacks(opts, true, 0);
        assert_eq!(changed.rt_priority, None);
        assert_eq!(notices.len(), 1);
        assert!(notices[0].contains("CAP_SYS_NICE"), "{notices:?}");
        assert!(!notices[0].contains('\n'));
    }

    #[test]
    fn an_rtprio_limit_high_enough_keeps_real_time_priority() {
        let opts = IoOptions {
            rt_priority: Some(10),
            ..IoOptions::default()
        };
        let (kept, notices) = emulator_fallbacks(opts, true, 10);
        assert_eq!(kept.rt_priority, Some(10));
        assert!(notices.is_empty());
    }

    #[test]
    fn af_xdp_rings_fall_back_to_packet_sockets_in_a_session() {
        let mut opts = IoOptions {
            rt_priority: None,
            ..IoOptions::default()
        };
        opts.rings.rx = RxRingKind::Xdp;
        opts.rings.tx = TxKind::Xsk;
        let (changed, notices) = emulator_fallbacks(opts, true, 0);
        assert_eq!(changed.rings.rx, RxRingKind::V2);
        assert_eq!(changed.rings.tx, TxKind::Sendmmsg);
        assert_eq!(notices.len(), 2, "{notices:?}");
    }
}
