//! The errors of keys, credentials and the sealed channel. A workload turns each into its own
//! error with the same words (`tcplab_load::LoadError` has a variant for each), since every one
//! reaches a user as a one-line diagnosis that names the flag or says what to check.

use std::io;

use crate::keys::KeyError;
use crate::noise::NoiseError;

/// A client's credentials could not be made, or the server they met is not one they believe.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// A key or key file given with a flag (or its environment variable) is unusable.
    #[error("--{flag}: {source}")]
    Key {
        /// The flag (without dashes) the key came from.
        flag: &'static str,
        /// What is wrong with it.
        source: KeyError,
    },
    /// Authentication failed: the server's key is not the pinned one, or the credentials the
    /// environment describes are unusable.
    #[error("authentication: {0}")]
    Auth(String),
}

/// Why a sealed channel did not carry a message. The words a user sees (which protocol version
/// to check) are the protocol's, added by whoever speaks it over the channel.
#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    /// Reading a record failed: the read timed out, the peer went away, or it announced a
    /// record over the limit.
    #[error("reading a control frame: {0}")]
    Read(io::Error),
    /// Writing to the connection failed.
    #[error("writing to the control connection: {0}")]
    Write(io::Error),
    /// A record did not seal or open: altered, out of order, malformed or too long.
    #[error("control connection: {0}")]
    Noise(NoiseError),
}

/// The crate's result type.
pub type Result<T, E = AuthError> = std::result::Result<T, E>;
