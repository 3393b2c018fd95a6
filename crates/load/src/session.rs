//! The client's side of the control protocol ([`Session`]: the authenticated handshake, then
//! the test's frames, sealed), the client's half of the handshake ([`handshake`], which the
//! coordinator's asks share), and the metadata every result carries ([`RunMeta`]).

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};
use tcplab_results::facts::Facts;
use tcplab_results::spec::WorkloadSpec;

use tcplab_auth::noise::{Initiator, NoiseError};
use tcplab_auth::{Channel, ClientAuth, push_frame, read_body};

use crate::clock::ThreadTimes;
use crate::error::{LoadError, Result};
use crate::net::{self, ConnectError};
use crate::proto::{self, Cause, Ctrl, ServerReport};
use crate::sockopt::SockOpts;
pub use tcplab_results::session::RunMeta;

/// A complete-so-far record for a run against `target` that starts now (wall clock, for the
/// record; never used to measure).
pub fn new_meta(target: SocketAddr, facts: Option<Facts>) -> RunMeta {
    let started_unix_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    RunMeta::new(target, facts, started_unix_ms)
}

/// What the client folds into its record from its own threads and from the server's report.
pub(crate) trait FoldIn {
    /// Adds what one client data thread took (one thread, or one run of a sweep).
    fn add_thread_times(&mut self, t: ThreadTimes);
    /// Folds the server's report in: its options, CPU, and whether it was cut short.
    fn absorb(&mut self, report: &ServerReport);
}

impl FoldIn for RunMeta {
    fn add_thread_times(&mut self, t: ThreadTimes) {
        RunMeta::add_client_times(self, t.cpu_ns, t.wait_ns);
    }

    fn absorb(&mut self, report: &ServerReport) {
        self.server_options = report.options.clone();
        self.server_cpu_s = report.cpu_ns as f64 / 1e9;
        self.server_cpu_wait_s = report.cpu_wait_ns.map(|ns| ns as f64 / 1e9);
        self.server_view = Some(report.view.clone());
        if !report.complete {
            let why = report.incomplete_reason.as_deref().unwrap_or("cut short");
            if report.stopped.is_some() {
                // The server stopped the test on a limit: that is the cause, and whatever this
                // side saw first (a connection shut under it) only its symptom.
                self.complete = true;
            }
            self.cut(format!("server: {why}"));
        }
    }
}

/// Connects a control connection (large receive buffer, no Nagle, writes bounded by
/// `timeout`), before the handshake: tests and asks (`tcplab_agent::remote`) alike.
pub fn connect_ctrl(target: SocketAddr, timeout: Duration) -> Result<TcpStream> {
    let ctrl_opts = SockOpts {
        rcvbuf: Some(proto::CTRL_BUFFER),
        ..SockOpts::default()
    };
    let ctrl = match net::connect(target, &ctrl_opts, timeout) {
        Ok(s) => s,
        Err(ConnectError::Io(source)) => {
            return Err(LoadError::Connect {
                addr: target,
                source,
            });
        }
        Err(ConnectError::Option(e)) => return Err(e),
    };
    ctrl.set_nodelay(true)
        .map_err(|e| LoadError::io("setting TCP_NODELAY on the control connection", e))?;
    ctrl.set_write_timeout(Some(timeout))
        .map_err(|e| LoadError::io("setting the control timeout", e))?;
    Ok(ctrl)
}

/// An open test on a server: the sealed control connection and the announced data address.
#[derive(Debug)]
pub struct Session {
    ctrl: Channel,
    data_addr: SocketAddr,
    timeout: Duration,
}

impl Session {
    /// Connects the control connection, authenticates both ends with the process's
    /// credentials ([`ClientAuth::current`]), sends the test, and waits for the data port.
    pub fn open(target: SocketAddr, test: WorkloadSpec, timeout: Duration) -> Result<Self> {
        Self::open_with(target, test, timeout, &*ClientAuth::current()?)
    }

