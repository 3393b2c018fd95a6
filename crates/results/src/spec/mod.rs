//! One description of a workload: [`WorkloadSpec`], a serde enum tagged by `kind` over each
//! workload's configuration, as a scenario's `[[workload]]` table holds it, a command's flags
//! convert into it, and a run's result records it. A parameter added to a configuration is
//! thereby a flag (where the command has it), a scenario key and a sweepable factor at once:
//! [`keys`] reads the keys off the types, and docs/scenarios.md's table is generated from them.

mod http;
mod keys;

use serde::{Deserialize, Serialize};

use crate::crr::CrrConfig;
use crate::error::ConfigError;
use crate::msgs::MsgsConfig;
use crate::rr::RrConfig;
use crate::rrul::RrulConfig;
use crate::sockopt::SockOpts;
use crate::stream::StreamConfig;

pub use http::{HttpServer, HttpSpec};
pub use keys::{key_of_flag, keys, socket_keys};

/// A workload and all its parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum WorkloadSpec {
    /// Bulk throughput over parallel flows.
    Stream(StreamConfig),
    /// A timed series of small messages (sfperf).
    Msgs(MsgsConfig),
    /// Request/response latency.
    Rr(RrConfig),
    /// Connect, request, response, close: connection rate.
    Crr(CrrConfig),
    /// Latency under load: probes before, during and after bulk flows.
    Rrul(RrulConfig),
    /// HTTP/1.1 requests against a web server started in the lab's server host.
    Http(HttpSpec),
}

/// Which workload, without its parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WorkloadKind {
    /// Bulk throughput.
    Stream,
    /// Small messages.
    Msgs,
    /// Request/response.
    Rr,
    /// Connection rate.
    Crr,
    /// Latency under load.
    Rrul,
    /// HTTP requests.
    Http,
}

/// Which way a figure is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Better {
    /// Higher is better (throughput, rates).
    Higher,
    /// Lower is better (latency, cost).
    Lower,
}

/// A kind's headline figure: the metric a study, tune and the mesh judge it by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Headline {
    /// The metric's key in a run's metrics (its summary, flattened with dots).
    pub metric: &'static str,
    /// Its unit.
    pub unit: &'static str,
    /// Which way is better.
    pub better: Better,
}

impl WorkloadKind {
    /// Every kind, in the order docs list them.
    pub const ALL: [WorkloadKind; 6] = [
        WorkloadKind::Stream,
        WorkloadKind::Msgs,
        WorkloadKind::Rr,
        WorkloadKind::Crr,
        WorkloadKind::Rrul,
        WorkloadKind::Http,
    ];

    /// The kinds' names, in the order of [`WorkloadKind::ALL`].
    pub const NAMES: &'static [&'static str] = &["stream", "msgs", "rr", "crr", "rrul", "http"];

    /// Its name on the command line and in files.
    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    /// Reads a name among `allowed` (what the caller can run); the error lists them.
    pub fn parse_among(name: &str, allowed: &[WorkloadKind]) -> Result<WorkloadKind, String> {
        allowed
            .iter()
            .copied()
            .find(|k| k.name() == name)
            .ok_or_else(|| {
                let names: Vec<&str> = allowed.iter().map(|k| k.name()).collect();
                format!(
                    "unknown workload `{}`: use {}",
                    tcplab_emu::error::shown(name),
                    names.join(", ")
                )
            })
    }

    /// The figure this kind is judged by.
    pub fn headline(self) -> Headline {
        let (metric, unit, better) = match self {
            WorkloadKind::Stream => ("throughput_bps", "bit/s", Better::Higher),
            WorkloadKind::Msgs => ("per_message_us.mean", "us", Better::Lower),
            WorkloadKind::Rr => ("latency_us.p99", "us", Better::Lower),
            WorkloadKind::Crr => ("connections_per_s", "1/s", Better::Higher),
            WorkloadKind::Rrul => ("inflation.during_p99_us", "us", Better::Lower),
            WorkloadKind::Http => ("ops_per_s", "1/s", Better::Higher),
        };
        Headline {
            metric,
            unit,
            better,
        }
    }

    /// What it measures, in a few words (docs and `--help`).
    pub fn about(self) -> &'static str {
        match self {
            WorkloadKind::Stream => "bulk throughput over parallel flows",
            WorkloadKind::Msgs => "a timed series of small messages, one way (sfperf)",
            WorkloadKind::Rr => "request/response latency, closed or open loop",
            WorkloadKind::Crr => "connect, request, response, close: connection rate",
            WorkloadKind::Rrul => "latency under load: probes before, during and after bulk flows",
            WorkloadKind::Http => "HTTP/1.1 requests to a web server in the lab (SPECweb96's mix)",
        }
    }
}

