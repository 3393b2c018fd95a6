//! `/metrics` over HTTP for Prometheus: one thread, one request per connection, the request
//! read by `httparse` with a size and time bound, so a slow or hostile client costs at most a
//! second and 8 KiB. Loopback needs nothing; any other address needs a bearer token
//! (Prometheus's `authorization: credentials_file:`) unless the operator says `--insecure`,
//! as the agent needs keys off loopback.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The content type of an OpenMetrics page.
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Largest request head read.
const MAX_HEAD: usize = 8 * 1024;

/// How long one client may take to send its request.
const READ_WITHIN: Duration = Duration::from_secs(1);

/// Who may read the page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Access {
    /// Anyone who can connect (loopback, or `--insecure`).
    Open,
    /// Requests carrying `Authorization: Bearer TOKEN`.
    Token(String),
}

/// Why the endpoint cannot be served as asked.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// Off loopback without a token or `--insecure`.
    #[error(
        "--metrics {0}: not a loopback address, so the page needs --metrics-token-file FILE \
         (Prometheus: authorization: credentials_file) or --insecure"
    )]
    NeedsToken(SocketAddr),
    /// The address could not be bound.
    #[error("--metrics {addr}: {source}; pick a free port or address")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// The OS's reason.
        source: std::io::Error,
    },
}

/// Binds the metrics listener, refusing an address off loopback with open access.
pub fn bind(addr: SocketAddr, access: &Access, insecure: bool) -> Result<TcpListener, ServeError> {
    if !addr.ip().is_loopback() && *access == Access::Open && !insecure {
        return Err(ServeError::NeedsToken(addr));
    }
    let listener = TcpListener::bind(addr).map_err(|source| ServeError::Bind { addr, source })?;
    // Non-blocking accept with a short sleep, so the loop sees the stop flag.
    listener
        .set_nonblocking(true)
        .map_err(|source| ServeError::Bind { addr, source })?;
    Ok(listener)
}

/// Serves `page()` at `/metrics` until `stop` is set.
pub fn serve(
    listener: &TcpListener,
    access: &Access,
    page: &dyn Fn() -> String,
    stop: &AtomicBool,
) {
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, _)) => answer(stream, access, page),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// What a request gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// 200 with the page (its body only for GET, not HEAD).
    Page {
        /// GET: the body follows the head.
        with_body: bool,
    },
    /// 401: no or a wrong token.
    Unauthorised,
    /// 404: not `/metrics`.
    NotFound,
    /// 405: not GET (or HEAD).
    NotAllowed,
    /// 400: not an HTTP request, or too large.
    Bad,
}

/// The reply to a request head (pure: the serving loop's decision, tested on its own).
pub fn decide(head: &[u8], access: &Access) -> Reply {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut req = httparse::Request::new(&mut headers);
    match req.parse(head) {
        Ok(httparse::Status::Complete(_)) => {}
        _ => return Reply::Bad,
    }
    if !matches!(req.method, Some("GET" | "HEAD")) {
        return Reply::NotAllowed;
    }
    let path = req.path.unwrap_or("").split('?').next().unwrap_or("");
    if path != "/metrics" {
        return Reply::NotFound;
    }
    if let Access::Token(token) = access {
        let given = req
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case("authorization"))
            .and_then(|h| std::str::from_utf8(h.value).ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or("");
        if !same(given.trim().as_bytes(), token.as_bytes()) {
            return Reply::Unauthorised;
        }
    }
    Reply::Page {
        with_body: req.method == Some("GET"),
    }
}

/// Compares without stopping at the first difference, so the time taken says nothing about
/// how much of a guessed token was right.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

fn answer(mut stream: TcpStream, access: &Access, page: &dyn Fn() -> String) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(READ_WITHIN));
    let _ = stream.set_write_timeout(Some(Duration::from_secs(5)));
    let head = read_head(&mut stream);
    let reply = head.map_or(Reply::Bad, |h| decide(&h, access));
    let head_only = reply == Reply::Page { with_body: false };
    let (status, kind, body) = match reply {
        Reply::Page { .. } => ("200 OK", OPENMETRICS, page()),
        Reply::Unauthorised => (
            "401 Unauthorized",
            "text/plain",
            "a bearer token is needed\n".into(),
        ),
        Reply::NotFound => (
            "404 Not Found",
            "text/plain",
            "the page is /metrics\n".into(),
        ),
        Reply::NotAllowed => ("405 Method Not Allowed", "text/plain", "use GET\n".into()),
        Reply::Bad => (
            "400 Bad Request",
            "text/plain",
            "not an HTTP request\n".into(),
        ),
    };
    let mut out = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    if status.starts_with("401") {
        out.push_str("WWW-Authenticate: Bearer\r\n");
    }
    out.push_str("\r\n");
    if !head_only {
        out.push_str(&body);
    }
    let _ = stream.write_all(out.as_bytes());
}

/// Reads up to the end of the request head, within the size and time bounds.
fn read_head(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    while head.len() < MAX_HEAD {
        let n = stream.read(&mut buf).ok()?;
        if n == 0 {
            return None;
        }
        head.extend_from_slice(&buf[..n]);
        if head.windows(4).any(|w| w == b"\r\n\r\n") {
            return Some(head);
        }
    }
    None
}

#[cfg(test)]
#[path = "serve_tests.rs"]
mod tests;
