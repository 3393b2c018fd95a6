//! The agent's limits and the judgements made with them, sans-IO: what a test asks for
//! ([`Needs`], from its parameters), whether the agent takes it, and whether a running test
//! has gone past what it may use. Every refusal is a [`Refusal`] whose message names the
//! limit's flag, because it is the one line the client's user sees.

use std::fmt;
use std::time::Duration;
use tcplab_results::spec::WorkloadSpec;

use tcplab_load::proto::Cause;
use tcplab_load::stream::Direction;

/// The agent's limits. The defaults are for an agent on a real network: generous for any
/// measurement a person runs by hand or a sweep runs, small enough that no client can hold the
/// host for long, fill its link for hours, or run it out of threads.
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    /// Tests running at once (`--max-concurrent`).
    pub max_tests: u32,
    /// Longest a test may run, from its Ready to its Report (`--max-duration`); None: no limit.
    pub max_duration: Option<Duration>,
    /// Data bytes a test may move, both ways together (`--max-bytes`); None: no limit.
    pub max_bytes: Option<u64>,
    /// Control connections a client address may open per second (`--max-conn-rate`); an IPv6
    /// client is counted by its /64, which is what one host gets.
    pub conn_rate: u32,
    /// Connections between accept and their test's start, at once (`--max-handshakes`); a
    /// single address gets at most a sixteenth of them (at least one), so a crowd of fewer
    /// than 16 addresses cannot keep another client out.
    pub max_handshakes: u32,
    /// The longest any single wait of a test may last (`--idle-timeout`); a client's own
    /// `--timeout` may shorten it, never lengthen it.
    pub idle_timeout: Duration,
    /// The whole handshake, from accept to the test's Hello (`--handshake-timeout`).
    pub handshake_timeout: Duration,
    /// Workload threads of all running tests together (`--max-threads`).
    pub max_threads: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_tests: 4,
            max_duration: Some(Duration::from_secs(300)),
            max_bytes: Some(100 << 30),
            conn_rate: 20,
            max_handshakes: 64,
            idle_timeout: Duration::from_secs(30),
            handshake_timeout: Duration::from_secs(5),
            max_threads: 1024,
        }
    }
}

impl Limits {
    /// The limits of a server a lab run starts inside its own process (`tcplab_front::lab::run_on`,
    /// the study's lab sessions): its only client is the same program, whose every test is
    /// bounded by its own parameters, so test length and bytes are not limited (a scenario may
    /// run a 10-minute soak at 40 Gbit/s); the connection, handshake and thread bounds stay.
    pub fn in_process() -> Self {
        Self {
            max_tests: 64,
            max_duration: None,
            max_bytes: None,
            conn_rate: 10_000,
            max_handshakes: 256,
            max_threads: 8192,
            ..Self::default()
        }
    }

    /// Handshakes one address may have in flight.
    pub fn per_address_handshakes(&self) -> u32 {
        (self.max_handshakes / 16).max(1)
    }

    /// Whether a test with these needs may start at all (before counting what else runs).
    pub fn check(&self, needs: &Needs) -> Result<(), Refusal> {
        if let (Some(asked), Some(limit)) = (needs.duration, self.max_duration)
            && asked > limit
        {
            return Err(Refusal::Duration { asked, limit });
        }
        if let (Some(asked), Some(limit)) = (needs.bytes, self.max_bytes)
            && asked > limit
        {
            return Err(Refusal::Bytes { asked, limit });
        }
        if needs.threads > self.max_threads {
            return Err(Refusal::Threads {
                asked: needs.threads,
                in_use: 0,
                limit: self.max_threads,
            });
        }
        Ok(())
    }

    /// Whether a test that has run `elapsed` and moved `bytes` has gone past a limit.
    pub fn overrun(&self, elapsed: Duration, bytes: u64) -> Option<Refusal> {
        if let Some(limit) = self.max_duration
            && elapsed > limit
        {
            return Some(Refusal::RanTooLong { limit });
        }
        if let Some(limit) = self.max_bytes
            && bytes > limit
        {
            return Some(Refusal::MovedTooMuch { limit });
        }
        None
    }

