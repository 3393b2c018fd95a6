//! The control protocol. One TCP connection per test carries length-prefixed frames (4-byte
//! big-endian length, then a body). It opens with the Noise handshake of `tcplab_auth`, which
//! authenticates both ends (the client's side in [`crate::session`], the server's in
//! `tcplab_agent::handshake`); every frame after it is sealed. The messages are JSON [`Ctrl`]
//! values, and after every `Report` binary bulk frames ([`crate::bulk`]) with the per-message
//! arrays (msgs' receive stamps), which as JSON numbers cost ~1.5 MB and 10 ms of decoding per
//! 100,000 messages: at most [`BULK_CHUNK`] stamps each, then an empty one, so neither end
//! holds a long run's stamps in one buffer. Data connections, to a per-test port the server announces,
//! carry only workload bytes; the server takes them only from the control connection's peer
//! address (docs/fleet.md).
//!
//! ```text
//! client                              server
//!   handshake (3 frames) ◄──────────►  both keys proven; refusals before it are JSON in clear
//!   Hello{version, test}  ───────────►  validates, checks limits, binds a data listener
//!                         ◄───────────  Ready{data_port} | Error{message, cause}
//!   data connections      ───────────►  (stream: accepted in connect order)
//!   Start (stream only)   ───────────►
//!   ... workload ...
//!   Done (rr, crr)        ───────────►
//!                         ◄───────────  Report(ServerReport) · bulk(recv_ns)… · bulk()
//! ```
//!
//! Instead of `Hello`, the first sealed frame may be an [`Ask`] (docs/fleet.md, "asks"):
//!
//! ```text
//!   Ask{Facts}            ───────────►  ◄── Answer(Facts(AgentFacts))
//!   Ask{Clock{probes}}    ───────────►  then per probe: Ping{t1} ──► ◄── Pong{t1, t2, t3}
//!   Ask{Run{target, server_key, test}} ►  the agent runs the CLIENT side of `test` toward
//!                                         `target` (its own key, pinning server_key)
//!                         ◄───────────  Answer(Run{result: the --json Report}) | Error
//!   Ask{Sysctl{set, lease_ms}} ──────►  journal (fsync) ─► apply (needs --allow-sysctl)
//!                         ◄───────────  Answer(Sysctl{previous})
//!   Renew (every lease/3) ───────────►  (no Renew within the lease, or the connection
//!   Release               ───────────►   closes: the agent restores on its own)
//!                         ◄───────────  Answer(Released)
//! ```
//! Refusals are `Error{message, cause}`: the message names the flag or field to fix, the
//! [`Cause`] says whether it is the client's usage, a limit, a busy server or a failure.
//!
//! The version travels in clear in the handshake's first frame, and again in `Hello`: a server
//! answers a client of another version (even a version-2 client, which sends a JSON `Hello` in
//! clear) with both versions named, so a peer out of step is a clear [`LoadError::Protocol`] or
//! [`LoadError::Refused`], never garbage. [`write_frame`] and [`read_frame`] keep a `Report` and
//! its bulk frame together, so callers see one [`Ctrl`] value, over a sealed
//! [`Channel`] or (for the version refusal and tests) a plain stream.

use std::io::{Read, Write};
use std::net::TcpStream;
use tcplab_results::facts::Facts;

use serde::{Deserialize, Serialize};
use tcplab_auth::{Channel, ChannelError};
use tcplab_results::spec::WorkloadSpec;
use tcplab_results::stamps::Stamps;
use tcplab_results::stream::IntervalSample;

use crate::bulk;
pub use crate::cause::Cause;
use crate::clock::ThreadTimes;
use crate::error::{LoadError, Result};
use crate::sockopt::AppliedOpts;
use crate::stamplog::StampLog;

