use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use super::*;
use crate::run::Change;

fn notice(change: Change) -> Notice {
    Notice {
        change,
        alert: crate::store::sample_alert(),
    }
}

const FAST: Retry = Retry {
    attempts: 3,
    backoff: Duration::from_millis(20),
    timeout: Duration::from_secs(5),
};

/// A loopback endpoint answering each request with the next status of `statuses` (then 200);
/// returns its URL and the bodies it was sent.
fn endpoint(statuses: Vec<u16>) -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let bodies = Arc::new(Mutex::new(Vec::new()));
    let seen = bodies.clone();
    std::thread::spawn(move || {
        let mut statuses = statuses.into_iter();
        for conn in listener.incoming().take(8) {
            let Ok(mut conn) = conn else { continue };
            let mut raw = Vec::new();
            let mut buf = [0u8; 4096];
            // Read the head, then the body its Content-Length announces.
            let body = loop {
                let n = conn.read(&mut buf).unwrap_or(0);
                if n == 0 {
                    break None;
                }
                raw.extend_from_slice(&buf[..n]);
                let mut headers = [httparse::EMPTY_HEADER; 32];
                let mut req = httparse::Request::new(&mut headers);
                if let Ok(httparse::Status::Complete(head)) = req.parse(&raw) {
                    let len: usize = req
                        .headers
                        .iter()
                        .find(|h| h.name.eq_ignore_ascii_case("content-length"))
                        .and_then(|h| std::str::from_utf8(h.value).ok()?.parse().ok())
                        .unwrap_or(0);
                    if raw.len() >= head + len {
                        assert_eq!(req.method, Some("POST"));
                        assert_eq!(req.path, Some("/hook"));
                        break Some(String::from_utf8_lossy(&raw[head..head + len]).to_string());
                    }
                }
            };
            let status = statuses.next().unwrap_or(200);
            if let Some(b) = body {
                seen.lock().unwrap().push(b);
            }
            let _ = write!(
                conn,
                "HTTP/1.1 {status} X\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
            );
        }
    });
    (url, bodies)
}

#[test]
fn each_notice_is_posted_as_json_and_a_failing_endpoint_is_tried_again() {
    let (url, bodies) = endpoint(vec![503]);
    let mut hook = Webhook::start(&url, FAST, |_| {}).unwrap();
    hook.send(&notice(Change::Opened));
    hook.send(&notice(Change::Closed));
    let d = hook.finish();
    assert_eq!(
        d,
        Delivery {
            sent: 2,
            failed: 0,
            dropped: 0
        }
    );
    let bodies = bodies.lock().unwrap();
    // The first try met a 503 and was made again.
    assert_eq!(bodies.len(), 3, "{bodies:?}");
    let first: serde_json::Value = serde_json::from_str(&bodies[0]).unwrap();
    assert_eq!(first["schema"], 1);
    assert_eq!(first["change"], "opened");
    assert_eq!(first["alert"]["src"], "h1");
    assert_eq!(first["alert"]["check"]["worse_by"], 0.67);
    let last: serde_json::Value = serde_json::from_str(&bodies[2]).unwrap();
    assert_eq!(last["change"], "closed");
}

#[test]
fn an_endpoint_that_never_answers_is_given_up_on_and_logged() {
    // A port nothing listens on: connection refused on every try.
    let url = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}/", l.local_addr().unwrap())
    };
    let logged = Arc::new(Mutex::new(Vec::new()));
    let into = logged.clone();
    let mut hook = Webhook::start(&url, FAST, move |m| {
        into.lock().unwrap().push(m.to_string())
    })
    .unwrap();
    hook.send(&notice(Change::Opened));
    assert_eq!(
        hook.finish(),
        Delivery {
            sent: 0,
            failed: 1,
            dropped: 0
        }
    );
    let logged = logged.lock().unwrap();
    assert!(logged[0].contains("after 3 tries"), "{logged:?}");
}

#[test]
fn urls_it_cannot_use_are_refused_with_the_fix() {
    for (url, says) in [
        ("https://hooks.example/x", "https is not supported"),
        ("ftp://h/x", "not http"),
        ("127.0.0.1:9000/x", "no scheme"),
        ("http:///x", "no host"),
    ] {
        let e = check_url(url).unwrap_err().to_string();
        assert!(e.contains(says) && e.contains("--webhook"), "{url}: {e}");
    }
    check_url("http://127.0.0.1:9000/tcplab").unwrap();
    check_url("http://[::1]:9000/").unwrap();
}
