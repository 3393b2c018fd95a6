//! `tcplab http`'s flags: the HTTP client.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use tcplab_front::Output;
use tcplab_front::http::{self as run, LabServer};
use tcplab_front::http::{HttpOptions, read_url_paths, run_http};
use tcplab_load::LoadError;
use tcplab_load::http::config::HttpConfig;
use tcplab_load::http::mix::Mix;
use tcplab_load::units::{parse_duration_ms, parse_interval_ms};

use super::common::SockOptArgs;

/// Which web server a lab run starts in the server host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ServerKind {
    /// tcplab's own file server (`tcplab serve --http`).
    Builtin,
    /// Debian's nginx, with a generated configuration, serving the same files from disk.
    Nginx,
}

impl From<ServerKind> for run::ServerKind {
    fn from(k: ServerKind) -> Self {
        match k {
            ServerKind::Builtin => Self::Builtin,
            ServerKind::Nginx => Self::Nginx,
        }
    }
}

/// `tcplab http`: HTTP/1.1 GET load, ops/s and response times overall and per file class.
#[derive(Debug, Clone, clap::Args)]
pub struct HttpArgs {
    /// A web server, `ADDR[:PORT]` (default port 80).
    #[arg(long, value_name = "ADDR[:PORT]", required_unless_present = "lab")]
    pub to: Option<String>,
    /// Run inside this lab: a web server started in --server, the client in --client.
    #[arg(long, value_name = "NAME", conflicts_with = "to")]
    pub lab: Option<String>,
    /// Lab host of the client.
    #[arg(long, value_name = "HOST", default_value = "client")]
    pub client: String,
    /// Lab host of the server.
    #[arg(long, value_name = "HOST", default_value = "server")]
    pub server: String,
    /// The web server a lab run starts: tcplab's built-in file server (the default), or nginx
    /// (Debian's package) serving the same files.
    // Checked by `lab_only_flags`, not clap's `requires = "lab"`: clap waives a requirement
    // that conflicts with a flag given (--lab with --to), so `--to X --server-kind nginx` passed.
    #[arg(long, value_enum, value_name = "KIND")]
    pub server_kind: Option<ServerKind>,
    /// nginx worker processes (default: the CPUs).
    #[arg(long, value_name = "N")]
    pub nginx_workers: Option<u32>,
    /// Directories of the SPECweb96 file set (36 files, about 5.1 MB each): what a lab's
    /// server serves and what --specweb96 draws from.
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub dirs: u32,
    /// Concurrent connections (requests in flight at most).
    #[arg(short = 'c', long, default_value_t = 4)]
    pub connections: u32,
    /// Requests per connection before the client closes it (default: keep it for the run).
    #[arg(long, value_name = "N", conflicts_with = "close")]
    pub requests_per_connection: Option<u64>,
    /// A connection per request (`Connection: close`), as SPECweb96's HTTP/1.0 clients.
    #[arg(long)]
    pub close: bool,
    /// Open loop at this many requests/s in total, latency from each intended start.
    #[arg(short = 'R', long, value_name = "PER_S")]
    pub rate: Option<f64>,
    /// Exponential gaps between intended starts (with --rate).
    #[arg(long, requires = "rate")]
    pub poisson: bool,
    /// Seed of the request mix and the Poisson schedule.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// A URL path to request; repeat for a list taken in turn.
    #[arg(long = "url", value_name = "PATH", conflicts_with_all = ["urls", "specweb96"])]
    pub url: Vec<String>,
    /// A file of URL paths, one per line (# comments), taken in turn.
    #[arg(long, value_name = "FILE", conflicts_with = "specweb96")]
    pub urls: Option<PathBuf>,
    /// SPECweb96's mix over its file set: classes 35 / 50 / 14 / 1 %. The default in a lab.
    #[arg(long)]
    pub specweb96: bool,
    /// The Host header (default: the target address).
    #[arg(long, value_name = "HOST")]
    pub host: Option<String>,
    /// Stop after this many requests.
    #[arg(short = 'n', long)]
    pub count: Option<u64>,
    /// Stop after this long, seconds (default 5 unless --count).
    #[arg(short = 't', long, value_name = "SECS", value_parser = parse_duration_ms)]
    pub duration: Option<u64>,
    /// Give up on one connect after this long, seconds.
    #[arg(long, value_name = "SECS", default_value = "10", value_parser = parse_duration_ms)]
    pub connect_timeout: u64,
    /// Give up on one response after this long, seconds.
    #[arg(long, value_name = "SECS", default_value = "10", value_parser = parse_duration_ms)]
    pub timeout: u64,
    /// Client event loops (default: the CPUs).
    #[arg(long, value_name = "N")]
    pub threads: Option<u32>,
    /// Check every body byte against the file set's content, not only its length.
    #[arg(long)]
    pub check_content: bool,
    /// Interval of the live lines of --ndjson, seconds.
    #[arg(short = 'i', long, value_name = "SECS", default_value = "1", value_parser = parse_interval_ms)]
    pub interval: u64,
    /// Print one JSON document (errors too, with a non-zero exit).
    #[arg(long)]
    pub json: bool,
    /// Print one JSON line per interval, then the result line.
    #[arg(long, conflicts_with = "json")]
    pub ndjson: bool,
    /// Write every raw sample to FILE (format: docs/samples.md).
    #[arg(long, value_name = "FILE")]
    pub samples: Option<PathBuf>,
    /// Socket options of the client's connections (and of the built-in server's).
    #[command(flatten)]
    pub opts: SockOptArgs,
}

