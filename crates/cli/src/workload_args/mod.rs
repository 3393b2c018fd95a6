//! The workload commands' flags (`serve`, `stream`, `msgs`, `rr`, `crr`, `rrul`, `http`): clap
//! parses them here into tcplab-load's configs and options ([`tcplab_front`],
//! [`tcplab_front::http`]), which run, print and pick the exit code. One file per
//! workload family; the flags every client shares in [`common`].

pub mod common;
pub mod http;
pub mod msgs;
pub mod rr;
pub mod rrul;
pub mod serve;
pub mod stream;

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests fail loudly on unexpected errors")]
mod spec_props;

pub use common::{ClientArgs, ClientKeyArgs, Sizes, SockOptArgs, parse_sizes};
pub use http::HttpArgs;
pub use msgs::MsgsArgs;
pub use rr::{CrrArgs, RrArgs};
pub use rrul::RrulArgs;
pub use serve::{AgentArgs, HttpServeArgs, ServeArgs};
pub use stream::StreamArgs;