    /// [`Session::open`] with these credentials.
    pub fn open_with(
        target: SocketAddr,
        test: WorkloadSpec,
        timeout: Duration,
        auth: &ClientAuth,
    ) -> Result<Self> {
        let ctrl = connect_ctrl(target, timeout)?;
        let hello = proto::encode(&Ctrl::Hello {
            version: proto::VERSION,
            test: Box::new(test),
        })?;
        let mut ctrl = handshake(ctrl, auth, target, &hello, timeout)?;
        ctrl.set_read_timeout(Some(timeout))
            .map_err(|e| LoadError::io("setting the control timeout", e))?;
        match proto::read_frame(&mut ctrl)? {
            Ctrl::Ready { data_port } => {
                let mut data_addr = target;
                data_addr.set_port(data_port);
                Ok(Self {
                    ctrl,
                    data_addr,
                    timeout,
                })
            }
            Ctrl::Error {
                message,
                cause: Cause::Auth,
            } => Err(LoadError::Auth(format!(
                "{} (this client's key is from {})",
                proto::peer_text(&message),
                auth.key_source()
            ))),
            Ctrl::Error { message, cause } => Err(LoadError::refused(cause, &message)),
            other => Err(out_of_step("Ready", &other)),
        }
    }

    /// Where data connections go.
    pub fn data_addr(&self) -> SocketAddr {
        self.data_addr
    }

    /// Opens one data connection with `opts`, with SO_RCVTIMEO/SO_SNDTIMEO set to the idle
    /// timeout so no data wait is unbounded.
    pub fn connect_data(&self, opts: &SockOpts) -> Result<TcpStream> {
        let s = match net::connect(self.data_addr, opts, self.timeout) {
            Ok(s) => s,
            Err(ConnectError::Io(source)) => {
                return Err(LoadError::Connect {
                    addr: self.data_addr,
                    source,
                });
            }
            Err(ConnectError::Option(e)) => return Err(e),
        };
        use std::os::fd::AsRawFd;
        crate::sockopt::set_timeouts(s.as_raw_fd(), self.timeout)
            .map_err(|e| LoadError::io("setting data timeouts", e))?;
        Ok(s)
    }

    /// Sends one control frame.
    pub fn send(&mut self, msg: &Ctrl) -> Result<()> {
        proto::write_frame(&mut self.ctrl, msg)
    }

    /// Waits up to `wait` for the server's report.
    pub fn report(&mut self, wait: Duration) -> Result<ServerReport> {
        self.ctrl
            .set_read_timeout(Some(wait.max(Duration::from_millis(1))))
            .map_err(|e| LoadError::io("setting the control timeout", e))?;
        match proto::read_frame(&mut self.ctrl)? {
            Ctrl::Report(r) => Ok(*r),
            Ctrl::Error { message, cause } => Err(LoadError::refused(cause, &message)),
            other => Err(out_of_step("Report", &other)),
        }
    }

    /// The idle timeout of this session.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }
}

/// The server sent `got` where `want` belongs: named by its kind (never its contents, which may
/// be large), with what to check.
fn out_of_step(want: &str, got: &Ctrl) -> LoadError {
    LoadError::Protocol(format!(
        "expected {want}, got {}; check that the server is a tcplab of protocol version {}",
        got.kind(),
        proto::VERSION
    ))
}

/// Largest message a client takes from a server (a report with 10 million stamps).
pub const MAX_FROM_SERVER: usize = 256 << 20;