impl std::fmt::Display for WorkloadKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl WorkloadSpec {
    /// Its kind.
    pub fn kind(&self) -> WorkloadKind {
        match self {
            WorkloadSpec::Stream(_) => WorkloadKind::Stream,
            WorkloadSpec::Msgs(_) => WorkloadKind::Msgs,
            WorkloadSpec::Rr(_) => WorkloadKind::Rr,
            WorkloadSpec::Crr(_) => WorkloadKind::Crr,
            WorkloadSpec::Rrul(_) => WorkloadKind::Rrul,
            WorkloadSpec::Http(_) => WorkloadKind::Http,
        }
    }

    /// The defaults of `kind`.
    pub fn default_of(kind: WorkloadKind) -> WorkloadSpec {
        match kind {
            WorkloadKind::Stream => WorkloadSpec::Stream(StreamConfig::default()),
            WorkloadKind::Msgs => WorkloadSpec::Msgs(MsgsConfig::default()),
            WorkloadKind::Rr => WorkloadSpec::Rr(RrConfig::default()),
            WorkloadKind::Crr => WorkloadSpec::Crr(CrrConfig::default()),
            WorkloadKind::Rrul => WorkloadSpec::Rrul(RrulConfig::default()),
            WorkloadKind::Http => WorkloadSpec::Http(HttpSpec::default()),
        }
    }

    /// Its socket options.
    pub fn socket(&self) -> &SockOpts {
        match self {
            WorkloadSpec::Stream(c) => &c.opts,
            WorkloadSpec::Msgs(c) => &c.opts,
            WorkloadSpec::Rr(c) => &c.opts,
            WorkloadSpec::Crr(c) => &c.opts,
            WorkloadSpec::Rrul(c) => &c.opts,
            WorkloadSpec::Http(s) => &s.config.opts,
        }
    }

    /// Its socket options, to change.
    pub fn socket_mut(&mut self) -> &mut SockOpts {
        match self {
            WorkloadSpec::Stream(c) => &mut c.opts,
            WorkloadSpec::Msgs(c) => &mut c.opts,
            WorkloadSpec::Rr(c) => &mut c.opts,
            WorkloadSpec::Crr(c) => &mut c.opts,
            WorkloadSpec::Rrul(c) => &mut c.opts,
            WorkloadSpec::Http(s) => &mut s.config.opts,
        }
    }

    /// The idle timeout: how long any single wait of a run may last (at least 1 ms).
    pub fn timeout(&self) -> std::time::Duration {
        let ms = match self {
            WorkloadSpec::Stream(c) => c.timeout_ms,
            WorkloadSpec::Msgs(c) => c.timeout_ms,
            WorkloadSpec::Rr(c) => c.timeout_ms,
            WorkloadSpec::Crr(c) => c.timeout_ms,
            WorkloadSpec::Rrul(c) => c.timeout_ms,
            WorkloadSpec::Http(s) => s.config.timeout_ms,
        };
        std::time::Duration::from_millis(ms.max(1))
    }

    /// Checks every parameter; the error names the flag (`--flows`), which is the scenario
    /// key with `_` for `-`.
    pub fn validate(&self) -> Result<(), ConfigError> {
        match self {
            WorkloadSpec::Stream(c) => c.validate(),
            WorkloadSpec::Msgs(c) => c.validate(),
            WorkloadSpec::Rr(c) => c.validate(),
            WorkloadSpec::Crr(c) => c.validate(),
            WorkloadSpec::Rrul(c) => c.validate(),
            WorkloadSpec::Http(s) => s.config.validate(),
        }
    }

