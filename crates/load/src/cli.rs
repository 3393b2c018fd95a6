//! Command-line front ends: `serve`, `stream`, `msgs`, `rr`, `crr`, `rrul`. Thin: each parses
//! flags into the library's config, picks where client and server run ([`crate::place`]), and
//! prints the result (terminal summary, `--json`, `--ndjson`) and raw samples (`--samples`).
//! Exit codes: 0 complete, 1 incomplete or failed run, 2 bad usage (a flag, a busy port, an
//! option the kernel lacks).

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Mutex;

use crate::error::LoadError;
use crate::live::OnLive;
use crate::place::Placement;
use crate::proto::DEFAULT_PORT;
use crate::report::{Report, error_json};
use crate::sockopt::SockOpts;
use crate::stream::{Direction, IntervalReport};
use crate::{crr, msgs, rr, rrul, stream};

/// Flags shared by every client workload.
#[derive(Debug, Clone, clap::Args)]
pub struct ClientArgs {
    /// Server running `tcplab serve`, `ADDR[:PORT]` (default port 5301).
    #[arg(long, value_name = "ADDR[:PORT]", required_unless_present = "lab")]
    pub to: Option<String>,
    /// Run both sides inside this lab (client thread in --client, server thread in --server).
    #[arg(long, value_name = "NAME", conflicts_with = "to")]
    pub lab: Option<String>,
    /// Lab host of the client.
    #[arg(long, value_name = "HOST", default_value = "client")]
    pub client: String,
    /// Lab host of the server.
    #[arg(long, value_name = "HOST", default_value = "server")]
    pub server: String,
    /// Print one JSON document (errors too, with a non-zero exit).
    #[arg(long)]
    pub json: bool,
    /// Print one JSON line per interval/run, then the result line.
    #[arg(long, conflicts_with = "json")]
    pub ndjson: bool,
    /// Write every raw sample to FILE (format: docs/samples.md).
    #[arg(long, value_name = "FILE")]
    pub samples: Option<PathBuf>,
    /// Longest any single wait may last, seconds.
    #[arg(long, value_name = "SECS", default_value = "10", value_parser = parse_duration_ms)]
    pub timeout: u64,
    /// Run the workload's threads (the client's, and in a lab the server's) at SCHED_FIFO
    /// priority N, 1-99, so the latency measured is the network's, not the host's scheduler's
    /// (recorded as facts.sched). Needs root. Above 10 it preempts the lab's emulator too.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u8).range(1..=99))]
    pub rt_priority: Option<u8>,
    /// Socket options (both sides).
    #[command(flatten)]
    pub opts: SockOpts,
    /// Keys: this client's, and the server's it believes.
    #[command(flatten)]
    pub auth: crate::auth::args::ClientKeyArgs,
}

/// `tcplab serve`: the server side of every workload, and with `--http PORT` an HTTP/1.1 file
/// server of SPECweb96's file set beside it.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// Address to listen on, ADDR:PORT.
    #[arg(long, value_name = "ADDR:PORT", default_value_t = SocketAddr::from(([0, 0, 0, 0], DEFAULT_PORT)))]
    pub listen: SocketAddr,
    /// Exit after this many tests.
    #[arg(long, value_name = "N")]
    pub max_tests: Option<u64>,
    /// Serve at SCHED_FIFO priority N, 1-99 (the server side of a client's `--rt-priority`).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u8).range(1..=99))]
    pub rt_priority: Option<u8>,
    /// Keys, scope and limits (docs/fleet.md).
    #[command(flatten)]
    pub agent: crate::agent::args::AgentArgs,
    /// The HTTP file server (--http PORT, --http-dirs N, --http-max-connections N).
    #[command(flatten)]
    pub http: crate::http::serve::HttpArgs,
}

