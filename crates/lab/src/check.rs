//! The smoke check: a real TCP connection (connect, 1 KiB each way, close) between every ordered
//! pair of end hosts, over IPv4 and IPv6, each side on a thread entered into its host. It proves
//! that addresses, links, bridges and routes all work, not just that ping gets through.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::error::{LabError, Result};
use crate::host::Host;
use crate::lab::Lab;

/// Bytes sent each way per check.
const PAYLOAD: usize = 1024;
/// Longest a single connection may take before it counts as failed.
const TIMEOUT: Duration = Duration::from_secs(3);

/// The outcome for one (from, to, address family).
#[derive(Debug, Clone, Serialize)]
pub struct PairCheck {
    /// Connecting host.
    pub from: String,
    /// Listening host.
    pub to: String,
    /// The address connected to.
    pub addr: IpAddr,
    /// Whether the exchange completed.
    pub ok: bool,
    /// Connect + exchange + close time in microseconds (when ok).
    pub micros: Option<u64>,
    /// Why it failed.
    pub error: Option<String>,
}

impl Lab {
    /// Checks every ordered pair of end hosts on every address family they share.
    pub fn check_connectivity(&self) -> Result<Vec<PairCheck>> {
        let ends: Vec<&Host> = self
            .hosts()
            .iter()
            .filter(|h| h.role() == crate::Role::Host)
            .collect();
        let mut out = Vec::new();
        for server in &ends {
            for addr in server.addrs().iter().map(|a| a.addr) {
                let listener = server.run(move || TcpListener::bind(SocketAddr::new(addr, 0)))?;
                let listener = listener.map_err(|e| {
                    LabError::kernel(format!("listening on {addr} in host {}", server.name()), e)
                })?;
                let port = listener
                    .local_addr()
                    .map_err(|e| LabError::kernel("reading the listener's port", e))?
                    .port();
                for client in ends.iter().filter(|c| c.name() != server.name()) {
                    out.push(check_pair(
                        client,
                        server,
                        &listener,
                        SocketAddr::new(addr, port),
                    )?);
                }
            }
        }
        Ok(out)
    }
}

/// One exchange: the client thread (in `client`) connects and sends, the server side (the
/// listener was opened inside `server`, so accepting from any thread is fine) echoes.
fn check_pair(
    client: &Host,
    server: &Host,
    listener: &TcpListener,
    to: SocketAddr,
) -> Result<PairCheck> {
    let listener = listener
        .try_clone()
        .map_err(|e| LabError::kernel("duplicating the listener", e))?;
    listener
        .set_nonblocking(false)
        .map_err(|e| LabError::kernel("configuring the listener", e))?;
    let echo = std::thread::spawn(move || -> std::io::Result<()> {
        let (mut s, _) = accept_with_timeout(&listener)?;
        s.set_read_timeout(Some(TIMEOUT))?;
        let mut buf = [0u8; PAYLOAD];
        s.read_exact(&mut buf)?;
        s.write_all(&buf)?;
        Ok(())
    });
    let result = client.run(move || -> std::io::Result<u64> {
        let start = Instant::now();
        let mut s = TcpStream::connect_timeout(&to, TIMEOUT)?;
        s.set_read_timeout(Some(TIMEOUT))?;
        let sent = [0x5au8; PAYLOAD];
        s.write_all(&sent)?;
        let mut back = [0u8; PAYLOAD];
        s.read_exact(&mut back)?;
        if back != sent {
            return Err(std::io::Error::other("echoed bytes differ"));
        }
        Ok(start.elapsed().as_micros() as u64)
    })?;
    let echoed = echo
        .join()
        .unwrap_or_else(|_| Err(std::io::Error::other("echo thread panicked")));
    let outcome = result.and_then(|us| echoed.map(|()| us));
    Ok(PairCheck {
        from: client.name().to_string(),
        to: server.name().to_string(),
        addr: to.ip(),
        ok: outcome.is_ok(),
        micros: outcome.as_ref().ok().copied(),
        error: outcome.err().map(|e| e.to_string()),
    })
}

/// accept(2) bounded by [`TIMEOUT`], so a broken lab fails the check instead of hanging it.
fn accept_with_timeout(listener: &TcpListener) -> std::io::Result<(TcpStream, SocketAddr)> {
    listener.set_nonblocking(true)?;
    let deadline = Instant::now() + TIMEOUT;
    loop {
        match listener.accept() {
            Ok((s, a)) => {
                s.set_nonblocking(false)?;
                return Ok((s, a));
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if Instant::now() >= deadline {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "no connection arrived",
                    ));
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => return Err(e),
        }
    }
}
