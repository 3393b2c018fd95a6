//! Authentication of the control connection: who may start a test on an agent, and which agent
//! a client is talking to.
//!
//! ```text
//! keys      X25519 key pairs, their one-line text forms, key files and lists     (pure + files)
//! noise     the Noise XX handshake and the sealed records after it               (sans-IO)
//! scope     loopback and lab address ranges                                      (pure)
//! channel   frames within a deadline; Channel, the sealed control connection    (sockets)
//! client    ClientAuth (key, pinned server keys) and the client's handshake     (sockets)
//! args      the client's --key, --server-key, --insecure                         (flags)
//! ```
//! The server's side of the handshake is in [`crate::agent`], beside the limits it enforces
//! while the handshake runs. The threat model and the file formats are in docs/fleet.md.

pub mod args;
pub mod channel;
pub mod client;
pub mod keys;
pub mod noise;
pub mod scope;

pub use channel::Channel;
pub(crate) use channel::push_frame;
pub use client::ClientAuth;
pub use keys::{KeyError, KeyList, KeyPair, PublicKey};
pub use scope::is_lab_or_loopback;
