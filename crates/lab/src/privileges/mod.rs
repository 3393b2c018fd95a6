//! What this process may do with labs: root on the machine, root only inside the user's
//! rootless session, or neither. Decided once, at the top (the command's start, after it joined
//! a session: `Privileges::decide`), and passed into the lab's build, which turns it into
//! refusals and fallbacks; the errors and the emulator take what they need as data and never
//! look it up themselves.
//!
//! Also where a process's lab objects live, since that follows from the same facts: namespace
//! handles (`/run/netns`, or the session's tmpfs), the state directory (the machine's, or the
//! user's own). This module depends on nothing else in the crate but its errors.

pub mod allowed;

use std::path::PathBuf;
use std::sync::OnceLock;

use tcplab_emu_io::{IoOptions, RxRingKind, TxKind};
use tcplab_results::facts::Rootless;

use crate::error::LabError;

/// Set by a session for itself and its children: where the lab's namespace handles live.
pub const NETNS_DIR_ENV: &str = "TCPLAB_NETNS_DIR";

/// What this process may do with labs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Privileges {
    /// Root on the machine (not merely mapped to root in a user namespace): every sysctl,
    /// AF_XDP, real-time priority.
    pub machine_root: bool,
    /// Root here: on the machine, or inside the user's session (namespaces and links can be
    /// made either way).
    pub effective_root: bool,
    /// Inside a user namespace other than the machine's (the user's rootless session).
    pub in_session: bool,
    /// RLIMIT_RTPRIO's soft limit: the highest real-time priority without CAP_SYS_NICE.
    pub rtprio_limit: u64,
    /// The machine's verdict on rootless labs, for saying how to get a session.
    pub rootless: Rootless,
}

static DECIDED: OnceLock<Privileges> = OnceLock::new();

impl Privileges {
    /// Reads this process's privileges now.
    pub fn of_this_process() -> Privileges {
        let in_session = in_user_namespace();
        let mut rootless = machine_verdict();
        rootless.this_process = in_session;
        Privileges {
            machine_root: machine_root(),
            effective_root: rustix::process::geteuid().is_root(),
            in_session,
            rtprio_limit: rtprio_limit(),
            rootless,
        }
    }

    /// Fixes this process's privileges for the rest of its life and returns them. A command
    /// calls it at its start, once it has joined the session it runs in (joining changes them);
    /// the first later call of [`Privileges::decided`] does it for a library caller that did not.
    pub fn decide() -> &'static Privileges {
        DECIDED.get_or_init(Privileges::of_this_process)
    }

    /// The privileges [`Privileges::decide`] fixed.
    pub fn decided() -> &'static Privileges {
        Privileges::decide()
    }

    /// Fails with [`LabError::NotRoot`] for `action` unless namespaces and links can be made
    /// here (root on the machine or in a session).
    pub fn require(&self, action: &str) -> Result<(), LabError> {
        if self.effective_root {
            Ok(())
        } else {
            Err(LabError::not_root(action, self.rootless.clone()))
        }
    }

    /// Changes the emulator options a rootless session cannot honour into ones it can, with one
    /// line per change saying what was given up and what would allow it. Outside a session the
    /// options are returned unchanged.
    pub fn emulator_fallbacks(&self, mut opts: IoOptions) -> (IoOptions, Vec<String>) {
        let mut notices = Vec::new();
        if !self.in_session {
            return (opts, notices);
        }
        if let Some(p) = opts
            .rt_priority
            .filter(|p| u64::from(*p) > self.rtprio_limit)
        {
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
}

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

/// An unprivileged process not in a session: for a lab command, no session of its user runs.
pub fn outside_session() -> bool {
    !in_user_namespace() && !rustix::process::getuid().is_root()
}

/// The highest real-time priority this process may take without CAP_SYS_NICE
/// (RLIMIT_RTPRIO's soft limit).
pub fn rtprio_limit() -> u64 {
    rustix::process::getrlimit(rustix::process::Resource::Rtprio)
        .current
        .unwrap_or(u64::MAX)
}

/// The machine's verdict on rootless labs, probed once per process (the probe starts a
/// process), without this process's membership.
pub fn machine_verdict() -> Rootless {
    static VERDICT: OnceLock<Rootless> = OnceLock::new();
    VERDICT
        .get_or_init(|| allowed::judge(&allowed::read()))
        .clone()
}

/// The machine's verdict on rootless labs and whether this process is in a session.
pub fn rootless_facts() -> Rootless {
    let mut facts = machine_verdict();
    facts.this_process = in_user_namespace();
    facts
}

/// The state directory of an unprivileged user: `TCPLAB_STATE_DIR`, else
/// `$XDG_RUNTIME_DIR/tcplab`, else `/tmp/tcplab-<uid>`.
pub fn user_state_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("TCPLAB_STATE_DIR") {
        return PathBuf::from(dir);
    }
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(run) if !run.is_empty() => PathBuf::from(run).join("tcplab"),
        _ => PathBuf::from(format!("/tmp/tcplab-{}", machine_uid())),
    }
}

/// The user's UID on the machine, also inside a session (where it reads as 0): the UID map's
/// outside half of the line that maps 0.
fn machine_uid() -> u32 {
    let uid = rustix::process::getuid().as_raw();
    if !in_user_namespace() {
        return uid;
    }
    std::fs::read_to_string("/proc/self/uid_map")
        .ok()
        .and_then(|map| {
            map.lines().find_map(|line| {
                let f: Vec<&str> = line.split_whitespace().collect();
                match f.as_slice() {
                    [inside, outside, _] if inside.parse() == Ok(uid) => outside.parse().ok(),
                    _ => None,
                }
            })
        })
        .unwrap_or(uid)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn privileges(in_session: bool, rtprio_limit: u64) -> Privileges {
        Privileges {
            machine_root: !in_session,
            effective_root: true,
            in_session,
            rtprio_limit,
            rootless: Rootless::default(),
        }
    }

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
        let (same, notices) = privileges(false, 0).emulator_fallbacks(opts.clone());
        assert_eq!(same, opts);
        assert!(notices.is_empty());
    }

    #[test]
    fn a_session_without_rtprio_drops_real_time_priority_and_says_so() {
        let opts = IoOptions {
            rt_priority: Some(10),
            ..IoOptions::default()
        };
        let (changed, notices) = privileges(true, 0).emulator_fallbacks(opts);
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
        let (kept, notices) = privileges(true, 10).emulator_fallbacks(opts);
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
        let (changed, notices) = privileges(true, 0).emulator_fallbacks(opts);
        assert_eq!(changed.rings.rx, RxRingKind::V2);
        assert_eq!(changed.rings.tx, TxKind::Sendmmsg);
        assert_eq!(notices.len(), 2, "{notices:?}");
    }
}
