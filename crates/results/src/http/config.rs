//! What an HTTP run asks for, and its checks (errors name the flag).

use serde::{Deserialize, Serialize};

use super::mix::{Mix, Mixer};
use crate::error::{ConfigError, check_bounds, config};
use crate::sockopt::SockOpts;

/// Most concurrent connections.
pub const MAX_CONNECTIONS: u32 = 20_000;
/// Most client threads (event loops).
pub const MAX_THREADS: u32 = 64;
/// Highest open-loop rate, requests/s.
pub const MAX_RATE: f64 = 10_000_000.0;

/// Parameters of an HTTP run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HttpConfig {
    /// Concurrent connections (`--connections`): the most requests in flight at once.
    pub connections: u32,
    /// Requests per connection before the client closes it (`--requests-per-connection`):
    /// 1 is a connection per request (`Connection: close`, as SPECweb96's HTTP/1.0 clients);
    /// `None` keeps each connection for the whole run.
    pub requests_per_connection: Option<u64>,
    /// Open loop at this many requests/s over all connections (`--rate`), latency counted
    /// from each request's intended start; `None` is a closed loop.
    pub rate: Option<f64>,
    /// Exponential gaps between intended starts instead of a fixed period (`--poisson`).
    pub poisson: bool,
    /// Seed of the request mix and of the Poisson schedule (`--seed`).
    pub seed: u64,
    /// What to request.
    pub mix: Mix,
    /// The Host header (`--host`; default: the target address).
    pub host: Option<String>,
    /// Stop after this many requests (`--count`).
    pub count: Option<u64>,
    /// Stop after this long, ms (`--duration`).
    pub duration_ms: Option<u64>,
    /// Give up on one connect after this long, ms (`--connect-timeout`).
    pub connect_timeout_ms: u64,
    /// Give up on one response after this long from its request, ms (`--timeout`): a response
    /// that never ends is cut here and counted as a timeout.
    pub timeout_ms: u64,
    /// Client event loops (`--threads`; default: the CPUs, at most the connections).
    pub threads: Option<u32>,
    /// Check every body byte against the file set's content (`--check-content`), not only
    /// its length.
    pub check_content: bool,
    /// TIME_WAIT sampling period, ms.
    pub sample_ms: u64,
    /// Socket options of the client's connections.
    pub opts: SockOpts,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            connections: 1,
            requests_per_connection: None,
            rate: None,
            poisson: false,
            seed: 0,
            mix: Mix::Paths(vec!["/".into()]),
            host: None,
            count: None,
            duration_ms: Some(5_000),
            connect_timeout_ms: 10_000,
            timeout_ms: 10_000,
            threads: None,
            check_content: false,
            sample_ms: 100,
            opts: SockOpts::default(),
        }
    }
}

impl HttpConfig {
    /// Checks every field; errors name the flag.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.connections == 0 || self.connections > MAX_CONNECTIONS {
            return Err(config(
                "connections",
                format!("{} is outside 1..={MAX_CONNECTIONS}", self.connections),
            ));
        }
        if self.requests_per_connection == Some(0) {
            return Err(config(
                "requests-per-connection",
                "must be at least 1 (1 = a connection per request; leave it out to keep connections open)",
            ));
        }
        if let Some(r) = self.rate
            && !(r.is_finite() && r > 0.0 && r <= MAX_RATE)
        {
            return Err(config(
                "rate",
                format!("{r} requests/s is outside (0, {MAX_RATE}]"),
            ));
        }
        if self.poisson && self.rate.is_none() {
            return Err(config(
                "poisson",
                "a Poisson schedule needs an open loop: give --rate too",
            ));
        }
        check_bounds(self.count, self.duration_ms)?;
        if self.connect_timeout_ms == 0 {
            return Err(config("connect-timeout", "must be above 0"));
        }
        if self.timeout_ms == 0 || self.sample_ms == 0 {
            return Err(config("timeout", "must be above 0"));
        }
        if self.threads.is_some_and(|t| t == 0 || t > MAX_THREADS) {
            return Err(config(
                "threads",
                format!("must be within 1..={MAX_THREADS}"),
            ));
        }
        if let Some(h) = &self.host
            && (h.is_empty() || !h.bytes().all(|b| b.is_ascii_graphic()))
        {
            return Err(config(
                "host",
                format!("{h:?} is not a valid Host header value (visible ASCII, no spaces)"),
            ));
        }
        Mixer::new(&self.mix, self.seed).map_err(|e| config("url", e))?;
        self.opts.validate()
    }

    /// Client event loops: `threads`, else `cpus` (the caller's available CPUs), never more
    /// than the connections.
    pub fn thread_count(&self, cpus: u32) -> u32 {
        self.threads.unwrap_or(cpus).min(self.connections).max(1)
    }

    /// Whether the client closes after every response.
    pub fn per_request(&self) -> bool {
        self.requests_per_connection == Some(1)
    }

    /// Seconds the run can last at most (its bound plus the waits it may still finish).
    pub fn deadline_s(&self) -> u64 {
        self.duration_ms.map_or(3600, |d| d / 1000 + 1)
            + (self.connect_timeout_ms + self.timeout_ms) / 1000
            + 2
    }
}

/// Which web server a lab run starts in the server host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ServerKind {
    /// tcplab's own file server (`tcplab serve --http`).
    Builtin,
    /// Debian's nginx, with a generated configuration, serving the same files from disk.
    Nginx,
}

impl ServerKind {
    /// Its name in results.
    pub fn name(self) -> &'static str {
        match self {
            Self::Builtin => "builtin",
            Self::Nginx => "nginx",
        }
    }
}

/// The server a lab run starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabServer {
    /// Which one.
    pub kind: ServerKind,
    /// Directories of the SPECweb96 file set it serves.
    pub dirs: u32,
    /// nginx worker processes (default: the CPUs).
    pub workers: Option<u32>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_inputs_name_their_flag() {
        let check = |cfg: HttpConfig, flag: &str| {
            let e = cfg.validate().expect_err("must fail").to_string();
            assert!(e.starts_with(&format!("invalid --{flag}:")), "{e}");
        };
        let d = HttpConfig::default;
        check(
            HttpConfig {
                connections: 0,
                ..d()
            },
            "connections",
        );
        check(
            HttpConfig {
                requests_per_connection: Some(0),
                ..d()
            },
            "requests-per-connection",
        );
        check(
            HttpConfig {
                rate: Some(-1.0),
                ..d()
            },
            "rate",
        );
        check(
            HttpConfig {
                poisson: true,
                ..d()
            },
            "poisson",
        );
        check(
            HttpConfig {
                count: None,
                duration_ms: None,
                ..d()
            },
            "count",
        );
        check(
            HttpConfig {
                mix: Mix::Paths(vec!["x".into()]),
                ..d()
            },
            "url",
        );
        check(
            HttpConfig {
                host: Some("a b".into()),
                ..d()
            },
            "host",
        );
        check(
            HttpConfig {
                threads: Some(0),
                ..d()
            },
            "threads",
        );
        assert!(d().validate().is_ok());
        assert_eq!(
            HttpConfig {
                connections: 1,
                threads: Some(8),
                ..d()
            }
            .thread_count(4),
            1
        );
        assert_eq!(
            HttpConfig {
                connections: 16,
                ..d()
            }
            .thread_count(4),
            4,
            "the CPUs when --threads is not given"
        );
    }
}
