//! `kind = "http"`: the client's configuration and the web server the lab starts for it. Its
//! table is flat, as `tcplab http --lab`'s flags are: the request mix is `dirs` (SPECweb96's
//! file set, which the server always serves) or `urls`, `close` is shorthand for a connection
//! per request, `server` and `nginx_workers` choose the server.

use serde::{Deserialize, Serialize};

use crate::http::config::{HttpConfig, LabServer, ServerKind};
use crate::http::mix::{Mix, Mixer};
use crate::sockopt::SockOpts;

/// An http workload: what the client does and which server answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "HttpForm", into = "HttpForm")]
pub struct HttpSpec {
    /// The client's configuration.
    pub config: HttpConfig,
    /// The server started in the lab's server host.
    pub server: HttpServer,
}

/// The web server an http workload starts (the lab's [`LabServer`], as the spec holds it).
pub type HttpServer = LabServer;

/// Directories of the SPECweb96 file set when the table does not say (about 20 MB).
const DEFAULT_DIRS: u32 = 4;

impl Default for HttpSpec {
    /// `tcplab http --lab`'s defaults: four connections on SPECweb96's mix of four directories,
    /// the built-in server.
    fn default() -> Self {
        HttpSpec {
            config: HttpConfig {
                connections: 4,
                mix: Mix::Specweb96 { dirs: DEFAULT_DIRS },
                ..HttpConfig::default()
            },
            server: LabServer {
                kind: ServerKind::Builtin,
                dirs: DEFAULT_DIRS,
                workers: None,
            },
        }
    }
}

/// The table's shape: [`HttpSpec`] as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct HttpForm {
    /// Concurrent connections: the most requests in flight at once (closed loop).
    connections: u32,
    /// Requests per connection before the client closes it; 1 is a connection per request;
    /// unset keeps each connection for the whole run.
    #[serde(skip_serializing_if = "Option::is_none")]
    requests_per_connection: Option<u64>,
    /// Shorthand for `requests_per_connection = 1` (`Connection: close`, as SPECweb96's
    /// HTTP/1.0 clients).
    close: bool,
    /// Open loop at this many requests/s over all connections, response times counted from
    /// each intended start (unset: closed loop).
    #[serde(skip_serializing_if = "Option::is_none")]
    rate: Option<f64>,
    /// Exponential gaps between intended starts instead of a fixed period (with `rate`).
    poisson: bool,
    /// Seed of the request mix and of the Poisson schedule.
    seed: u64,
    /// The Host header (default: the target address).
    #[serde(skip_serializing_if = "Option::is_none")]
    host: Option<String>,
    /// Requests in all (then `duration` is a cap).
    #[serde(skip_serializing_if = "Option::is_none")]
    count: Option<u64>,
    /// How long to run.
    #[serde(
        default,
        with = "crate::units::serde_ms_opt",
        skip_serializing_if = "Option::is_none"
    )]
    duration: Option<u64>,
    /// Give up on one connect after this long.
    #[serde(with = "crate::units::serde_ms")]
    connect_timeout: u64,
    /// Give up on one response after this long from its request (counted as a timeout).
    #[serde(with = "crate::units::serde_ms")]
    timeout: u64,
    /// Client event loops (default: the CPUs, at most the connections).
    #[serde(skip_serializing_if = "Option::is_none")]
    threads: Option<u32>,
    /// Check every body byte against the file set's content, not only its length.
    check_content: bool,
    /// TIME_WAIT sampling period.
    #[serde(with = "crate::units::serde_ms")]
    sample: u64,
    /// Socket options of the client's connections (and of the built-in server's).
    socket: SockOpts,
    /// The web server started in the server host for each run: `builtin` (tcplab's file
    /// server) or `nginx` (Debian's package, the same files from disk).
    server: ServerKind,
    /// Directories of the SPECweb96 file set the server holds (36 files, about 5.1 MB each);
    /// the requests follow SPECweb96's classes 35 / 50 / 14 / 1 % unless `urls` is given.
    dirs: u32,
    /// URL paths requested in turn (`["/dir00000/class1_1"]`) instead of SPECweb96's mix.
    #[serde(skip_serializing_if = "Option::is_none")]
    urls: Option<Vec<String>>,
    /// nginx worker processes (default: the CPUs).
    #[serde(skip_serializing_if = "Option::is_none")]
    nginx_workers: Option<u32>,
}

impl Default for HttpForm {
    fn default() -> Self {
        HttpSpec::default().into()
    }
}

impl From<HttpSpec> for HttpForm {
    fn from(s: HttpSpec) -> Self {
        let c = s.config;
        let close = c.requests_per_connection == Some(1);
        HttpForm {
            connections: c.connections,
            requests_per_connection: c.requests_per_connection.filter(|_| !close),
            close,
            rate: c.rate,
            poisson: c.poisson,
            seed: c.seed,
            host: c.host,
            count: c.count,
            duration: c.duration_ms,
            connect_timeout: c.connect_timeout_ms,
            timeout: c.timeout_ms,
            threads: c.threads,
            check_content: c.check_content,
            sample: c.sample_ms,
            socket: c.opts,
            server: s.server.kind,
            dirs: s.server.dirs,
            urls: match c.mix {
                Mix::Paths(p) => Some(p),
                Mix::Specweb96 { .. } => None,
            },
            nginx_workers: s.server.workers,
        }
    }
}

impl TryFrom<HttpForm> for HttpSpec {
    type Error = String;

    /// Reads the table, refusing what the client or the server would refuse later, with the
    /// key and the fix (a scenario's error names the key, not the command's flag).
    fn try_from(f: HttpForm) -> Result<Self, String> {
        let requests_per_connection = match (f.close, f.requests_per_connection) {
            (_, Some(0)) => {
                return Err("`requests_per_connection` = 0: it must be at least 1 (1 = a connection per request; leave it out to keep connections open)".into());
            }
            (true, Some(n)) if n != 1 => {
                return Err(format!(
                    "`close = true` means requests_per_connection = 1, but `requests_per_connection` = {n}: keep one of them"
                ));
            }
            (true, _) => Some(1),
            (false, n) => n,
        };
        Mixer::new(&Mix::Specweb96 { dirs: f.dirs }, 0)
            .map_err(|e| format!("`dirs` = {}: {e}", f.dirs))?;
        let mix = match f.urls {
            Some(urls) => {
                let mix = Mix::Paths(urls);
                Mixer::new(&mix, 0).map_err(|e| {
                    format!("`urls`: {e}; write e.g. urls = [\"/dir00000/class1_1\"]")
                })?;
                mix
            }
            None => Mix::Specweb96 { dirs: f.dirs },
        };
        if f.nginx_workers == Some(0) {
            return Err(
                "`nginx_workers` = 0: give at least 1, or leave it out for one per CPU".into(),
            );
        }
        Ok(HttpSpec {
            config: HttpConfig {
                connections: f.connections,
                requests_per_connection,
                rate: f.rate,
                poisson: f.poisson,
                seed: f.seed,
                mix,
                host: f.host,
                count: f.count,
                duration_ms: f.duration,
                connect_timeout_ms: f.connect_timeout,
                timeout_ms: f.timeout,
                threads: f.threads,
                check_content: f.check_content,
                sample_ms: f.sample,
                opts: f.socket,
            },
            server: LabServer {
                kind: f.server,
                dirs: f.dirs,
                workers: f.nginx_workers,
            },
        })
    }
}
