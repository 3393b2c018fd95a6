//! Why a peer refused or stopped a test or an ask, as a kind the other end acts on (its exit
//! code, whether a study tries again), never the message's words. Refusals travel as
//! `Ctrl::Error { message, cause }` ([`crate::proto`]); a client's [`crate::LoadError`] keeps the
//! cause it was given.

use serde::{Deserialize, Serialize};

/// Why a peer refused or stopped a test or an ask.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    /// The request is wrong (a parameter out of range, a kind the server does not run): the
    /// client's usage to fix, exit code 2, the same on every retry.
    Invalid,
    /// The client's key was refused: usage to fix, exit code 2.
    Auth,
    /// The peers speak different protocol versions, or one sent what the other did not expect.
    Protocol,
    /// A limit of the server's (`--max-duration`, `--max-bytes`) refused the test or stopped
    /// it; the message names the flag. The same test is refused again.
    Limit,
    /// The server is busy (`--max-concurrent`, `--max-threads`, the connection and handshake
    /// rates) or stopping: the same request may run later.
    Busy,
    /// The server tried and failed (it could not open a data port, a socket option).
    #[default]
    Failed,
}

impl Cause {
    /// True when the same request would be refused again whenever it is sent.
    pub fn is_permanent(self) -> bool {
        matches!(
            self,
            Self::Invalid | Self::Auth | Self::Protocol | Self::Limit
        )
    }
}
