//! tcplab's command line, the part its examples and tests share with the binary: the workload
//! commands' flags ([`workload_args`]), parsed here so that the library crates take plain,
//! already-parsed values. The other commands live beside `main.rs` in `cmd/`.

pub mod workload_args;
pub mod writable;
