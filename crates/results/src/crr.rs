//! crr's configuration and result: connect, request, response, close per transaction, with
//! the connect failures counted per second, SYN retransmissions inferred from connect times
//! and counted by the kernel, and TIME_WAIT sampled (the run itself is `tcplab_load::crr`).

use serde::{Deserialize, Serialize};

use crate::error::{ConfigError, check_bounds, config};
use crate::session::RunMeta;
use crate::sockopt::SockOpts;
use crate::stats::Percentiles;

/// Most concurrent connection threads.
pub const MAX_CONCURRENCY: u32 = 1024;
/// Largest request or response.
pub const MAX_SIZE: u32 = 1 << 20;
/// Most raw samples kept per run.
pub const MAX_SAMPLES: u64 = 4_000_000;

/// Parameters of a crr run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CrrConfig {
    /// Concurrent connection loops (`--concurrency`).
    pub concurrency: u32,
    /// Request size, bytes (`--req`).
    #[serde(with = "crate::units::serde_size_u32")]
    pub req: u32,
    /// Response size, bytes (`--resp`).
    #[serde(with = "crate::units::serde_size_u32")]
    pub resp: u32,
    /// Stop after this many transactions (`--count`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    /// Stop after this long (`--duration`).
    #[serde(
        rename = "duration",
        default,
        with = "crate::units::serde_ms_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub duration_ms: Option<u64>,
    /// Give up on one connect after this long (`--connect-timeout`).
    #[serde(rename = "connect_timeout", with = "crate::units::serde_ms")]
    pub connect_timeout_ms: u64,
    /// TIME_WAIT sampling period.
    #[serde(rename = "sample", with = "crate::units::serde_ms")]
    pub sample_ms: u64,
    /// Socket options of the data connections (both sides).
    #[serde(rename = "socket")]
    pub opts: SockOpts,
    /// Idle timeout of every other wait (`--timeout`).
    #[serde(rename = "timeout", with = "crate::units::serde_ms")]
    pub timeout_ms: u64,
    /// Threads the server accepts and serves with (`--server-threads`; default one more than
    /// the client's loops, so no connection waits for a thread). Fewer than the loops is a
    /// server with a small worker pool: connections wait in its accept queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_threads: Option<u32>,
}

impl Default for CrrConfig {
    fn default() -> Self {
        Self {
            concurrency: 1,
            req: 1,
            resp: 1,
            count: None,
            duration_ms: Some(5_000),
            connect_timeout_ms: 10_000,
            sample_ms: 100,
            opts: SockOpts::default(),
            timeout_ms: 10_000,
            server_threads: None,
        }
    }
}

impl CrrConfig {
    /// Checks every field; errors name the flag.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.concurrency == 0 || self.concurrency > MAX_CONCURRENCY {
            return Err(config(
                "concurrency",
                format!("{} is outside 1..={MAX_CONCURRENCY}", self.concurrency),
            ));
        }
        for (flag, v) in [("req", self.req), ("resp", self.resp)] {
            if v == 0 || v > MAX_SIZE {
                return Err(config(flag, format!("{v} bytes is outside 1..={MAX_SIZE}")));
            }
        }
        check_bounds(self.count, self.duration_ms)?;
        if self.connect_timeout_ms == 0 {
            return Err(config("connect-timeout", "must be above 0"));
        }
        if self.timeout_ms == 0 || self.sample_ms == 0 {
            return Err(config("timeout", "must be above 0"));
        }
        if self
            .server_threads
            .is_some_and(|t| t == 0 || t > MAX_CONCURRENCY + 1)
        {
            return Err(config(
                "server-threads",
                format!("must be within 1..={}", MAX_CONCURRENCY + 1),
            ));
        }
        self.opts.validate()
    }

    /// Seconds the run can last at most (its bound plus a connect timeout and slack): the
    /// length of the per-second error table.
    pub fn deadline_s(&self) -> u64 {
        self.duration_ms.map_or(3600, |d| d / 1000 + 1) + self.connect_timeout_ms / 1000 + 2
    }
}

