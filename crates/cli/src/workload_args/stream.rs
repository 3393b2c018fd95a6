//! `tcplab stream`'s flags.

use std::io::Write;
use std::process::ExitCode;

use tcplab_load::stream::{self, StreamConfig};
use tcplab_load::units::{parse_bytes, parse_duration_ms, parse_rate};

use super::common::ClientArgs;

/// Which way the data goes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Direction {
    /// Client sends, server receives.
    #[default]
    Up,
    /// Server sends, client receives.
    Down,
    /// N flows each way at once.
    Bidir,
}

impl From<Direction> for stream::Direction {
    fn from(d: Direction) -> Self {
        match d {
            Direction::Up => Self::Up,
            Direction::Down => Self::Down,
            Direction::Bidir => Self::Bidir,
        }
    }
}

/// `tcplab stream`: bulk throughput.
#[derive(Debug, Clone, clap::Args)]
pub struct StreamArgs {
    /// Parallel flows per direction.
    #[arg(short = 'P', long, default_value_t = 1)]
    pub flows: u32,
    /// Direction: up (client sends), down (server sends), bidir.
    #[arg(long = "dir", value_enum, default_value_t = Direction::Up)]
    pub direction: Direction,
    /// Send for this long, seconds (default 10 unless --bytes).
    #[arg(short = 't', long, value_name = "SECS", value_parser = parse_duration_ms)]
    pub duration: Option<u64>,
    /// Send this many bytes per direction (K/M/G suffixes).
    #[arg(short = 'n', long, value_name = "BYTES", value_parser = parse_bytes)]
    pub bytes: Option<u64>,
    /// Leave the first SECS out of the figures.
    #[arg(long, value_name = "SECS", default_value = "0", value_parser = parse_duration_ms)]
    pub omit: u64,
    /// Report interval, seconds.
    #[arg(short = 'i', long, value_name = "SECS", default_value = "1", value_parser = parse_duration_ms)]
    pub interval: u64,
    /// Bytes per write.
    #[arg(long, value_name = "BYTES", default_value = "128K", value_parser = parse_bytes)]
    pub write_size: u64,
    /// The receiving side reads no faster than RATE (e.g. 20M = 20 Mbit/s): an application
    /// slower than the path.
    #[arg(long, value_name = "RATE", value_parser = parse_rate)]
    pub read_rate: Option<u64>,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub common: ClientArgs,
}

impl StreamArgs {
    /// The workload these flags describe, as a scenario file and a study hold it.
    pub fn spec(&self) -> tcplab_results::spec::WorkloadSpec {
        tcplab_results::spec::WorkloadSpec::Stream(self.config())
    }

    /// The library configuration these flags describe.
    pub fn config(&self) -> StreamConfig {
        StreamConfig {
            flows: self.flows,
            direction: self.direction.into(),
            duration_ms: self.duration.or(if self.bytes.is_some() {
                None
            } else {
                Some(10_000)
            }),
            bytes: self.bytes,
            omit_ms: self.omit,
            interval_ms: self.interval,
            write_size: u32::try_from(self.write_size).unwrap_or(u32::MAX),
            opts: self.common.sock_opts(),
            timeout_ms: self.common.timeout,
            read_rate_bps: self.read_rate,
        }
    }

    /// Runs the workload and prints the result to stdout.
    pub fn run(&self) -> anyhow::Result<ExitCode> {
        self.common.check_outputs()?;
        Ok(self.run_with(&mut std::io::stdout()))
    }

    /// Runs the workload and prints to `out` (what `run` does with stdout).
    pub fn run_with(&self, out: &mut (dyn Write + Send)) -> ExitCode {
        tcplab_front::run_stream(&self.config(), &self.common.options(), out)
    }
}
