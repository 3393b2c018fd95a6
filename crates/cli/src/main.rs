//! `tcplab`: argument parsing and dispatch only. Every command lives in `cmd/`, the workloads'
//! flags in this package's library (`workload_args`); the work lives in the library crates.

#[macro_use]
mod output;
mod cmd;

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};
use tcplab::workload_args;

/// A TCP performance lab for Linux: emulated networks, workloads, diagnosis, tuning.
#[derive(Debug, Parser)]
// The version names the commit and whether the tree was modified (build.rs), as facts do.
#[command(
    name = "tcplab",
    version = env!("TCPLAB_BUILD"),
    about,
    long_about = None,
    propagate_version = true
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Build, list, enter and remove emulated networks (hosts are network namespaces).
    #[command(subcommand)]
    Lab(cmd::lab::LabCommand),
    /// The server side of every workload (stream, msgs, rr, crr): the agent, with keys and limits;
    /// with --http PORT, an HTTP/1.1 file server of SPECweb96's file set beside it.
    Serve(workload_args::ServeArgs),
    /// Agent keys: make a key pair, show a key's public line.
    #[command(subcommand)]
    Key(cmd::key::KeyCommand),
    /// Bulk throughput: N flows, up/down/bidirectional, per-interval tcp_info.
    Stream(workload_args::StreamArgs),
    /// A timed stream of small messages (sfperf): per-message cost, one-way delays, stalls.
    Msgs(workload_args::MsgsArgs),
    /// Request/response latency (closed loop or open loop with coordinated-omission correction).
    Rr(workload_args::RrArgs),
    /// Connect-request-response-close rate, connect times, SYN retransmits, TIME_WAIT.
    Crr(workload_args::CrrArgs),
    /// Latency under load: probes before, during and after bulk flows up, down or both.
    Rrul(workload_args::RrulArgs),
    /// HTTP/1.1 GET load on a web server (or SPECweb96's file set in a lab, served by tcplab
    /// or nginx): ops/s, response times per file class, errors, SYN and TIME_WAIT evidence.
    Http(workload_args::HttpArgs),
    /// Run one configuration of a scenario file (the baseline unless --config).
    Run(cmd::study::RunArgs),
    /// Run every configuration of a scenario file, with repetitions, racing and a stored result.
    Sweep(cmd::study::SweepArgs),
    /// The table, plots (HTML) and exports of a study database.
    Report(cmd::study::ReportArgs),
    /// A battery of workloads on a path, then what limits TCP there, with evidence and fixes.
    Doctor(cmd::doctor::DoctorArgs),
    /// How often the doctor is right: run or score a labelled corpus of pathologies.
    #[command(subcommand)]
    Corpus(cmd::corpus::CorpusCommand),
    /// Race candidate settings for a workload, verify the winner, print the lines to apply.
    Tune(cmd::tune::TuneArgs),
    /// The embedded default: an emulated WAN path, doctor and tune on it, an HTML report.
    Demo(cmd::tune::DemoArgs),
    /// The user-space link emulator between two interfaces (delay, jitter, loss, rate, queue).
    Emu(cmd::emu::EmuArgs),
    /// Many hosts: reach every agent of a hosts file (version, keys, facts, clock offset).
    #[command(subcommand)]
    Fleet(cmd::fleet::FleetCommand),
    /// Every ordered pair of a fleet's hosts runs a workload: the N×N grid, worst pairs, and
    /// the chance one all-to-all meets a stall.
    Mesh(cmd::fleet::MeshArgs),
    /// A fleet measured continuously: every pair on a schedule, the history kept, /metrics for
    /// Prometheus, regressions against each pair's own history (`monitor alerts` lists them).
    Monitor(cmd::monitor::MonitorArgs),
    /// Print the facts that explain a measurement on this machine (kernel, HZ, CPUs, sysctls).
    Facts(cmd::facts::FactsArgs),
    /// Shell completions (bash, zsh, fish, elvish, powershell) on stdout.
    Completions(cmd::docs::CompletionsArgs),
    /// Write the manual pages: tcplab(1) and one per command (`man tcplab-doctor`).
    Man(cmd::docs::ManArgs),
}

