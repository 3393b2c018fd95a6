//! tcplab's command line, the part its examples and tests share with the binary: the workload
//! commands' flags ([`workload_args`]) and the impairment flags ([`impair_args`]), parsed here
//! so that the library crates take plain, already-parsed values (and the unit tests that hold
//! them to their scenario keys link no binary). The other commands live beside `main.rs` in
//! `cmd/`.

pub mod impair_args;
pub mod workload_args;
pub mod writable;
