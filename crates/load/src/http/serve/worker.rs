//! A worker of the HTTP server: an epoll event loop over the shared listener (EPOLLEXCLUSIVE)
//! and its own connections (edge-triggered), with the sweep that times them out.

use std::collections::VecDeque;
use std::io::{self, IoSlice, Read};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::conn::{Conn, Cx, Verdict, error_reply, send_iov};
use super::{
    ACCEPT_BATCH, CLOSE, HttpServer, LINGER, LISTENER, MAX_HEAD, S408, S503, Stats, TICK, bump,
};
use crate::error::{LoadError, Result};
use crate::sockopt::Apply;
use tcplab_auth::scope::is_lab_or_loopback;

/// An epoll instance.
struct Epoll(OwnedFd);

impl Epoll {
    fn new() -> io::Result<Self> {
        // Safety: plain epoll_create1(2); the result is checked before use.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // Safety: `fd` is a fresh descriptor that nothing else owns.
        Ok(Self(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    fn add(&self, fd: RawFd, token: u64, events: u32) -> io::Result<()> {
        let mut ev = libc::epoll_event { events, u64: token };
        // Safety: both descriptors are open and `ev` is a live epoll_event.
        let rc = unsafe { libc::epoll_ctl(self.0.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    fn del(&self, fd: RawFd) {
        let mut ev = libc::epoll_event { events: 0, u64: 0 };
        // Safety: as in `add`; a failure (not registered) leaves nothing to undo.
        let _ = unsafe { libc::epoll_ctl(self.0.as_raw_fd(), libc::EPOLL_CTL_DEL, fd, &mut ev) };
    }

    fn wait(&self, events: &mut [libc::epoll_event], timeout: Duration) -> io::Result<usize> {
        let ms = timeout.as_millis().min(i32::MAX as u128) as libc::c_int;
        let max = events.len().min(i32::MAX as usize) as libc::c_int;
        // Safety: `events` is writable for `max` entries.
        let n = unsafe { libc::epoll_wait(self.0.as_raw_fd(), events.as_mut_ptr(), max, ms) };
        if n >= 0 {
            Ok(n as usize)
        } else {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                Ok(0)
            } else {
                Err(e)
            }
        }
    }
}

/// One event loop: its epoll, its connections, its scratch buffer.
pub(super) struct Worker<'s> {
    srv: &'s HttpServer,
    stats: &'s Stats,
    ep: Epoll,
    conns: Vec<Option<Conn<'s>>>,
    free: Vec<usize>,
    ready: VecDeque<usize>,
    scratch: Box<[u8]>,
    now: Instant,
    /// The listener is out of this epoll until then (accept ran out of descriptors).
    paused_until: Option<Instant>,
}

const LISTEN_EVENTS: u32 = (libc::EPOLLIN | libc::EPOLLEXCLUSIVE) as u32;
/// A FIN, a reset or an error: the event's mask says so, and no later edge will.
const HANGUPS: u32 = (libc::EPOLLRDHUP | libc::EPOLLHUP | libc::EPOLLERR) as u32;
const CONN_EVENTS: u32 = (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP | libc::EPOLLET) as u32;

impl<'s> Worker<'s> {
    pub(super) fn new(srv: &'s HttpServer, stats: &'s Stats) -> Result<Self> {
        let ep = Epoll::new().map_err(|e| LoadError::io("creating an HTTP worker's epoll", e))?;
        ep.add(srv.listener.as_raw_fd(), LISTENER, LISTEN_EVENTS)
            .map_err(|e| LoadError::io("watching the HTTP listener (EPOLLEXCLUSIVE, 4.5+)", e))?;
        Ok(Self {
            srv,
            stats,
            ep,
            conns: Vec::new(),
            free: Vec::new(),
            ready: VecDeque::new(),
            scratch: vec![0u8; MAX_HEAD + 1].into_boxed_slice(),
            now: Instant::now(),
            paused_until: None,
        })
    }

    pub(super) fn run(&mut self, stop: &AtomicBool, failed: &AtomicBool) -> Result<()> {
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 256];
        let srv = self.srv;
        let limits = &srv.limits;
        // Timeouts are checked this often: a fraction of the shortest, within 5-100 ms.
        let sweep_every = (limits.request_timeout.min(limits.idle_timeout) / 8)
            .clamp(Duration::from_millis(5), Duration::from_millis(100));
        let mut next_sweep = Instant::now() + sweep_every;
        while !stop.load(Ordering::Relaxed) && !failed.load(Ordering::Relaxed) {
            let wait = if self.ready.is_empty() {
                TICK.min(next_sweep.saturating_duration_since(self.now))
            } else {
                Duration::ZERO
            };
            let n = self
                .ep
                .wait(&mut events, wait)
                .map_err(|e| LoadError::io("waiting for HTTP connections (epoll_wait)", e))?;
            self.now = Instant::now();
            for ev in &events[..n] {
                let (token, mask) = (ev.u64, ev.events);
                if token == LISTENER {
                    self.accept_some();
                } else {
                    self.turn(token as usize, mask & HANGUPS == 0);
                }
            }
            for _ in 0..self.ready.len() {
                if let Some(i) = self.ready.pop_front() {
                    if let Some(c) = self.conns.get_mut(i).and_then(Option::as_mut) {
                        c.in_ready = false;
                    }
                    self.turn(i, false);
                }
            }
            if self.now >= next_sweep {
                self.sweep();
                next_sweep = self.now + sweep_every;
            }
            if self.paused_until.is_some_and(|t| self.now >= t) {
                self.paused_until = None;
                let fd = self.srv.listener.as_raw_fd();
                self.ep
                    .add(fd, LISTENER, LISTEN_EVENTS)
                    .map_err(|e| LoadError::io("watching the HTTP listener again", e))?;
            }
        }
        for i in 0..self.conns.len() {
            self.close(i);
        }
        Ok(())
    }

    /// A turn of connection `i`, if it is still open.
    fn turn(&mut self, i: usize, short_is_empty: bool) {
        let Some(conn) = self.conns.get_mut(i).and_then(Option::as_mut) else {
            return;
        };
        let mut cx = Cx {
            srv: self.srv,
            stats: self.stats,
            scratch: &mut self.scratch,
            now: self.now,
        };
        match conn.drive(&mut cx, short_is_empty) {
            Verdict::Wait => {}
            Verdict::More => {
                if !conn.in_ready {
                    conn.in_ready = true;
                    self.ready.push_back(i);
                }
            }
            Verdict::Close => self.close(i),
        }
    }

    fn close(&mut self, i: usize) {
        if let Some(slot) = self.conns.get_mut(i)
            && slot.take().is_some()
        {
            self.free.push(i);
            self.srv.open.fetch_sub(1, Ordering::Relaxed);
        }
    }

    fn accept_some(&mut self) {
        for _ in 0..ACCEPT_BATCH {
            match self.srv.listener.accept() {
                Ok((sock, peer)) => self.admit(sock, peer),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::Interrupted | io::ErrorKind::ConnectionAborted
                    ) => {}
                Err(_) => {
                    // Out of descriptors or memory (or stranger): the connection waits in the
                    // backlog, counted, and the listener rests so the loop does not spin on it.
                    bump(&self.stats.accept_errors, 1);
                    self.ep.del(self.srv.listener.as_raw_fd());
                    self.paused_until = Some(self.now + Duration::from_millis(50));
                    return;
                }
            }
        }
    }

    fn admit(&mut self, sock: TcpStream, peer: SocketAddr) {
        let srv = self.srv;
        bump(&self.stats.accepted, 1);
        if srv.lab_only
            && (!is_lab_or_loopback(peer.ip())
                || !sock.local_addr().is_ok_and(|a| is_lab_or_loopback(a.ip())))
        {
            // The socket filter drops these; this is the second lock on the same door.
            bump(&self.stats.refused_scope, 1);
            return;
        }
        if srv.open.fetch_add(1, Ordering::Relaxed) >= srv.limits.max_connections {
            srv.open.fetch_sub(1, Ordering::Relaxed);
            bump(&self.stats.refused_over_cap, 1);
            self.refuse(sock);
            return;
        }
        let fd = sock.as_raw_fd();
        // Options were inherited from the listener; re-applying is harmless (as for the
        // workloads' data sockets) and covers any the kernel does not inherit.
        let ok = sock.set_nonblocking(true).is_ok() && srv.opts.apply(fd).is_ok();
        let i = self.free.pop().unwrap_or_else(|| {
            self.conns.push(None);
            self.conns.len() - 1
        });
        self.conns[i] = Some(Conn::new(sock, self.now));
        if !ok || self.ep.add(fd, i as u64, CONN_EVENTS).is_err() {
            self.close(i);
        }
        // Adding an edge-triggered socket reports its current state: the first turn comes
        // from the next wait.
    }

    /// Over the cap: 503, our FIN, a read of what already came (so the close is a FIN, not a
    /// reset that could destroy the 503), closed.
    fn refuse(&mut self, sock: TcpStream) {
        let canned = &self.srv.errors[S503];
        let _ = sock.set_nonblocking(true);
        let iov = [
            IoSlice::new(&canned.heads[CLOSE]),
            IoSlice::new(&canned.body),
        ];
        let want = iov.iter().map(|s| s.len()).sum::<usize>();
        if let Ok(n) = send_iov(sock.as_raw_fd(), &iov) {
            bump(&self.stats.bytes_sent, n as u64);
            if n == want {
                bump(&self.stats.status[S503], 1);
            }
        }
        let _ = sock.shutdown(Shutdown::Write);
        let _ = (&sock).read(&mut self.scratch);
    }

    /// Closes what timed out: lingering past [`LINGER`], idle past `idle_timeout`, a request
    /// incomplete past `request_timeout` (after a 408).
    fn sweep(&mut self) {
        let srv = self.srv;
        let limits = &srv.limits;
        let linger = LINGER.min(limits.idle_timeout);
        for i in 0..self.conns.len() {
            let Some(c) = self.conns[i].as_mut() else {
                continue;
            };
            let idle = self.now.saturating_duration_since(c.last);
            if c.lingering {
                if idle >= linger {
                    self.close(i);
                }
            } else if c
                .request_since
                .is_some_and(|t| self.now.saturating_duration_since(t) >= limits.request_timeout)
            {
                bump(&self.stats.request_timeouts, 1);
                let mut cx = Cx {
                    srv: self.srv,
                    stats: self.stats,
                    scratch: &mut self.scratch,
                    now: self.now,
                };
                c.respond(&mut cx, error_reply(S408));
                self.turn(i, false);
            } else if idle >= limits.idle_timeout {
                bump(&self.stats.idle_timeouts, 1);
                self.close(i);
            }
        }
    }
}
