//! What `tcplab http` does once its flags are parsed (crates/cli builds the [`HttpConfig`] and
//! these options): run against a web server (`tcplab_load::http::run`) or in a lab ([`lab`]),
//! print as asked.

pub mod lab;

use std::io::Write;
use std::process::ExitCode;
use std::sync::Mutex;

use tcplab_load::LoadError;
use tcplab_load::http::config::HttpConfig;
use tcplab_load::http::result::HttpInterval;
use tcplab_load::http::run::run_client_live;
use tcplab_load::live::OnLive;
use tcplab_load::report::Report;

use crate::output::{Output, emit_report, live_printer, report_error};

pub use lab::{LAB_PORT, run_in_lab};
pub use tcplab_results::http::config::{LabServer, ServerKind};

/// HTTP's default port, for `--to ADDR` without one.
pub const DEFAULT_HTTP_PORT: u16 = 80;

/// Where an HTTP run goes and how it is printed, beside its [`HttpConfig`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpOptions {
    /// A web server, `ADDR[:PORT]` (default port 80).
    pub to: Option<String>,
    /// Run inside this lab instead: `lab_server` started in `server`, the client in `client`.
    pub lab: Option<String>,
    /// Lab host of the client.
    pub client: String,
    /// Lab host of the server.
    pub server: String,
    /// The web server a lab run starts.
    pub lab_server: LabServer,
    /// Interval of the live lines of NDJSON, ms.
    pub interval_ms: u64,
    /// How the result is printed.
    pub output: Output,
}

/// Runs `cfg` as `opts` say and prints to `out` (NDJSON intervals live).
pub fn run_http(cfg: &HttpConfig, opts: &HttpOptions, out: &mut (dyn Write + Send)) -> ExitCode {
    let out = Mutex::new(out);
    let print = live_printer::<HttpInterval>(&out);
    let cb: OnLive<'_, _> = if opts.output.ndjson {
        Some(&print)
    } else {
        None
    };
    match execute(cfg, opts, cb) {
        Ok(report) => emit_report(&opts.output, &out, &report),
        Err(e) => report_error(&opts.output, &out, &e),
    }
}

fn execute(
    cfg: &HttpConfig,
    opts: &HttpOptions,
    cb: OnLive<'_, HttpInterval>,
) -> Result<Report, LoadError> {
    cfg.validate()?;
    match (&opts.to, &opts.lab) {
        (Some(to), _) => {
            let target = parse_http_target(to)?;
            let mut r = run_client_live(cfg, target, None, opts.interval_ms, cb)?;
            r.server = "remote".into();
            Ok(Report::Http(r))
        }
        (None, Some(lab)) => {
            let lab = tcplab_lab::Lab::open(lab).map_err(|e| LoadError::Lab(e.to_string()))?;
            run_in_lab(
                &lab,
                &opts.client,
                &opts.server,
                &opts.lab_server,
                cfg,
                opts.interval_ms,
                cb,
            )
        }
        (None, None) => Err(LoadError::config(
            "to",
            "give --to ADDR[:PORT] or --lab NAME",
        )),
    }
}

/// `ADDR[:PORT]` of a web server; port 80 when left out. Names are resolved.
pub fn parse_http_target(s: &str) -> Result<std::net::SocketAddr, LoadError> {
    crate::place::parse_target_port(s, DEFAULT_HTTP_PORT)
}

/// The URL paths a file lists, one per line (blank lines and `#` comments left out); an error
/// names `--urls`.
pub fn read_url_paths(file: &std::path::Path) -> Result<Vec<String>, LoadError> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| LoadError::config("urls", format!("reading {}: {e}", file.display())))?;
    let paths: Vec<String> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(String::from)
        .collect();
    if paths.is_empty() {
        return Err(LoadError::config(
            "urls",
            format!("{} lists no URL path", file.display()),
        ));
    }
    Ok(paths)
}
