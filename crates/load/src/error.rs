//! The library's error type. Every message names the flag (or the peer) and says what to do,
//! because the CLI prints it as the one-line diagnosis the user sees.

use std::io;
use std::net::SocketAddr;

use tcplab_auth::AuthError;

use crate::cause::Cause;

/// Errors from configuring or running a workload.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// A configuration value is out of range or inconsistent with another one.
    #[error("invalid --{flag}: {reason}")]
    Config {
        /// The command-line flag (without dashes) the value came from.
        flag: &'static str,
        /// What is wrong and what would be accepted.
        reason: String,
    },
    /// The kernel does not know a socket option the user asked for.
    #[error(
        "--{flag}: this kernel lacks {option} (ENOPROTOOPT); drop the flag or use a kernel that has it ({since})"
    )]
    Unsupported {
        /// The flag that asked for the option.
        flag: &'static str,
        /// The option's C name.
        option: &'static str,
        /// Since which kernel the option exists.
        since: &'static str,
    },
    /// The kernel refused a socket option value.
    #[error("--{flag}: setting {option} failed: {source}")]
    SockOpt {
        /// The flag that asked for the option.
        flag: &'static str,
        /// The option's C name.
        option: &'static str,
        /// The errno.
        source: io::Error,
    },
    /// The server could not bind its listening address.
    #[error("cannot listen on {addr}: {source}; choose another address or port with --listen")]
    Listen {
        /// The address asked for.
        addr: SocketAddr,
        /// The errno (EADDRINUSE for a busy port).
        source: io::Error,
    },
    /// The client could not reach the server's control port.
    #[error(
        "cannot reach the tcplab server at {addr}: {source}; is `tcplab serve` running there (--to)?"
    )]
    Connect {
        /// The server address.
        addr: SocketAddr,
        /// The errno (ECONNREFUSED, ETIMEDOUT, ...).
        source: io::Error,
    },
    /// The control connection carried something unexpected.
    #[error("control connection: {0}")]
    Protocol(String),
    /// The server refused (or stopped) the test or ask and said why.
    #[error("server refused the test: {message}")]
    Refused {
        /// Why, as a kind: usage, a limit, a busy server, a failure.
        cause: Cause,
        /// The server's reason, made safe to print.
        message: String,
    },
    /// A key or key file given with a flag (or its environment variable) is unusable.
    #[error("--{flag}: {source}")]
    Key {
        /// The flag (without dashes) the key came from.
        flag: &'static str,
        /// What is wrong with it.
        source: tcplab_auth::KeyError,
    },
    /// Authentication failed: the server's key is not the pinned one, or the server does not
    /// accept this client's key.
    #[error("authentication: {0}")]
    Auth(String),
    /// Another I/O failure, with what was being done.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: &'static str,
        /// The errno.
        source: io::Error,
    },
    /// An agent refused or failed a request other than a test (an ask: facts, clock, run,
    /// sysctl); the message names the agent's flag or the request's field to fix.
    #[error("agent: {0}")]
    Agent(String),
    /// The lab could not be opened or entered.
    #[error("--lab: {0}")]
    Lab(String),
    /// The raw samples file could not be written.
    #[error("--samples {path}: {source}")]
    Samples {
        /// The file.
        path: String,
        /// The errno.
        source: io::Error,
    },
}

impl LoadError {
    /// Shorthand for [`LoadError::Config`].
    pub fn config(flag: &'static str, reason: impl Into<String>) -> Self {
        Self::Config {
            flag,
            reason: reason.into(),
        }
    }

    /// Shorthand for [`LoadError::Io`].
    pub fn io(context: &'static str, source: io::Error) -> Self {
        Self::Io { context, source }
    }

    /// The error a peer's refusal means: a refused key is an authentication error, anything
    /// else the refusal with its cause; the peer's words are made safe to print.
    pub fn refused(cause: Cause, message: &str) -> Self {
        let message = tcplab_text::one_line(message);
        match cause {
            Cause::Auth => Self::Auth(message),
            cause => Self::Refused { cause, message },
        }
    }

    /// True for errors caused by what the user asked for (exit code 2), false for run failures.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            Self::Config { .. }
                | Self::Unsupported { .. }
                | Self::SockOpt { .. }
                | Self::Listen { .. }
                | Self::Key { .. }
                | Self::Auth(_)
                | Self::Refused {
                    cause: Cause::Invalid,
                    ..
                }
        )
    }
}

/// A configuration type's own check (`tcplab_results`) is this crate's [`LoadError::Config`].
impl From<tcplab_results::ConfigError> for LoadError {
    fn from(e: tcplab_results::ConfigError) -> Self {
        Self::Config {
            flag: e.flag,
            reason: e.reason,
        }
    }
}

/// Keys and credentials (`tcplab_auth`) fail with the same words as this crate's variants.
impl From<AuthError> for LoadError {
    fn from(e: AuthError) -> Self {
        match e {
            AuthError::Key { flag, source } => Self::Key { flag, source },
            AuthError::Auth(message) => Self::Auth(message),
        }
    }
}

/// The crate's result type.
pub type Result<T, E = LoadError> = std::result::Result<T, E>;
