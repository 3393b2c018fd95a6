//! The kinds of a failed HTTP response, as a result counts and serialises them (the response
//! reader that finds most of them is `tcplab_load::http::parse`).

use std::fmt;

use serde::{Deserialize, Serialize};

/// Why a response failed; serialised snake_case; `Refused`, `Reset`, `Timeout`, `Connect` are
/// set by the client's I/O, not by the parser, but live here so one enum names every error kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The connection was refused (RST to the SYN).
    Refused,
    /// The connection was reset while a request was outstanding.
    Reset,
    /// No complete response within the client's time limit.
    Timeout,
    /// Any other failure to connect.
    Connect,
    /// A status other than the one expected (the client's verdict; the reader gives the
    /// status in [`Done::status`] and never fails a response for it).
    Status,
    /// Bytes that are not an HTTP/1.1 response, or whose framing cannot be trusted.
    Malformed,
    /// The connection closed before the response was complete.
    Truncated,
    /// A well-framed 200 response whose body is not the file asked for.
    Content,
}

impl ErrorKind {
    /// Every kind, in order.
    pub const ALL: [ErrorKind; 8] = [
        ErrorKind::Refused,
        ErrorKind::Reset,
        ErrorKind::Timeout,
        ErrorKind::Connect,
        ErrorKind::Status,
        ErrorKind::Malformed,
        ErrorKind::Truncated,
        ErrorKind::Content,
    ];

    /// Its name, as serialised.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Refused => "refused",
            ErrorKind::Reset => "reset",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Connect => "connect",
            ErrorKind::Status => "status",
            ErrorKind::Malformed => "malformed",
            ErrorKind::Truncated => "truncated",
            ErrorKind::Content => "content",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
