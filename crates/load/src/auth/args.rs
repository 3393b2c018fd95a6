//! The client flags that choose its key and the server keys it believes, shared by every
//! workload command.

use std::path::PathBuf;

use super::client::{ClientAuth, load_pins};
use super::keys::KeyPair;
use crate::error::{LoadError, Result};

/// `--key`, `--server-key`, `--insecure` of the client commands.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ClientKeyArgs {
    /// This client's secret key (default: TCPLAB_KEY, else ~/.config/tcplab/key if it exists,
    /// else a key made for this run, which only servers without --keys accept).
    #[arg(long, value_name = "FILE")]
    pub key: Option<PathBuf>,
    /// The server's public key (the line `tcplab serve` prints at start), or a file of keys
    /// any of which is accepted (default: TCPLAB_SERVER_KEY). Needed for a server outside
    /// loopback and lab addresses; a server holding another key is refused.
    #[arg(long, value_name = "KEY|FILE")]
    pub server_key: Option<String>,
    /// Believe whatever key the server holds, on any address (a server someone in the path
    /// pretends to be included).
    #[arg(long, conflicts_with = "server_key")]
    pub insecure: bool,
}

impl ClientKeyArgs {
    /// The credentials these flags (and the environment, for what they leave out) describe.
    pub fn credentials(&self) -> Result<ClientAuth> {
        let mut auth = match &self.key {
            Some(path) => ClientAuth::new(
                KeyPair::load(path).map_err(|source| LoadError::Key {
                    flag: "key",
                    source,
                })?,
                format!("--key {}", path.display()),
            ),
            None => ClientAuth::from_env()?,
        };
        if let Some(v) = &self.server_key {
            let pins = load_pins(v, "--server-key").map_err(|source| LoadError::Key {
                flag: "server-key",
                source,
            })?;
            auth = auth.with_pins(pins, "--server-key");
        }
        Ok(auth.with_insecure(self.insecure))
    }

    /// True when no flag was given (the environment's credentials apply as they are).
    pub fn is_empty(&self) -> bool {
        self.key.is_none() && self.server_key.is_none() && !self.insecure
    }

    /// Makes these the process's credentials, unless no flag was given.
    pub fn install(&self) -> Result<()> {
        if !self.is_empty() {
            self.credentials()?.install();
        }
        Ok(())
    }
}