/// Protocol version; a server refuses other versions with a clear message. Version 2: the
/// report's `recv_ns` travels in a bulk frame after the JSON report. Version 3: the control
/// connection opens with a Noise handshake and every frame after it is sealed. Version 4: the
/// stamps travel in bulk frames of at most [`BULK_CHUNK`], ended by an empty one. Version 5:
/// every report carries the server's own view of the test ([`ServerReport::view`]: its
/// counters, its end of the data connection), and the facts answer the agent's host. Version 6:
/// the test is a [`WorkloadSpec`] (tagged `kind`, values with units, as a scenario writes it)
/// and refusals carry their cause.
pub const VERSION: u32 = 6;
/// Stamps per bulk frame (at most ~640 KB of varints).
pub const BULK_CHUNK: usize = 1 << 16;
/// Socket buffer of both ends of a control connection, bytes (the kernel caps it at
/// `net.core.{w,r}mem_max`, ~200 KiB by default): a report and its stamps frame (~150 KB for
/// 100,000 messages) then go out in one write and arrive without the two ends taking turns
/// to empty and refill a 16 KiB initial buffer, each turn a wake-up on a busy machine.
pub const CTRL_BUFFER: u32 = 1 << 20;
/// Default control port of `tcplab serve` (iperf3's 5201 is left free for side-by-side runs).
pub const DEFAULT_PORT: u16 = 5301;
/// Most stamps a report carries (msgs' largest run).
const MAX_STAMPS: u64 = tcplab_results::msgs::MAX_COUNT;
/// Largest frame accepted (a bulk frame of 10 M stamps of up to 10 bytes each fits).
const MAX_FRAME: usize = 256 << 20;
/// Bytes set aside for a plain frame's body before any arrives; more as they do.
const FIRST_READ: usize = 64 << 10;

impl Ctrl {
    /// A refusal with its cause.
    pub fn refusal(cause: Cause, message: impl Into<String>) -> Self {
        Self::Error {
            message: message.into(),
            cause,
        }
    }

    /// The message's kind, for messages (never its contents, which may be large).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Hello { .. } => "Hello",
            Self::Ready { .. } => "Ready",
            Self::Start => "Start",
            Self::Done => "Done",
            Self::Report(_) => "Report",
            Self::Error { .. } => "Error",
            Self::Ask { .. } => "Ask",
            Self::Answer(_) => "Answer",
            Self::Ping { .. } => "Ping",
            Self::Pong { .. } => "Pong",
            Self::Renew => "Renew",
            Self::Release => "Release",
        }
    }
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
        test: Box<WorkloadSpec>,
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
    /// Either way: the test or ask cannot run (or was stopped); the message is the reason,
    /// naming the flag or field to fix, and the cause is what the other end acts on (its exit
    /// code, whether a study tries again), never the message's words.
    Error {
        /// One-line reason.
        message: String,
        /// Why, as a kind (a peer of version 5 or older sends none: [`Cause::Failed`]).
        #[serde(default)]
        cause: Cause,
    },
    /// Client → agent, instead of `Hello`: a request other than a test ([`Ask`]).
    Ask {
        /// Must equal [`VERSION`].
        version: u32,
        /// The request.
        ask: Box<Ask>,
    },
    /// Agent → client: what an [`Ask`] asked for.
    Answer(Box<Answer>),
    /// Client → agent (after `Ask::Clock`): the client's CLOCK_REALTIME when it sent this, ns.
    Ping {
        /// Client clock at send.
        t1_ns: i64,
    },
    /// Agent → client: the Ping's stamp, and the agent's CLOCK_REALTIME on receipt and just
    /// before sending this, ns.
    Pong {
        /// The Ping's `t1_ns`, echoed.
        t1_ns: i64,
        /// Agent clock on receipt.
        t2_ns: i64,
        /// Agent clock at send.
        t3_ns: i64,
    },
    /// Client → agent (after `Ask::Sysctl`): keep the held sysctls for another lease.
    Renew,
    /// Client → agent (after `Ask::Sysctl`): restore them now (answered `Answer::Released`).
    Release,
}

/// A request to an agent other than a test: the first sealed frame, in place of `Hello`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "ask", rename_all = "snake_case")]
pub enum Ask {
    /// What the agent is and the machine it sees ([`AgentFacts`]).
    Facts,
    /// `probes` Ping/Pong exchanges (1..=[`MAX_PROBES`]), to estimate the agent's clock offset.
    Clock {
        /// Exchanges that follow.
        probes: u32,
    },
    /// Run the CLIENT side of `test` toward the agent at `target`, with the agent's own key,
    /// pinning `server_key` (None: `target` must be a loopback or lab address).
    Run {
        /// The other agent's control address.
        target: std::net::SocketAddr,
        /// The other agent's public key line (`tcplab-x25519 BASE64`).
        server_key: Option<String>,
        /// The test.
        test: Box<WorkloadSpec>,
    },
    /// Set these `net.` sysctls in the agent's network namespace and hold them while the
    /// client renews within `lease_ms` (needs `--allow-sysctl`).
    Sysctl {
        /// (key, value) pairs, keys dotted (`net.ipv4.tcp_rmem`).
        set: Vec<(String, String)>,
        /// The lease: with no `Renew` for this long, the agent restores on its own.
        lease_ms: u64,
    },
}

