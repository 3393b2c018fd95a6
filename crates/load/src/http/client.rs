//! The HTTP client: one epoll event loop per thread, each driving its share of the
//! connections with non-blocking sockets (as wrk does: a thread per connection would spend
//! the CPU it shares with the server on context switches at tens of thousands of requests/s).
//!
//! Closed loop: a connection sends its next request as soon as the last one is answered.
//! Open loop (`--rate`): each thread follows its share of the schedule; a request whose turn
//! comes while every connection is busy waits for one, and its response time still counts from
//! its intended start (wrk2's correction for coordinated omission). With a connection per
//! request, the response time includes the connect, as SPECweb96 measured it.

use std::collections::VecDeque;
use std::io::{ErrorKind as IoKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use rand::{Rng, SeedableRng};
use rustix::event::epoll;
use rustix::net::{AddressFamily, SocketFlags, SocketType};

use super::config::HttpConfig;
use super::fileset::FileId;
use super::mix::Mixer;
use super::parse::{Done, ErrorKind, Expect, Progress, ResponseReader};
use super::result::{HttpSample, LoopRecord, NONE};
use crate::clock::{ThreadTimes, now_ns};
use crate::sockopt::Apply;

/// Most raw samples kept per run (48 bytes each).
pub const MAX_SAMPLES: u64 = 2_000_000;

/// Bytes read per read(2): a whole typical response at once.
const READ_BUF: usize = 64 * 1024;

/// A connect that failed for want of local ports is tried again after this long, so an
/// exhausted port range is not a busy loop.
const PORT_RETRY_NS: u64 = 1_000_000;

/// How often in-flight requests are checked against their timeouts.
const TIMEOUT_SCAN_NS: u64 = 5_000_000;

/// Shared by the loops: the run's bounds and the counters a live reporter reads.
#[derive(Debug)]
pub(crate) struct Plan<'a> {
    pub cfg: &'a HttpConfig,
    pub target: SocketAddr,
    pub host: String,
    pub t0: u64,
    pub deadline: u64,
    /// Requests started (against `--count`).
    pub claimed: AtomicU64,
    /// Successful requests so far.
    pub completed: AtomicU64,
    /// Failed requests so far.
    pub failed: AtomicU64,
    /// Set when the loops must stop.
    pub stop: AtomicBool,
    /// Raw samples each loop may keep.
    pub samples_per_loop: usize,
}

impl Plan<'_> {
    /// Claims one request against `--count`; false once they are all claimed.
    fn claim(&self) -> bool {
        let limit = self.cfg.count.unwrap_or(u64::MAX);
        self.claimed.fetch_add(1, Ordering::AcqRel) < limit
    }
}

/// Where a connection is in its request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// No request outstanding (an open keep-alive socket may be kept).
    Idle,
    /// Non-blocking connect in progress.
    Connecting,
    /// Writing the request.
    Writing,
    /// Reading the response.
    Reading,
    /// The response is in and the server said it closes: waiting for its FIN, so the
    /// connection ends the way HTTP/1.0 ends it (the server closes first and keeps the
    /// TIME_WAIT, as in seed 003), before the connection takes another request.
    Draining,
}

#[derive(Debug)]
struct Conn {
    sock: Option<TcpStream>,
    state: State,
    op: HttpSample,
    file: Option<FileId>,
    /// Requests answered on the open socket.
    served: u64,
    req: Vec<u8>,
    req_pos: usize,
    reader: ResponseReader,
    /// When the current phase times out.
    deadline: u64,
    /// Not before this (a connect refused for want of ports waits).
    not_before: u64,
}

/// The open-loop schedule of one loop: intended starts, fixed period or Poisson gaps.
#[derive(Debug)]
struct Schedule {
    period_ns: f64,
    poisson: Option<rand_chacha::ChaCha8Rng>,
    next: f64,
}

impl Schedule {
    fn new(rate: f64, poisson: bool, seed: u64, t0: u64) -> Self {
        Self {
            period_ns: 1e9 / rate,
            poisson: poisson.then(|| rand_chacha::ChaCha8Rng::seed_from_u64(seed)),
            next: t0 as f64,
        }
    }

    /// The next intended start, ns.
    fn peek(&self) -> u64 {
        self.next as u64
    }

    fn advance(&mut self) {
        let gap = match self.poisson.as_mut() {
            Some(rng) => -(1.0 - rng.random::<f64>()).ln() * self.period_ns,
            None => self.period_ns,
        };
        self.next += gap;
    }
}

