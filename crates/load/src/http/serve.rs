//! The built-in HTTP/1.1 file server (`tcplab serve --http PORT`): SPECweb96's file set, every
//! file built once in memory at bind so serving a request costs no disk and no copy, only the
//! kernel's (a lab measures the network and TCP, not a web server's file cache).
//!
//! Design: one epoll event loop per worker thread (one per CPU), each watching the shared
//! non-blocking listener with EPOLLEXCLUSIVE, so an idle worker takes new connections and a busy
//! one is not woken for them. Sockets are non-blocking and edge-triggered; a response is the
//! canned head and the file's bytes, both borrowed from the server, handed to the kernel with one
//! `sendmsg` of an iovec (several when requests are pipelined). A write the kernel takes only in
//! part waits for EPOLLOUT while the worker serves other connections, so a slow reader of a
//! 900 KB file holds nothing but its own connection.
//!
//! Why not a thread per connection (a blocking prototype with the same cap was measured
//! against this on the 2-CPU VM, both serving a 1 KB file to tcplab's own HTTP client with
//! 2 event loops, 5 s per point, the machine busy with other work): keep-alive was a draw
//! within the noise (64 connections: 37-76 k requests/s here, 13-59 k there), but a
//! connection per request ran 1.5-2x faster here (64 connections: 8.2-10.7 k/s against
//! 2.8-6.1 k/s; 256: 6.0-7.7 k/s against 2.5-4.6 k/s, with a p99 of 1 s there, a SYN's first
//! retransmission: one thread accepting and spawning falls behind), and 4,096 idle keep-alive
//! connections would cost 4,096 stacks and a scheduler as busy as the load it measures.
//!
//! Bounds: a connection holds at most [`MAX_HEAD`] + 1 unparsed bytes and [`MAX_QUEUED`]
//! queued responses (pipelined requests past that wait in the kernel's buffer), and the server
//! at most `max_connections` connections: one more is accepted, answered 503 and closed at once
//! (counted), so the accept queue never fills silently.

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

mod conn;
mod worker;

use super::fileset::{CLASSES, FILES_PER_CLASS, FileId, FileSet};
use crate::bpf;
use crate::error::{LoadError, Result};
use crate::net::{self, ConnectError};
use crate::sockopt::SockOpts;
use tcplab_auth::scope::{LAB_RANGES, is_lab_or_loopback, is_wildcard};

/// Longest request head (request line and headers), bytes; a longer one is answered 431.
pub const MAX_HEAD: usize = 16 * 1024;
/// Most headers in a request; more is answered 431.
pub const MAX_HEADERS: usize = 32;
/// Most bytes of files held in memory (1 GiB, about 209 directories).
pub const MAX_MEMORY: u64 = 1 << 30;
/// Longest request body skipped (a GET may carry one); a longer one is answered 413.
pub const MAX_BODY: u64 = 64 * 1024;
/// Responses queued on one connection before its pipelined requests wait for the writes.
pub const MAX_QUEUED: usize = 32;
/// How long a closing connection waits for the client's FIN after ours, at most (a close with
/// unread bytes would send a reset, which can destroy the response before the client reads it).
const LINGER: Duration = Duration::from_secs(2);
/// The longest epoll wait: how soon `serve` notices `stop`.
const TICK: Duration = Duration::from_millis(50);
/// Rounds of write/parse/read one connection gets per wake-up before the others' turn.
const BUDGET: u32 = 16;
/// Connections accepted per wake-up of the listener before the others' turn.
const ACCEPT_BATCH: u32 = 64;
/// Slices per sendmsg.
const IOV: usize = 64;
/// The listener's epoll token; connections use their slot index.
const LISTENER: u64 = u64::MAX;
/// Workers at most, whatever the CPU count.
const MAX_WORKERS: usize = 16;

/// The HTTP file server `tcplab serve` runs beside the agent (its `--http PORT`,
/// `--http-dirs N`, `--http-max-connections N`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpServeOptions {
    /// Serve SPECweb96's file set over HTTP/1.1 on this port of the agent's address (0 picks a
    /// free port); `None`: no HTTP server.
    pub port: Option<u16>,
    /// Directories of the file set (36 files, about 5.1 MB each).
    pub http_dirs: u32,
    /// Connections kept open at once; one more is answered 503 and closed (counted).
    pub http_max_connections: u32,
}