/// Most Ping/Pong exchanges one `Ask::Clock` may ask for.
pub const MAX_PROBES: u32 = 64;

/// An agent's answer to an [`Ask`].
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "answer", rename_all = "snake_case")]
pub enum Answer {
    /// To `Ask::Facts`.
    Facts(Box<AgentFacts>),
    /// To `Ask::Run`: the test's result.
    Run {
        /// The result, as `tcplab <workload> --json` prints it.
        result: Box<crate::Report>,
    },
    /// To `Ask::Sysctl`: the values held now replaced, in the order asked.
    Sysctl {
        /// (key, value before).
        previous: Vec<(String, String)>,
    },
    /// To `Release`: every held value is restored.
    Released,
}

/// What an agent says about itself (`Ask::Facts`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentFacts {
    /// The agent's tcplab version.
    pub tcplab: String,
    /// Its control protocol version.
    pub protocol: u32,
    /// True when it runs with `--keys` (only listed clients may use it).
    pub authenticated: bool,
    /// True when it runs with `--allow-sysctl`.
    pub allow_sysctl: bool,
    /// The machine as the agent sees it (`tcplab_host::facts::machine()`: kernel, HZ, CPUs,
    /// congestion control, buffers), in its own network namespace.
    pub facts: Option<Facts>,
    /// The agent's own network namespace as a host (its per-namespace sysctls such as
    /// `net.ipv4.tcp_rmem`, its interfaces): what a doctor needs to name the far end's limits.
    /// `None` from an agent before protocol 5.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<tcplab_results::facts::HostFacts>,
}

/// What the server measured, returned at the end of every test.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerReport {
    /// False when the server side was cut short.
    pub complete: bool,
    /// Why the server side was cut short.
    pub incomplete_reason: Option<String>,
    /// Set when the server stopped the test itself (a limit, its own shutdown): then that is
    /// the run's cause, and whatever the client saw next (a connection shut) only its symptom.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<Cause>,
    /// CPU time of the server's data threads, ns.
    pub cpu_ns: u64,
    /// Time the server's data threads were runnable but waited for a CPU, ns (schedstat run
    /// delay); None where the kernel does not count it, or from a server that predates it.
    #[serde(default)]
    pub cpu_wait_ns: Option<u64>,
    /// Data bytes received.
    pub bytes_received: u64,
    /// Data bytes sent.
    pub bytes_sent: u64,
    /// Wall time of the server side, ns.
    pub elapsed_ns: u64,
    /// Options in force on the first data socket.
    pub options: Option<AppliedOpts>,
    /// msgs: receive timestamp (CLOCK_MONOTONIC ns) of every message, in order. Not in the
    /// JSON report: [`write_frame`] sends it in the bulk frames that follow.
    #[serde(skip)]
    pub recv_ns: Stamps,
    /// stream: the server's interval samples.
    pub intervals: Vec<IntervalSample>,
    /// rr/crr: transactions served.
    pub transactions: u64,
    /// What the server saw on its own side: the counters of its namespace that rose during the
    /// test, its end of the data connection, its accept-queue limit.
    #[serde(default)]
    pub view: tcplab_results::peer::PeerView,
}

impl ServerReport {
    /// Records what the server's data threads took (CPU time and CPU wait).
    pub fn set_times(&mut self, t: ThreadTimes) {
        self.cpu_ns = t.cpu_ns;
        self.cpu_wait_ns = t.wait_ns;
    }
}

/// A connection that carries control frames: a sealed [`Channel`] (every test) or a plain
/// stream (the version refusal to old clients, and tests of the framing).
pub trait Frames {
    /// Sends `bodies` as consecutive frames, in one write.
    fn send_bodies(&mut self, bodies: &[&[u8]]) -> Result<()>;
    /// Receives one frame's body, honouring the socket's read timeout.
    fn recv_body(&mut self) -> Result<Vec<u8>>;
}

impl Frames for TcpStream {
    fn send_bodies(&mut self, bodies: &[&[u8]]) -> Result<()> {
        let mut buf = Vec::with_capacity(bodies.iter().map(|b| b.len() + 4).sum());
        for b in bodies {
            tcplab_auth::push_frame(&mut buf, b);
        }
        self.write_all(&buf)
            .map_err(|e| LoadError::io("writing to the control connection", e))
    }

    fn recv_body(&mut self) -> Result<Vec<u8>> {
        read_body(self)
    }
}

