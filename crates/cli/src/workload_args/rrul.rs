//! `tcplab rrul`'s flags.

use std::io::Write;
use std::process::ExitCode;

use tcplab_load::rrul::{self, RrulConfig};
use tcplab_load::units::parse_duration_ms;

use super::common::ClientArgs;

/// Which way the bulk load goes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LoadDirection {
    /// The client sends.
    Up,
    /// The server sends.
    Down,
    /// Both at once, `flows` each way (RRUL's default).
    #[default]
    Both,
}

impl From<LoadDirection> for rrul::LoadDirection {
    fn from(d: LoadDirection) -> Self {
        match d {
            LoadDirection::Up => Self::Up,
            LoadDirection::Down => Self::Down,
            LoadDirection::Both => Self::Both,
        }
    }
}

/// `tcplab rrul`: latency under load (probes before, during and after bulk flows).
#[derive(Debug, Clone, clap::Args)]
pub struct RrulArgs {
    /// Direction of the load: up (client sends), down (server sends), both.
    #[arg(long = "dir", value_enum, default_value_t = LoadDirection::Both)]
    pub direction: LoadDirection,
    /// Bulk flows per direction.
    #[arg(short = 'P', long, default_value_t = 1)]
    pub flows: u32,
    /// Idle phase before the load, seconds.
    #[arg(long, value_name = "SECS", default_value = "2", value_parser = parse_duration_ms)]
    pub before: u64,
    /// Load phase: how long the bulk flows send, seconds.
    #[arg(long, value_name = "SECS", default_value = "6", value_parser = parse_duration_ms)]
    pub during: u64,
    /// Idle phase after the load, seconds.
    #[arg(long, value_name = "SECS", default_value = "2", value_parser = parse_duration_ms)]
    pub after: u64,
    /// How long the probes run past --after's planned end, seconds: room for the queue the
    /// load leaves behind to drain, since the after phase starts only when it has.
    #[arg(long, value_name = "SECS", default_value = "2", value_parser = parse_duration_ms)]
    pub drain: u64,
    /// Probe request size, bytes.
    #[arg(long, default_value_t = 64)]
    pub req: u32,
    /// Probe response size, bytes.
    #[arg(long, default_value_t = 64)]
    pub resp: u32,
    /// One probe every SECS on a fixed schedule (e.g. 10ms).
    #[arg(long, value_name = "SECS", default_value = "10ms", value_parser = parse_duration_ms)]
    pub spacing: u64,
    /// Interval of the load's reports and tcp_info samples, seconds.
    #[arg(short = 'i', long, value_name = "SECS", default_value = "1", value_parser = parse_duration_ms)]
    pub interval: u64,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub common: ClientArgs,
}

impl RrulArgs {
    /// The workload these flags describe, as a scenario file and a study hold it.
    pub fn spec(&self) -> tcplab_results::spec::WorkloadSpec {
        tcplab_results::spec::WorkloadSpec::Rrul(self.config())
    }

    /// The library configuration these flags describe (socket options go to the bulk flows).
    pub fn config(&self) -> RrulConfig {
        RrulConfig {
            direction: self.direction.into(),
            flows: self.flows,
            before_ms: self.before,
            during_ms: self.during,
            after_ms: self.after,
            drain_ms: self.drain,
            req: self.req,
            resp: self.resp,
            spacing_ms: self.spacing,
            interval_ms: self.interval,
            opts: self.common.sock_opts(),
            timeout_ms: self.common.timeout,
        }
    }

    /// Runs the workload and prints the result to stdout.
    pub fn run(&self) -> anyhow::Result<ExitCode> {
        self.common.check_outputs()?;
        Ok(self.run_with(&mut std::io::stdout()))
    }

    /// Runs the workload and prints to `out` (what `run` does with stdout).
    pub fn run_with(&self, out: &mut (dyn Write + Send)) -> ExitCode {
        tcplab_front::run_rrul(&self.config(), &self.common.options(), out)
    }
}
