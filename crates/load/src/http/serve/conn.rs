//! One connection of the HTTP server, sans epoll: what to answer a parsed request
//! ([`decide`], pure), and the connection's turn — write what is queued, answer what was read,
//! read more — until the kernel makes it wait.

use std::collections::VecDeque;
use std::io::{self, IoSlice, Read};
use std::net::{Shutdown, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::time::Instant;

use super::super::fileset::FileSet;
use super::{
    BUDGET, CLOSE, HttpServer, IOV, KEEP, KEEP10, MAX_BODY, MAX_HEAD, MAX_HEADERS, MAX_QUEUED,
    S200, S400, S404, S405, S413, S431, S501, Stats, bump, slot,
};
use crate::sockopt::{rearm_quickack, set_int};

/// sendmsg(2) of `iov` with MSG_NOSIGNAL (a peer gone is EPIPE, never SIGPIPE) and
/// MSG_DONTWAIT.
pub(super) fn send_iov(fd: RawFd, iov: &[IoSlice<'_>]) -> io::Result<usize> {
    // Safety: msghdr is plain old data; all-zero is a valid empty message.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    // IoSlice is guaranteed ABI-compatible with iovec on Unix.
    msg.msg_iov = iov.as_ptr() as *mut libc::iovec;
    msg.msg_iovlen = iov.len() as _;
    // Safety: `msg` points at `iov.len()` live iovecs describing borrowed, live buffers.
    let n = unsafe { libc::sendmsg(fd, &msg, libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT) };
    if n >= 0 {
        Ok(n as usize)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// What to send for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Reply {
    /// A file's slot, or `None` for the error response of `status`.
    file: Option<usize>,
    status: usize,
    /// HEAD: the head alone.
    head_only: bool,
    /// KEEP, CLOSE or KEEP10.
    variant: usize,
    /// Request body bytes to skip before the next request.
    body: u64,
}

/// Case-insensitive comma-separated token lists (`Connection: keep-alive, Upgrade`).
fn has_token(value: &[u8], token: &str) -> bool {
    value
        .split(|b| *b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
}

/// The answer to a parsed request; `served` requests came before it on its connection.
pub(super) fn decide(
    req: &httparse::Request<'_, '_>,
    set: &FileSet,
    served: u64,
    max: u64,
) -> Reply {
    let http10 = req.version == Some(0);
    let (mut close, mut keep, mut hosts, mut chunked, mut bad) = (false, false, 0, false, false);
    let mut length: Option<u64> = None;
    for h in req.headers.iter() {
        let name = h.name.as_bytes();
        if name.eq_ignore_ascii_case(b"connection") {
            close |= has_token(h.value, "close");
            keep |= has_token(h.value, "keep-alive");
        } else if name.eq_ignore_ascii_case(b"host") {
            hosts += 1;
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            chunked = true;
        } else if name.eq_ignore_ascii_case(b"content-length") {
            let v = h.value.trim_ascii();
            let n = (!v.is_empty() && v.len() <= 18 && v.iter().all(u8::is_ascii_digit))
                .then(|| v.iter().fold(0u64, |n, d| n * 10 + u64::from(d - b'0')));
            match (n, length) {
                (None, _) => bad = true,
                (Some(n), Some(prev)) if n != prev => bad = true,
                (Some(n), _) => length = Some(n),
            }
        }
    }
    let keep_alive = !close && (!http10 || keep) && served.saturating_add(1) < max;
    let variant = match (keep_alive, http10) {
        (false, _) => CLOSE,
        (true, false) => KEEP,
        (true, true) => KEEP10,
    };
    let method = req.method.unwrap_or("");
    let head_only = method == "HEAD";
    let error = |status| Reply {
        file: None,
        status,
        head_only,
        variant: CLOSE,
        body: 0,
    };
    // RFC 9112 §3.2: an HTTP/1.1 request without exactly one Host is a 400.
    if bad || (!http10 && hosts != 1) {
        return error(S400);
    }
    if method != "GET" && !head_only {
        return error(S405);
    }
    if chunked {
        return error(S501);
    }
    let body = length.unwrap_or(0);
    if body > MAX_BODY {
        return error(S413);
    }
    let mut path = req.path.unwrap_or("");
    // The absolute form (`GET http://host/dir00000/class0_1`), which proxies send.
    if let Some(rest) = path.strip_prefix("http://") {
        path = rest.find('/').map_or("/", |i| &rest[i..]);
    }
    let file = set.lookup(path).map(|id| slot(&id));
    Reply {
        file,
        status: if file.is_some() { S200 } else { S404 },
        head_only,
        variant,
        body,
    }
}

/// What a connection asks of its worker after a turn.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    /// Waiting for the kernel (EPOLLIN or EPOLLOUT).
    Wait,
    /// Out of budget with work left: another turn soon.
    More,
    /// Done: close it.
    Close,
}

/// What a connection's turn may use of its worker.
pub(super) struct Cx<'w, 's> {
    pub(super) srv: &'s HttpServer,
    pub(super) stats: &'s Stats,
    pub(super) scratch: &'w mut [u8],
    pub(super) now: Instant,
}

/// One client connection.
pub(super) struct Conn<'s> {
    pub(super) sock: TcpStream,
    /// Unparsed bytes from `start` on.
    pub(super) inbuf: Vec<u8>,
    pub(super) start: usize,
    /// Request body bytes still to skip.
    pub(super) body: u64,
    /// What to send, in order, borrowed from the server; `off` bytes of the first are sent.
    pub(super) out: VecDeque<&'s [u8]>,
    pub(super) off: usize,
    pub(super) queued: usize,
    pub(super) served: u64,
    /// After what is queued, no more: shut down and linger.
    pub(super) close_after: bool,
    pub(super) lingering: bool,
    /// When the current incomplete request's first byte arrived.
    pub(super) request_since: Option<Instant>,
    /// Last read or write progress.
    pub(super) last: Instant,
    pub(super) in_ready: bool,
}

impl<'s> Conn<'s> {
    pub(super) fn new(sock: TcpStream, now: Instant) -> Self {
        Self {
            sock,
            inbuf: Vec::new(),
            start: 0,
            body: 0,
            out: VecDeque::new(),
            off: 0,
            queued: 0,
            served: 0,
            close_after: false,
            lingering: false,
            request_since: None,
            last: now,
            in_ready: false,
        }
    }

    /// Writes what is queued, parses what was read, reads more: until the kernel has to wait,
    /// the connection is done, or its budget is spent. `short_is_empty`: a short read emptied
    /// the socket — true only for a turn from an event without EPOLLRDHUP (a FIN that came
    /// before the event raises no new edge, so then we read on until EAGAIN or EOF).
    pub(super) fn drive(&mut self, cx: &mut Cx<'_, 's>, short_is_empty: bool) -> Verdict {
        if self.lingering {
            return self.linger(cx);
        }
        let mut drained = false;
        for _ in 0..BUDGET {
            if !self.out.is_empty() {
                match self.flush(cx) {
                    Ok(true) => {}
                    Ok(false) => return Verdict::Wait,
                    Err(()) => return Verdict::Close,
                }
            }
            if self.close_after {
                let _ = self.sock.shutdown(Shutdown::Write);
                self.lingering = true;
                self.last = cx.now;
                return self.linger(cx);
            }
            self.parse(cx);
            if !self.out.is_empty() || self.close_after {
                continue;
            }
            if drained {
                return Verdict::Wait;
            }
            let room = (MAX_HEAD + 1).saturating_sub(self.inbuf.len() - self.start);
            let want = room.min(cx.scratch.len());
            if want == 0 {
                self.respond(cx, error_reply(S431));
                continue;
            }
            match (&self.sock).read(&mut cx.scratch[..want]) {
                Ok(0) => return Verdict::Close,
                Ok(n) => {
                    self.inbuf.extend_from_slice(&cx.scratch[..n]);
                    self.last = cx.now;
                    if cx.srv.opts.quickack {
                        rearm_quickack(self.sock.as_raw_fd());
                    }
                    // A short read emptied the socket: more data will raise a new edge.
                    drained = short_is_empty && n < want;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => drained = true,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Verdict::Close,
            }
        }
        Verdict::More
    }

    /// Sends what is queued: `Ok(true)` when all of it went, `Ok(false)` when the kernel took
    /// only part (its buffer is full; EPOLLOUT will come), `Err` when the peer is gone.
    fn flush(&mut self, cx: &mut Cx<'_, 's>) -> Result<bool, ()> {
        while !self.out.is_empty() {
            let mut iov = [IoSlice::new(&[]); IOV];
            let mut n = 0;
            let mut want = 0;
            for (k, seg) in self.out.iter().take(IOV).enumerate() {
                let s: &[u8] = if k == 0 { &seg[self.off..] } else { seg };
                iov[k] = IoSlice::new(s);
                want += s.len();
                n = k + 1;
            }
            let sent = match send_iov(self.sock.as_raw_fd(), &iov[..n]) {
                Ok(sent) => sent,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return Err(()),
            };
            bump(&cx.stats.bytes_sent, sent as u64);
            self.last = cx.now;
            let mut left = sent;
            while let Some(seg) = self.out.front() {
                let rest = seg.len() - self.off;
                if left < rest {
                    self.off += left;
                    break;
                }
                left -= rest;
                self.off = 0;
                self.out.pop_front();
            }
            if sent < want {
                // A partial write sets SOCK_NOSPACE: the kernel raises EPOLLOUT when room frees.
                return Ok(false);
            }
        }
        self.queued = 0;
        if cx.srv.opts.cork {
            // TCP_CORK holds a partial segment for up to 200 ms: pulling the cork sends the
            // response's tail now, as nginx's tcp_nopush does; then cork the next response.
            let fd = self.sock.as_raw_fd();
            let _ = set_int(fd, libc::IPPROTO_TCP, libc::TCP_CORK, 0);
            let _ = set_int(fd, libc::IPPROTO_TCP, libc::TCP_CORK, 1);
        }
        Ok(true)
    }

    /// Answers every complete request in the buffer, in order (up to [`MAX_QUEUED`]).
    fn parse(&mut self, cx: &mut Cx<'_, 's>) {
        while !self.close_after && self.queued < MAX_QUEUED {
            let avail = self.inbuf.len() - self.start;
            if self.body > 0 {
                let skip = self.body.min(avail as u64);
                self.start += skip as usize;
                self.body -= skip;
                if self.body > 0 {
                    break;
                }
                continue;
            }
            if avail == 0 {
                break;
            }
            let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
            let mut req = httparse::Request::new(&mut headers);
            let max = cx.srv.limits.max_requests_per_connection;
            let reply = match req.parse(&self.inbuf[self.start..]) {
                Ok(httparse::Status::Complete(n)) if n <= MAX_HEAD => {
                    let r = decide(&req, &cx.srv.set, self.served, max);
                    self.start += n;
                    r
                }
                Ok(httparse::Status::Complete(_)) => error_reply(S431),
                Ok(httparse::Status::Partial) if avail <= MAX_HEAD => break,
                Ok(httparse::Status::Partial) | Err(httparse::Error::TooManyHeaders) => {
                    error_reply(S431)
                }
                Err(_) => error_reply(S400),
            };
            bump(&cx.stats.requests, 1);
            self.request_since = None;
            self.respond(cx, reply);
        }
        if self.start > 0 {
            self.inbuf.drain(..self.start);
            self.start = 0;
        }
        if self.inbuf.is_empty() && self.inbuf.capacity() > 4096 {
            // An idle keep-alive connection keeps no 16 KiB buffer.
            self.inbuf = Vec::new();
        }
        // The clock runs while we wait for the client to finish a request, not while its
        // complete requests wait for our queue ([`MAX_QUEUED`]) to drain to a slow reader.
        let waiting = self.body > 0 || (!self.inbuf.is_empty() && self.queued < MAX_QUEUED);
        if self.close_after || !waiting {
            self.request_since = None;
        } else {
            self.request_since.get_or_insert(cx.now);
        }
    }

    pub(super) fn respond(&mut self, cx: &mut Cx<'_, 's>, r: Reply) {
        let canned = match r.file {
            Some(i) => &cx.srv.files[i],
            None => &cx.srv.errors[r.status],
        };
        bump(&cx.stats.status[r.status], 1);
        self.out.push_back(&canned.heads[r.variant]);
        if !r.head_only {
            self.out.push_back(&canned.body);
        }
        self.queued += 1;
        self.served += 1;
        self.body = r.body;
        if r.variant == CLOSE {
            self.close_after = true;
            // Whatever else the client sent is not read as requests.
            self.inbuf.clear();
            self.start = 0;
        }
    }

    /// After our FIN: reads and drops what the client still sends until its FIN.
    fn linger(&mut self, cx: &mut Cx<'_, 's>) -> Verdict {
        for _ in 0..BUDGET {
            match (&self.sock).read(cx.scratch) {
                Ok(0) => return Verdict::Close,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Verdict::Wait,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Verdict::Close,
            }
        }
        Verdict::More
    }
}

pub(super) fn error_reply(status: usize) -> Reply {
    Reply {
        file: None,
        status,
        head_only: false,
        variant: CLOSE,
        body: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::fileset::FileId;
    use super::*;

    fn decide_on(raw: &[u8]) -> Reply {
        let set = FileSet::new(2).expect("set");
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut req = httparse::Request::new(&mut headers);
        assert!(req.parse(raw).expect("parses").is_complete());
        decide(&req, &set, 0, 100)
    }

    #[test]
    fn decisions() {
        let r = decide_on(b"GET /dir00001/class3_9 HTTP/1.1\r\nHost: x\r\n\r\n");
        let id = FileId::new(1, 3, 9).expect("id");
        assert_eq!((r.file, r.status, r.variant), (Some(slot(&id)), S200, KEEP));
        let r =
            decide_on(b"HEAD /dir00000/class0_1 HTTP/1.1\r\nHost: x\r\nConnection: Close\r\n\r\n");
        assert!(r.head_only && r.variant == CLOSE && r.status == S200);
        assert_eq!(
            decide_on(b"GET /dir00000/class0_1 HTTP/1.0\r\n\r\n").variant,
            CLOSE
        );
        let r = decide_on(b"GET /dir00000/class0_1 HTTP/1.0\r\nConnection: x, keep-alive\r\n\r\n");
        assert_eq!(r.variant, KEEP10);
        assert_eq!(
            decide_on(b"GET /dir00002/class0_1 HTTP/1.1\r\nHost: x\r\n\r\n").status,
            S404
        );
        assert_eq!(decide_on(b"GET / HTTP/1.1\r\n\r\n").status, S400, "no Host");
        assert_eq!(
            decide_on(b"POST / HTTP/1.1\r\nHost: x\r\n\r\n").status,
            S405
        );
        let te = b"GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert_eq!(decide_on(te).status, S501);
        let big = b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 9999999\r\n\r\n";
        assert_eq!(decide_on(big).status, S413);
        let two = b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n";
        assert_eq!(decide_on(two).status, S400);
        let body = b"GET /dir00000/class0_1 HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n";
        assert_eq!(decide_on(body).body, 5);
        let abs = b"GET http://h:80/dir00000/class1_2 HTTP/1.1\r\nHost: h\r\n\r\n";
        assert_eq!(decide_on(abs).status, S200);
        let set = FileSet::new(1).expect("set");
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut req = httparse::Request::new(&mut headers);
        let _ = req.parse(b"GET /dir00000/class0_1 HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!(
            decide(&req, &set, 99, 100).variant,
            CLOSE,
            "the last allowed"
        );
    }
}
