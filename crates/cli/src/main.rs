//! `tcplab`: argument parsing and dispatch only. Every command lives in `cmd/`; the work lives in
//! the library crates.

mod cmd;
mod output;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// A TCP performance lab for Linux: emulated networks, workloads, diagnosis, tuning.
#[derive(Debug, Parser)]
#[command(name = "tcplab", version, about, long_about = None, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Build, list, enter and remove emulated networks (hosts are network namespaces).
    #[command(subcommand)]
    Lab(cmd::lab::LabCommand),
    /// The user-space link emulator between two interfaces (delay, jitter, loss, rate, queue).
    Emu(cmd::emu::EmuArgs),
    /// Print the facts that explain a measurement on this machine (kernel, HZ, CPUs, sysctls).
    Facts(cmd::facts::FactsArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Persistent emulated labs run their emulator as `tcplab emu --lab NAME`: this binary.
    if let Ok(exe) = std::env::current_exe() {
        tcplab_lab::emulation::set_companion_program(exe);
    }
    match cli.command {
        Command::Emu(a) => a.run(),
        Command::Lab(c) => c.run(),
        Command::Facts(a) => a.run(),
    }
}
