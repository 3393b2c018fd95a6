//! Test support: an anonymous network namespace per test (unshare(CLONE_NEWNET) on a thread:
//! no /run/netns entry to leak, gone with the thread), its sysctls, and a tcplab server on its
//! loopback that stops when the closure returns.

#![allow(
    dead_code,
    clippy::unwrap_used,
    reason = "test support; a panic is the failure report"
)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tcplab_agent::Server;
use tcplab_results::Facts;
use tcplab_results::facts::HostFacts;

/// Runs `f` on a thread in a fresh network namespace with loopback up; fails (never skips) when
/// this process may not create one: CI runs the suite as root.
pub fn in_fresh_netns<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::spawn(move || {
        // Safety: unshare only changes this thread's namespace membership; no memory is passed.
        let rc = unsafe { libc::unshare(libc::CLONE_NEWNET) };
        assert_eq!(
            rc,
            0,
            "unshare(CLONE_NEWNET): {} (these tests need root: run the suite as root)",
            std::io::Error::last_os_error()
        );
        loopback_up();
        f()
    })
    .join()
    .unwrap()
}

/// `ip link set lo up` with SIOCGIFFLAGS/SIOCSIFFLAGS.
fn loopback_up() {
    // Safety: a plain datagram socket; the fd is closed below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0) };
    assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
    // Safety: ifreq is plain data; zeroed is a valid value.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in ifr.ifr_name.iter_mut().zip(b"lo\0") {
        *d = *s as libc::c_char;
    }
    // Safety: fd is a live socket and ifr a valid ifreq naming "lo"; the kernel fills the
    // flags, we add IFF_UP and write them back.
    unsafe {
        assert_eq!(libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut ifr), 0);
        ifr.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
        assert_eq!(libc::ioctl(fd, libc::SIOCSIFFLAGS, &ifr), 0);
        libc::close(fd);
    }
}

/// Pins the calling thread to the CPU it is running on; threads it starts afterwards (a
/// server, a workload's client) inherit that, so both ends of a loopback flow share one CPU
/// instead of wherever the scheduler puts them each run.
pub fn pin_to_this_cpu() {
    // Safety: sched_getcpu takes no arguments and only returns a number.
    let cpu = unsafe { libc::sched_getcpu() };
    assert!(
        cpu >= 0,
        "sched_getcpu: {}",
        std::io::Error::last_os_error()
    );
    // Safety: cpu_set_t is plain data (zeroed = empty); CPU_SET writes one bit inside it, and
    // sched_setaffinity reads exactly size_of::<cpu_set_t>() bytes of it for this thread (0).
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu as usize, &mut set);
        let rc = libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set);
        assert_eq!(
            rc,
            0,
            "sched_setaffinity: {}",
            std::io::Error::last_os_error()
        );
    }
}

/// Writes a sysctl of the calling thread's network namespace.
pub fn sysctl(key: &str, value: &str) {
    let path = format!("/proc/sys/{}", key.replace('.', "/"));
    std::fs::write(&path, value).unwrap();
}

pub fn read_sysctl(key: &str) -> String {
    let path = format!("/proc/sys/{}", key.replace('.', "/"));
    std::fs::read_to_string(path)
        .unwrap()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// Runs `f` against a tcplab server on this namespace's loopback; the server stops on return.
pub fn serve<T>(f: impl FnOnce(SocketAddr) -> T) -> T {
    let server = Server::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr: SocketAddr = server.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let t = std::thread::spawn(move || {
        let _ = server.serve(&s2, None);
    });
    let r = f(addr);
    stop.store(true, Ordering::Relaxed);
    let _ = t.join();
    r
}

/// Facts of the machine plus this namespace as both hosts `client` and `server`, with the
/// sysctls `keys` as read here.
pub fn facts_here(keys: &[&str]) -> Facts {
    let mut f = tcplab_lab::facts::machine();
    let sysctls: BTreeMap<String, String> = keys
        .iter()
        .map(|k| (k.to_string(), read_sysctl(k)))
        .collect();
    let host = HostFacts {
        sysctls,
        interfaces: Vec::new(),
    };
    f.hosts.insert("client".into(), host.clone());
    f.hosts.insert("server".into(), host);
    f
}
