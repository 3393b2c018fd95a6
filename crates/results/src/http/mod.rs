//! HTTP's configuration and result (the client, the server and the response reader are
//! `tcplab_load::http`): what to request ([`mix`]: URL paths in turn, or SPECweb96's file set
//! of [`fileset`] drawn from a seeded stream), the run's figures per size class, its failures
//! by [`error_kind`], and the human form.

pub mod config;
pub mod error_kind;
pub mod fileset;
pub(crate) mod human;
pub mod mix;
pub mod result;
