//! `tcplab http`'s client against small servers on loopback that misbehave on purpose: every
//! kind of failure is counted under its own name with its reason, never a panic or a hang, and
//! an open loop corrects for a server that stalls (coordinated omission).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tcplab_load::http::config::HttpConfig;
use tcplab_load::http::mix::Mix;
use tcplab_load::http::result::HttpResult;
use tcplab_load::http::run::run_client_live;

/// A loopback server answering every request of every connection with `respond(n, stream)`
/// (n counts requests over the run), until the test ends.
struct Server {
    addr: SocketAddr,
    stop: &'static AtomicBool,
}

impl Server {
    fn start(respond: fn(u64, &mut TcpStream) -> bool) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let stop: &'static AtomicBool = Box::leak(Box::new(AtomicBool::new(false)));
        listener.set_nonblocking(true).expect("nonblocking");
        std::thread::spawn(move || {
            let count = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
            while !stop.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((mut s, _)) => {
                        let count = count.clone();
                        std::thread::spawn(move || {
                            let _ = s.set_nonblocking(false);
                            let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                            let mut buf = Vec::new();
                            let mut chunk = [0u8; 4096];
                            loop {
                                while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n")
                                {
                                    buf.drain(..end + 4);
                                    let n = count.fetch_add(1, Ordering::Relaxed);
                                    if !respond(n, &mut s) {
                                        return;
                                    }
                                }
                                match s.read(&mut chunk) {
                                    Ok(0) | Err(_) => return,
                                    Ok(k) => buf.extend_from_slice(&chunk[..k]),
                                }
                            }
                        });
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(2)),
                }
            }
        });
        Self { addr, stop }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn ok(_: u64, s: &mut TcpStream) -> bool {
    s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        .is_ok()
}

fn run(addr: SocketAddr, cfg: HttpConfig) -> HttpResult {
    run_client_live(&cfg, addr, None, 1000, None).expect("run")
}

fn cfg(count: u64) -> HttpConfig {
    HttpConfig {
        connections: 2,
        count: Some(count),
        duration_ms: Some(10_000),
        mix: Mix::Paths(vec!["/x".into()]),
        timeout_ms: 500,
        connect_timeout_ms: 2_000,
        ..HttpConfig::default()
    }
}

#[test]
fn keep_alive_and_connection_per_request_both_complete_every_request() {
    let server = Server::start(ok);
    let r = run(server.addr, cfg(200));
    assert_eq!((r.summary.requests, r.summary.errors), (200, 0), "{r:?}");
    // Keep-alive: 200 requests over at most the two connections. Whether the second opens
    // before the first has done all 200 on loopback is up to the scheduler.
    assert!(
        (1..=2).contains(&r.connections_opened),
        "{}",
        r.connections_opened
    );
    let r = run(
        server.addr,
        HttpConfig {
            requests_per_connection: Some(1),
            ..cfg(100)
        },
    );
    assert_eq!((r.summary.requests, r.summary.errors), (100, 0));
    assert_eq!(r.connections_opened, 100);
    assert_eq!(r.summary.connect_us.n, 100);
    assert_eq!(r.samples.len(), 100);
    assert!(r.samples.iter().all(|s| s.connected_ns >= s.start_ns
        && s.first_byte_ns >= s.connected_ns
        && s.done_ns >= s.first_byte_ns));
}