/// Runs the client's side of the handshake on a connected `stream` within `timeout`, then
/// sends `first` (the test's Hello, or an ask) sealed in the same write as the last handshake
/// frame. A test ([`Session::open`]) and the coordinator's asks (`tcplab_agent::remote`) both
/// open their control connection through it.
pub fn handshake(
    mut stream: TcpStream,
    auth: &ClientAuth,
    target: SocketAddr,
    first: &[u8],
    timeout: Duration,
) -> Result<Channel> {
    let deadline = Some(Instant::now() + timeout);
    let noise = |e: NoiseError| LoadError::Protocol(format!("handshake with {target}: {e}"));
    let (init, f1) = Initiator::start(auth.key(), proto::VERSION).map_err(noise)?;
    let mut buf = Vec::new();
    push_frame(&mut buf, &f1);
    stream
        .write_all(&buf)
        .map_err(|e| LoadError::io("writing to the control connection", e))?;
    let f2 = read_body(&mut stream, 64 << 10, deadline).map_err(|e| handshake_read(target, &e))?;
    if let Some(refusal) = clear_refusal(&f2) {
        return Err(refusal);
    }
    let seen = init.on_reply(&f2).map_err(noise)?;
    auth.check_server(target, seen.server_key())?;
    let (f3, transport) = seen.finish().map_err(noise)?;
    let mut prefix = Vec::new();
    push_frame(&mut prefix, &f3);
    let mut channel = Channel::new(stream, transport, MAX_FROM_SERVER);
    channel.send_after(&prefix, &[first])?;
    Ok(channel)
}

/// A refusal the server sent in clear instead of frame 2 (a limit, or a server of another
/// protocol version), or `None` for a Noise reply. Frame 2 begins with the server's ephemeral
/// key, 32 random bytes whose first is `{` once in 256 handshakes: only a frame that parses as a
/// refusal is one.
fn clear_refusal(f2: &[u8]) -> Option<LoadError> {
    if f2.first() != Some(&b'{') {
        return None;
    }
    match serde_json::from_slice::<Ctrl>(f2).ok()? {
        Ctrl::Error { message, cause } => Some(LoadError::refused(cause, &message)),
        _ => None,
    }
}

/// An error reading frame 2, with the likely cause.
fn handshake_read(target: SocketAddr, e: &std::io::Error) -> LoadError {
    if e.kind() == std::io::ErrorKind::UnexpectedEof {
        LoadError::Protocol(format!(
            "the server at {target} closed the connection during the handshake without a \
             reason; a tcplab older than protocol version 3 (the first with this handshake) \
             does that (install this version there), servers since say why they refuse"
        ))
    } else if e.kind() == std::io::ErrorKind::InvalidData {
        LoadError::Protocol(format!(
            "the peer at {target} is not a tcplab server of protocol version {} ({e}); check \
             --to",
            proto::VERSION
        ))
    } else {
        LoadError::Protocol(format!(
            "{}; check --to and that `tcplab serve` runs there",
            net::reason("waiting for the server's handshake", e)
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcplab_auth::KeyPair;
    use tcplab_auth::noise::{Intro, Responder, parse_intro};

    #[test]
    fn a_noise_reply_that_begins_with_a_brace_is_not_taken_for_a_refusal() {
        let server = KeyPair::generate("s").expect("s");
        let client = ClientAuth::ephemeral().expect("key");
        // One reply in 256 begins with `{`; 5,000 tries miss it with odds of about 1e-8.
        let found = (0..5_000).find_map(|_| {
            let (init, f1) = Initiator::start(client.key(), proto::VERSION).expect("start");
            let Intro::Current(msg1) = parse_intro(&f1, proto::VERSION) else {
                panic!("frame 1 is not this version's");
            };
            let (_, f2) = Responder::start(&server, msg1).expect("reply");
            (f2.first() == Some(&b'{')).then_some((init, f2))
        });
        let (init, f2) = found.expect("a reply beginning with a brace");
        assert!(clear_refusal(&f2).is_none());
        assert!(init.on_reply(&f2).is_ok());
    }

    #[test]
    fn a_refusal_in_clear_is_read_as_one() {
        let refusal =
            serde_json::to_vec(&Ctrl::refusal(Cause::Busy, "too many sessions")).expect("json");
        let e = clear_refusal(&refusal).expect("a refusal");
        assert!(e.to_string().contains("too many sessions"), "{e}");
    }
}
