//! `tcplab msgs`'s flags.

use std::io::Write;
use std::process::ExitCode;

use tcplab_load::msgs::{self, MsgsConfig};
use tcplab_load::units::{parse_interval_ms, parse_rate};

use super::common::{ClientArgs, Sizes, parse_sizes};

/// How the sender writes each message.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Pattern {
    /// One write per message.
    #[default]
    Write,
    /// Two writes (first half, second half), then read a 1-byte reply from the receiver.
    WriteWriteRead,
}

impl From<Pattern> for msgs::Pattern {
    fn from(p: Pattern) -> Self {
        match p {
            Pattern::Write => Self::Write,
            Pattern::WriteWriteRead => Self::WriteWriteRead,
        }
    }
}

/// `tcplab msgs`: the sfperf timed stream of small messages.
#[derive(Debug, Clone, clap::Args)]
pub struct MsgsArgs {
    /// Messages per run.
    #[arg(short = 'c', long, default_value_t = 100_000)]
    pub count: u64,
    /// Message size, bytes.
    #[arg(short = 's', long, default_value_t = 1)]
    pub size: u32,
    /// Sweep sizes: a list (1,64,128) or a doubling range (1..4096).
    #[arg(long, value_name = "LIST", value_parser = parse_sizes)]
    pub sizes: Option<Sizes>,
    /// Pace writes: message i starts at start + i x GAP µs.
    #[arg(long, value_name = "US", default_value_t = 0)]
    pub gap_us: u64,
    /// With --gap-us: start each write at least GAP after the previous one instead of at its
    /// slot, so a sender that falls behind never sends late messages back to back.
    #[arg(long, requires = "gap_us")]
    pub spaced: bool,
    /// Write pattern.
    #[arg(long, value_enum, default_value_t = Pattern::Write)]
    pub pattern: Pattern,
    /// Do not take per-message timestamps (to measure their cost).
    #[arg(long)]
    pub no_timestamps: bool,
    /// Link rate for the theoretical best, bit/s (K/M/G suffixes: 100M).
    #[arg(long, value_name = "RATE", value_parser = parse_rate)]
    pub link_rate: Option<u64>,
    /// A receive gap above this many ms counts as a stall.
    #[arg(long, value_name = "MS", default_value_t = 5.0)]
    pub stall_ms: f64,
    /// Interval of the live lines of --ndjson, seconds.
    #[arg(short = 'i', long, value_name = "SECS", default_value = "1", value_parser = parse_interval_ms)]
    pub interval: u64,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub common: ClientArgs,
}

impl MsgsArgs {
    /// The workload these flags describe, as a scenario file and a study hold it.
    pub fn spec(&self) -> tcplab_results::spec::WorkloadSpec {
        tcplab_results::spec::WorkloadSpec::Msgs(self.config())
    }

    /// The library configuration these flags describe.
    pub fn config(&self) -> MsgsConfig {
        MsgsConfig {
            count: self.count,
            size: self.size,
            sizes: self.sizes.clone().map(|s| s.0).unwrap_or_default(),
            gap_us: self.gap_us,
            spaced: self.spaced,
            pattern: self.pattern.into(),
            timestamps: !self.no_timestamps,
            link_rate_bps: self.link_rate,
            stall_ms: self.stall_ms,
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
        tcplab_front::run_msgs(&self.config(), self.interval, &self.common.options(), out)
    }
}