impl Frames for Channel {
    fn send_bodies(&mut self, bodies: &[&[u8]]) -> Result<()> {
        Ok(self.send(bodies)?)
    }

    fn recv_body(&mut self) -> Result<Vec<u8>> {
        Ok(self.recv()?)
    }
}

/// The sealed channel's failures in the protocol's words: a read that failed says which
/// protocol version the peer should speak.
impl From<ChannelError> for LoadError {
    fn from(e: ChannelError) -> Self {
        match e {
            ChannelError::Read(e) => read_failed(&e),
            ChannelError::Write(e) => LoadError::io("writing to the control connection", e),
            ChannelError::Noise(e) => LoadError::Protocol(e.to_string()),
        }
    }
}

/// Encodes one control message as a frame body.
pub fn encode(msg: &Ctrl) -> Result<Vec<u8>> {
    serde_json::to_vec(msg).map_err(|e| LoadError::Protocol(format!("encoding a frame: {e}")))
}

/// Writes one frame; a `Report` is followed by its bulk frames (`recv_ns`) and the empty one
/// that ends them, all in one write when they fit in one chunk.
pub fn write_frame<C: Frames + ?Sized>(conn: &mut C, msg: &Ctrl) -> Result<()> {
    let json = encode(msg)?;
    if u32::try_from(json.len()).is_err() {
        return Err(LoadError::Protocol("frame larger than 4 GiB".into()));
    }
    let Ctrl::Report(r) = msg else {
        return conn.send_bodies(&[&json]);
    };
    let mut empty = Vec::new();
    bulk::encode(&[], &mut empty);
    let mut stamps = r.recv_ns.iter();
    let mut chunk = Vec::with_capacity(BULK_CHUNK.min(r.recv_ns.len()));
    let mut body = Vec::new();
    let mut head = Some(json);
    loop {
        chunk.clear();
        chunk.extend(stamps.by_ref().take(BULK_CHUNK));
        if chunk.is_empty() {
            break;
        }
        body.clear();
        bulk::encode(&chunk, &mut body);
        match head.take() {
            Some(json) if chunk.len() < BULK_CHUNK => {
                return conn.send_bodies(&[&json, &body, &empty]);
            }
            Some(json) => conn.send_bodies(&[&json, &body])?,
            None => conn.send_bodies(&[&body])?,
        }
    }
    stamps
        .finish()
        .map_err(|e| LoadError::io("reading the receive stamps back to send them", e))?;
    match head {
        Some(json) => conn.send_bodies(&[&json, &empty]),
        None => conn.send_bodies(&[&empty]),
    }
}

/// Reads one frame, honouring the socket's read timeout; a `Report` gets its `recv_ns` from
/// the bulk frames that must follow it (kept in a [`StampLog`], so a long run's go to a file).
pub fn read_frame<C: Frames + ?Sized>(conn: &mut C) -> Result<Ctrl> {
    let mut msg = decode(&conn.recv_body()?)?;
    if let Ctrl::Report(r) = &mut msg {
        r.recv_ns = read_stamps(conn)?;
    }
    Ok(msg)
}

/// The bulk frames after a report, up to the empty one that ends them.
fn read_stamps<C: Frames + ?Sized>(conn: &mut C) -> Result<Stamps> {
    let mut log =
        StampLog::new(0).map_err(|e| LoadError::io("keeping the report's receive stamps", e))?;
    loop {
        let body = conn.recv_body().map_err(|e| {
            LoadError::Protocol(format!(
                "no stamps frame after the report ({e}); a peer of protocol version {VERSION} \
                 sends them: use a tcplab of that version on both ends"
            ))
        })?;
        let chunk = bulk::decode(&body)?;
        if chunk.is_empty() {
            break;
        }
        if chunk.len() > BULK_CHUNK || log.len() + chunk.len() as u64 > MAX_STAMPS {
            return Err(LoadError::Protocol(format!(
                "stamps frames carry more than {MAX_STAMPS} stamps, or one more than \
                 {BULK_CHUNK}; check that the peer is a tcplab of protocol version {VERSION}"
            )));
        }
        for v in chunk {
            log.push(v);
        }
    }
    log.finish()
        .map_err(|e| LoadError::io("keeping the report's receive stamps", e))
}

