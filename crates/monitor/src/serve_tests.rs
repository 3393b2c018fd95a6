use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpStream};
use std::sync::Arc;

use super::*;

fn get(path: &str, auth: Option<&str>) -> Vec<u8> {
    let mut r = format!("GET {path} HTTP/1.1\r\nHost: x\r\n");
    if let Some(a) = auth {
        r.push_str(&format!("Authorization: {a}\r\n"));
    }
    r.push_str("\r\n");
    r.into_bytes()
}

#[test]
fn only_get_metrics_with_the_token_reads_the_page() {
    let token = Access::Token("s3cret".into());
    assert_eq!(
        decide(&get("/metrics", None), &Access::Open),
        Reply::Page { with_body: true }
    );
    assert_eq!(
        decide(&get("/metrics?x=1", Some("Bearer s3cret")), &token),
        Reply::Page { with_body: true }
    );
    assert_eq!(decide(&get("/metrics", None), &token), Reply::Unauthorised);
    assert_eq!(
        decide(&get("/metrics", Some("Bearer s3cre")), &token),
        Reply::Unauthorised
    );
    assert_eq!(
        decide(&get("/metrics", Some("Basic czNjcmV0")), &token),
        Reply::Unauthorised
    );
    assert_eq!(decide(&get("/", None), &Access::Open), Reply::NotFound);
    assert_eq!(
        decide(b"POST /metrics HTTP/1.1\r\n\r\n", &Access::Open),
        Reply::NotAllowed
    );
    assert_eq!(
        decide(b"HEAD /metrics HTTP/1.1\r\n\r\n", &Access::Open),
        Reply::Page { with_body: false }
    );
    assert_eq!(
        decide(b"\x16\x03\x01garbage\r\n\r\n", &Access::Open),
        Reply::Bad
    );
}

#[test]
fn an_address_off_loopback_needs_a_token_or_insecure() {
    let off: SocketAddr = "198.18.0.1:9464".parse().unwrap();
    let e = bind(off, &Access::Open, false).unwrap_err().to_string();
    assert!(
        e.contains("--metrics-token-file") && e.contains("--insecure"),
        "{e}"
    );
}

/// A real scrape over loopback: the page with its content type, and a client that sends
/// nothing costs the server no more than its read bound.
#[test]
fn a_scrape_over_loopback_gets_the_page() {
    let listener = bind((Ipv4Addr::LOCALHOST, 0).into(), &Access::Open, false).unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let server = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            serve(
                &listener,
                &Access::Open,
                &|| "tcplab_up 1\n# EOF\n".to_string(),
                &stop,
            )
        })
    };
    let silent = TcpStream::connect(addr).unwrap();
    let mut c = TcpStream::connect(addr).unwrap();
    c.write_all(&get("/metrics", None)).unwrap();
    let mut reply = String::new();
    c.read_to_string(&mut reply).unwrap();
    assert!(reply.starts_with("HTTP/1.1 200 OK\r\n"), "{reply}");
    assert!(reply.contains(OPENMETRICS), "{reply}");
    assert!(reply.ends_with("tcplab_up 1\n# EOF\n"), "{reply}");
    drop(silent);
    stop.store(true, Ordering::Relaxed);
    server.join().unwrap();
}