impl Default for HttpServeOptions {
    fn default() -> Self {
        Self {
            port: None,
            http_dirs: 4,
            http_max_connections: HttpLimits::default().max_connections,
        }
    }
}

impl HttpServeOptions {
    /// The server these flags ask for on `ip` (`None` without --http); `lab_only` when it
    /// must serve only loopback and lab addresses.
    pub fn bind(&self, ip: std::net::IpAddr, lab_only: bool) -> Result<Option<HttpServer>> {
        let Some(port) = self.port else {
            return Ok(None);
        };
        let set = FileSet::new(self.http_dirs).map_err(|e| LoadError::config("http-dirs", e))?;
        let limits = HttpLimits {
            max_connections: self.http_max_connections,
            ..HttpLimits::default()
        };
        let addr = SocketAddr::new(ip, port);
        let opts = SockOpts::default();
        let srv = if lab_only {
            HttpServer::bind_lab_only(addr, set, opts, limits)
        } else {
            HttpServer::bind(addr, set, opts, limits)
        };
        srv.map(Some)
    }
}

/// The server's limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpLimits {
    /// Connections open at once; one more is answered 503 and closed.
    pub max_connections: u32,
    /// A keep-alive connection with no request for this long is closed (so is one whose client
    /// reads nothing of its response for this long).
    pub idle_timeout: Duration,
    /// A request head (and body, if any) still incomplete this long after its first byte is
    /// answered 408 and closed: the slow-loris guard.
    pub request_timeout: Duration,
    /// Requests on one connection; the last is answered with `Connection: close`.
    pub max_requests_per_connection: u64,
}

impl Default for HttpLimits {
    fn default() -> Self {
        Self {
            max_connections: 4096,
            idle_timeout: Duration::from_secs(60),
            request_timeout: Duration::from_secs(10),
            max_requests_per_connection: 1_000_000,
        }
    }
}

impl HttpLimits {
    fn validate(&self) -> Result<()> {
        if self.max_connections == 0 {
            return Err(LoadError::config(
                "http-max-connections",
                "0 connections serves nobody; give at least 1 (default 4096)",
            ));
        }
        if self.idle_timeout.is_zero() || self.request_timeout.is_zero() {
            return Err(LoadError::config(
                "http",
                "idle_timeout and request_timeout must be above 0 (defaults 60 s and 10 s)",
            ));
        }
        if self.max_requests_per_connection == 0 {
            return Err(LoadError::config(
                "http",
                "max_requests_per_connection must be at least 1 (default 1000000)",
            ));
        }
        Ok(())
    }
}

/// What the server has done since bind.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct HttpServeCounts {
    /// Connections accepted, including those then refused.
    pub accepted: u64,
    /// Connections answered 503 and closed because `max_connections` were open.
    pub refused_over_cap: u64,
    /// Connections closed unanswered because an address was outside loopback and lab ranges
    /// (only when bound with [`HttpServer::bind_lab_only`]).
    pub refused_scope: u64,
    /// accept(2) failures (out of descriptors or memory: the listener pauses 50 ms).
    pub accept_errors: u64,
    /// Connections open now.
    pub open: u32,
    /// Requests parsed (complete heads, good or bad).
    pub requests: u64,
    /// Responses queued, by status code (200, 400, 404, 405, 408, 413, 431, 501, 503).
    pub responses: BTreeMap<u16, u64>,
    /// Bytes the kernel took, heads and bodies.
    pub bytes_sent: u64,
    /// Connections answered 408 and closed: a request incomplete after `request_timeout`.
    pub request_timeouts: u64,
    /// Connections closed after `idle_timeout` without a request or without write progress.
    pub idle_timeouts: u64,
}

impl HttpServeCounts {
    /// Responses queued with `status`.
    pub fn status(&self, status: u16) -> u64 {
        self.responses.get(&status).copied().unwrap_or(0)
    }
}