    /// The spec with the time bound every run has: a run that gives neither a duration nor
    /// what ends it by itself (stream's bytes, rr's, crr's and http's count) lasts its kind's
    /// default duration. A table that leaves `duration` out reads as no duration; this makes
    /// it the default, as the command's flags do.
    pub fn settled(mut self) -> WorkloadSpec {
        let bound = |d: &mut Option<u64>, ends: bool, default: Option<u64>| {
            if d.is_none() && !ends {
                *d = default;
            }
        };
        match &mut self {
            WorkloadSpec::Stream(c) => bound(
                &mut c.duration_ms,
                c.bytes.is_some(),
                StreamConfig::default().duration_ms,
            ),
            WorkloadSpec::Rr(c) => bound(
                &mut c.duration_ms,
                c.count.is_some(),
                RrConfig::default().duration_ms,
            ),
            WorkloadSpec::Crr(c) => bound(
                &mut c.duration_ms,
                c.count.is_some(),
                CrrConfig::default().duration_ms,
            ),
            WorkloadSpec::Http(s) => bound(
                &mut s.config.duration_ms,
                s.config.count.is_some(),
                HttpSpec::default().config.duration_ms,
            ),
            WorkloadSpec::Msgs(_) | WorkloadSpec::Rrul(_) => {}
        }
        self
    }

    /// A rough duration of one run, s, for `--dry-run` estimates: the stated duration, or for
    /// counted workloads an assumed cost (msgs: 10 µs per message plus its pace; crr: 100 µs
    /// per connection per parallel loop; http: 200 µs per request per connection; stream
    /// bytes at 1 Gbit/s).
    pub fn estimated_secs(&self) -> f64 {
        let secs = |ms: Option<u64>| ms.map(|ms| ms as f64 / 1e3);
        let capped = |est: f64, ms: Option<u64>| secs(ms).map_or(est, |d| est.min(d));
        match self {
            WorkloadSpec::Stream(c) => match c.bytes {
                Some(b) => capped(b as f64 * 8.0 / 1e9, c.duration_ms),
                None => secs(c.duration_ms).unwrap_or(0.0),
            },
            WorkloadSpec::Msgs(c) => {
                let runs = c.sizes.len().max(1) as f64;
                runs * c.count as f64 * (10e-6 + c.gap_us as f64 / 1e6)
            }
            WorkloadSpec::Rr(c) => secs(c.duration_ms).unwrap_or(0.0).max(1.0),
            WorkloadSpec::Crr(c) => match c.count {
                Some(n) => capped(
                    n as f64 * 100e-6 / f64::from(c.concurrency.max(1)),
                    c.duration_ms,
                ),
                None => secs(c.duration_ms).unwrap_or(0.0),
            },
            WorkloadSpec::Rrul(c) => {
                (c.before_ms + c.during_ms + c.after_ms + c.drain_ms) as f64 / 1e3
            }
            WorkloadSpec::Http(s) => {
                let c = &s.config;
                match c.count {
                    Some(n) => capped(
                        n as f64 * 200e-6 / f64::from(c.connections.max(1)),
                        c.duration_ms,
                    ),
                    None => secs(c.duration_ms).unwrap_or(0.0),
                }
            }
        }
    }

    /// The same workload at a reduced size (`--quick`): durations, counts and stream bytes
    /// times `factor`, with floors of 200 ms, 1,000 messages, 100 connections, requests or
    /// transactions and 1 MB, so a quick run still measures something; rrul's phases keep
    /// ten probes and one load interval each.
    pub fn scaled(&self, factor: f64) -> WorkloadSpec {
        let ms = |d: u64| ((d as f64 * factor) as u64).max(200).min(d);
        let dur = |d: Option<u64>| d.map(ms);
        let count = |n: u64, floor: u64| ((n as f64 * factor) as u64).max(floor).min(n);
        let mut out = self.clone();
        match &mut out {
            WorkloadSpec::Stream(c) => {
                c.duration_ms = dur(c.duration_ms);
                c.bytes = c.bytes.map(|b| count(b, 1_000_000));
            }
            WorkloadSpec::Msgs(c) => c.count = count(c.count, 1_000),
            WorkloadSpec::Rr(c) => {
                c.duration_ms = dur(c.duration_ms);
                c.count = c.count.map(|n| count(n, 100));
            }
            WorkloadSpec::Crr(c) => {
                c.duration_ms = dur(c.duration_ms);
                c.count = c.count.map(|n| count(n, 100));
            }
            WorkloadSpec::Rrul(c) => {
                let least = (crate::rrul::MIN_PROBES_PER_PHASE * c.spacing_ms).max(c.interval_ms);
                for phase in [&mut c.before_ms, &mut c.during_ms, &mut c.after_ms] {
                    *phase = ms(*phase).max(least).min(*phase);
                }
            }
            WorkloadSpec::Http(s) => {
                s.config.duration_ms = dur(s.config.duration_ms);
                s.config.count = s.config.count.map(|n| count(n, 100));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests;