impl HttpArgs {
    /// The workload these flags describe with the server a lab run starts, as a scenario
    /// file and a study hold it.
    pub fn spec(&self) -> Result<tcplab_results::spec::WorkloadSpec, LoadError> {
        Ok(tcplab_results::spec::WorkloadSpec::Http(
            tcplab_results::spec::HttpSpec {
                config: self.config()?,
                server: self.options().lab_server,
            },
        ))
    }

    /// The library configuration these flags describe.
    pub fn config(&self) -> Result<HttpConfig, LoadError> {
        let mix = if let Some(file) = &self.urls {
            Mix::Paths(read_url_paths(file)?)
        } else if !self.url.is_empty() {
            Mix::Paths(self.url.clone())
        } else if self.specweb96 || self.lab.is_some() {
            Mix::Specweb96 { dirs: self.dirs }
        } else {
            Mix::Paths(vec!["/".into()])
        };
        Ok(HttpConfig {
            connections: self.connections,
            requests_per_connection: if self.close {
                Some(1)
            } else {
                self.requests_per_connection
            },
            rate: self.rate,
            poisson: self.poisson,
            seed: self.seed,
            mix,
            host: self.host.clone(),
            count: self.count,
            duration_ms: self.duration.or(if self.count.is_some() {
                None
            } else {
                Some(5_000)
            }),
            connect_timeout_ms: self.connect_timeout,
            timeout_ms: self.timeout,
            threads: self.threads,
            check_content: self.check_content,
            opts: self.opts.sock_opts(),
            ..HttpConfig::default()
        })
    }

    /// Where the run goes and how it prints, as tcplab-load takes them.
    pub fn options(&self) -> HttpOptions {
        HttpOptions {
            to: self.to.clone(),
            lab: self.lab.clone(),
            client: self.client.clone(),
            server: self.server.clone(),
            lab_server: LabServer {
                kind: self.server_kind.unwrap_or(ServerKind::Builtin).into(),
                dirs: self.dirs,
                workers: self.nginx_workers,
            },
            interval_ms: self.interval,
            output: Output {
                json: self.json,
                ndjson: self.ndjson,
                samples: self.samples.clone(),
            },
        }
    }

    /// The flags that choose the server a lab run starts, refused without --lab: with --to the
    /// server is already running, and ignoring them would measure another server than asked.
    fn lab_only_flags(&self) -> anyhow::Result<()> {
        let given = [
            ("--server-kind", self.server_kind.is_some()),
            ("--nginx-workers", self.nginx_workers.is_some()),
        ];
        match given.iter().find(|g| g.1) {
            Some((flag, _)) if self.lab.is_none() => anyhow::bail!(
                "{flag} chooses the web server a lab run starts: give --lab NAME with it, or \
                 leave it out with --to (that server is already running)"
            ),
            _ => Ok(()),
        }
    }

    /// Runs the load and prints the result to stdout.
    pub fn run(&self) -> anyhow::Result<ExitCode> {
        self.lab_only_flags()?;
        if let Some(path) = &self.samples {
            crate::writable::file("--samples", path)?;
        }
        Ok(self.run_with(&mut std::io::stdout()))
    }

    /// Runs the load and prints to `out` (what `run` does with stdout).
    pub fn run_with(&self, out: &mut (dyn Write + Send)) -> ExitCode {
        let opts = self.options();
        match self.config() {
            Ok(cfg) => run_http(&cfg, &opts, out),
            Err(e) => tcplab_front::print_error(&opts.output, out, &e),
        }
    }
}
