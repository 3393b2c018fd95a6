//! Where the two sides run: against a remote `tcplab serve` (`--to`), or both inside a lab
//! (`--lab`), the server on a thread entered into the server host and the client on a thread
//! entered into the client host. Also the target addresses people write (`ADDR[:PORT]`,
//! names).

use std::net::SocketAddr;
use tcplab_results::facts::Facts;

use tcplab_load::error::{LoadError, Result};
use tcplab_load::proto::DEFAULT_PORT;
use tcplab_load::report::Report;

/// Where a workload's client and server run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// The server is a `tcplab serve` at this address; the client runs here.
    Remote(SocketAddr),
    /// Both sides run inside lab `lab`, in hosts `client` and `server`.
    Lab {
        /// Lab name.
        lab: String,
        /// Client host name.
        client: String,
        /// Server host name.
        server: String,
    },
}

impl Placement {
    /// Runs `client` against a server placed as described; returns its report.
    pub fn run<F>(self, client: F) -> Result<Report>
    where
        F: FnOnce(SocketAddr, Option<Facts>) -> Result<Report> + Send,
    {
        match self {
            Self::Remote(addr) => client(addr, None),
            Self::Lab {
                lab,
                client: c,
                server: s,
            } => crate::lab::run_in_lab(&lab, &c, &s, client),
        }
    }
}

/// Parses `ADDR`, `ADDR:PORT`, `[V6]:PORT` or `V6` (default port 5301); names resolve via the system.
pub fn parse_target(s: &str) -> Result<SocketAddr> {
    parse_target_port(s, DEFAULT_PORT)
}

/// `ADDR[:PORT]` or `NAME[:PORT]`, `port` when it has none.
pub fn parse_target_port(s: &str, port: u16) -> Result<SocketAddr> {
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Ok(a);
    }
    if let Ok(ip) = s
        .trim_matches(|c| c == '[' || c == ']')
        .parse::<std::net::IpAddr>()
    {
        return Ok(SocketAddr::new(ip, port));
    }
    resolve_target(s, port)
}

/// A `NAME[:PORT]` resolved to its first address, `port` when it has none.
fn resolve_target(s: &str, port: u16) -> Result<SocketAddr> {
    use std::net::ToSocketAddrs;
    let with_port = if s.contains(':') {
        s.to_string()
    } else {
        format!("{s}:{port}")
    };
    with_port
        .to_socket_addrs()
        .ok()
        .and_then(|mut it| it.next())
        .ok_or_else(|| LoadError::config("to", format!("{s:?} is not an address (ADDR[:PORT])")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets() {
        assert_eq!(
            parse_target("127.0.0.1").ok(),
            Some(SocketAddr::from(([127, 0, 0, 1], DEFAULT_PORT)))
        );
        assert_eq!(
            parse_target("127.0.0.1:99").ok(),
            Some(SocketAddr::from(([127, 0, 0, 1], 99)))
        );
        assert_eq!(
            parse_target("[::1]").map(|a| a.port()).ok(),
            Some(DEFAULT_PORT)
        );
        assert!(parse_target("no such host!").is_err());
    }
}
