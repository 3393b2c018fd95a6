//! How a workload command prints: its result (the terminal summary, one JSON document, or
//! NDJSON lines), its raw samples, its errors, and the exit code each means: 0 complete, 1 an
//! incomplete or failed run, 2 bad usage (a flag, a busy port, an option the kernel lacks).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Mutex;

use tcplab_load::LoadError;
use tcplab_load::report::{Report, error_json};

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

pub(crate) fn write_line(out: &Out<'_, '_>, line: &str) {
    if let Ok(mut w) = out.lock() {
        // EPIPE on stdout (a closed pager) is not an error worth reporting.
        let _ = writeln!(w, "{line}");
        let _ = w.flush();
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
        && let Err(e) = tcplab_load::samples::write_file(path, report)
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
