//! The control protocol. One TCP connection per test carries length-prefixed JSON frames
//! (4-byte big-endian length, then a JSON [`Ctrl`] value); data connections, to a per-test
//! port the server announces, carry only workload bytes.
//!
//! ```text
//! client                              server
//!   Hello{version, test}  ───────────►  validates, binds a data listener (same IP, port 0)
//!                         ◄───────────  Ready{data_port} | Error{message}
//!   data connections      ───────────►  (stream: accepted in connect order)
//!   Start (stream only)   ───────────►
//!   ... workload ...
//!   Done (rr, crr)        ───────────►
//!                         ◄───────────  Report(ServerReport)
//! ```

use std::io::{Read, Write};
use std::net::TcpStream;

use serde::{Deserialize, Serialize};

use crate::error::{LoadError, Result};
use crate::sockopt::AppliedOpts;
use crate::stream::IntervalSample;
use crate::{crr::CrrConfig, msgs::MsgsConfig, rr::RrConfig, stream::StreamConfig};

/// Protocol version; a server refuses other versions with a clear message.
pub const VERSION: u32 = 1;
/// Default control port of `tcplab serve` (iperf3's 5201 is left free for side-by-side runs).
pub const DEFAULT_PORT: u16 = 5301;
/// Largest control frame accepted (msgs receive stamps: 8 bytes x 10 M messages, as JSON).
const MAX_FRAME: usize = 256 << 20;

/// One test's parameters, as sent in [`Ctrl::Hello`].
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "workload", rename_all = "lowercase")]
pub enum TestSpec {
    /// Bulk throughput.
    Stream(StreamConfig),
    /// Timed stream of small messages.
    Msgs(MsgsConfig),
    /// Request/response.
    Rr(RrConfig),
    /// Connect/request/response/close.
    Crr(CrrConfig),
}

/// A control frame.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Ctrl {
    /// Client → server: run this test.
    Hello {
        /// Must equal [`VERSION`].
        version: u32,
        /// The test.
        test: Box<TestSpec>,
    },
    /// Server → client: data connections go to this port on the same IP.
    Ready {
        /// The per-test data port.
        data_port: u16,
    },
    /// Client → server: all data connections are up, start (stream).
    Start,
    /// Client → server: the client side has finished (rr, crr).
    Done,
    /// Server → client: the server side's figures.
    Report(Box<ServerReport>),
    /// Either way: the test cannot run; the message is the reason.
    Error {
        /// One-line reason.
        message: String,
    },
}

/// What the server measured, returned at the end of every test.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerReport {
    /// False when the server side was cut short.
    pub complete: bool,
    /// Why the server side was cut short.
    pub incomplete_reason: Option<String>,
    /// CPU time of the server's data threads, ns.
    pub cpu_ns: u64,
    /// Data bytes received.
    pub bytes_received: u64,
    /// Data bytes sent.
    pub bytes_sent: u64,
    /// Wall time of the server side, ns.
    pub elapsed_ns: u64,
    /// Options in force on the first data socket.
    pub options: Option<AppliedOpts>,
    /// msgs: receive timestamp (CLOCK_MONOTONIC ns) of every message, in order.
    pub recv_ns: Vec<u64>,
    /// stream: the server's interval samples.
    pub intervals: Vec<IntervalSample>,
    /// rr/crr: transactions served.
    pub transactions: u64,
}

/// Writes one frame.
pub fn write_frame(stream: &mut TcpStream, msg: &Ctrl) -> Result<()> {
    let body = serde_json::to_vec(msg)
        .map_err(|e| LoadError::Protocol(format!("encoding a frame: {e}")))?;
    let len = u32::try_from(body.len())
        .map_err(|_| LoadError::Protocol("frame larger than 4 GiB".into()))?;
    let mut buf = Vec::with_capacity(4 + body.len());
    buf.extend_from_slice(&len.to_be_bytes());
    buf.extend_from_slice(&body);
    stream
        .write_all(&buf)
        .map_err(|e| LoadError::io("writing to the control connection", e))
}

/// Reads one frame, honouring the socket's read timeout.
pub fn read_frame(stream: &mut TcpStream) -> Result<Ctrl> {
    let mut len = [0u8; 4];
    stream
        .read_exact(&mut len)
        .map_err(|e| LoadError::Protocol(crate::net::reason("reading a control frame", &e)))?;
    let len = u32::from_be_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(LoadError::Protocol(format!(
            "frame of {len} bytes exceeds the {MAX_FRAME}-byte limit; is the peer a tcplab server?"
        )));
    }
    let mut body = vec![0u8; len];
    stream
        .read_exact(&mut body)
        .map_err(|e| LoadError::Protocol(crate::net::reason("reading a control frame", &e)))?;
    serde_json::from_slice(&body).map_err(|e| {
        LoadError::Protocol(format!(
            "bad control frame: {e}; is the peer a tcplab server of this version?"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_over_a_socket() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let mut c = TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
        let (mut s, _) = l.accept().expect("accept");
        let hello = Ctrl::Hello {
            version: VERSION,
            test: Box::new(TestSpec::Rr(RrConfig::default())),
        };
        write_frame(&mut c, &hello).expect("write");
        write_frame(&mut c, &Ctrl::Ready { data_port: 4242 }).expect("write");
        match read_frame(&mut s).expect("read") {
            Ctrl::Hello { version, test } => {
                assert_eq!(version, VERSION);
                assert!(matches!(*test, TestSpec::Rr(_)));
            }
            other => panic!("got {other:?}"),
        }
        assert!(matches!(
            read_frame(&mut s).expect("read"),
            Ctrl::Ready { data_port: 4242 }
        ));
    }

    #[test]
    fn garbage_is_a_protocol_error() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let mut c = TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
        let (mut s, _) = l.accept().expect("accept");
        c.write_all(b"GET / HTTP/1.1\r\n\r\n").expect("write");
        let err = read_frame(&mut s).expect_err("garbage");
        assert!(err.to_string().contains("tcplab server"), "{err}");
    }
}