/// Statuses the server answers with, their reasons and (but 200) a short text body.
const STATUS: [(u16, &str); 9] = [
    (200, "OK"),
    (400, "Bad Request"),
    (404, "Not Found"),
    (405, "Method Not Allowed"),
    (408, "Request Timeout"),
    (413, "Content Too Large"),
    (431, "Request Header Fields Too Large"),
    (501, "Not Implemented"),
    (503, "Service Unavailable"),
];
const S200: usize = 0;
const S400: usize = 1;
const S404: usize = 2;
const S405: usize = 3;
const S408: usize = 4;
const S413: usize = 5;
const S431: usize = 6;
const S501: usize = 7;
const S503: usize = 8;

/// Head variants: keep-alive (HTTP/1.1), closing, keep-alive for an HTTP/1.0 client (which
/// must be told).
const KEEP: usize = 0;
const CLOSE: usize = 1;
const KEEP10: usize = 2;

/// A response built once: its three heads and its body.
struct Canned {
    heads: [Box<[u8]>; 3],
    body: Box<[u8]>,
}

impl Canned {
    fn new(status: usize, extra: &str, content_type: &str, body: Box<[u8]>) -> Self {
        let (code, reason) = STATUS[status];
        let len = body.len();
        let head = |connection: &str| {
            format!(
                "HTTP/1.1 {code} {reason}\r\nServer: tcplab\r\nContent-Length: {len}\r\n\
                 Content-Type: {content_type}\r\n{extra}{connection}\r\n"
            )
            .into_bytes()
            .into_boxed_slice()
        };
        Self {
            heads: [
                head(""),
                head("Connection: close\r\n"),
                head("Connection: keep-alive\r\n"),
            ],
            body,
        }
    }
}

/// Counters of one worker, on their own cache lines so workers do not share them.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Stats {
    accepted: AtomicU64,
    refused_over_cap: AtomicU64,
    refused_scope: AtomicU64,
    accept_errors: AtomicU64,
    requests: AtomicU64,
    bytes_sent: AtomicU64,
    request_timeouts: AtomicU64,
    idle_timeouts: AtomicU64,
    status: [AtomicU64; STATUS.len()],
}

fn bump(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

/// The HTTP/1.1 server of a file set.
pub struct HttpServer {
    listener: TcpListener,
    set: FileSet,
    opts: SockOpts,
    limits: HttpLimits,
    lab_only: bool,
    /// Every file of the set, in [`slot`] order.
    files: Vec<Canned>,
    /// Error responses by status index (200's unused).
    errors: Vec<Canned>,
    /// Connections open, across workers (the cap).
    open: AtomicU32,
    stats: Vec<Stats>,
}

impl fmt::Debug for HttpServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpServer")
            .field("listener", &self.listener)
            .field("set", &self.set)
            .field("opts", &self.opts)
            .field("limits", &self.limits)
            .field("lab_only", &self.lab_only)
            .field("workers", &self.stats.len())
            .finish_non_exhaustive()
    }
}

/// A file's index in [`HttpServer::files`].
fn slot(id: &FileId) -> usize {
    let per_dir = usize::from(CLASSES) * usize::from(FILES_PER_CLASS);
    id.dir as usize * per_dir
        + usize::from(id.class) * usize::from(FILES_PER_CLASS)
        + usize::from(id.index - 1)
}

/// The listen backlog: the namespace's net.core.somaxconn (the kernel caps any larger value
/// there anyway), or 4096 when it cannot be read.
fn somaxconn() -> i32 {
    std::fs::read_to_string("/proc/sys/net/core/somaxconn")
        .ok()
        .and_then(|s| s.trim().parse::<i32>().ok())
        .filter(|n| *n > 0)
        .unwrap_or(4096)
}

impl HttpServer {
    /// Binds `addr` (SO_REUSEADDR, backlog net.core.somaxconn, `opts` on the listener and on
    /// every accepted socket) and builds every file of `set` in memory (at most
    /// [`MAX_MEMORY`]). Serves any peer: see [`Self::bind_lab_only`].
    pub fn bind(
        addr: SocketAddr,
        set: FileSet,
        opts: SockOpts,
        limits: HttpLimits,
    ) -> Result<Self> {
        Self::bind_scoped(addr, set, opts, limits, false)
    }

