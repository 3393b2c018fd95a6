//! Where the two sides run: against a remote `tcplab serve` (`--to`), or both inside a lab
//! (`--lab`), the server on a thread entered into the server host and the client on a thread
//! entered into the client host.

use std::net::SocketAddr;

use crate::error::Result;
use crate::report::Report;

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
        F: FnOnce(SocketAddr, serde_json::Value) -> Result<Report> + Send,
    {
        match self {
            Self::Remote(addr) => client(addr, serde_json::json!({})),
            Self::Lab {
                lab,
                client: c,
                server: s,
            } => crate::lab::run_in_lab(&lab, &c, &s, client),
        }
    }
}
