//! What the workload commands (`serve`, `stream`, `msgs`, `rr`, `crr`, `rrul`) do once their
//! flags are parsed (crates/cli parses them into the workloads' configs and these options):
//! pick where client and server run ([`crate::place`]), run, and print the result (terminal
//! summary, JSON, NDJSON) and raw samples. Exit codes: 0 complete, 1 incomplete or failed run,
//! 2 bad usage (a flag, a busy port, an option the kernel lacks).

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Mutex;
use tcplab_results::facts::Facts;
use tcplab_results::run_facts::{Sched, SchedPolicy};

use crate::agent::args::AgentOptions;
use crate::auth::args::ClientKeys;
use crate::error::LoadError;
use crate::http::serve::HttpServeOptions;
use crate::live::OnLive;
use crate::place::{Placement, parse_target};
use crate::report::{Report, error_json};
use crate::stream::IntervalReport;
use crate::{crr, msgs, rr, rrul, stream};

/// How a result is printed, and where its raw samples go.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Output {
    /// One JSON document (errors too, with a non-zero exit) instead of the terminal summary.
    pub json: bool,
    /// One JSON line per interval/run/point/phase, then the result line.
    pub ndjson: bool,
    /// Write every raw sample to this file (format: docs/samples.md).
    pub samples: Option<PathBuf>,
}

/// Where and how a client workload runs, beside its config: the choices every client command
/// shares (`--to`/`--lab`, output, real-time priority, keys).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientOptions {
    /// Server running `tcplab serve`, `ADDR[:PORT]` (default port 5301).
    pub to: Option<String>,
    /// Run both sides inside this lab instead (client thread in `client`, server thread in
    /// `server`).
    pub lab: Option<String>,
    /// Lab host of the client.
    pub client: String,
    /// Lab host of the server.
    pub server: String,
    /// How the result is printed.
    pub output: Output,
    /// SCHED_FIFO priority (1-99) of the workload's threads for the run, recorded as
    /// `facts.sched`.
    pub rt_priority: Option<u8>,
    /// This client's key and the server keys it believes (none given: the environment's).
    pub keys: ClientKeys,
}

/// `tcplab serve`: the server side of every workload, and an HTTP/1.1 file server of
/// SPECweb96's file set beside it when asked for.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Address to listen on.
    pub listen: SocketAddr,
    /// Exit after this many tests.
    pub max_tests: Option<u64>,
    /// Serve at this SCHED_FIFO priority, 1-99.
    pub rt_priority: Option<u8>,
    /// Keys, scope and limits (docs/fleet.md).
    pub agent: AgentOptions,
    /// The HTTP file server.
    pub http: HttpServeOptions,
}

impl ServeOptions {
    /// Serves until killed (or `max_tests`).
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

/// `tcplab stream`: runs `cfg` where `opts` says and prints to `out` (NDJSON intervals live).
pub fn run_stream(
    cfg: &stream::StreamConfig,
    opts: &ClientOptions,
    out: &mut (dyn Write + Send),
) -> ExitCode {
    let out = Mutex::new(out);
    let print = |iv: &IntervalReport| {
        if let Ok(line) =
            serde_json::to_string(&serde_json::json!({ "type": "interval", "interval": iv }))
        {
            write_line(&out, &line);
        }
    };
    let cb: stream::OnInterval<'_> = if opts.output.ndjson {
        Some(&print)
    } else {
        None
    };
    execute(opts, &out, |target, facts| {
        stream::run_client(cfg, target, facts, cb).map(Report::Stream)
    })
}

/// `tcplab msgs`: runs `cfg` where `opts` says and prints to `out`; with NDJSON, a live line
/// every `interval_ms`.
pub fn run_msgs(
    cfg: &msgs::MsgsConfig,
    interval_ms: u64,
    opts: &ClientOptions,
    out: &mut (dyn Write + Send),
) -> ExitCode {
    let out = Mutex::new(out);
    let print = live_printer::<msgs::MsgsInterval>(&out);
    let cb: OnLive<'_, _> = if opts.output.ndjson {
        Some(&print)
    } else {
        None
    };
    execute(opts, &out, |target, facts| {
        msgs::run_client_live(cfg, target, facts, interval_ms, cb).map(Report::Msgs)
    })
}

/// `tcplab rr`: runs `cfg` where `opts` says and prints to `out`; with NDJSON, a live line
/// every `interval_ms`.
pub fn run_rr(
    cfg: &rr::RrConfig,
    interval_ms: u64,
    opts: &ClientOptions,
    out: &mut (dyn Write + Send),
) -> ExitCode {
    let out = Mutex::new(out);
    let print = live_printer::<rr::RrInterval>(&out);
    let cb: OnLive<'_, _> = if opts.output.ndjson {
        Some(&print)
    } else {
        None
    };
    execute(opts, &out, |target, facts| {
        rr::run_client_live(cfg, target, facts, interval_ms, cb).map(Report::Rr)
    })
}

/// `tcplab crr`: runs `cfg` where `opts` says and prints to `out`; with NDJSON, a live line
/// every `interval_ms`.
pub fn run_crr(
    cfg: &crr::CrrConfig,
    interval_ms: u64,
    opts: &ClientOptions,
    out: &mut (dyn Write + Send),
) -> ExitCode {
    let out = Mutex::new(out);
    let print = live_printer::<crr::CrrInterval>(&out);
    let cb: OnLive<'_, _> = if opts.output.ndjson {
        Some(&print)
    } else {
        None
    };
    execute(opts, &out, |target, facts| {
        crr::run_client_live(cfg, target, facts, interval_ms, cb).map(Report::Crr)
    })
}

/// `tcplab rrul`: runs `cfg` where `opts` says and prints to `out`.
pub fn run_rrul(
    cfg: &rrul::RrulConfig,
    opts: &ClientOptions,
    out: &mut (dyn Write + Send),
) -> ExitCode {
    let out = Mutex::new(out);
    execute(opts, &out, |target, facts| {
        rrul::run_client(cfg, target, facts).map(Report::Rrul)
    })
}

/// Prints an error that stopped a command before its run, as a failed run's would be (one JSON
/// document with `--json`/`--ndjson`); exit code 2 for bad usage, else 1.
pub fn print_error(output: &Output, out: &mut (dyn Write + Send), e: &LoadError) -> ExitCode {
    report_error(output, &Mutex::new(out), e)
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
fn execute<F>(args: &ClientOptions, out: &Out<'_, '_>, client: F) -> ExitCode
where
    F: FnOnce(SocketAddr, Option<Facts>) -> Result<Report, LoadError> + Send,
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
        args.keys.install()?;
        let guard = args.rt_priority.map(crate::sched::raise).transpose()?;
        let mut report = p.run(client)?;
        drop(guard);
        record_sched(&mut report, args.rt_priority);
        Ok(report)
    };
    match placement.and_then(run) {
        Ok(report) => emit_report(&args.output, out, &report),
        Err(e) => report_error(&args.output, out, &e),
    }
}

/// Prints a failed run's error (JSON with --json/--ndjson); exit code 2 for bad usage.
pub(crate) fn report_error(how: &Output, out: &Out<'_, '_>, e: &LoadError) -> ExitCode {
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
    report.meta_mut().facts.sched = Some(Sched {
        policy: SchedPolicy::Fifo,
        priority,
    });
}

/// Prints a result as asked and writes its raw samples.
pub(crate) fn emit_report(args: &Output, out: &Out<'_, '_>, report: &Report) -> ExitCode {
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
    if let Some(path) = &args.samples
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