    /// [`Self::bind`] for an unauthenticated server reachable from outside: only loopback and
    /// lab addresses are served (a socket filter on the listener, and a check per connection),
    /// and a specific address outside them is refused.
    pub fn bind_lab_only(
        addr: SocketAddr,
        set: FileSet,
        opts: SockOpts,
        limits: HttpLimits,
    ) -> Result<Self> {
        Self::bind_scoped(addr, set, opts, limits, true)
    }

    fn bind_scoped(
        addr: SocketAddr,
        set: FileSet,
        opts: SockOpts,
        limits: HttpLimits,
        lab_only: bool,
    ) -> Result<Self> {
        limits.validate()?;
        opts.validate()?;
        let bytes = set.total_bytes();
        if bytes > MAX_MEMORY {
            let most = MAX_MEMORY / FileSet::dir_bytes();
            return Err(LoadError::config(
                "http-dirs",
                format!(
                    "--http-dirs {} makes {} MB; at most {} MB ({most} directories) are served \
                     from memory: give --http-dirs {most} or fewer, or write the set to disk \
                     (http::files::write_set) and serve it with nginx",
                    set.dirs(),
                    bytes / 1_000_000,
                    MAX_MEMORY / 1_000_000
                ),
            ));
        }
        if lab_only && !is_wildcard(addr.ip()) && !is_lab_or_loopback(addr.ip()) {
            return Err(LoadError::config(
                "listen",
                format!(
                    "{} is not a loopback or lab address ({LAB_RANGES}); --http has no \
                     authentication, so it serves only those: listen on one, or give \
                     --insecure to serve anyone who can reach the port",
                    addr.ip()
                ),
            ));
        }
        let filter = |fd: RawFd| {
            if lab_only {
                bpf::attach(fd, &bpf::only_lab())
            } else {
                Ok(())
            }
        };
        let listener = match net::listen_with(addr, &opts, somaxconn(), filter) {
            Ok(l) => l,
            Err(ConnectError::Option(e)) => return Err(e),
            Err(ConnectError::Io(e)) => {
                return Err(LoadError::config(
                    "http",
                    format!(
                        "cannot listen on {addr}: {e}; choose another port with --http \
                         (0 picks a free one)"
                    ),
                ));
            }
        };
        listener
            .set_nonblocking(true)
            .map_err(|e| LoadError::io("making the HTTP listener non-blocking", e))?;
        let files = set
            .files()
            .map(|id| {
                let mut body = vec![0u8; id.size() as usize];
                id.fill(0, &mut body);
                Canned::new(S200, "", "application/octet-stream", body.into())
            })
            .collect();
        let errors = (0..STATUS.len())
            .map(|s| {
                let (code, reason) = STATUS[s];
                let extra = if s == S405 {
                    "Allow: GET, HEAD\r\n"
                } else {
                    ""
                };
                let body = format!("{code} {reason}\n").into_bytes().into_boxed_slice();
                Canned::new(s, extra, "text/plain", body)
            })
            .collect();
        let workers = std::thread::available_parallelism()
            .map_or(1, usize::from)
            .clamp(1, MAX_WORKERS);
        Ok(Self {
            listener,
            set,
            opts,
            limits,
            lab_only,
            files,
            errors,
            open: AtomicU32::new(0),
            stats: (0..workers).map(|_| Stats::default()).collect(),
        })
    }

    /// The bound address (useful after binding port 0).
    pub fn local_addr(&self) -> Result<SocketAddr> {
        self.listener
            .local_addr()
            .map_err(|e| LoadError::io("reading the HTTP listen address", e))
    }

    /// The file set served.
    pub fn set(&self) -> FileSet {
        self.set
    }

    /// One line for a log: where, what, the limits.
    pub fn summary(&self) -> String {
        let addr = self
            .local_addr()
            .map_or_else(|_| "?".into(), |a| a.to_string());
        format!(
            "http on {addr} (SPECweb96 file set: {} directories, {:.1} MB in memory; at most \
             {} connections; {} workers{})",
            self.set.dirs(),
            self.set.total_bytes() as f64 / 1e6,
            self.limits.max_connections,
            self.stats.len(),
            if self.lab_only {
                "; loopback and lab addresses only"
            } else {
                ""
            }
        )
    }

