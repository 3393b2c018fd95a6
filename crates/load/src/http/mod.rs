//! HTTP/1.1 load against web servers (seed 003, SPECweb96): the file set and the request mix
//! (pure), the response parser (pure), the client's event loops, and the built-in file server
//! (`tcplab serve --http PORT`).

pub mod client;
pub mod config;
pub mod files;
pub mod fileset;
pub mod front;
pub(crate) mod human;
pub mod mix;
pub mod parse;
pub mod result;
pub mod run;
pub mod serve;