    /// The limits in one line, as `tcplab serve` prints them at start.
    pub fn summary(&self) -> String {
        let or_none = |v: Option<String>| v.unwrap_or_else(|| "no limit".into());
        format!(
            "{} tests at once (--max-concurrent), {} per test (--max-duration), {} per test \
             (--max-bytes), {} control connections/s per address (--max-conn-rate), {} \
             handshakes (--max-handshakes), {} threads (--max-threads), idle {} s, handshake {} s",
            self.max_tests,
            or_none(self.max_duration.map(|d| format!("{} s", d.as_secs_f64()))),
            or_none(self.max_bytes.map(bytes)),
            self.conn_rate,
            self.max_handshakes,
            self.max_threads,
            self.idle_timeout.as_secs_f64(),
            self.handshake_timeout.as_secs_f64(),
        )
    }
}

/// What a test asks of the agent, read from its parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Needs {
    /// How long it says it runs, when it says (a count-bounded test does not).
    pub duration: Option<Duration>,
    /// How many data bytes it says it moves, when it says.
    pub bytes: Option<u64>,
    /// Workload threads the server side runs for it.
    pub threads: u32,
}

impl Needs {
    /// Reads a test's needs from its parameters: rrul's are its probes' and its load's
    /// together (the two tests its client opens side by side); None for http, whose server is
    /// a web server.
    pub fn of(test: &WorkloadSpec) -> Option<Self> {
        let ms = |d: Option<u64>| d.map(Duration::from_millis);
        Some(match test {
            WorkloadSpec::Stream(c) => {
                let ways = if c.direction == Direction::Bidir {
                    2
                } else {
                    1
                };
                Self {
                    duration: ms(c.duration_ms),
                    bytes: c.bytes.map(|b| b.saturating_mul(ways)),
                    threads: c.flows.saturating_mul(ways as u32).saturating_add(1),
                }
            }
            WorkloadSpec::Msgs(c) => {
                let sizes: &[u32] = if c.sizes.is_empty() {
                    std::slice::from_ref(&c.size)
                } else {
                    &c.sizes
                };
                let per: u64 = sizes.iter().map(|&s| u64::from(s)).sum();
                Self {
                    duration: None,
                    bytes: Some(c.count.saturating_mul(per)),
                    threads: 1,
                }
            }
            WorkloadSpec::Rr(c) => {
                let pair = u64::from(c.req) + u64::from(c.resp);
                Self {
                    duration: ms(c.duration_ms),
                    bytes: c.count.map(|n| n.saturating_mul(pair)),
                    threads: 1,
                }
            }
            WorkloadSpec::Crr(c) => {
                let pair = u64::from(c.req) + u64::from(c.resp);
                let threads = c
                    .server_threads
                    .unwrap_or(c.concurrency.min(256) + 1)
                    .max(1);
                Self {
                    duration: ms(c.duration_ms),
                    bytes: c.count.map(|n| n.saturating_mul(pair)),
                    threads,
                }
            }
            WorkloadSpec::Rrul(c) => {
                let probes = Self::of(&WorkloadSpec::Rr(c.probe_config()))?;
                let load = Self::of(&WorkloadSpec::Stream(c.bulk_config()))?;
                Self {
                    duration: probes.duration.max(load.duration),
                    bytes: None,
                    threads: probes.threads.saturating_add(load.threads),
                }
            }
            WorkloadSpec::Http(_) => return None,
        })
    }
}

/// How the message of a test the agent stopped begins (clients put it before their own reason,
/// which is only the symptom: a connection the server shut).
pub const STOPPED: &str = "stopped by the server:";