    /// Serves until `stop` is set, on one worker thread per CPU (named `tcplab-http`), each
    /// inheriting the caller's network namespace; returns within about 50 ms of `stop`, every
    /// worker joined and every connection closed. The first worker's error stops the others.
    pub fn serve(&self, stop: &AtomicBool) -> Result<()> {
        let failed = AtomicBool::new(false);
        let workers = self
            .stats
            .iter()
            .map(|stats| worker::Worker::new(self, stats))
            .collect::<Result<Vec<_>>>()?;
        std::thread::scope(|scope| {
            let mut handles = Vec::new();
            let mut first_err = None;
            for mut w in workers {
                let failed = &failed;
                let spawned = std::thread::Builder::new()
                    .name("tcplab-http".into())
                    .spawn_scoped(scope, move || {
                        let r = w.run(stop, failed);
                        if r.is_err() {
                            failed.store(true, Ordering::Relaxed);
                        }
                        r
                    });
                match spawned {
                    Ok(h) => handles.push(h),
                    Err(e) => {
                        failed.store(true, Ordering::Relaxed);
                        first_err = Some(LoadError::io("starting an HTTP worker thread", e));
                        break;
                    }
                }
            }
            for h in handles {
                let r = h.join().unwrap_or_else(|_| {
                    Err(LoadError::io(
                        "an HTTP worker",
                        io::Error::other("panicked (a bug: please report it)"),
                    ))
                });
                if let Err(e) = r {
                    first_err.get_or_insert(e);
                }
            }
            first_err.map_or(Ok(()), Err)
        })
    }

    /// What the server has done since bind, summed over its workers.
    pub fn counts(&self) -> HttpServeCounts {
        let sum = |f: fn(&Stats) -> &AtomicU64| -> u64 {
            self.stats
                .iter()
                .map(|s| f(s).load(Ordering::Relaxed))
                .sum()
        };
        let responses = STATUS
            .iter()
            .enumerate()
            .map(|(i, (code, _))| {
                let n = self
                    .stats
                    .iter()
                    .map(|s| s.status[i].load(Ordering::Relaxed))
                    .sum();
                (*code, n)
            })
            .filter(|(_, n)| *n > 0)
            .collect();
        HttpServeCounts {
            accepted: sum(|s| &s.accepted),
            refused_over_cap: sum(|s| &s.refused_over_cap),
            refused_scope: sum(|s| &s.refused_scope),
            accept_errors: sum(|s| &s.accept_errors),
            open: self.open.load(Ordering::Relaxed),
            requests: sum(|s| &s.requests),
            responses,
            bytes_sent: sum(|s| &s.bytes_sent),
            request_timeouts: sum(|s| &s.request_timeouts),
            idle_timeouts: sum(|s| &s.idle_timeouts),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_cover_the_set_once() {
        let set = FileSet::new(3).expect("set");
        let slots: Vec<usize> = set.files().map(|id| slot(&id)).collect();
        assert_eq!(slots, (0..set.files().count()).collect::<Vec<_>>());
    }

    #[test]
    fn too_large_a_set_names_the_flag_and_the_limit() {
        let set = FileSet::new(300).expect("set");
        let addr = SocketAddr::from(([127, 0, 0, 1], 0));
        let err = HttpServer::bind(addr, set, SockOpts::default(), HttpLimits::default())
            .expect_err("over 1 GiB");
        let msg = err.to_string();
        assert!(msg.contains("--http-dirs 300 makes 1535 MB"), "{msg}");
        assert!(msg.contains("209 directories"), "{msg}");
        let err = HttpServer::bind_lab_only(
            SocketAddr::from(([8, 8, 8, 8], 0)),
            FileSet::new(1).expect("set"),
            SockOpts::default(),
            HttpLimits::default(),
        )
        .expect_err("public address");
        assert!(err.to_string().contains("--insecure"), "{err}");
    }

    #[test]
    fn canned_heads_are_the_documented_ones() {
        let c = Canned::new(S200, "", "application/octet-stream", vec![b'x'; 3].into());
        assert_eq!(
            &*c.heads[CLOSE],
            b"HTTP/1.1 200 OK\r\nServer: tcplab\r\nContent-Length: 3\r\n\
              Content-Type: application/octet-stream\r\nConnection: close\r\n\r\n"
        );
        assert!(c.heads[KEEP].ends_with(b"octet-stream\r\n\r\n"));
    }
}