impl ServeArgs {
    /// Serves until killed (or `--max-tests`).
    pub fn run(&self) -> anyhow::Result<ExitCode> {
        let _rt = match self.rt_priority.map(crate::sched::raise).transpose() {
            Ok(guard) => guard,
            Err(e) => {
                eprintln!("tcplab serve: error: {e}");
                return Ok(ExitCode::from(2));
            }
        };
        let server = match self
            .agent
            .config()
            .and_then(|c| crate::server::Server::with_config(self.listen, c))
        {
            Ok(s) => s,
            Err(e) => {
                eprintln!("tcplab serve: error: {e}");
                return Ok(ExitCode::from(2));
            }
        };
        crate::agent::args::raise_fd_limit();
        // Unauthenticated, the HTTP server serves only loopback and lab addresses, even when
        // the agent takes clients with --keys from anywhere; --insecure opens both.
        let http = match self.http.bind(self.listen.ip(), !server.config().insecure) {
            Ok(h) => h,
            Err(e) => {
                eprintln!("tcplab serve: error: {e}");
                return Ok(ExitCode::from(2));
            }
        };
        eprintln!(
            "tcplab serve: listening on {} (protocol {})",
            server.local_addr()?,
            crate::proto::VERSION
        );
        if let Some(h) = &http {
            eprintln!("tcplab serve: {}", h.summary());
        }
        for line in crate::agent::args::banner(server.config())
            .into_iter()
            .chain(crate::agent::args::restored_lines(
                server.restored_at_start(),
            ))
        {
            eprintln!("tcplab serve: {line}");
        }
        let stop = self.agent.stop_flag()?;
        std::thread::scope(|scope| -> anyhow::Result<()> {
            let web = match &http {
                Some(h) => Some(
                    std::thread::Builder::new()
                        .name("tcplab-http".into())
                        .spawn_scoped(scope, || h.serve(&stop))?,
                ),
                None => None,
            };
            let served = server.serve(&stop, self.max_tests);
            // --max-tests ended the agent: the HTTP server ends with it.
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            if let Some(w) = web {
                w.join()
                    .map_err(|_| anyhow::anyhow!("the HTTP server thread panicked"))??;
            }
            Ok(served?)
        })?;
        // Dropping the server restores whatever is still held.
        drop(server);
        Ok(ExitCode::SUCCESS)
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
    /// The library configuration these flags describe.
    pub fn config(&self) -> stream::StreamConfig {
        stream::StreamConfig {
            flows: self.flows,
            direction: self.direction,
            duration_ms: self.duration.or(if self.bytes.is_some() {
                None
            } else {
                Some(10_000)
            }),
            bytes: self.bytes,
            omit_ms: self.omit,
            interval_ms: self.interval,
            write_size: u32::try_from(self.write_size).unwrap_or(u32::MAX),
            opts: self.common.opts.clone(),
            timeout_ms: self.common.timeout,
            read_rate_bps: self.read_rate,
        }
    }

    /// Runs the workload and prints the result to stdout.
    pub fn run(&self) -> anyhow::Result<ExitCode> {
        Ok(self.run_with(&mut std::io::stdout()))
    }

    /// Runs the workload and prints to `out` (what `run` does with stdout).
    pub fn run_with(&self, out: &mut (dyn Write + Send)) -> ExitCode {
        let cfg = self.config();
        let out = Mutex::new(out);
        let ndjson = self.common.ndjson;
        let print = |iv: &IntervalReport| {
            if let Ok(line) =
                serde_json::to_string(&serde_json::json!({ "type": "interval", "interval": iv }))
            {
                write_line(&out, &line);
            }
        };
        let cb: stream::OnInterval<'_> = if ndjson { Some(&print) } else { None };
        execute(&self.common, &out, |target, facts| {
            stream::run_client(&cfg, target, facts, cb).map(Report::Stream)
        })
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
    /// Write pattern.
    #[arg(long, value_enum, default_value_t = msgs::Pattern::Write)]
    pub pattern: msgs::Pattern,
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
    /// The library configuration these flags describe.
    pub fn config(&self) -> msgs::MsgsConfig {
        msgs::MsgsConfig {
            count: self.count,
            size: self.size,
            sizes: self.sizes.clone().map(|s| s.0).unwrap_or_default(),
            gap_us: self.gap_us,
            pattern: self.pattern,
            timestamps: !self.no_timestamps,
            link_rate_bps: self.link_rate,
            stall_ms: self.stall_ms,
            opts: self.common.opts.clone(),
            timeout_ms: self.common.timeout,
        }
    }

    /// Runs the workload and prints the result to stdout.
    pub fn run(&self) -> anyhow::Result<ExitCode> {
        Ok(self.run_with(&mut std::io::stdout()))
    }

    /// Runs the workload and prints to `out` (what `run` does with stdout).
    pub fn run_with(&self, out: &mut (dyn Write + Send)) -> ExitCode {
        let cfg = self.config();
        let out = Mutex::new(out);
        let print = live_printer::<msgs::MsgsInterval>(&out);
        let cb: OnLive<'_, _> = if self.common.ndjson {
            Some(&print)
        } else {
            None
        };
        execute(&self.common, &out, |target, facts| {
            msgs::run_client_live(&cfg, target, facts, self.interval, cb).map(Report::Msgs)
        })
    }
}

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
    /// The library configuration these flags describe.
    pub fn config(&self) -> rr::RrConfig {
        rr::RrConfig {
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
            opts: self.common.opts.clone(),
            timeout_ms: self.common.timeout,
            stall_ms: self.stall_ms,
        }
    }