/// One raw crr sample (CLOCK_MONOTONIC ns).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CrrSample {
    /// connect() called.
    pub start_ns: u64,
    /// connect() returned.
    pub connected_ns: u64,
    /// Response complete (close follows).
    pub done_ns: u64,
}

/// Failed connects/transactions in one second of the run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorSecond {
    /// Second since the start.
    pub second: u64,
    /// EADDRNOTAVAIL (local ports exhausted).
    pub addrnotavail: u64,
    /// ECONNREFUSED.
    pub connrefused: u64,
    /// Timeouts, resets and anything else.
    pub other: u64,
}

/// SYN retransmissions, inferred and counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SynRetrans {
    /// Connects that took 0.8-2.5 s: one SYN lost (initial RTO 1 s).
    pub connects_near_1s: u64,
    /// Connects that took 2.5 s or more: two or more SYNs lost (1 s + 2 s).
    pub connects_near_3s: u64,
    /// TcpExt TCPSynRetrans of the client namespace, during the run (null if unreadable).
    pub kernel_syn_retrans: Option<u64>,
}

/// TIME_WAIT sockets seen on the client host.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TimeWait {
    /// Largest count sampled.
    pub max: u64,
    /// Count at the end.
    pub last: u64,
    /// (seconds since start, count) per sample.
    pub samples: Vec<(f64, u64)>,
}

/// The `summary` object of a crr result.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CrrSummary {
    /// Completed transactions (connections) per second.
    pub connections_per_s: Option<f64>,
    /// Connect time, µs.
    pub connect_us: Percentiles,
    /// Completed transactions.
    pub transactions: u64,
}

/// A crr result.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CrrResult {
    /// Common record.
    #[serde(flatten)]
    pub meta: RunMeta,
    /// What was asked.
    pub config: CrrConfig,
    /// Headline figures.
    pub summary: CrrSummary,
    /// Wall time, s.
    pub elapsed_s: f64,
    /// Connect to response complete, µs.
    pub transaction_us: Percentiles,
    /// Connections the server accepted and answered.
    pub server_transactions: u64,
    /// Failures per second (only seconds with failures).
    pub errors: Vec<ErrorSecond>,
    /// Totals of `errors`.
    pub errors_total: ErrorSecond,
    /// SYN retransmissions.
    pub syn_retrans: SynRetrans,
    /// TIME_WAIT on the client host.
    pub time_wait: TimeWait,
    /// Raw samples beyond [`MAX_SAMPLES`] that were not kept.
    pub samples_dropped: u64,
    /// Raw samples, kept for --samples.
    #[serde(skip)]
    pub samples: Vec<CrrSample>,
}

/// One interval of a running crr, as streamed with `--ndjson` (client side).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CrrInterval {
    /// Interval number from 0.
    pub index: u32,
    /// Start, s since the run started.
    pub start_s: f64,
    /// End, s.
    pub end_s: f64,
    /// Transactions (connections) completed in the interval.
    pub connections: u64,
    /// Their rate, per second.
    pub connections_per_s: Option<f64>,
    /// Failed connects or transactions in the interval (EADDRNOTAVAIL, ECONNREFUSED, other).
    pub failures: u64,
    /// TIME_WAIT sockets on the client host at the latest sample.
    pub time_wait: u64,
    /// TcpExt TCPSynRetrans of the client namespace during the interval (null if unreadable).
    pub kernel_syn_retrans: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_inputs_name_their_flag() {
        let check = |cfg: CrrConfig, flag: &str| {
            let e = cfg.validate().expect_err("must fail").to_string();
            assert!(e.starts_with(&format!("invalid --{flag}:")), "{e}");
        };
        check(
            CrrConfig {
                concurrency: 0,
                ..CrrConfig::default()
            },
            "concurrency",
        );
        check(
            CrrConfig {
                req: 0,
                ..CrrConfig::default()
            },
            "req",
        );
        check(
            CrrConfig {
                resp: MAX_SIZE + 1,
                ..CrrConfig::default()
            },
            "resp",
        );
        check(
            CrrConfig {
                count: None,
                duration_ms: None,
                ..CrrConfig::default()
            },
            "count",
        );
        check(
            CrrConfig {
                duration_ms: Some(0),
                ..CrrConfig::default()
            },
            "duration",
        );
    }
}
