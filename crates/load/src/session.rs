//! The client's side of the control protocol ([`Session`]: the authenticated handshake, then
//! the test's frames, sealed) and the metadata every result carries ([`RunMeta`]).

use std::net::{SocketAddr, TcpStream};
use std::time::Duration;
use tcplab_results::facts::Facts;
use tcplab_results::spec::WorkloadSpec;

use crate::auth::{Channel, ClientAuth};
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
/// `timeout`), before the handshake: tests and asks ([`crate::remote`]) alike.
pub(crate) fn connect_ctrl(target: SocketAddr, timeout: Duration) -> Result<TcpStream> {
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
        let mut ctrl = crate::auth::client::handshake(ctrl, auth, target, &hello, timeout)?;
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
        crate::agent::handshake::kind(got),
        proto::VERSION
    ))
}
