//! The four workloads' command lines without the rest of tcplab's commands, for quick
//! benchmarks: `cargo run --release -p tcplab --example workload -- rr --lab NAME ...` takes the
//! same flags as `tcplab rr` (and stream, msgs, crr).

use std::process::ExitCode;

use clap::Parser;
use tcplab::workload_args::{CrrArgs, MsgsArgs, RrArgs, StreamArgs};

#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Subcommand)]
enum Cmd {
    Stream(StreamArgs),
    Msgs(MsgsArgs),
    Rr(RrArgs),
    Crr(CrrArgs),
}

fn main() -> anyhow::Result<ExitCode> {
    match Cli::parse().cmd {
        Cmd::Stream(a) => a.run(),
        Cmd::Msgs(a) => a.run(),
        Cmd::Rr(a) => a.run(),
        Cmd::Crr(a) => a.run(),
    }
}