/// Decodes one JSON frame body.
pub fn decode(body: &[u8]) -> Result<Ctrl> {
    if body.starts_with(&bulk::MAGIC) {
        return Err(LoadError::Protocol(format!(
            "got a binary stamps frame where a JSON control frame was expected; the peer is \
             out of step: check that it is a tcplab of protocol version {VERSION}"
        )));
    }
    serde_json::from_slice(body).map_err(|e| {
        LoadError::Protocol(format!(
            "bad control frame ({}); check that the peer is a tcplab of protocol version \
             {VERSION}",
            peer_text(&e.to_string())
        ))
    })
}

/// Text a peer sent (a refusal's message, or a decoder's words about its frame, which quote
/// it), fit for a one-line error: control characters escaped, cut to a few hundred characters.
pub fn peer_text(text: &str) -> String {
    tcplab_text::one_line(text)
}

/// An error reading a control frame, with what to check.
pub(crate) fn read_failed(e: &std::io::Error) -> LoadError {
    LoadError::Protocol(format!(
        "{}; check that the peer is a running tcplab of protocol version {VERSION}",
        crate::net::reason("reading a control frame", e)
    ))
}

/// Reads one plain frame's body, whatever its kind. The body grows as its bytes arrive, so a
/// length a peer announces but never sends costs no memory.
fn read_body(stream: &mut TcpStream) -> Result<Vec<u8>> {
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).map_err(|e| read_failed(&e))?;
    let len = u32::from_be_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(LoadError::Protocol(format!(
            "frame of {len} bytes exceeds the {MAX_FRAME}-byte limit; check that the peer is a \
             tcplab of protocol version {VERSION}"
        )));
    }
    let mut body = Vec::with_capacity(len.min(FIRST_READ));
    while body.len() < len {
        if body.len() == body.capacity() {
            // Doubling, but never past the announced length: a 100 MB stamps frame ends in
            // a 100 MB buffer, not the next power of two.
            body.reserve_exact((len - body.len()).min(body.capacity().max(FIRST_READ)));
        }
        let start = body.len();
        body.resize(body.capacity().min(len), 0);
        match stream.read(&mut body[start..]) {
            Ok(0) => {
                return Err(read_failed(&std::io::Error::from(
                    std::io::ErrorKind::UnexpectedEof,
                )));
            }
            Ok(n) => body.truncate(start + n),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => body.truncate(start),
            Err(e) => return Err(read_failed(&e)),
        }
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{msgs::MsgsConfig, rr::RrConfig};

    #[test]
    fn frames_round_trip_over_a_socket() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let mut c = TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
        let (mut s, _) = l.accept().expect("accept");
        let hello = Ctrl::Hello {
            version: VERSION,
            test: Box::new(WorkloadSpec::Rr(RrConfig::default())),
        };
        write_frame(&mut c, &hello).expect("write");
        write_frame(&mut c, &Ctrl::Ready { data_port: 4242 }).expect("write");
        match read_frame(&mut s).expect("read") {
            Ctrl::Hello { version, test } => {
                assert_eq!(version, VERSION);
                assert!(matches!(*test, WorkloadSpec::Rr(_)));
            }
            other => panic!("got {other:?}"),
        }
        assert!(matches!(
            read_frame(&mut s).expect("read"),
            Ctrl::Ready { data_port: 4242 }
        ));
    }

    #[test]
    fn asks_and_answers_round_trip_in_their_documented_shape() {
        let ask = Ctrl::Ask {
            version: VERSION,
            ask: Box::new(Ask::Sysctl {
                set: vec![("net.core.somaxconn".into(), "512".into())],
                lease_ms: 3_000,
            }),
        };
        let json = String::from_utf8(encode(&ask).expect("json")).expect("utf-8");
        assert_eq!(
            json,
            r#"{"type":"ask","version":6,"ask":{"ask":"sysctl","set":[["net.core.somaxconn","512"]],"lease_ms":3000}}"#
        );
        let run = Ctrl::Ask {
            version: VERSION,
            ask: Box::new(Ask::Run {
                target: "198.18.0.2:5301".parse().expect("addr"),
                server_key: None,
                test: Box::new(WorkloadSpec::Msgs(MsgsConfig::default())),
            }),
        };
        match decode(&encode(&run).expect("json")).expect("decode") {
            Ctrl::Ask { ask, .. } => match *ask {
                Ask::Run { target, test, .. } => {
                    assert_eq!(target.port(), 5301);
                    assert!(matches!(*test, WorkloadSpec::Msgs(_)));
                }
                other => panic!("got {other:?}"),
            },
            other => panic!("got {other:?}"),
        }
        let released = encode(&Ctrl::Answer(Box::new(Answer::Released))).expect("json");
        assert_eq!(released, br#"{"type":"answer","answer":"released"}"#);
        assert!(matches!(
            decode(br#"{"type":"pong","t1_ns":1,"t2_ns":-2,"t3_ns":3}"#).expect("pong"),
            Ctrl::Pong { t2_ns: -2, .. }
        ));
        assert!(matches!(
            decode(br#"{"type":"renew"}"#).expect("renew"),
            Ctrl::Renew
        ));
    }

    #[test]
    fn garbage_is_a_protocol_error() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let mut c = TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
        let (mut s, _) = l.accept().expect("accept");
        c.write_all(b"GET / HTTP/1.1\r\n\r\n").expect("write");
        let err = read_frame(&mut s).expect_err("garbage");
        assert!(
            err.to_string().contains("a tcplab of protocol version"),
            "{err}"
        );
    }

    /// A report of `n` stamps sent and read back, with a frame after it to show the two
    /// ends stay in step.
    fn report_round_trip(n: u64) {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let mut c = TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
        let (mut s, _) = l.accept().expect("accept");
        let report = ServerReport {
            complete: true,
            bytes_received: n,
            transactions: n,
            recv_ns: (0..n).map(|i| 5_000_000_000 + i * 1_500).collect(),
            ..ServerReport::default()
        };
        let json = serde_json::to_string(&report).expect("json");
        assert!(!json.contains("recv_ns") && json.len() < 300, "{json}");
        let writer = std::thread::spawn(move || {
            write_frame(&mut c, &Ctrl::Report(Box::new(report.clone()))).expect("write");
            write_frame(&mut c, &Ctrl::Done).expect("write");
            report
        });
        let got = match read_frame(&mut s).expect("read") {
            Ctrl::Report(r) => *r,
            other => panic!("got {other:?}"),
        };
        let sent = writer.join().expect("writer");
        assert_eq!(got, sent);
        assert_eq!(got.recv_ns.len() as u64, n);
        assert_eq!(
            got.recv_ns.last(),
            n.checked_sub(1).map(|i| 5_000_000_000 + i * 1_500)
        );
        // The next frame starts right after the bulk frames: the two stay in step.
        assert!(matches!(read_frame(&mut s).expect("read"), Ctrl::Done));
    }

    #[test]
    fn a_report_carries_its_stamps_in_bulk_frames() {
        report_round_trip(100_000);
    }

    #[test]
    fn stamps_on_chunk_edges_and_none_travel_whole() {
        for n in [
            0,
            1,
            BULK_CHUNK as u64 - 1,
            BULK_CHUNK as u64,
            2 * BULK_CHUNK as u64 + 1,
        ] {
            report_round_trip(n);
        }
    }

    #[test]
    fn a_version_1_report_is_a_clear_error() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let mut c = TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
        let (mut s, _) = l.accept().expect("accept");
        // Version 1 sent the stamps inside the JSON report and nothing after it.
        let body = br#"{"type":"report","complete":true,"incomplete_reason":null,"cpu_ns":1,"bytes_received":2,"bytes_sent":0,"elapsed_ns":3,"options":null,"recv_ns":[7,8],"intervals":[],"transactions":2}"#;
        c.write_all(&(body.len() as u32).to_be_bytes())
            .expect("write");
        c.write_all(body).expect("write");
        write_frame(&mut c, &Ctrl::Done).expect("write");
        let err = read_frame(&mut s).expect_err("no bulk frame").to_string();
        assert!(err.contains("expected a binary stamps frame"), "{err}");
        assert!(
            err.contains(&format!("protocol version {VERSION}")),
            "{err}"
        );
        // And one that closes after its report.
        write_frame(&mut c, &Ctrl::Done).expect("write");
        c.write_all(&(body.len() as u32).to_be_bytes())
            .expect("write");
        c.write_all(body).expect("write");
        drop(c);
        assert!(matches!(read_frame(&mut s).expect("read"), Ctrl::Done));
        let err = read_frame(&mut s).expect_err("closed").to_string();
        assert!(err.contains("no stamps frame after the report"), "{err}");
    }

    #[test]
    fn a_bulk_frame_out_of_place_is_named() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let mut c = TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
        let (mut s, _) = l.accept().expect("accept");
        let mut stamps = Vec::new();
        bulk::encode(&[1, 2, 3], &mut stamps);
        c.send_bodies(&[&stamps]).expect("write");
        let err = read_frame(&mut s).expect_err("bulk first").to_string();
        assert!(err.contains("out of step"), "{err}");
    }
}
