//! `tcplab rr`'s and `tcplab crr`'s flags.

use std::io::Write;
use std::process::ExitCode;

use tcplab_load::crr::{self, CrrConfig};
use tcplab_load::rr::RrConfig;
use tcplab_load::units::{parse_duration_ms, parse_interval_ms};

use super::common::{ClientArgs, Sizes, parse_sizes};

/// `tcplab rr`: request/response latency and rate.
#[derive(Debug, Clone, clap::Args)]
pub struct RrArgs {
    /// Request size, bytes.
    #[arg(long, default_value_t = 1)]
    pub req: u32,
    /// Response size, bytes.
    #[arg(long, default_value_t = 1)]
    pub resp: u32,
    /// Requests in flight (closed loop).
    #[arg(long, default_value_t = 1)]
    pub depth: u32,
    /// Open loop at this many transactions/s (coordinated-omission corrected).
    #[arg(long, value_name = "TPS")]
    pub rate: Option<f64>,
    /// Open loop with Poisson arrivals.
    #[arg(long)]
    pub poisson: bool,
    /// Seed of the Poisson schedule.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Stop after this many transactions.
    #[arg(short = 'c', long)]
    pub count: Option<u64>,
    /// Stop after this long, seconds (default 5 unless --count).
    #[arg(short = 't', long, value_name = "SECS", value_parser = parse_duration_ms)]
    pub duration: Option<u64>,
    /// NetPIPE sweep: sizes as a list or doubling range; each is also probed at ±3 bytes.
    #[arg(long, value_name = "LIST", value_parser = parse_sizes)]
    pub sizes: Option<Sizes>,
    /// Interval of the live lines of --ndjson, seconds.
    #[arg(short = 'i', long, value_name = "SECS", default_value = "1", value_parser = parse_interval_ms)]
    pub interval: u64,
    /// A transaction slower than this many ms counts as a stall.
    #[arg(long, value_name = "MS", default_value_t = 5.0)]
    pub stall_ms: f64,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub common: ClientArgs,
}

impl RrArgs {
    /// The workload these flags describe, as a scenario file and a study hold it.
    pub fn spec(&self) -> tcplab_results::spec::WorkloadSpec {
        tcplab_results::spec::WorkloadSpec::Rr(self.config())
    }

    /// The library configuration these flags describe.
    pub fn config(&self) -> RrConfig {
        RrConfig {
            req: self.req,
            resp: self.resp,
            depth: self.depth,
            rate: self.rate,
            poisson: self.poisson,
            seed: self.seed,
            count: self.count,
            duration_ms: self.duration.or(if self.count.is_some() {
                None
            } else {
                Some(5_000)
            }),
            sizes: self.sizes.clone().map(|s| s.0).unwrap_or_default(),
            opts: self.common.sock_opts(),
            timeout_ms: self.common.timeout,
            stall_ms: self.stall_ms,
        }
    }

    /// Runs the workload and prints the result to stdout.
    pub fn run(&self) -> anyhow::Result<ExitCode> {
        self.common.check_outputs()?;
        Ok(self.run_with(&mut std::io::stdout()))
    }

    /// Runs the workload and prints to `out` (what `run` does with stdout).
    pub fn run_with(&self, out: &mut (dyn Write + Send)) -> ExitCode {
        tcplab_front::run_rr(&self.config(), self.interval, &self.common.options(), out)
    }
}

/// `tcplab crr`: connect/request/response/close rate.
#[derive(Debug, Clone, clap::Args)]
pub struct CrrArgs {
    /// Concurrent connection loops.
    #[arg(short = 'C', long, default_value_t = 1)]
    pub concurrency: u32,
    /// Request size, bytes.
    #[arg(long, default_value_t = 1)]
    pub req: u32,
    /// Response size, bytes.
    #[arg(long, default_value_t = 1)]
    pub resp: u32,
    /// Stop after this many transactions.
    #[arg(short = 'c', long)]
    pub count: Option<u64>,
    /// Stop after this long, seconds (default 5 unless --count).
    #[arg(short = 't', long, value_name = "SECS", value_parser = parse_duration_ms)]
    pub duration: Option<u64>,
    /// Give up on one connect after this long, seconds.
    #[arg(long, value_name = "SECS", default_value = "10", value_parser = parse_duration_ms)]
    pub connect_timeout: u64,
    /// Interval of the live lines of --ndjson, seconds.
    #[arg(short = 'i', long, value_name = "SECS", default_value = "1", value_parser = parse_interval_ms)]
    pub interval: u64,
    /// Threads the server serves with (default: one more than --concurrency); fewer is a
    /// server with a small worker pool, whose connections wait in its accept queue.
    #[arg(long, value_name = "N")]
    pub server_threads: Option<u32>,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub common: ClientArgs,
}

impl CrrArgs {
    /// The workload these flags describe, as a scenario file and a study hold it.
    pub fn spec(&self) -> tcplab_results::spec::WorkloadSpec {
        tcplab_results::spec::WorkloadSpec::Crr(self.config())
    }

    /// The library configuration these flags describe.
    pub fn config(&self) -> CrrConfig {
        CrrConfig {
            concurrency: self.concurrency,
            req: self.req,
            resp: self.resp,
            count: self.count,
            duration_ms: self.duration.or(if self.count.is_some() {
                None
            } else {
                Some(5_000)
            }),
            connect_timeout_ms: self.connect_timeout,
            opts: self.common.sock_opts(),
            timeout_ms: self.common.timeout,
            server_threads: self.server_threads,
            ..crr::CrrConfig::default()
        }
    }

    /// Runs the workload and prints the result to stdout.
    pub fn run(&self) -> anyhow::Result<ExitCode> {
        self.common.check_outputs()?;
        Ok(self.run_with(&mut std::io::stdout()))
    }

    /// Runs the workload and prints to `out` (what `run` does with stdout).
    pub fn run_with(&self, out: &mut (dyn Write + Send)) -> ExitCode {
        tcplab_front::run_crr(&self.config(), self.interval, &self.common.options(), out)
    }
}
