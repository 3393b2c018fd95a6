//! A small three-namespace path lab for the root integration tests:
//! `client (c0 198.18.0.1) ─veth─ middle (m0 | m1) ─veth─ server (s0 198.18.0.2)`.
//!
//! Namespaces are named `tlx-<pid>-<n>` and deleted in `Drop`, even when a test panics.
//! Offloads are turned off on every veth end (ethtool) so the bridge sees real frames, and
//! IPv6 is disabled so neighbour discovery does not add stray frames to exact counts.
#![allow(dead_code, reason = "each test file uses a subset of the fixture")]

use std::os::fd::AsRawFd;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};

pub const CLIENT_IP: &str = "198.18.0.1";
pub const SERVER_IP: &str = "198.18.0.2";

static NEXT: AtomicU32 = AtomicU32::new(0);

/// True when running as root (the integration tests need it).
pub fn is_root() -> bool {
    // Safety: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn run(args: &[&str]) -> Output {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .expect("spawn command");
    assert!(
        out.status.success(),
        "{:?} failed: {}",
        args,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A network namespace deleted on drop.
#[derive(Debug)]
pub struct Netns {
    pub name: String,
}

impl Netns {
    pub fn new() -> Self {
        let name = format!(
            "tlx-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        run(&["ip", "netns", "add", &name]);
        let ns = Self { name };
        ns.exec(&["ip", "link", "set", "lo", "up"]);
        ns.exec(&["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"]);
        ns.exec(&["sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1"]);
        ns
    }

    /// Runs a command inside the namespace; panics with its stderr if it fails.
    pub fn exec(&self, args: &[&str]) -> Output {
        let mut full = vec!["ip", "netns", "exec", &self.name];
        full.extend_from_slice(args);
        run(&full)
    }

    /// Moves the calling thread into this namespace (use only on threads you spawned).
    pub fn enter(&self) {
        let f = std::fs::File::open(format!("/run/netns/{}", self.name)).expect("open netns");
        // Safety: a valid netns fd; CLONE_NEWNET affects only the calling thread.
        let rc = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(
            rc,
            0,
            "setns {}: {}",
            self.name,
            std::io::Error::last_os_error()
        );
    }

    /// Runs `f` on a fresh thread inside this namespace and returns its result.
    pub fn run_in<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        self.spawn_in(f)
            .join()
            .expect("thread in namespace panicked")
    }

    /// Spawns `f` on a fresh thread inside this namespace.
    pub fn spawn_in<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> std::thread::JoinHandle<T> {
        let name = self.name.clone();
        std::thread::spawn(move || {
            Netns { name: name.clone() }.enter_and_forget();
            f()
        })
    }

    fn enter_and_forget(self) {
        self.enter();
        std::mem::forget(self);
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}

/// client ─ middle ─ server, the middle's two interfaces up without addresses.
#[derive(Debug)]
pub struct PathLab {
    pub client: Netns,
    pub middle: Netns,
    pub server: Netns,
}

fn set_offloads(ns: &Netns, dev: &str, on: bool) {
    let v = if on { "on" } else { "off" };
    ns.exec(&[
        "ethtool", "-K", dev, "tso", v, "gso", v, "gro", v, "tx", v, "rx", v,
    ]);
}

impl PathLab {
    pub fn new() -> Self {
        Self::with_offloads(false)
    }

    /// The path lab with segmentation, receive and checksum offloads on every veth end set
    /// to `on` (TSO/GSO super-packets cross the middle when on).
    pub fn with_offloads(on: bool) -> Self {
        let lab = Self {
            client: Netns::new(),
            middle: Netns::new(),
            server: Netns::new(),
        };
        let (c, m, s) = (&lab.client.name, &lab.middle.name, &lab.server.name);
        run(&[
            "ip", "link", "add", "c0", "netns", c, "type", "veth", "peer", "name", "m0", "netns", m,
        ]);
        run(&[
            "ip", "link", "add", "s0", "netns", s, "type", "veth", "peer", "name", "m1", "netns", m,
        ]);
        for (ns, dev) in [
            (&lab.client, "c0"),
            (&lab.middle, "m0"),
            (&lab.middle, "m1"),
            (&lab.server, "s0"),
        ] {
            set_offloads(ns, dev, on);
            ns.exec(&["ip", "link", "set", dev, "up"]);
        }
        lab.client
            .exec(&["ip", "addr", "add", &format!("{CLIENT_IP}/24"), "dev", "c0"]);
        lab.server
            .exec(&["ip", "addr", "add", &format!("{SERVER_IP}/24"), "dev", "s0"]);
        lab
    }

    /// Joins m0 and m1 with the kernel's own bridge (the comparison baseline).
    pub fn kernel_bridge(&self) {
        self.middle
            .exec(&["ip", "link", "add", "br0", "type", "bridge"]);
        self.middle
            .exec(&["ip", "link", "set", "m0", "master", "br0"]);
        self.middle
            .exec(&["ip", "link", "set", "m1", "master", "br0"]);
        self.middle.exec(&["ip", "link", "set", "br0", "up"]);
    }

    /// `ping -c count -i interval` from the client to the server; the per-packet RTTs in ms
    /// (lost pings are simply missing).
    pub fn ping_rtts(&self, count: u32, interval: &str) -> Vec<f64> {
        let out = Command::new("ip")
            .args([
                "netns",
                "exec",
                &self.client.name,
                "ping",
                "-n",
                "-c",
                &count.to_string(),
                "-i",
                interval,
                "-W",
                "2",
                SERVER_IP,
            ])
            .output()
            .expect("ping");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split("time=").nth(1))
            .filter_map(|t| t.split_whitespace().next()?.parse().ok())
            .collect()
    }
}

/// Median of a sample (sorted copy).
pub fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// A TCP echo server on the server's address; serves one connection, then returns.
pub fn tcp_echo_server(lab: &PathLab, port: u16) -> std::thread::JoinHandle<u64> {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let h = lab.server.spawn_in(move || {
        use std::io::{Read, Write};
        let l = std::net::TcpListener::bind((SERVER_IP, port)).expect("bind echo server");
        ready_tx.send(()).expect("signal ready");
        let (mut s, _) = l.accept().expect("accept");
        s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .expect("timeout");
        let mut buf = [0_u8; 65536];
        let mut total = 0;
        loop {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => return total,
                Ok(n) => {
                    total += n as u64;
                    if s.write_all(&buf[..n]).is_err() {
                        return total;
                    }
                }
            }
        }
    });
    ready_rx
        .recv_timeout(std::time::Duration::from_secs(5))
        .expect("echo server ready");
    h
}

/// `count` 1-byte request/responses over one TCP connection from the client; RTTs in ms.
pub fn tcp_rr_rtts(lab: &PathLab, port: u16, count: usize) -> Vec<f64> {
    lab.client.run_in(move || {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect_timeout(
            &format!("{SERVER_IP}:{port}").parse().expect("addr"),
            std::time::Duration::from_secs(5),
        )
        .expect("connect through the bridge");
        s.set_nodelay(true).expect("nodelay");
        s.set_read_timeout(Some(std::time::Duration::from_secs(2)))
            .expect("timeout");
        let mut rtts = Vec::with_capacity(count);
        let mut b = [0_u8; 1];
        for i in 0..count {
            let t0 = std::time::Instant::now();
            s.write_all(&[i as u8]).expect("write");
            s.read_exact(&mut b).expect("echo");
            assert_eq!(b[0], i as u8);
            rtts.push(t0.elapsed().as_secs_f64() * 1e3);
        }
        rtts
    })
}

// ---- shared by the test files: bridges, links, checks -------------------------------------

use std::time::Duration;

use tcplab_emu::{ImpairmentFlags, LinkConfig};
use tcplab_emu_io::{BasicConfig, BasicModel, Bridge, EmuBridge, IoOptions, Report};

pub fn model(delay_ms: u64, loss: f64, seed: u64) -> BasicModel {
    BasicModel::new(
        BasicConfig {
            delay_ns: delay_ms * 1_000_000,
            loss,
        },
        seed,
    )
}

/// Starts a bridge with two [`BasicModel`]s, m0 ↔ m1, inside the middle namespace.
pub fn start(
    lab: &PathLab,
    fwd: BasicModel,
    rev: BasicModel,
    opts: IoOptions,
) -> Bridge<BasicModel> {
    lab.middle
        .run_in(move || Bridge::with_models("m0", "m1", fwd, rev, &opts))
        .expect("bridge starts")
}

/// A link configuration from `tcplab emu`-style flags (delay, loss), seed fixed.
pub fn link(delay: &str, loss: &str) -> LinkConfig {
    let flags = ImpairmentFlags {
        delay: Some(delay.to_owned()),
        loss: Some(loss.to_owned()),
        seed: Some("7".to_owned()),
        ..Default::default()
    };
    flags.to_link_config().expect("valid flags")
}

/// Starts the emulator bridge (tcplab_emu's model) m0 ↔ m1 inside the middle namespace.
pub fn start_emu(lab: &PathLab, cfg: LinkConfig) -> EmuBridge {
    lab.middle
        .run_in(move || EmuBridge::start("m0", "m1", &cfg, &IoOptions::default()))
        .expect("bridge starts")
}

/// `Udp: RcvbufErrors` of a namespace (datagrams the receiving socket had no room for).
pub fn udp_rcvbuf_errors(ns: &Netns) -> u64 {
    udp_counter(ns, "RcvbufErrors")
}

/// One `Udp:` counter of a namespace's `/proc/net/snmp`, e.g. `InCsumErrors`.
pub fn udp_counter(ns: &Netns, name: &str) -> u64 {
    let snmp = String::from_utf8_lossy(&ns.exec(&["cat", "/proc/net/snmp"]).stdout).into_owned();
    let mut udp = snmp.lines().filter(|l| l.starts_with("Udp:"));
    let (names, values) = (udp.next().unwrap_or(""), udp.next().unwrap_or(""));
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .find(|(n, _)| *n == name)
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or_else(|| panic!("Udp {name} in /proc/net/snmp"))
}

/// Fails the test without root: CI runs the suite as root, so a test that needs it must never
/// pass by skipping.
#[macro_export]
macro_rules! require_root {
    () => {
        assert!(
            $crate::common::is_root(),
            "needs root (CAP_NET_ADMIN for namespaces, CAP_NET_RAW for rings): run the suite as root"
        );
    };
}

pub fn assert_balanced(r: &Report) {
    for d in [&r.forward, &r.reverse] {
        assert_eq!(d.queued, 0, "{d:?}");
        assert!(d.balanced(), "in + dup != out + drops: {d:?}");
        assert_eq!(d.drops.ring_overflow, 0, "{d:?}");
        assert_eq!(d.drops.tx_failed, 0, "{d:?}");
    }
}

/// Sends `n` numbered UDP datagrams client → server (paced, bounded) and returns the numbers
/// in arrival order; the receiver stops 500 ms after the last one.
pub fn udp_burst(lab: &PathLab, port: u16, n: u32) -> Vec<u32> {
    let receiver = lab.server.spawn_in(move || {
        let s = std::net::UdpSocket::bind((SERVER_IP, port)).expect("bind");
        s.set_read_timeout(Some(Duration::from_millis(500)))
            .expect("timeout");
        let mut buf = [0_u8; 2048];
        let mut got = Vec::with_capacity(2 * n as usize);
        while let Ok(len) = s.recv(&mut buf) {
            if len == 4 {
                got.push(u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]));
            }
        }
        got
    });
    std::thread::sleep(Duration::from_millis(50));
    lab.client.run_in(move || {
        let s = std::net::UdpSocket::bind((CLIENT_IP, 0)).expect("bind");
        for i in 0..n {
            s.send_to(&i.to_be_bytes(), (SERVER_IP, port))
                .expect("send");
            if i % 50 == 49 {
                std::thread::sleep(Duration::from_micros(500));
            }
        }
    });
    receiver.join().expect("receiver")
}