/// Why the agent refused a connection or a test, or stopped one. The message names the limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The address opened control connections faster than `--max-conn-rate`.
    Rate {
        /// The limit, per second.
        limit: u32,
    },
    /// Too many handshakes in flight (all, or from this address).
    Handshakes {
        /// The limit that was hit (the global one, or the per-address share).
        limit: u32,
        /// True when it was this address's share.
        per_address: bool,
    },
    /// `--max-concurrent` tests are running.
    Tests {
        /// The limit.
        limit: u32,
    },
    /// The test needs more threads than are free under `--max-threads`.
    Threads {
        /// Threads the test needs.
        asked: u32,
        /// Threads other tests hold.
        in_use: u32,
        /// The limit.
        limit: u32,
    },
    /// The test says it runs longer than `--max-duration`.
    Duration {
        /// What it asked for.
        asked: Duration,
        /// The limit.
        limit: Duration,
    },
    /// The test says it moves more than `--max-bytes`.
    Bytes {
        /// What it asked for.
        asked: u64,
        /// The limit.
        limit: u64,
    },
    /// The test ran past `--max-duration` and was stopped.
    RanTooLong {
        /// The limit.
        limit: Duration,
    },
    /// The test moved more than `--max-bytes` and was stopped.
    MovedTooMuch {
        /// The limit.
        limit: u64,
    },
    /// The agent is stopping (its stdin closed under `--stop-on-stdin-eof`, or a signal), so
    /// its running tests are stopped rather than waited for.
    AgentStopping,
}

impl Refusal {
    /// The flag of the limit (for counters and logs).
    pub fn flag(&self) -> &'static str {
        match self {
            Self::Rate { .. } => "max-conn-rate",
            Self::Handshakes { .. } => "max-handshakes",
            Self::Tests { .. } => "max-concurrent",
            Self::Threads { .. } => "max-threads",
            Self::Duration { .. } | Self::RanTooLong { .. } => "max-duration",
            Self::Bytes { .. } | Self::MovedTooMuch { .. } => "max-bytes",
            Self::AgentStopping => "stopping",
        }
    }

    /// Its cause as the client reads it: a limit the test itself is over (asked or run past)
    /// is refused again whenever it is sent; the others pass once the agent is less busy.
    pub fn cause(&self) -> Cause {
        match self {
            Self::Duration { .. }
            | Self::Bytes { .. }
            | Self::RanTooLong { .. }
            | Self::MovedTooMuch { .. } => Cause::Limit,
            Self::Rate { .. }
            | Self::Handshakes { .. }
            | Self::Tests { .. }
            | Self::Threads { .. }
            | Self::AgentStopping => Cause::Busy,
        }
    }
}

/// Bytes in the binary units the flags take (`--max-bytes 100G` is 100 GiB).
fn bytes(b: u64) -> String {
    let f = b as f64;
    match b {
        b if b >= 1 << 30 => format!("{}G", round(f / f64::from(1u32 << 30))),
        b if b >= 1 << 20 => format!("{}M", round(f / f64::from(1u32 << 20))),
        b => format!("{b} bytes"),
    }
}