    /// Runs the workload and prints the result to stdout.
    pub fn run(&self) -> anyhow::Result<ExitCode> {
        Ok(self.run_with(&mut std::io::stdout()))
    }

    /// Runs the workload and prints to `out` (what `run` does with stdout).
    pub fn run_with(&self, out: &mut (dyn Write + Send)) -> ExitCode {
        let cfg = self.config();
        let out = Mutex::new(out);
        let print = live_printer::<rr::RrInterval>(&out);
        let cb: OnLive<'_, _> = if self.common.ndjson {
            Some(&print)
        } else {
            None
        };
        execute(&self.common, &out, |target, facts| {
            rr::run_client_live(&cfg, target, facts, self.interval, cb).map(Report::Rr)
        })
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
    /// The library configuration these flags describe.
    pub fn config(&self) -> crr::CrrConfig {
        crr::CrrConfig {
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
            opts: self.common.opts.clone(),
            timeout_ms: self.common.timeout,
            server_threads: self.server_threads,
            ..crr::CrrConfig::default()
        }
    }

    /// Runs the workload and prints the result to stdout.
    pub fn run(&self) -> anyhow::Result<ExitCode> {
        Ok(self.run_with(&mut std::io::stdout()))
    }

    /// Runs the workload and prints to `out` (what `run` does with stdout).
    pub fn run_with(&self, out: &mut (dyn Write + Send)) -> ExitCode {
        let cfg = self.config();
        let out = Mutex::new(out);
        let print = live_printer::<crr::CrrInterval>(&out);
        let cb: OnLive<'_, _> = if self.common.ndjson {
            Some(&print)
        } else {
            None
        };
        execute(&self.common, &out, |target, facts| {
            crr::run_client_live(&cfg, target, facts, self.interval, cb).map(Report::Crr)
        })
    }
}

/// `tcplab rrul`: latency under load (probes before, during and after bulk flows).
#[derive(Debug, Clone, clap::Args)]
pub struct RrulArgs {
    /// Direction of the load: up (client sends), down (server sends), both.
    #[arg(long = "dir", value_enum, default_value_t = rrul::LoadDirection::Both)]
    pub direction: rrul::LoadDirection,
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
    /// The library configuration these flags describe (socket options go to the bulk flows).
    pub fn config(&self) -> rrul::RrulConfig {
        rrul::RrulConfig {
            direction: self.direction,
            flows: self.flows,
            before_ms: self.before,
            during_ms: self.during,
            after_ms: self.after,
            drain_ms: self.drain,
            req: self.req,
            resp: self.resp,
            spacing_ms: self.spacing,
            interval_ms: self.interval,
            opts: self.common.opts.clone(),
            timeout_ms: self.common.timeout,
        }
    }

