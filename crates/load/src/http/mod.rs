//! HTTP/1.1 load against web servers (seed 003, SPECweb96): the file set and the request mix
//! (pure), the response parser (pure), the client's event loops, and the built-in file server
//! (`tcplab serve --http PORT`).

pub mod client;
pub mod files;
pub mod parse;
pub mod run;
pub mod serve;
/// The configuration, the request mix over the file set, and the result with its human form
/// are plain data and pure functions (`tcplab_results::http`).
pub use tcplab_results::http::{config, fileset, mix, result};