/// One event loop over `n` connections; `index` tells loops apart (seeds).
pub(crate) fn run_loop(plan: &Plan<'_>, index: u32, n: u32) -> (LoopRecord, ThreadTimes) {
    let times0 = ThreadTimes::now();
    let cfg = plan.cfg;
    let mut rec = LoopRecord::new(cfg.rate.is_some(), cfg.deadline_s(), plan.samples_per_loop);
    let record = event_loop(plan, index, n, &mut rec);
    if let Err(e) = record {
        rec.examples
            .entry("loop".into())
            .or_insert_with(|| format!("the event loop stopped: {e}"));
    }
    (rec, ThreadTimes::now().since(times0))
}

fn event_loop(plan: &Plan<'_>, index: u32, n: u32, rec: &mut LoopRecord) -> std::io::Result<()> {
    let cfg = plan.cfg;
    let ep = epoll::create(epoll::CreateFlags::CLOEXEC)?;
    let seed = cfg.seed ^ u64::from(index).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut mixer = Mixer::new(&cfg.mix, seed).map_err(std::io::Error::other)?;
    let mut conns: Vec<Conn> = (0..n)
        .map(|_| Conn {
            sock: None,
            state: State::Idle,
            op: HttpSample::default(),
            file: None,
            served: 0,
            req: Vec::with_capacity(256),
            req_pos: 0,
            reader: ResponseReader::new(),
            deadline: u64::MAX,
            not_before: 0,
        })
        .collect();
    let mut schedule = cfg.rate.map(|r| {
        let share = r * f64::from(n) / f64::from(cfg.connections);
        Schedule::new(share, cfg.poisson, seed, plan.t0)
    });
    let mut due: VecDeque<u64> = VecDeque::new();
    let mut idle: Vec<usize> = (0..conns.len()).rev().collect();
    let mut buf = vec![0u8; READ_BUF];
    let mut events: Vec<epoll::Event> = Vec::with_capacity(256);
    let mut exhausted = false;
    let mut next_scan = plan.t0 + TIMEOUT_SCAN_NS;
    loop {
        let now = now_ns();
        if now >= plan.deadline || plan.stop.load(Ordering::Relaxed) {
            break;
        }
        // Open loop: every intended start that has come joins the queue.
        if let Some(s) = schedule.as_mut() {
            while !exhausted && s.peek() <= now {
                if plan.claim() {
                    due.push_back(s.peek());
                    s.advance();
                } else {
                    exhausted = true;
                }
            }
        }
        // Idle connections take the next request.
        let mut waiting = Vec::new();
        while let Some(i) = idle.pop() {
            let c = &mut conns[i];
            if c.not_before > now {
                waiting.push(i);
                continue;
            }
            let intended = if schedule.is_some() {
                match due.pop_front() {
                    Some(t) => Some(t),
                    None => {
                        waiting.push(i);
                        break;
                    }
                }
            } else if !exhausted && plan.claim() {
                None
            } else {
                exhausted = true;
                waiting.push(i);
                break;
            };
            start(plan, &ep, i, c, &mut mixer, intended, rec);
            if conns[i].state == State::Idle {
                waiting.push(i);
            }
        }
        idle.extend(waiting);
        if exhausted && due.is_empty() && idle.len() == conns.len() {
            break;
        }
        // Sleep until an event, the next intended start, a retry or a timeout scan.
        let mut wake = next_scan.min(plan.deadline);
        if let Some(s) = schedule.as_ref()
            && !exhausted
        {
            wake = wake.min(s.peek());
        }
        for &i in &idle {
            if conns[i].not_before > now {
                wake = wake.min(conns[i].not_before);
            }
        }
        let wait_ns = wake.saturating_sub(now_ns());
        let timeout = rustix::time::Timespec {
            tv_sec: (wait_ns / 1_000_000_000) as i64,
            tv_nsec: (wait_ns % 1_000_000_000) as i64,
        };
        events.clear();
        match epoll::wait(
            &ep,
            rustix::buffer::spare_capacity(&mut events),
            Some(&timeout),
        ) {
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
        for ev in &events {
            let i = ev.data.u64() as usize;
            let Some(c) = conns.get_mut(i) else { continue };
            let was_busy = c.state != State::Idle;
            on_ready(plan, i, c, &mut buf, rec);
            if was_busy && c.state == State::Idle {
                idle.push(i);
            }
        }
        let now = now_ns();
        if now >= next_scan {
            next_scan = now + TIMEOUT_SCAN_NS;
            for (i, c) in conns.iter_mut().enumerate() {
                if c.state == State::Draining && now >= c.deadline {
                    // The server never closed: ours to close, the response was whole.
                    c.sock = None;
                    c.state = State::Idle;
                    c.deadline = u64::MAX;
                    idle.push(i);
                } else if c.state != State::Idle && now >= c.deadline {
                    let phase = if c.state == State::Connecting {
                        "no connection"
                    } else {
                        "no complete response"
                    };
                    let why = format!(
                        "{phase} within {} ms",
                        if c.state == State::Connecting {
                            cfg.connect_timeout_ms
                        } else {
                            cfg.timeout_ms
                        }
                    );
                    fail(plan, c, ErrorKind::Timeout, false, &why, rec);
                    idle.push(i);
                }
            }
        }
    }
    Ok(())
}

/// Starts a request on an idle connection: a connect first if it has no socket. `intended`
/// is its scheduled start in an open loop; a closed loop's request starts now, stamped just
/// before its connect or write so the loop's own turn is not counted against the server.
fn start(
    plan: &Plan<'_>,
    ep: &impl AsFd,
    i: usize,
    c: &mut Conn,
    mixer: &mut Mixer,
    intended: Option<u64>,
    rec: &mut LoopRecord,
) {
    let now = now_ns();
    let intended = intended.unwrap_or(now);
    let target = mixer.draw();
    c.file = target.file;
    c.op = HttpSample {
        intended_ns: intended,
        start_ns: now,
        class: target.file.map_or(NONE, |f| f.class),
        error: NONE,
        ..HttpSample::default()
    };
    c.req.clear();
    if c.sock.is_none() {
        c.served = 0;
    }
    let close = plan.cfg.requests_per_connection == Some(c.served + 1);
    let _ = write!(
        c.req,
        "GET {} HTTP/1.1\r\nHost: {}\r\n{}\r\n",
        target.path,
        plan.host,
        if close { "Connection: close\r\n" } else { "" }
    );
    c.req_pos = 0;
    if c.sock.is_some() {
        c.state = State::Writing;
        c.deadline = now + plan.cfg.timeout_ms * 1_000_000;
        write_request(plan, c, rec);
        return;
    }
    match connect(plan, ep, i) {
        Ok((sock, done)) => {
            c.sock = Some(sock);
            rec.opened += 1;
            if done {
                c.op.connected_ns = now_ns();
                c.state = State::Writing;
                c.deadline = now + plan.cfg.timeout_ms * 1_000_000;
                write_request(plan, c, rec);
            } else {
                c.state = State::Connecting;
                c.deadline = now + plan.cfg.connect_timeout_ms * 1_000_000;
            }
        }
        Err(e) => connect_failed(plan, c, &e, rec),
    }
}

/// A non-blocking connect registered with the loop's epoll (edge-triggered, every event the
/// connection can need, so no epoll_ctl is needed afterwards); `true` if already connected.
fn connect(plan: &Plan<'_>, ep: &impl AsFd, i: usize) -> std::io::Result<(TcpStream, bool)> {
    let family = match plan.target {
        SocketAddr::V4(_) => AddressFamily::INET,
        SocketAddr::V6(_) => AddressFamily::INET6,
    };
    let fd = rustix::net::socket_with(
        family,
        SocketType::STREAM,
        SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
        None,
    )?;
    plan.cfg
        .opts
        .apply(fd.as_raw_fd())
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    let done = match rustix::net::connect(&fd, &plan.target) {
        Ok(()) => true,
        Err(rustix::io::Errno::INPROGRESS) => false,
        Err(e) => return Err(e.into()),
    };
    let flags = epoll::EventFlags::IN
        | epoll::EventFlags::OUT
        | epoll::EventFlags::RDHUP
        | epoll::EventFlags::ET;
    epoll::add(ep, &fd, epoll::EventData::new_u64(i as u64), flags)?;
    Ok((TcpStream::from(fd), done))
}

fn connect_failed(plan: &Plan<'_>, c: &mut Conn, e: &std::io::Error, rec: &mut LoopRecord) {
    let ports = e.raw_os_error() == Some(libc::EADDRNOTAVAIL);
    let kind = match e.raw_os_error() {
        Some(libc::ECONNREFUSED) => ErrorKind::Refused,
        Some(libc::ECONNRESET) => ErrorKind::Reset,
        Some(libc::ETIMEDOUT) => ErrorKind::Timeout,
        _ => ErrorKind::Connect,
    };
    let why = if ports {
        "connect: no local port free (EADDRNOTAVAIL): widen net.ipv4.ip_local_port_range or reuse TIME_WAIT ports".to_string()
    } else {
        format!("connect: {e}")
    };
    fail(plan, c, kind, ports, &why, rec);
    if ports {
        c.not_before = now_ns() + PORT_RETRY_NS;
    }
}

/// The socket is ready for what its state waits for.
fn on_ready(plan: &Plan<'_>, _i: usize, c: &mut Conn, buf: &mut [u8], rec: &mut LoopRecord) {
    match c.state {
        State::Connecting => {
            let Some(sock) = c.sock.as_ref() else { return };
            match rustix::net::sockopt::socket_error(sock) {
                Ok(Ok(())) => {
                    // Still in progress: an edge for another reason (none expected).
                    if sock.peer_addr().is_err() {
                        return;
                    }
                    c.op.connected_ns = now_ns();
                    c.state = State::Writing;
                    c.deadline = now_ns() + plan.cfg.timeout_ms * 1_000_000;
                    write_request(plan, c, rec);
                }
                Ok(Err(errno)) => {
                    c.sock = None;
                    connect_failed(plan, c, &errno.into(), rec);
                }
                Err(e) => {
                    c.sock = None;
                    connect_failed(plan, c, &e.into(), rec);
                }
            }
        }
        State::Writing => write_request(plan, c, rec),
        State::Reading => read_response(plan, c, buf, rec),
        State::Draining => drain(c, buf, rec),
        State::Idle => idle_socket_event(c, buf, rec),
    }
}

/// Writes what is left of the request; on EAGAIN the next edge resumes it.
fn write_request(plan: &Plan<'_>, c: &mut Conn, rec: &mut LoopRecord) {
    let Some(mut sock) = c.sock.as_ref() else {
        return;
    };
    while c.req_pos < c.req.len() {
        match sock.write(&c.req[c.req_pos..]) {
            Ok(0) => {
                fail(
                    plan,
                    c,
                    ErrorKind::Reset,
                    false,
                    "write: connection closed",
                    rec,
                );
                return;
            }
            Ok(n) => c.req_pos += n,
            Err(e) if e.kind() == IoKind::WouldBlock => return,
            Err(e) if e.kind() == IoKind::Interrupted => {}
            Err(e) => {
                let kind = io_kind(&e);
                fail(plan, c, kind, false, &format!("write: {e}"), rec);
                return;
            }
        }
    }
    c.state = State::Reading;
    c.reader.reset(Expect {
        size: c.file.map(|f| f.size()),
        file: c.file,
        check_content: plan.cfg.check_content,
        head_request: false,
    });
}

fn io_kind(e: &std::io::Error) -> ErrorKind {
    match e.kind() {
        IoKind::ConnectionReset | IoKind::BrokenPipe | IoKind::ConnectionAborted => {
            ErrorKind::Reset
        }
        IoKind::ConnectionRefused => ErrorKind::Refused,
        IoKind::TimedOut => ErrorKind::Timeout,
        _ => ErrorKind::Truncated,
    }
}

/// Reads until the response is complete or the socket has nothing more for now.
fn read_response(plan: &Plan<'_>, c: &mut Conn, buf: &mut [u8], rec: &mut LoopRecord) {
    loop {
        let Some(mut sock) = c.sock.as_ref() else {
            return;
        };
        let outcome = match sock.read(buf) {
            Ok(0) => c.reader.eof().map(Progress::Done),
            Ok(n) => {
                if c.op.first_byte_ns == 0 {
                    c.op.first_byte_ns = now_ns();
                }
                match c.reader.feed(&buf[..n]) {
                    Ok(Progress::Done(d)) if d.consumed < n => {
                        let why = format!(
                            "{} bytes after the response, with no request outstanding",
                            n - d.consumed
                        );
                        fail(plan, c, ErrorKind::Malformed, false, &why, rec);
                        return;
                    }
                    other => other,
                }
            }
            Err(e) if e.kind() == IoKind::WouldBlock => return,
            Err(e) if e.kind() == IoKind::Interrupted => continue,
            Err(e) => {
                let kind = io_kind(&e);
                fail(plan, c, kind, false, &format!("read: {e}"), rec);
                return;
            }
        };
        match outcome {
            Ok(Progress::More) => {}
            Ok(Progress::Done(d)) => {
                complete(plan, c, &d, rec);
                if c.state == State::Draining {
                    // Edge-triggered: the FIN may already be in, its edge consumed by
                    // this read; look now rather than wait for an edge that will not come.
                    drain(c, buf, rec);
                }
                return;
            }
            Err(e) => {
                fail(plan, c, e.kind, false, &e.reason, rec);
                return;
            }
        }
    }
}

/// A response arrived whole.
fn complete(plan: &Plan<'_>, c: &mut Conn, d: &Done, rec: &mut LoopRecord) {
    let now = now_ns();
    c.op.done_ns = now;
    c.op.status = d.status;
    c.op.bytes = u32::try_from(d.body_bytes).unwrap_or(u32::MAX);
    if c.op.first_byte_ns == 0 {
        c.op.first_byte_ns = now;
    }
    c.served += 1;
    let keep = d.keep_alive
        && plan
            .cfg
            .requests_per_connection
            .is_none_or(|n| c.served < n);
    if d.keep_alive && !keep {
        // We close (our count is reached) though the server would have kept it.
        c.sock = None;
    }
    if d.keep_alive || c.sock.is_none() {
        c.state = State::Idle;
        c.deadline = u64::MAX;
    } else {
        c.state = State::Draining;
        c.deadline = now + plan.cfg.timeout_ms * 1_000_000;
    }
    if (200..400).contains(&d.status) {
        plan.completed.fetch_add(1, Ordering::Relaxed);
        rec.record(c.op, plan.t0, None);
    } else {
        plan.failed.fetch_add(1, Ordering::Relaxed);
        c.op.error = ErrorKind::Status as u8;
        let why = format!("status {}", d.status);
        rec.record(c.op, plan.t0, Some((ErrorKind::Status, false, &why)));
    }
}

/// The request failed: the connection is closed (its state is unknown) and the failure
/// recorded.
fn fail(
    plan: &Plan<'_>,
    c: &mut Conn,
    kind: ErrorKind,
    ports: bool,
    why: &str,
    rec: &mut LoopRecord,
) {
    c.sock = None;
    c.state = State::Idle;
    c.deadline = u64::MAX;
    c.op.done_ns = now_ns();
    c.op.error = kind as u8;
    plan.failed.fetch_add(1, Ordering::Relaxed);
    rec.record(c.op, plan.t0, Some((kind, ports, why)));
}

/// Waits for the server's FIN after a response that said it closes; anything else it sends
/// is noted, and the connection is closed either way.
fn drain(c: &mut Conn, buf: &mut [u8], rec: &mut LoopRecord) {
    let Some(mut sock) = c.sock.as_ref() else {
        c.state = State::Idle;
        return;
    };
    loop {
        match sock.read(buf) {
            Ok(0) => break,
            Ok(n) => {
                rec.examples
                    .entry("unsolicited".into())
                    .or_insert_with(|| format!("{n} bytes after a response that closes"));
                break;
            }
            Err(e) if e.kind() == IoKind::WouldBlock => return,
            Err(e) if e.kind() == IoKind::Interrupted => {}
            Err(_) => break,
        }
    }
    c.sock = None;
    c.state = State::Idle;
    c.deadline = u64::MAX;
}

/// An event on a kept-alive socket with no request outstanding: the server closed it (its
/// keep-alive timeout), which is normal, or sent bytes nobody asked for, which is not.
fn idle_socket_event(c: &mut Conn, buf: &mut [u8], rec: &mut LoopRecord) {
    let Some(mut sock) = c.sock.as_ref() else {
        return;
    };
    match sock.read(buf) {
        Ok(0) => c.sock = None,
        Ok(n) => {
            rec.examples
                .entry("unsolicited".into())
                .or_insert_with(|| format!("{n} bytes arrived with no request outstanding"));
            c.sock = None;
        }
        Err(e) if e.kind() == IoKind::WouldBlock => {}
        Err(_) => c.sock = None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fixed_schedule_keeps_its_period_and_poisson_its_mean() {
        let mut s = Schedule::new(1000.0, false, 0, 5);
        let starts: Vec<u64> = (0..4)
            .map(|_| {
                let t = s.peek();
                s.advance();
                t
            })
            .collect();
        assert_eq!(starts, [5, 1_000_005, 2_000_005, 3_000_005]);
        let mut p = Schedule::new(1000.0, true, 7, 0);
        let n = 100_000;
        (0..n).for_each(|_| p.advance());
        let mean_gap = p.peek() as f64 / f64::from(n);
        assert!((mean_gap - 1e6).abs() < 1.5e4, "{mean_gap}");
    }
}