#[test]
fn each_kind_of_failure_is_named() {
    fn garbage(_: u64, s: &mut TcpStream) -> bool {
        let _ = s.write_all(b"HTTP/1.1 2x0 OK\r\n\r\n");
        false
    }
    fn truncated(_: u64, s: &mut TcpStream) -> bool {
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort");
        false
    }
    fn silent(_: u64, _: &mut TcpStream) -> bool {
        std::thread::sleep(Duration::from_millis(1500));
        false
    }
    fn not_found(_: u64, s: &mut TcpStream) -> bool {
        s.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
            .is_ok()
    }
    for (respond, kind, count) in [
        (garbage as fn(u64, &mut TcpStream) -> bool, "malformed", 10),
        (truncated, "truncated", 10),
        (silent, "timeout", 2),
        (not_found, "status", 10),
    ] {
        let server = Server::start(respond);
        let r = run(server.addr, cfg(count));
        let e = serde_json::to_value(r.errors_total).unwrap();
        assert_eq!(e[kind], count, "{kind}: {e} {:?}", r.error_examples);
        assert_eq!(r.summary.errors, count, "{kind}");
        assert!(!r.error_examples[kind].is_empty(), "{kind}");
    }
    // Nobody listening: refused.
    let free = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let r = run(free, cfg(5));
    assert_eq!(r.errors_total.refused, 5, "{:?}", r.errors_total);
}

#[test]
fn an_open_loop_counts_a_stall_against_every_request_it_held_up() {
    // One connection at 500 requests/s; the 100th response is held 300 ms. Without the
    // correction, one request is slow; with it, every request meant to start during the stall
    // waited for it: about 150 of them, from 300 ms down.
    fn stall(n: u64, s: &mut TcpStream) -> bool {
        if n == 100 {
            std::thread::sleep(Duration::from_millis(300));
        }
        ok(n, s)
    }
    let server = Server::start(stall);
    let r = run(
        server.addr,
        HttpConfig {
            connections: 1,
            rate: Some(500.0),
            count: Some(600),
            timeout_ms: 5_000,
            ..cfg(600)
        },
    );
    assert_eq!(r.summary.requests, 600, "{:?}", r.errors_total);
    let slow = |from: fn(&tcplab_load::http::result::HttpSample) -> u64| {
        r.samples
            .iter()
            .filter(|s| s.done_ns - from(s) > 100_000_000)
            .count()
    };
    let corrected = slow(|s| s.intended_ns);
    let uncorrected = slow(|s| s.start_ns);
    assert!(uncorrected <= 2, "uncorrected {uncorrected}");
    assert!((80..=200).contains(&corrected), "corrected {corrected}");
    let p99 = r.summary.response_us.p99.unwrap();
    let u99 = r.uncorrected_response_us.unwrap().p99.unwrap();
    assert!(p99 > 100_000.0 && u99 < 100_000.0, "{p99} {u99}");
}

#[test]
fn raw_samples_name_each_failure_and_read_back() {
    fn not_found(n: u64, s: &mut TcpStream) -> bool {
        if n % 2 == 0 {
            return ok(n, s);
        }
        s.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
            .is_ok()
    }
    let server = Server::start(not_found);
    let r = run(server.addr, cfg(20));
    let mut text = Vec::new();
    tcplab_load::samples::write(&mut text, &tcplab_load::report::Report::Http(r)).unwrap();
    let text = String::from_utf8(text).unwrap();
    let (workload, sections) = tcplab_load::samples::parse(&text).expect("reads back");
    assert_eq!(workload, "http");
    let requests = &sections[0];
    assert_eq!(requests.kind, "request");
    assert_eq!(requests.rows.len(), 20);
    let errors = &requests.labels["error"];
    assert_eq!(errors.len(), 10, "{text}");
    assert!(errors.iter().all(|(_, name)| name == "status"));
    let status = requests.columns.iter().position(|c| c == "status").unwrap();
    for (row, _) in errors {
        assert_eq!(requests.rows[*row][status], Some(404.0));
    }
    // A name where a number belongs, or a malformed name, is still refused.
    let bad = text.replacen(",404,", ",4x4,", 1);
    assert!(tcplab_load::samples::parse(&bad).is_err());
    let body = text.find("\n0,").unwrap();
    let bad = format!(
        "{}{}",
        &text[..body],
        text[body..].replacen(",status,", ",st-atus,", 1)
    );
    assert!(tcplab_load::samples::parse(&bad).is_err());
}