    /// Runs the workload and prints the result to stdout.
    pub fn run(&self) -> anyhow::Result<ExitCode> {
        Ok(self.run_with(&mut std::io::stdout()))
    }

    /// Runs the workload and prints to `out` (what `run` does with stdout).
    pub fn run_with(&self, out: &mut (dyn Write + Send)) -> ExitCode {
        let cfg = self.config();
        let out = Mutex::new(out);
        execute(&self.common, &out, |target, facts| {
            rrul::run_client(&cfg, target, facts).map(Report::Rrul)
        })
    }
}

pub(crate) type Out<'a, 'b> = Mutex<&'a mut (dyn Write + Send + 'b)>;

/// The --ndjson printer of live intervals: `{"type":"interval","interval":{..}}`, flushed.
pub(crate) fn live_printer<'o, T: serde::Serialize>(
    out: &'o Out<'_, '_>,
) -> impl Fn(&T) + Sync + 'o {
    move |iv: &T| {
        if let Ok(line) =
            serde_json::to_string(&serde_json::json!({ "type": "interval", "interval": iv }))
        {
            write_line(out, &line);
        }
    }
}

fn write_line(out: &Out<'_, '_>, line: &str) {
    if let Ok(mut w) = out.lock() {
        // EPIPE on stdout (a closed pager) is not an error worth reporting.
        let _ = writeln!(w, "{line}");
        let _ = w.flush();
    }
}

/// Places the run, executes `client`, prints; maps errors to exit codes.
fn execute<F>(args: &ClientArgs, out: &Out<'_, '_>, client: F) -> ExitCode
where
    F: FnOnce(SocketAddr, serde_json::Value) -> Result<Report, LoadError> + Send,
{
    let placement = match (&args.to, &args.lab) {
        (Some(to), _) => parse_target(to).map(Placement::Remote),
        (None, Some(lab)) => Ok(Placement::Lab {
            lab: lab.clone(),
            client: args.client.clone(),
            server: args.server.clone(),
        }),
        (None, None) => Err(LoadError::config(
            "to",
            "give --to ADDR[:PORT] or --lab NAME",
        )),
    };
    let run = |p: Placement| -> Result<Report, LoadError> {
        args.auth.install()?;
        let guard = args.rt_priority.map(crate::sched::raise).transpose()?;
        let mut report = p.run(client)?;
        drop(guard);
        record_sched(&mut report, args.rt_priority);
        Ok(report)
    };
    let how = Emit {
        json: args.json,
        ndjson: args.ndjson,
        samples: args.samples.as_deref(),
    };
    match placement.and_then(run) {
        Ok(report) => emit_report(&how, out, &report),
        Err(e) => report_error(&how, out, &e),
    }
}

/// How a workload's result is printed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Emit<'a> {
    pub json: bool,
    pub ndjson: bool,
    pub samples: Option<&'a std::path::Path>,
}

/// Prints a failed run's error (JSON with --json/--ndjson); exit code 2 for bad usage.
pub(crate) fn report_error(how: &Emit<'_>, out: &Out<'_, '_>, e: &LoadError) -> ExitCode {
    let kind = if e.is_usage() { "usage" } else { "run" };
    if how.json || how.ndjson {
        write_line(out, &error_json(&e.to_string(), kind));
    } else {
        eprintln!("tcplab: error: {e}");
    }
    ExitCode::from(if e.is_usage() { 2 } else { 1 })
}

/// Records the workload threads' real-time priority, if one was asked for, in the facts
/// (`facts.sched`): a latency measured at SCHED_FIFO is not comparable with one measured
/// without it.
fn record_sched(report: &mut Report, rt_priority: Option<u8>) {
    let Some(priority) = rt_priority else {
        return;
    };
    if let Some(facts) = report.meta_mut().facts.as_object_mut() {
        facts.insert(
            "sched".into(),
            serde_json::json!({ "policy": "fifo", "priority": priority }),
        );
    }
}