/// Workloads report their own results (text or JSON); an error left over is a usage error.
fn workload(result: anyhow::Result<ExitCode>) -> ExitCode {
    output::finish(false, result)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    tcplab_lab::facts::set_build(env!("TCPLAB_BUILD"));
    // Persistent emulated labs run their emulator as `tcplab emu --lab NAME`: this binary.
    if let Ok(exe) = std::env::current_exe() {
        tcplab_lab::emulation::set_companion_program(exe);
    }
    // Before anything spawns a thread: joining a user namespace needs a single-threaded process.
    if let Err(e) = join_rootless_session(&cli.command) {
        return output::finish(false, Err(e.into()));
    }
    // What this process may do is fixed here, in the session it runs in, and read by every
    // lab it builds.
    tcplab_lab::Privileges::decide();
    let code = dispatch(cli.command);
    if let Err(e) = tcplab_lab::rootless::session::leave() {
        eprintln!("tcplab: leaving the rootless session: {e}");
    }
    code
}

/// An unprivileged user's commands that build or use labs run in the user's rootless session
/// (docs/rootless.md); root's never do.
fn join_rootless_session(command: &Command) -> tcplab_lab::Result<()> {
    if tcplab_lab::privileges::machine_root() {
        return Ok(());
    }
    if let Some(join) = lab_use(command) {
        tcplab_lab::rootless::session::enter(join)?;
    }
    Ok(())
}

/// Whether a command builds labs (and so may start a session) or only uses existing ones.
fn lab_use(command: &Command) -> Option<tcplab_lab::rootless::Join> {
    use cmd::lab::LabCommand;
    use tcplab_lab::rootless::Join::{Create, Existing};
    let existing_if = |lab: &Option<String>| lab.as_ref().map(|_| Existing);
    match command {
        Command::Lab(LabCommand::HoldSession) => None,
        Command::Lab(LabCommand::Up(_)) => Some(Create),
        Command::Lab(_) | Command::Emu(_) => Some(Existing),
        Command::Run(_)
        | Command::Sweep(_)
        | Command::Doctor(_)
        | Command::Tune(_)
        | Command::Demo(_)
        | Command::Corpus(_)
        | Command::Mesh(_) => Some(Create),
        Command::Stream(a) => existing_if(&a.common.lab),
        Command::Msgs(a) => existing_if(&a.common.lab),
        Command::Rr(a) => existing_if(&a.common.lab),
        Command::Crr(a) => existing_if(&a.common.lab),
        Command::Rrul(a) => existing_if(&a.common.lab),
        Command::Http(a) => existing_if(&a.lab),
        Command::Facts(a) => existing_if(&a.lab),
        Command::Serve(_)
        | Command::Report(_)
        | Command::Key(_)
        | Command::Fleet(_)
        | Command::Monitor(_)
        | Command::Completions(_)
        | Command::Man(_) => None,
    }
}

fn dispatch(command: Command) -> ExitCode {
    match command {
        Command::Emu(a) => a.run(),
        Command::Doctor(a) => a.run(),
        Command::Tune(a) => a.run(),
        Command::Corpus(c) => c.run(),
        Command::Demo(a) => a.run(),
        Command::Run(a) => a.run(),
        Command::Sweep(a) => a.run(),
        Command::Report(a) => a.run(),
        Command::Serve(a) => workload(a.run()),
        Command::Http(a) => workload(a.run()),
        Command::Stream(a) => workload(a.run()),
        Command::Msgs(a) => workload(a.run()),
        Command::Rr(a) => workload(a.run()),
        Command::Crr(a) => workload(a.run()),
        Command::Rrul(a) => workload(a.run()),
        Command::Lab(c) => c.run(),
        Command::Facts(a) => a.run(),
        Command::Key(c) => c.run(),
        Command::Fleet(c) => c.run(),
        Command::Mesh(a) => a.run(),
        Command::Monitor(a) => a.run(),
        Command::Completions(a) => a.run(Cli::command()),
        Command::Man(a) => a.run(Cli::command()),
    }
}
