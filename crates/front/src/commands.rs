//! What the client workload commands (`stream`, `msgs`, `rr`, `crr`, `rrul`) do once their
//! flags are parsed (crates/cli parses them into the workloads' configs and these options):
//! pick where client and server run ([`crate::place`]), run, and print the result and raw
//! samples ([`crate::output`]).

use std::io::Write;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Mutex;
use tcplab_results::facts::Facts;
use tcplab_results::run_facts::{Sched, SchedPolicy};

use tcplab_auth::args::ClientKeys;
use tcplab_load::LoadError;
use tcplab_load::live::OnLive;
use tcplab_load::report::Report;
use tcplab_load::stream::IntervalReport;
use tcplab_load::{crr, msgs, rr, rrul, stream};

use crate::output::{Out, Output, emit_report, live_printer, report_error, write_line};
use crate::place::{Placement, parse_target};

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
        let guard = args
            .rt_priority
            .map(tcplab_load::sched::raise)
            .transpose()?;
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
