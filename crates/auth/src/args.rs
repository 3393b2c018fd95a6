//! A client's choice of its key and of the server keys it believes (what the workload
//! commands' `--key`, `--server-key` and `--insecure` say; crates/cli parses them).

use std::path::PathBuf;

use crate::client::{ClientAuth, load_pins};
use crate::error::{AuthError, Result};
use crate::keys::KeyPair;

/// The keys a client uses: its own, and the server's it believes; left out, the
/// environment's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientKeys {
    /// This client's secret key file (`--key`; default: TCPLAB_KEY, else
    /// ~/.config/tcplab/key if it exists, else a key made for this run, which only servers
    /// without --keys accept).
    pub key: Option<PathBuf>,
    /// The server's public key (the line `tcplab serve` prints at start), or a file of keys
    /// any of which is accepted (`--server-key`; default: TCPLAB_SERVER_KEY). Needed for a server outside
    /// loopback and lab addresses; a server holding another key is refused.
    pub server_key: Option<String>,
    /// Believe whatever key the server holds, on any address (`--insecure`; a server someone
    /// in the path pretends to be included).
    pub insecure: bool,
}

impl ClientKeys {
    /// The credentials these keys (and the environment, for what they leave out) describe.
    pub fn credentials(&self) -> Result<ClientAuth> {
        let mut auth = match &self.key {
            Some(path) => ClientAuth::new(
                KeyPair::load(path).map_err(|source| AuthError::Key {
                    flag: "key",
                    source,
                })?,
                format!("--key {}", path.display()),
            ),
            None => ClientAuth::from_env()?,
        };
        if let Some(v) = &self.server_key {
            let pins = load_pins(v, "--server-key").map_err(|source| AuthError::Key {
                flag: "server-key",
                source,
            })?;
            auth = auth.with_pins(pins, "--server-key");
        }
        Ok(auth.with_insecure(self.insecure))
    }

    /// True when nothing was chosen (the environment's credentials apply as they are).
    pub fn is_empty(&self) -> bool {
        self.key.is_none() && self.server_key.is_none() && !self.insecure
    }

    /// Makes these the process's credentials, unless nothing was chosen.
    pub fn install(&self) -> Result<()> {
        if !self.is_empty() {
            self.credentials()?.install();
        }
        Ok(())
    }
}
