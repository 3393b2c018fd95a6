//! tcplab-auth: authentication of the control connection: who may start a test on an agent, and
//! which agent a client is talking to. Both the workload clients (`tcplab-load`) and the agent
//! (`tcplab-agent`) use it; it knows nothing of what the sealed messages say.
//!
//! # Map
//! ```text
//! keys      X25519 key pairs, their one-line text forms, key files and lists     (pure + files)
//! noise     the Noise XX handshake and the sealed records after it               (sans-IO)
//! scope     loopback and lab address ranges                                      (pure)
//! channel   frames within a deadline; Channel, the sealed control connection    (sockets)
//! client    ClientAuth: the client's key and the server keys it believes         (env, files)
//! args      the client's --key, --server-key, --insecure                         (flags)
//! error     AuthError (keys, credentials), ChannelError (the channel)            (pure)
//! ```
//! The two sides of the handshake speak the control protocol and live with it: the client's in
//! `tcplab_load::session`, the server's in `tcplab_agent::handshake`, beside the limits it
//! enforces while the handshake runs. The threat model and the file formats are in
//! docs/fleet.md.

pub mod args;
pub mod channel;
pub mod client;
pub mod error;
pub mod keys;
pub mod noise;
pub mod scope;

pub use channel::{Channel, push_frame, read_body};
pub use client::ClientAuth;
pub use error::{AuthError, ChannelError};
pub use keys::{KeyError, KeyList, KeyPair, PublicKey};
pub use scope::is_lab_or_loopback;
