//! The server side of every workload: one listener for control connections; per test a data
//! listener on the same IP with the test's socket options, then the workload's `serve` routine.
//! Each test runs on its own thread, which inherits the network namespace of the thread that
//! called [`Server::serve`], so a server entered into a lab host stays there.

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::error::{LoadError, Result};
use crate::net::reason;
use crate::net::{self, ConnectError};
use crate::proto::{self, Ctrl, ServerReport, TestSpec};
use crate::sockopt::{SockOpts, read_back, set_timeouts};
use crate::{crr, msgs, rr, stream};

/// How long a fresh control connection may take to say Hello.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// How often the accept loop looks at the stop flag.
const POLL: Duration = Duration::from_millis(100);

/// A tcplab server: `tcplab serve --listen ADDR:PORT` (default port [`proto::DEFAULT_PORT`]).
#[derive(Debug)]
pub struct Server {
    listener: TcpListener,
}

impl Server {
    /// Binds the control listener. A busy port is [`LoadError::Listen`] naming the address.
    pub fn bind(addr: SocketAddr) -> Result<Self> {
        let listener = match net::listen(addr, &SockOpts::default(), 128) {
            Ok(l) => l,
            Err(ConnectError::Io(source)) => return Err(LoadError::Listen { addr, source }),
            Err(ConnectError::Option(e)) => return Err(e),
        };
        set_timeouts(listener.as_raw_fd(), POLL)
            .map_err(|e| LoadError::io("setting the accept timeout", e))?;
        Ok(Self { listener })
    }

    /// The bound control address (useful after binding port 0).
    pub fn local_addr(&self) -> Result<SocketAddr> {
        self.listener
            .local_addr()
            .map_err(|e| LoadError::io("reading the listen address", e))
    }

    /// Serves tests until `stop` is set or `max_tests` control connections were handled;
    /// each test runs on its own thread, and all are joined before returning.
    pub fn serve(&self, stop: &AtomicBool, max_tests: Option<u64>) -> Result<()> {
        let mut handled = 0u64;
        std::thread::scope(|scope| {
            while !stop.load(Ordering::Relaxed) && max_tests.is_none_or(|m| handled < m) {
                match self.listener.accept() {
                    Ok((ctrl, _)) => {
                        handled += 1;
                        scope.spawn(move || {
                            // A failed test is reported to its client; the server goes on.
                            let _ = handle(ctrl);
                        });
                    }
                    Err(e)
                        if matches!(
                            e.kind(),
                            io::ErrorKind::WouldBlock
                                | io::ErrorKind::TimedOut
                                | io::ErrorKind::Interrupted
                        ) => {}
                    Err(e) => return Err(LoadError::io("accepting a control connection", e)),
                }
            }
            Ok(())
        })
    }
}

/// What a workload's server routine gets: the control connection, its data listener and the
/// test's idle timeout.
#[derive(Debug)]
pub(crate) struct ServerCtx {
    pub ctrl: TcpStream,
    pub listener: TcpListener,
    pub timeout: Duration,
    pub opts: SockOpts,
}

impl ServerCtx {
    /// Accepts the test's data connection and starts its report: complete, with the socket
    /// options the kernel applied read back; without a connection, the incomplete report to
    /// send instead.
    pub fn accept_data(&self) -> (Option<TcpStream>, ServerReport) {
        match self.accept() {
            Ok(s) => {
                let report = ServerReport {
                    complete: true,
                    options: Some(read_back(s.as_raw_fd(), &self.opts)),
                    ..ServerReport::default()
                };
                (Some(s), report)
            }
            Err(e) => (
                None,
                ServerReport {
                    complete: false,
                    incomplete_reason: Some(reason("waiting for the data connection", &e)),
                    ..ServerReport::default()
                },
            ),
        }
    }