/// One decimal, none when whole.
fn round(v: f64) -> String {
    let r = (v * 10.0).round() / 10.0;
    if r.fract() == 0.0 {
        format!("{r:.0}")
    } else {
        format!("{r:.1}")
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Rate { limit } => write!(
                f,
                "too many control connections from this address: the server's limit is \
                 --max-conn-rate {limit} per second; wait a second and retry"
            ),
            Self::Handshakes { limit, per_address } => write!(
                f,
                "too many handshakes in progress{}: the server's limit is --max-handshakes \
                 ({limit}{}); retry shortly",
                if *per_address {
                    " from this address"
                } else {
                    ""
                },
                if *per_address { " per address" } else { "" },
            ),
            Self::Tests { limit } => write!(
                f,
                "server busy: {limit} tests running, its limit is --max-concurrent {limit}; retry \
                 when one ends"
            ),
            Self::Threads {
                asked,
                in_use,
                limit,
            } => write!(
                f,
                "the test needs {asked} server threads and {in_use} of the server's \
                 --max-threads {limit} are in use; use fewer flows or server threads, or retry"
            ),
            Self::Duration { asked, limit } => write!(
                f,
                "the test asks for {} s, over the server's limit --max-duration {} s",
                asked.as_secs_f64(),
                limit.as_secs_f64()
            ),
            Self::Bytes { asked, limit } => write!(
                f,
                "the test would move {}, over the server's limit --max-bytes {}",
                bytes(*asked),
                bytes(*limit)
            ),
            Self::RanTooLong { limit } => write!(
                f,
                "{STOPPED} the test ran past its limit --max-duration {} s",
                limit.as_secs_f64()
            ),
            Self::MovedTooMuch { limit } => write!(
                f,
                "{STOPPED} the test moved more than its limit --max-bytes {}",
                bytes(*limit)
            ),
            Self::AgentStopping => write!(
                f,
                "{STOPPED} the agent is stopping (its stdin closed under --stop-on-stdin-eof, \
                 or it was told to stop); run the test again once it is back"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcplab_load::{crr::CrrConfig, msgs::MsgsConfig, stream::StreamConfig};
    use tcplab_results::spec::WorkloadKind;

    #[test]
    fn needs_come_from_the_parameters() {
        let s = WorkloadSpec::Stream(StreamConfig {
            flows: 4,
            direction: Direction::Bidir,
            duration_ms: Some(20_000),
            bytes: Some(1_000),
            ..StreamConfig::default()
        });
        assert_eq!(
            Needs::of(&s),
            Some(Needs {
                duration: Some(Duration::from_secs(20)),
                bytes: Some(2_000),
                threads: 9
            })
        );
        let m = WorkloadSpec::Msgs(MsgsConfig {
            count: 1_000,
            sizes: vec![1, 10, 100],
            ..MsgsConfig::default()
        });
        assert_eq!(Needs::of(&m).and_then(|n| n.bytes), Some(111_000));
        let c = WorkloadSpec::Crr(CrrConfig {
            concurrency: 1_000,
            ..CrrConfig::default()
        });
        assert_eq!(Needs::of(&c).map(|n| n.threads), Some(257));
        let rrul = tcplab_results::rrul::RrulConfig {
            flows: 4,
            ..Default::default()
        };
        let probes = Needs::of(&WorkloadSpec::Rr(rrul.probe_config())).expect("rr");
        let load = Needs::of(&WorkloadSpec::Stream(rrul.bulk_config())).expect("stream");
        let both = Needs::of(&WorkloadSpec::Rrul(rrul)).expect("rrul is served");
        assert_eq!(both.threads, probes.threads + load.threads);
        assert!(both.duration >= load.duration && both.duration.is_some());
        assert_eq!(
            Needs::of(&WorkloadSpec::default_of(WorkloadKind::Http)),
            None
        );
    }

    #[test]
    fn a_limit_the_test_is_over_is_permanent_and_a_busy_agent_is_not() {
        let over = Refusal::Duration {
            asked: Duration::from_secs(20),
            limit: Duration::from_secs(10),
        };
        assert!(over.cause().is_permanent());
        assert!(!Refusal::Tests { limit: 4 }.cause().is_permanent());
        assert!(!Refusal::AgentStopping.cause().is_permanent());
    }

    #[test]
    fn each_refusal_names_its_flag() {
        let l = Limits::default();
        let long = Needs {
            duration: Some(Duration::from_secs(301)),
            bytes: None,
            threads: 1,
        };
        let e = l.check(&long).expect_err("too long");
        assert_eq!(e.flag(), "max-duration");
        assert!(e.to_string().contains("--max-duration 300 s"), "{e}");
        let big = Needs {
            duration: None,
            bytes: Some(200 << 30),
            threads: 1,
        };
        assert!(
            l.check(&big)
                .expect_err("big")
                .to_string()
                .contains("--max-bytes 100G")
        );
        let ok = Needs {
            duration: Some(Duration::from_secs(10)),
            bytes: Some(1),
            threads: 2,
        };
        assert!(l.check(&ok).is_ok());
        assert!(
            l.check(&Needs {
                threads: 5000,
                ..ok
            })
            .is_err()
        );
        let unlimited = Limits::in_process();
        assert!(unlimited.check(&long).is_ok() && unlimited.check(&big).is_ok());
    }

    #[test]
    fn a_running_test_is_stopped_past_either_limit() {
        let l = Limits::default();
        assert_eq!(l.overrun(Duration::from_secs(299), 10), None);
        let e = l.overrun(Duration::from_secs(301), 10).expect("long");
        assert!(e.to_string().starts_with("stopped by the server"), "{e}");
        assert_eq!(
            l.overrun(Duration::from_secs(1), (100 << 30) + 1)
                .map(|r| r.flag()),
            Some("max-bytes")
        );
    }
}
