//! The built-in HTTP/1.1 file server on loopback: exact bytes of every file, keep-alive,
//! pipelining, HTTP/1.0, HEAD, errors, slow and stalled clients, the connection cap, hostile
//! input and the files on disk (`tcplab serve --http` is tested with the command line,
//! crates/cli/tests/workload_cli.rs). Every wait is bounded; no assertion depends on exact
//! timing.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use tcplab_load::http::files::{check_written, write_set};
use tcplab_load::http::fileset::{FileId, FileSet};
use tcplab_load::http::serve::{HttpLimits, HttpServeCounts, HttpServer};
use tcplab_load::sockopt::SockOpts;

/// Longest any single wait of a test.
const WAIT: Duration = Duration::from_secs(20);

struct Running {
    srv: Arc<HttpServer>,
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<tcplab_load::error::Result<()>>>,
}

impl Running {
    fn start(dirs: u32, limits: HttpLimits) -> Self {
        let set = FileSet::new(dirs).expect("set");
        let any = SocketAddr::from(([127, 0, 0, 1], 0));
        let srv = Arc::new(HttpServer::bind(any, set, SockOpts::default(), limits).expect("bind"));
        let addr = srv.local_addr().expect("addr");
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (srv, stop) = (srv.clone(), stop.clone());
            std::thread::spawn(move || srv.serve(&stop))
        };
        Self {
            srv,
            addr,
            stop,
            thread: Some(thread),
        }
    }

    fn client(&self) -> Client {
        Client::connect(self.addr)
    }

    fn counts(&self) -> HttpServeCounts {
        self.srv.counts()
    }

    /// Polls the counts until `ok` holds (the server counts after the client sees the effect).
    fn wait_counts(&self, what: &str, ok: impl Fn(&HttpServeCounts) -> bool) -> HttpServeCounts {
        let end = Instant::now() + WAIT;
        loop {
            let c = self.counts();
            if ok(&c) {
                return c;
            }
            assert!(Instant::now() < end, "{what}: {c:?}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Stops the server; returns how long `serve` took to return.
    fn stop(&mut self) -> Duration {
        let t = Instant::now();
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.thread.take() {
            h.join().expect("serve thread").expect("serve");
        }
        t.elapsed()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.thread.take() {
            let _ = h.join();
        }
    }
}

#[derive(Debug)]
struct Resp {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Resp {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A blocking client with a read timeout and its own buffer (pipelined responses).
struct Client {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Client {
    fn connect(addr: SocketAddr) -> Self {
        let s = TcpStream::connect_timeout(&addr, WAIT).expect("connect");
        s.set_read_timeout(Some(WAIT)).expect("timeout");
        s.set_write_timeout(Some(WAIT)).expect("timeout");
        Self { s, buf: Vec::new() }
    }

    fn send(&mut self, bytes: &[u8]) {
        self.s.write_all(bytes).expect("send");
    }

    fn fill(&mut self) -> io::Result<usize> {
        let mut chunk = [0u8; 65536];
        let n = self.s.read(&mut chunk)?;
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(n)
    }

    /// The next response; `head` for the answer to a HEAD (no body).
    fn response(&mut self, head: bool) -> io::Result<Resp> {
        loop {
            let mut headers = [httparse::EMPTY_HEADER; 32];
            let mut r = httparse::Response::new(&mut headers);
            if let httparse::Status::Complete(n) = r.parse(&self.buf).map_err(io::Error::other)? {
                let headers: Vec<(String, String)> = r
                    .headers
                    .iter()
                    .map(|h| {
                        let v = String::from_utf8_lossy(h.value).into_owned();
                        (h.name.to_string(), v)
                    })
                    .collect();
                let status = r.code.unwrap_or(0);
                let mut resp = Resp {
                    status,
                    headers,
                    body: Vec::new(),
                };
                let len: usize = resp
                    .header("content-length")
                    .expect("Content-Length")
                    .parse()
                    .expect("length");
                self.buf.drain(..n);
                let len = if head { 0 } else { len };
                while self.buf.len() < len {
                    if self.fill()? == 0 {
                        return Err(io::ErrorKind::UnexpectedEof.into());
                    }
                }
                resp.body = self.buf.drain(..len).collect();
                return Ok(resp);
            }
            if self.fill()? == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
        }
    }

    fn get(&mut self, path: &str) -> Resp {
        self.send(format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
        self.response(false).expect("response")
    }

    /// True when the server closed (EOF or reset) with nothing more to read.
    fn closed(&mut self) -> bool {
        self.buf.is_empty() && matches!(self.fill(), Ok(0) | Err(_))
    }
}

fn file(dir: u32, class: u8, index: u8) -> FileId {
    FileId::new(dir, class, index).expect("file")
}

fn limits() -> HttpLimits {
    HttpLimits::default()
}

#[test]
fn every_file_exact_on_one_keep_alive_connection_and_stop_is_prompt() {
    let mut srv = Running::start(2, limits());
    let set = FileSet::new(2).expect("set");
    let mut c = srv.client();
    let mut n = 0;
    for round in 0..2 {
        for id in set.files() {
            let r = c.get(&id.path());
            assert_eq!(r.status, 200, "{id} round {round}");
            assert_eq!(r.body.len() as u64, id.size(), "{id}");
            assert!(id.matches(0, &r.body), "{id}: content");
            assert_eq!(r.header("server"), Some("tcplab"));
            assert_eq!(r.header("content-type"), Some("application/octet-stream"));
            assert_eq!(
                r.header("connection"),
                None,
                "keep-alive is HTTP/1.1's default"
            );
            n += 1;
        }
    }
    let counts = srv.counts();
    assert_eq!(counts.accepted, 1, "{counts:?}");
    assert_eq!(counts.status(200), n);
    assert_eq!(counts.requests, n);
    assert!(counts.bytes_sent > 2 * set.total_bytes(), "{counts:?}");
    // A connection left open does not hold `serve` back.
    let took = srv.stop();
    assert!(took < Duration::from_secs(5), "serve took {took:?} to stop");
    assert!(c.closed(), "stopping closes connections");
    assert_eq!(srv.counts().open, 0);
}

#[test]
fn connection_close_http10_and_head() {
    let srv = Running::start(1, limits());
    let path = file(0, 1, 3).path();
    // Connection: close — the response says so, then the server closes.
    let mut c = srv.client();
    c.send(format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").as_bytes());
    let r = c.response(false).expect("response");
    assert_eq!((r.status, r.header("connection")), (200, Some("close")));
    assert!(file(0, 1, 3).matches(0, &r.body));
    assert!(c.closed());
    // HTTP/1.0 without keep-alive: closed after the response.
    let mut c = srv.client();
    c.send(format!("GET {path} HTTP/1.0\r\n\r\n").as_bytes());
    let r = c.response(false).expect("response");
    assert_eq!((r.status, r.header("connection")), (200, Some("close")));
    assert!(c.closed());
    // HTTP/1.0 with keep-alive: told so, and kept.
    let mut c = srv.client();
    for _ in 0..3 {
        c.send(format!("GET {path} HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n").as_bytes());
        let r = c.response(false).expect("response");
        assert_eq!(
            (r.status, r.header("connection")),
            (200, Some("keep-alive"))
        );
        assert_eq!(r.body.len(), 3 * 1024);
    }
    // HEAD: the GET's head (its Content-Length), no body; the connection goes on.
    let mut c = srv.client();
    c.send(format!("HEAD {path} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
    let r = c.response(true).expect("head");
    assert_eq!((r.status, r.header("content-length")), (200, Some("3072")));
    let r = c.get(&path);
    assert_eq!(
        (r.status, r.body.len()),
        (200, 3072),
        "no stray body before it"
    );
}

#[test]
fn bad_requests_get_404_405_400_431() {
    let srv = Running::start(1, limits());
    // 404 keeps the connection.
    let mut c = srv.client();
    for path in [
        "/dir00001/class0_1",
        "/",
        "/dir00000/class0_1?x",
        "/../etc/passwd",
    ] {
        let r = c.get(path);
        assert_eq!(r.status, 404, "{path}");
        assert_eq!(r.header("connection"), None);
    }
    assert_eq!(c.get(&file(0, 0, 1).path()).status, 200);
    // 405 with Allow, then closed.
    let mut c = srv.client();
    c.send(b"POST /dir00000/class0_1 HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc");
    let r = c.response(false).expect("405");
    assert_eq!((r.status, r.header("allow")), (405, Some("GET, HEAD")));
    assert!(c.closed());
    // Malformed: 400 and closed.
    for bad in [
        &b"GARBAGE\r\n\r\n"[..],
        b"GET /dir00000/class0_1 HTTP/9.9\r\n\r\n",
        b"GET /dir00000/class0_1 HTTP/1.1\r\n\r\n", // no Host
        b"GET /dir00000/class0_1 HTTP/1.1\r\nHost: t\r\nContent-Length: x\r\n\r\n",
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", // a TLS ClientHello
    ] {
        let mut c = srv.client();
        c.send(bad);
        let r = c.response(false).expect("400");
        assert_eq!((r.status, r.header("connection")), (400, Some("close")));
        assert!(c.closed(), "{}", String::from_utf8_lossy(bad));
    }
    // A head over 16 KiB, or with more than 32 headers: 431.
    let mut c = srv.client();
    let long = format!(
        "GET / HTTP/1.1\r\nHost: t\r\nX: {}\r\n\r\n",
        "a".repeat(17_000)
    );
    c.send(long.as_bytes());
    assert_eq!(c.response(false).expect("431").status, 431);
    let mut c = srv.client();
    let many: String = (0..40).map(|i| format!("X-{i}: y\r\n")).collect();
    c.send(format!("GET / HTTP/1.1\r\nHost: t\r\n{many}\r\n").as_bytes());
    assert_eq!(c.response(false).expect("431").status, 431);
    let counts = srv.counts();
    assert!(
        counts.status(404) >= 4 && counts.status(405) == 1,
        "{counts:?}"
    );
    assert!(
        counts.status(400) >= 5 && counts.status(431) == 2,
        "{counts:?}"
    );
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    let srv = Running::start(2, limits());
    let ids = [file(1, 3, 9), file(0, 0, 1), file(1, 2, 5), file(0, 1, 1)];
    let mut c = srv.client();
    let mut all = String::new();
    for id in ids {
        all += &format!("GET {id} HTTP/1.1\r\nHost: t\r\n\r\n");
    }
    all += &format!("HEAD {} HTTP/1.1\r\nHost: t\r\n\r\n", ids[0]);
    all += "GET /nope HTTP/1.1\r\nHost: t\r\n\r\n";
    // A GET with a body: the body is skipped, not read as the next request.
    all += &format!(
        "GET {} HTTP/1.1\r\nHost: t\r\nContent-Length: 8\r\n\r\nGET /x\r\n",
        ids[3]
    );
    all += &format!(
        "GET {} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
        ids[1]
    );
    c.send(all.as_bytes());
    for id in ids {
        let r = c.response(false).expect("response");
        assert_eq!((r.status, r.body.len() as u64), (200, id.size()), "{id}");
        assert!(id.matches(0, &r.body), "{id}");
    }
    assert_eq!(c.response(true).expect("head").status, 200);
    assert_eq!(c.response(false).expect("404").status, 404);
    let r = c.response(false).expect("after a body");
    assert!(r.status == 200 && ids[3].matches(0, &r.body));
    let r = c.response(false).expect("last");
    assert_eq!((r.status, r.header("connection")), (200, Some("close")));
    assert!(c.closed());
    // Many more than a connection queues at once, each a few bytes apart.
    let mut c = srv.client();
    let one = format!("GET {} HTTP/1.1\r\nHost: t\r\n\r\n", file(0, 0, 9));
    c.send(one.repeat(200).as_bytes());
    for i in 0..200 {
        let r = c.response(false).expect("response");
        assert_eq!((r.status, r.body.len()), (200, 922), "response {i}");
    }
}

#[test]
fn slow_clients_are_served_and_stalled_ones_timed_out() {
    let srv = Running::start(
        1,
        HttpLimits {
            request_timeout: Duration::from_millis(400),
            ..limits()
        },
    );
    // Byte by byte, 2 ms apart: each gap is far under the timeout, the whole head too.
    let mut c = srv.client();
    c.s.set_nodelay(true).expect("nodelay");
    let req = format!("GET {} HTTP/1.1\r\nHost: t\r\n\r\n", file(0, 2, 1));
    for b in req.bytes() {
        c.send(&[b]);
        std::thread::sleep(Duration::from_millis(2));
    }
    let r = c.response(false).expect("slow head");
    assert_eq!((r.status, r.body.len()), (200, 10_240));
    // Half a head, then nothing: 408 and closed once the timeout passes (however late).
    let mut c = srv.client();
    c.send(b"GET /dir00000/class0_1 HTTP/1.1\r\nHo");
    let r = c.response(false).expect("408");
    assert_eq!((r.status, r.header("connection")), (408, Some("close")));
    assert!(c.closed());
    let counts = srv.wait_counts("a request timeout", |c| c.request_timeouts == 1);
    assert_eq!(counts.status(408), 1);
    // The server still serves.
    assert_eq!(srv.client().get(&file(0, 0, 1).path()).status, 200);
}

#[test]
fn idle_keep_alive_connections_close_and_requests_per_connection_are_capped() {
    let srv = Running::start(
        1,
        HttpLimits {
            idle_timeout: Duration::from_millis(300),
            max_requests_per_connection: 3,
            ..limits()
        },
    );
    let mut c = srv.client();
    assert_eq!(c.get(&file(0, 0, 1).path()).status, 200);
    assert!(c.closed(), "an idle connection is closed");
    srv.wait_counts("an idle timeout", |c| c.idle_timeouts >= 1);
    let mut c = srv.client();
    for i in 1..=3 {
        let r = c.get(&file(0, 0, 2).path());
        let close = r.header("connection");
        assert_eq!(close, (i == 3).then_some("close"), "response {i}");
    }
    assert!(c.closed());
}

#[test]
fn a_slow_reader_of_large_files_does_not_hold_up_others() {
    // A short request timeout: a reader slower than it is still no slow-loris (its requests
    // are complete; our writes are what waits).
    let srv = Running::start(
        1,
        HttpLimits {
            request_timeout: Duration::from_millis(300),
            ..limits()
        },
    );
    let big = file(0, 3, 9);
    let mut hog = srv.client();
    let req = format!("GET {big} HTTP/1.1\r\nHost: t\r\n\r\n");
    // ~37 MB asked for (more requests than a connection queues), nothing read for now: the
    // server's writes to it stall.
    hog.send(req.repeat(40).as_bytes());
    let mut c = srv.client();
    for _ in 0..50 {
        assert_eq!(c.get(&file(0, 1, 1).path()).status, 200);
    }
    std::thread::sleep(Duration::from_secs(1));
    // Then the hog reads every byte, exact.
    for i in 0..40 {
        let r = hog.response(false).expect("big");
        assert_eq!(
            (r.status, r.body.len() as u64),
            (200, big.size()),
            "response {i}"
        );
        assert!(big.matches(0, &r.body), "response {i}");
    }
    assert_eq!(srv.counts().request_timeouts, 0);
}

#[test]
fn connections_over_the_cap_are_answered_503_closed_and_counted() {
    let srv = Running::start(
        1,
        HttpLimits {
            max_connections: 3,
            ..limits()
        },
    );
    let path = file(0, 0, 1).path();
    let mut kept: Vec<Client> = (0..3).map(|_| srv.client()).collect();
    for c in &mut kept {
        assert_eq!(c.get(&path).status, 200);
    }
    for _ in 0..3 {
        let mut extra = srv.client();
        // The 503 may be lost to a reset if the request crossed the close: either is a refusal.
        extra
            .s
            .write_all(format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes())
            .ok();
        match extra.response(false) {
            Ok(r) => {
                assert_eq!((r.status, r.header("connection")), (503, Some("close")));
                assert!(extra.closed());
            }
            Err(e) => assert_ne!(
                e.kind(),
                io::ErrorKind::WouldBlock,
                "refused, not left hanging"
            ),
        }
    }
    let counts = srv.wait_counts("three refusals", |c| c.refused_over_cap == 3);
    assert_eq!((counts.accepted, counts.open), (6, 3), "{counts:?}");
    // The connections under the cap still work; one closed makes room for another.
    for c in &mut kept {
        assert_eq!(c.get(&path).status, 200);
    }
    drop(kept.pop());
    let end = Instant::now() + WAIT;
    loop {
        let mut c = srv.client();
        c.send(format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
        if c.response(false).is_ok_and(|r| r.status == 200) {
            break;
        }
        assert!(
            Instant::now() < end,
            "no room after a close: {:?}",
            srv.counts()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Requests a client might send, to be mutated.
const TEMPLATES: [&str; 4] = [
    "GET /dir00000/class1_2 HTTP/1.1\r\nHost: t\r\n\r\n",
    "HEAD /dir00000/class3_1 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
    "GET /dir00000/class0_1 HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\n\r\nbodyGET / HTTP/1.1\r\n\r\n",
    "GET /dir00000/class2_9 HTTP/1.1\r\nHost: t\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n",
];

fn hostile() -> impl Strategy<Value = Vec<u8>> {
    let mutated = (
        0..TEMPLATES.len(),
        proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 0..8),
        1usize..4,
    )
        .prop_map(|(t, edits, repeat)| {
            let mut v = TEMPLATES[t].repeat(repeat).into_bytes();
            for (at, byte, op) in edits {
                let i = at.index(v.len() + 1);
                match op {
                    0 => v.insert(i, byte),
                    1 if i < v.len() => v[i] = byte,
                    _ if i < v.len() => {
                        v.remove(i);
                    }
                    _ => {}
                }
            }
            v
        });
    prop_oneof![proptest::collection::vec(any::<u8>(), 0..3000), mutated]
}

#[test]
fn hostile_bytes_never_crash_the_server() {
    let srv = Running::start(
        1,
        HttpLimits {
            request_timeout: Duration::from_secs(2),
            ..limits()
        },
    );
    let good = format!("GET {} HTTP/1.1\r\nHost: t\r\n\r\n", file(0, 1, 2));
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 96,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    runner
        .run(&hostile(), |bytes| {
            let mut c = srv.client();
            // The server may close before taking it all; then the write fails. Fine.
            let _ = c.s.write_all(&bytes);
            let _ = c.s.shutdown(Shutdown::Write);
            // Whatever comes back, the server closes once our FIN is read (bounded by WAIT).
            let mut sink = Vec::new();
            let _ = c.s.read_to_end(&mut sink);
            if !sink.is_empty() {
                prop_assert!(
                    sink.starts_with(b"HTTP/1.1 "),
                    "{:?}",
                    &sink[..sink.len().min(64)]
                );
            }
            let mut probe = srv.client();
            probe.send(good.as_bytes());
            let r = probe
                .response(false)
                .expect("a good request after hostile bytes");
            prop_assert_eq!((r.status, r.body.len()), (200, 2048));
            Ok(())
        })
        .expect("no case breaks the server");
    let counts = srv.wait_counts("every connection closed", |c| c.open == 0);
    assert!(counts.requests > 96, "{counts:?}");
}

#[test]
fn the_set_written_to_disk_checks() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let set = FileSet::new(2).expect("set");
    let n = write_set(&set, tmp.path()).expect("write");
    assert_eq!(n, set.total_bytes());
    check_written(&set, tmp.path()).expect("check");
    let id = file(1, 2, 7);
    let body = std::fs::read(tmp.path().join("dir00001/class2_7")).expect("read");
    assert!(id.matches(0, &body) && body.len() as u64 == id.size());
    // A missing file is named.
    std::fs::remove_file(tmp.path().join("dir00001/class0_9")).expect("rm");
    let e = check_written(&set, tmp.path()).expect_err("missing");
    assert!(e.to_string().contains("dir00001/class0_9"), "{e}");
}