    /// Accepts one data connection within the idle timeout, with the test's options and
    /// timeouts applied.
    pub fn accept(&self) -> io::Result<TcpStream> {
        let deadline = crate::clock::now_ns() + self.timeout.as_nanos() as u64;
        loop {
            match self.listener.accept() {
                Ok((s, _)) => {
                    set_timeouts(s.as_raw_fd(), self.timeout)?;
                    // Options were inherited from the listener; re-applying is harmless and
                    // covers those the kernel does not copy.
                    let _ = self.opts.apply(s.as_raw_fd());
                    return Ok(s);
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                    ) =>
                {
                    if crate::clock::now_ns() > deadline {
                        return Err(io::Error::from_raw_os_error(libc::ETIMEDOUT));
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }
}

fn handle(mut ctrl: TcpStream) -> Result<()> {
    let _ = ctrl.set_nodelay(true);
    // Best effort: a smaller buffer only costs the report's transfer some wake-ups.
    let buffer = i32::try_from(proto::CTRL_BUFFER).unwrap_or(i32::MAX);
    let _ = crate::sockopt::set_int(ctrl.as_raw_fd(), libc::SOL_SOCKET, libc::SO_SNDBUF, buffer);
    ctrl.set_read_timeout(Some(HELLO_TIMEOUT))
        .map_err(|e| LoadError::io("control timeout", e))?;
    ctrl.set_write_timeout(Some(HELLO_TIMEOUT))
        .map_err(|e| LoadError::io("control timeout", e))?;
    let test = match proto::read_frame(&mut ctrl)? {
        Ctrl::Hello { version, test } if version == proto::VERSION => *test,
        Ctrl::Hello { version, .. } => {
            return refuse(
                &mut ctrl,
                format!(
                    "protocol version {version} not supported (server speaks {})",
                    proto::VERSION
                ),
            );
        }
        other => return refuse(&mut ctrl, format!("expected Hello, got {other:?}")),
    };
    if let Err(e) = test.validate() {
        return refuse(&mut ctrl, e.to_string());
    }
    let ip = ctrl
        .local_addr()
        .map_err(|e| LoadError::io("reading the control address", e))?
        .ip();
    let opts = test.opts().clone();
    let listener = match net::listen(SocketAddr::new(ip, 0), &opts, 4096) {
        Ok(l) => l,
        Err(ConnectError::Option(e)) => return refuse(&mut ctrl, format!("server: {e}")),
        Err(ConnectError::Io(e)) => {
            return refuse(&mut ctrl, format!("server cannot open a data port: {e}"));
        }
    };
    set_timeouts(listener.as_raw_fd(), POLL)
        .map_err(|e| LoadError::io("setting the accept timeout", e))?;
    let data_port = listener
        .local_addr()
        .map_err(|e| LoadError::io("reading the data port", e))?
        .port();
    proto::write_frame(&mut ctrl, &Ctrl::Ready { data_port })?;
    let mut ctx = ServerCtx {
        ctrl,
        listener,
        timeout: test.timeout(),
        opts,
    };
    let report: ServerReport = match &test {
        TestSpec::Stream(c) => stream::serve(&mut ctx, c),
        TestSpec::Msgs(c) => msgs::serve(&mut ctx, c),
        TestSpec::Rr(c) => rr::serve(&mut ctx, c),
        TestSpec::Crr(c) => crr::serve(&mut ctx, c),
    };
    let _ = ctx.ctrl.set_write_timeout(Some(ctx.timeout));
    proto::write_frame(&mut ctx.ctrl, &Ctrl::Report(Box::new(report)))
}

fn refuse(ctrl: &mut TcpStream, message: String) -> Result<()> {
    proto::write_frame(
        ctrl,
        &Ctrl::Error {
            message: message.clone(),
        },
    )?;
    Err(LoadError::Refused(message))
}

impl TestSpec {
    /// Validates the test's configuration (the server re-checks what the client sent).
    pub fn validate(&self) -> Result<()> {
        match self {
            Self::Stream(c) => c.validate(),
            Self::Msgs(c) => c.validate(),
            Self::Rr(c) => c.validate(),
            Self::Crr(c) => c.validate(),
        }
    }

    /// The socket options of the test's data connections.
    pub fn opts(&self) -> &SockOpts {
        match self {
            Self::Stream(c) => &c.opts,
            Self::Msgs(c) => &c.opts,
            Self::Rr(c) => &c.opts,
            Self::Crr(c) => &c.opts,
        }
    }

    /// The idle timeout: how long any single wait may last.
    pub fn timeout(&self) -> Duration {
        let ms = match self {
            Self::Stream(c) => c.timeout_ms,
            Self::Msgs(c) => c.timeout_ms,
            Self::Rr(c) => c.timeout_ms,
            Self::Crr(c) => c.timeout_ms,
        };
        Duration::from_millis(ms.max(1))
    }
}
