//! Test support for the agent: a keyed agent on loopback with short limits, the legitimate
//! client's credentials, raw connections from other loopback addresses, and the figures
//! (the agent's threads, the process's RSS) the hostile tests report.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tcplab_agent::Server;
use tcplab_agent::{AgentConfig, Limits};
use tcplab_auth::{ClientAuth, KeyList, KeyPair};
use tcplab_load::rr;

/// The legitimate client's key and the agent's, the same for every test of a binary.
pub struct Keys {
    pub client: KeyPair,
    pub server: KeyPair,
}

pub fn keys() -> &'static Keys {
    static KEYS: OnceLock<Keys> = OnceLock::new();
    KEYS.get_or_init(|| {
        let k = Keys {
            client: KeyPair::generate("legit").expect("key"),
            server: KeyPair::generate("agent").expect("key"),
        };
        // Every workload this binary runs is the legitimate client, pinning the agent.
        ClientAuth::new(k.client.clone(), "the test's key")
            .with_pins(KeyList::of([k.server.public()]), "the test's pin")
            .install();
        k
    })
}

/// The hostile tests measure threads and memory: one at a time.
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// The limits the hostile tests run the agent with: the defaults, with timeouts short enough
/// for a test.
pub fn test_limits() -> Limits {
    Limits {
        handshake_timeout: Duration::from_secs(1),
        idle_timeout: Duration::from_secs(2),
        max_duration: Some(Duration::from_secs(20)),
        ..Limits::default()
    }
}