/// Prints a result as asked and writes its raw samples.
pub(crate) fn emit_report(args: &Emit<'_>, out: &Out<'_, '_>, report: &Report) -> ExitCode {
    if args.json {
        write_line(out, &report.to_json());
    } else if args.ndjson {
        for line in run_lines(report) {
            write_line(out, &line);
        }
        let line = serde_json::to_value(report)
            .map(|mut v| {
                if let Some(o) = v.as_object_mut() {
                    o.insert("type".into(), "result".into());
                }
                v.to_string()
            })
            .unwrap_or_else(|e| error_json(&e.to_string(), "run"));
        write_line(out, &line);
    } else {
        write_line(out, report.to_string().trim_end());
    }
    if let Some(path) = args.samples
        && let Err(e) = crate::samples::write_file(path, report)
    {
        eprintln!("tcplab: error: {e}");
        return ExitCode::from(1);
    }
    if report.meta().complete {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// NDJSON lines for the runs of a msgs sweep, the points of an rr sweep and the phases of an
/// rrul run (stream intervals are streamed live instead).
fn run_lines(report: &Report) -> Vec<String> {
    let lines = |kind: &str, items: Vec<serde_json::Value>| -> Vec<String> {
        items
            .into_iter()
            .map(|v| serde_json::json!({ "type": kind, kind: v }).to_string())
            .collect()
    };
    match report {
        Report::Msgs(r) => lines(
            "run",
            r.runs
                .iter()
                .filter_map(|x| serde_json::to_value(x).ok())
                .collect(),
        ),
        Report::Rr(r) => lines(
            "point",
            r.points
                .iter()
                .filter_map(|x| serde_json::to_value(x).ok())
                .collect(),
        ),
        Report::Rrul(r) => lines(
            "phase",
            r.phases
                .iter()
                .filter_map(|x| serde_json::to_value(x).ok())
                .collect(),
        ),
        Report::Stream(_) | Report::Crr(_) | Report::Http(_) => Vec::new(),
    }
}

/// A live-report interval: a duration of at least 10 ms.
pub fn parse_interval_ms(s: &str) -> Result<u64, String> {
    let ms = parse_duration_ms(s)?;
    if ms < crate::live::MIN_INTERVAL_MS {
        return Err(format!("{s:?} is shorter than 10 ms"));
    }
    Ok(ms)
}

/// Parses `ADDR`, `ADDR:PORT`, `[V6]:PORT` or `V6` (default port 5301); names resolve via the system.
pub fn parse_target(s: &str) -> Result<SocketAddr, LoadError> {
    parse_target_port(s, DEFAULT_PORT)
}

/// `ADDR[:PORT]` or `NAME[:PORT]`, `port` when it has none.
pub(crate) fn parse_target_port(s: &str, port: u16) -> Result<SocketAddr, LoadError> {
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Ok(a);
    }
    if let Ok(ip) = s
        .trim_matches(|c| c == '[' || c == ']')
        .parse::<std::net::IpAddr>()
    {
        return Ok(SocketAddr::new(ip, port));
    }
    resolve_target(s, port)
}

/// A `NAME[:PORT]` resolved to its first address, `port` when it has none.
fn resolve_target(s: &str, port: u16) -> Result<SocketAddr, LoadError> {
    use std::net::ToSocketAddrs;
    let with_port = if s.contains(':') {
        s.to_string()
    } else {
        format!("{s}:{port}")
    };
    with_port
        .to_socket_addrs()
        .ok()
        .and_then(|mut it| it.next())
        .ok_or_else(|| LoadError::config("to", format!("{s:?} is not an address (ADDR[:PORT])")))
}

/// Seconds (`1.5`, `2s`, `250ms`) to milliseconds.
pub fn parse_duration_ms(s: &str) -> Result<u64, String> {
    let (num, scale) = if let Some(v) = s.strip_suffix("ms") {
        (v, 1.0)
    } else if let Some(v) = s.strip_suffix('s') {
        (v, 1000.0)
    } else {
        (s, 1000.0)
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a duration (e.g. 10, 2.5s, 250ms)"))?;
    if !(v.is_finite() && v >= 0.0 && v * scale < 1e12) {
        return Err(format!("{s:?} is out of range"));
    }
    Ok((v * scale).round() as u64)
}

fn parse_scaled(s: &str, base: f64) -> Result<u64, String> {
    let t = s.trim();
    let (num, mul) = match t.chars().last() {
        Some('k' | 'K') => (&t[..t.len() - 1], base),
        Some('m' | 'M') => (&t[..t.len() - 1], base * base),
        Some('g' | 'G') => (&t[..t.len() - 1], base * base * base),
        _ => (t, 1.0),
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a number (suffixes K, M, G)"))?;
    if !(v.is_finite() && v >= 0.0 && v * mul < 1.8e19) {
        return Err(format!("{s:?} is out of range"));
    }
    Ok((v * mul).round() as u64)
}

/// Bytes with binary K/M/G suffixes (128K = 131072).
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    parse_scaled(s, 1024.0)
}

/// Rates with decimal K/M/G suffixes (100M = 100,000,000 bit/s).
pub fn parse_rate(s: &str) -> Result<u64, String> {
    parse_scaled(s, 1000.0)
}

/// A parsed `--sizes` value (one clap value holding many sizes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sizes(pub Vec<u32>);

/// A size list `1,64,1500` or a doubling range `1..4096`.
pub fn parse_sizes(s: &str) -> Result<Sizes, String> {
    parse_size_list(s).map(Sizes)
}

fn parse_size_list(s: &str) -> Result<Vec<u32>, String> {
    if let Some((a, b)) = s.split_once("..") {
        let a: u32 = a
            .trim()
            .parse()
            .map_err(|_| format!("{a:?} is not a size"))?;
        let b: u32 = b
            .trim()
            .parse()
            .map_err(|_| format!("{b:?} is not a size"))?;
        if a == 0 || a > b {
            return Err(format!("range {s:?} must be 1 <= start <= end"));
        }
        let mut v = Vec::new();
        let mut x = a;
        while x <= b {
            v.push(x);
            x = match x.checked_mul(2) {
                Some(n) => n,
                None => break,
            };
        }
        return Ok(v);
    }
    s.split(',')
        .map(|p| {
            p.trim()
                .parse::<u32>()
                .map_err(|_| format!("{p:?} is not a size in bytes"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsers() {
        assert_eq!(parse_duration_ms("2.5"), Ok(2500));
        assert_eq!(parse_duration_ms("250ms"), Ok(250));
        assert_eq!(parse_duration_ms("3s"), Ok(3000));
        assert!(parse_duration_ms("-1").is_err());
        assert_eq!(parse_bytes("128K"), Ok(131_072));
        assert_eq!(parse_rate("100M"), Ok(100_000_000));
        assert_eq!(parse_size_list("1..16"), Ok(vec![1, 2, 4, 8, 16]));
        assert_eq!(parse_sizes("1, 64,1500"), Ok(Sizes(vec![1, 64, 1500])));
        assert!(parse_sizes("0..4").is_err());
        assert_eq!(
            parse_target("127.0.0.1").ok(),
            Some(SocketAddr::from(([127, 0, 0, 1], DEFAULT_PORT)))
        );
        assert_eq!(
            parse_target("127.0.0.1:99").ok(),
            Some(SocketAddr::from(([127, 0, 0, 1], 99)))
        );
        assert_eq!(
            parse_target("[::1]").map(|a| a.port()).ok(),
            Some(DEFAULT_PORT)
        );
        assert!(parse_target("no such host!").is_err());
    }
}
