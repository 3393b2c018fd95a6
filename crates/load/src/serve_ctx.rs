//! What a workload's server routine gets ([`ServerCtx`]: the control connection, the test's data
//! listener, its options and idle timeout) and the one thing it owes whoever runs it: every data
//! socket it accepts goes to the test's [`TestGuard`], so a test stopped from outside (a limit,
//! the agent stopping) wakes out of its blocking calls. The agent (`tcplab-agent`) builds the
//! context and implements the guard; the workloads see only this.

use std::io;
use std::net::{IpAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Duration;

use tcplab_auth::Channel;

use crate::net::reason;
use crate::proto::ServerReport;
use crate::sockopt::{Apply, SockOpts, read_back, set_timeouts};

/// The guard of one running test, as its server routine sees it.
pub trait TestGuard: Send + Sync + std::fmt::Debug {
    /// Takes a data socket the routine accepted, to shut it down if the test is stopped (the
    /// guard keeps a duplicate; the routine still owns the socket and closes it).
    fn hold(&self, data: &TcpStream);
}

/// What a workload's server routine gets: the control connection, its data listener and the
/// test's idle timeout.
#[derive(Debug)]
pub struct ServerCtx {
    /// The sealed control connection.
    pub ctrl: Channel,
    /// The test's data listener (it takes only `client`).
    pub listener: TcpListener,
    /// The test's idle timeout: the longest any single wait may last.
    pub timeout: Duration,
    /// The test's socket options, applied to every data socket.
    pub opts: SockOpts,
    /// The control connection's peer: the only address data connections are taken from.
    pub client: IpAddr,
    /// The test's guard (holds its data sockets, to stop the test from outside).
    pub guard: Arc<dyn TestGuard>,
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
                Ok((s, peer)) if peer.ip().to_canonical() != self.client.to_canonical() => {
                    // The listener's filter drops these; a connection that got here anyway
                    // (a filter the kernel lacks) is closed unanswered.
                    drop(s);
                }
                Ok((s, _)) => {
                    // The filter has done its job at the SYN; a bulk flow's packets need not
                    // each run it.
                    crate::bpf::detach(s.as_raw_fd());
                    self.guard.hold(&s);
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