/// A keyed agent on 127.0.0.1, served from a thread named `tcplab-serve`; dropping it stops it.
pub struct Agent {
    pub addr: SocketAddr,
    pub server: Arc<Server>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Agent {
    pub fn start(limits: Limits) -> Self {
        let k = keys();
        let config = AgentConfig {
            key: k.server.clone(),
            authorized: Some(KeyList::of([k.client.public()])),
            keys_source: "test".into(),
            insecure: false,
            limits,
            log: false,
            allow_sysctl: false,
            journal: None,
            machine: tcplab_host::facts::machine,
        };
        let server = Arc::new(
            Server::with_config("127.0.0.1:0".parse().expect("addr"), config).expect("bind"),
        );
        let addr = server.local_addr().expect("addr");
        let stop = Arc::new(AtomicBool::new(false));
        let (s2, srv) = (stop.clone(), server.clone());
        let thread = std::thread::Builder::new()
            .name("tcplab-serve".into())
            .spawn(move || {
                let _ = srv.serve(&s2, None);
            })
            .expect("spawn");
        Self {
            addr,
            server,
            stop,
            thread: Some(thread),
        }
    }

    /// Waits up to `within` for the agent to hold no handshake and no test.
    pub fn drained(&self, within: Duration) -> bool {
        let end = Instant::now() + within;
        while Instant::now() < end {
            let c = self.server.counts();
            if c.handshakes == 0 && c.tests == 0 {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// How many times the agent refused something under `counter`.
    pub fn refused(&self, counter: &str) -> u64 {
        self.server
            .counts()
            .refused
            .iter()
            .find(|(c, _)| *c == counter)
            .map_or(0, |(_, n)| *n)
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The legitimate client: a short rr test that must complete.
pub fn legit(addr: SocketAddr) {
    let cfg = rr::RrConfig {
        count: Some(200),
        duration_ms: None,
        timeout_ms: 5_000,
        ..rr::RrConfig::default()
    };
    let r = rr::run_client(&cfg, addr, None).expect("legitimate client served");
    assert!(r.meta.complete, "{:?}", r.meta.incomplete_reason);
    assert_eq!(r.summary.transactions, 200);
}

/// The agent's connection threads (named `tcplab-conn`, which its workloads' threads inherit;
/// its one accept loop is not counted) and the process's resident memory, KiB.
#[derive(Debug, Clone, Copy, Default)]
pub struct Figures {
    pub threads: usize,
    pub rss_kib: u64,
}

pub fn figures() -> Figures {
    let threads = std::fs::read_dir("/proc/self/task")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| {
                    std::fs::read_to_string(e.path().join("comm"))
                        .is_ok_and(|c| c.starts_with(tcplab_agent::server::CONN_THREAD))
                })
                .count()
        })
        .unwrap_or(0);
    let rss_kib = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0);
    Figures { threads, rss_kib }
}

/// Records the peak of the figures while a hostile case runs.
#[derive(Default)]
pub struct Peak(Mutex<Figures>);

impl Peak {
    pub fn sample(&self) {
        let f = figures();
        let mut p = self.0.lock().unwrap_or_else(|e| e.into_inner());
        p.threads = p.threads.max(f.threads);
        p.rss_kib = p.rss_kib.max(f.rss_kib);
    }
    pub fn get(&self) -> Figures {
        *self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Prints a case's figures in one line (`cargo test -- --nocapture` shows them) and checks the
/// bounds every case must keep.
/// The figures once the agent's connection threads have gone back to `threads` (they leave a
/// moment after their slot is given back), or after 3 s.
pub fn settled(threads: usize) -> Figures {
    let end = Instant::now() + Duration::from_secs(3);
    loop {
        let f = figures();
        if f.threads <= threads || Instant::now() > end {
            return f;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

pub fn report(case: &str, before: Figures, during: Figures, after: Figures, max_threads: usize) {
    eprintln!(
        "agent figures: {case}: agent threads before/during/after {}/{}/{}, RSS KiB {}/{}/{}",
        before.threads,
        during.threads,
        after.threads,
        before.rss_kib,
        during.rss_kib,
        after.rss_kib
    );
    assert!(
        during.threads <= max_threads,
        "{case}: {} agent threads",
        during.threads
    );
    assert_eq!(after.threads, before.threads, "{case}: threads left behind");
    assert!(
        during.rss_kib < before.rss_kib + 64 * 1024,
        "{case}: RSS grew from {} to {} KiB",
        before.rss_kib,
        during.rss_kib
    );
}

/// A TCP connection to `to` from loopback address `from` (so the agent sees another client).
pub fn connect_from(
    from: Ipv4Addr,
    to: SocketAddr,
    timeout: Duration,
) -> std::io::Result<TcpStream> {
    // Safety: socket() has no preconditions; the fd is owned by the TcpStream at once.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // Safety: fd is a fresh socket we own.
    let s = unsafe { TcpStream::from_raw_fd(fd) };
    let sin = |a: SocketAddrV4| libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: a.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes(a.ip().octets()),
        },
        sin_zero: [0; 8],
    };
    let local = sin(SocketAddrV4::new(from, 0));
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // Safety: `local` is a valid sockaddr_in of `len` bytes.
    if unsafe {
        libc::bind(
            s.as_raw_fd(),
            (&local as *const libc::sockaddr_in).cast(),
            len,
        )
    } != 0
    {
        return Err(std::io::Error::last_os_error());
    }
    let SocketAddr::V4(to4) = to else {
        return Err(std::io::Error::from(std::io::ErrorKind::InvalidInput));
    };
    let remote = sin(to4);
    s.set_nonblocking(true)?;
    // Safety: `remote` is a valid sockaddr_in of `len` bytes.
    let rc = unsafe {
        libc::connect(
            s.as_raw_fd(),
            (&remote as *const libc::sockaddr_in).cast(),
            len,
        )
    };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINPROGRESS) {
            return Err(e);
        }
        let mut pfd = libc::pollfd {
            fd: s.as_raw_fd(),
            events: libc::POLLOUT,
            revents: 0,
        };
        let ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
        // Safety: one live pollfd.
        let n = unsafe { libc::poll(&mut pfd, 1, ms) };
        if n == 0 {
            return Err(std::io::Error::from(std::io::ErrorKind::TimedOut));
        }
        if let Some(e) = s.take_error()? {
            return Err(e);
        }
    }
    s.set_nonblocking(false)?;
    Ok(s)
}

/// Waits up to `within` for the agent to close `s` (reading and discarding what it sends);
/// true when it did.
pub fn closed_by_peer(s: &mut TcpStream, within: Duration) -> bool {
    let end = Instant::now() + within;
    let mut buf = [0u8; 4096];
    while Instant::now() < end {
        let _ = s.set_read_timeout(Some(Duration::from_millis(50)));
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return true,
        }
    }
    false
}

/// Sends one frame (4-byte big-endian length, then `body`).
pub fn send_frame(s: &mut TcpStream, body: &[u8]) -> std::io::Result<()> {
    let mut buf = (body.len() as u32).to_be_bytes().to_vec();
    buf.extend_from_slice(body);
    s.write_all(&buf)
}

/// Reads one frame's body (at most 1 MiB).
pub fn read_frame(s: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len)?;
    let len = u32::from_be_bytes(len) as usize;
    if len > 1 << 20 {
        return Err(std::io::Error::from(std::io::ErrorKind::InvalidData));
    }
    let mut body = vec![0u8; len];
    s.read_exact(&mut body)?;
    Ok(body)
}
