//! rrul's configuration and result: latency under load, an open-loop rr probe test for the
//! whole span beside a stream test for the middle of it (the run itself, and why the probes
//! are open loop on a fixed schedule, is `tcplab_load::rrul`). The probes are split into
//! before/during/after by the load's measured edges in [`phase`] (pure); the human form is in
//! `text.rs`.

pub mod phase;
mod text;

use serde::{Deserialize, Serialize};

use crate::error::{ConfigError, config};
use crate::rr::{self, RrConfig, RrResult, RrSample};
use crate::session::RunMeta;
use crate::sockopt::SockOpts;
use crate::stream::{self, Direction, StreamConfig, StreamResult};
pub use phase::{Inflation, LoadSpan, Phase, PhaseName};
pub(crate) use text::write_human;

/// Default of [`RrulConfig::drain_ms`]. Reno through 1000 packets at 20 Mbit/s left 1.3-1.5 s
/// to drain (the bottleneck queue and the unsent part of a 4 MB send buffer) after its sender
/// stopped writing.
pub const DEFAULT_DRAIN_MS: u64 = 2_000;
/// Longest phase, ms (one hour).
pub const MAX_PHASE_MS: u64 = 3_600_000;
/// Largest probe request or response, bytes.
pub const MAX_PROBE_SIZE: u32 = 64 << 10;
/// Most probe payload, bit/s both ways together: 64/64-byte probes every 1 ms. Probes above it
/// would themselves load a slow path they are meant to measure.
pub const MAX_PROBE_BPS: u64 = 1_024_000;
/// Fewest probes an idle phase must hold for its percentiles to mean something.
pub const MIN_PROBES_PER_PHASE: u64 = 10;
/// Which way the bulk load goes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LoadDirection {
    /// The client sends.
    Up,
    /// The server sends.
    Down,
    /// Both at once, `flows` each way (RRUL's default).
    #[default]
    Both,
}

impl LoadDirection {
    /// The stream direction that carries this load.
    pub fn stream(self) -> Direction {
        match self {
            Self::Up => Direction::Up,
            Self::Down => Direction::Down,
            Self::Both => Direction::Bidir,
        }
    }

    /// The name as on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Up => "up",
            Self::Down => "down",
            Self::Both => "both",
        }
    }
}

/// Parameters of an rrul run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RrulConfig {
    /// Direction of the load (`--dir`).
    pub direction: LoadDirection,
    /// Bulk flows per direction (`--flows`).
    pub flows: u32,
    /// Idle phase before the load (`--before`).
    #[serde(rename = "before", with = "crate::units::serde_ms")]
    pub before_ms: u64,
    /// Load phase: how long the bulk flows send (`--during`).
    #[serde(rename = "during", with = "crate::units::serde_ms")]
    pub during_ms: u64,
    /// Idle phase after the load (`--after`).
    #[serde(rename = "after", with = "crate::units::serde_ms")]
    pub after_ms: u64,
    /// How long the probes run past `before + during + after` (`--drain`): room for the
    /// load's set-up and for the queue it filled (send buffers and the bottleneck) to drain
    /// after its senders stop, since the `after` phase starts only then. The probes' schedule
    /// is fixed when they start, so a load that drains for longer shortens `after` (the run
    /// says so); probes due after `after` ends are counted, not used.
    #[serde(rename = "drain", with = "crate::units::serde_ms")]
    pub drain_ms: u64,
    /// Probe request size, bytes (`--req`).
    #[serde(with = "crate::units::serde_size_u32")]
    pub req: u32,
    /// Probe response size, bytes (`--resp`).
    #[serde(with = "crate::units::serde_size_u32")]
    pub resp: u32,
    /// The time between probes, on a fixed schedule (`--spacing`).
    #[serde(rename = "spacing", with = "crate::units::serde_ms")]
    pub spacing_ms: u64,
    /// Interval of the load's reports and tcp_info samples (`--interval`).
    #[serde(rename = "interval", with = "crate::units::serde_ms")]
    pub interval_ms: u64,
    /// Socket options of the bulk flows, both sides (the probes always run TCP_NODELAY alone).
    #[serde(rename = "socket")]
    pub opts: SockOpts,
    /// Idle timeout of every wait (`--timeout`).
    #[serde(rename = "timeout", with = "crate::units::serde_ms")]
    pub timeout_ms: u64,
}

impl Default for RrulConfig {
    fn default() -> Self {
        Self {
            direction: LoadDirection::Both,
            flows: 1,
            before_ms: 2_000,
            during_ms: 6_000,
            after_ms: 2_000,
            drain_ms: DEFAULT_DRAIN_MS,
            req: 64,
            resp: 64,
            spacing_ms: 10,
            interval_ms: 1_000,
            opts: SockOpts::default(),
            timeout_ms: 10_000,
        }
    }
}

impl RrulConfig {
    /// Checks every field; errors name the flag and the fix.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.flows == 0 || self.flows > stream::MAX_FLOWS {
            return Err(config(
                "flows",
                format!("{} is outside 1..={}", self.flows, stream::MAX_FLOWS),
            ));
        }
        if !(1..=10_000).contains(&self.spacing_ms) {
            return Err(config(
                "spacing",
                "must be within 1 ms..=10 s between probes",
            ));
        }
        for (flag, v) in [("req", self.req), ("resp", self.resp)] {
            if !(1..=MAX_PROBE_SIZE).contains(&v) {
                return Err(config(
                    flag,
                    format!("{v} bytes is outside 1..={MAX_PROBE_SIZE} for a probe"),
                ));
            }
        }
        let probe_bps = u64::from(self.req + self.resp) * 8 * 1000 / self.spacing_ms;
        if probe_bps > MAX_PROBE_BPS {
            return Err(config(
                "spacing",
                format!(
                    "probes of {}+{} bytes every {} ms carry {probe_bps} bit/s, above \
                     {MAX_PROBE_BPS}: they would load the path they measure; raise --spacing or \
                     lower --req/--resp",
                    self.req, self.resp, self.spacing_ms
                ),
            ));
        }
        self.validate_phases()?;
        if self.timeout_ms == 0 {
            return Err(config("timeout", "must be above 0"));
        }
        self.bulk_config().validate()?;
        self.probe_config().validate()
    }

    /// Each phase within bounds and long enough for [`MIN_PROBES_PER_PHASE`] probes.
    fn validate_phases(&self) -> Result<(), ConfigError> {
        let least = MIN_PROBES_PER_PHASE * self.spacing_ms;
        for (flag, v) in [
            ("before", self.before_ms),
            ("during", self.during_ms),
            ("after", self.after_ms),
        ] {
            if v < least {
                return Err(config(
                    flag,
                    format!(
                        "{v} ms holds fewer than {MIN_PROBES_PER_PHASE} probes at --spacing {} \
                         ms; give at least {least} ms or a smaller --spacing",
                        self.spacing_ms
                    ),
                ));
            }
            if v > MAX_PHASE_MS {
                return Err(config(flag, "must be at most 3600 s"));
            }
        }
        if self.drain_ms > MAX_PHASE_MS {
            return Err(config("drain", "must be at most 3600 s"));
        }
        if self.interval_ms > self.during_ms {
            return Err(config(
                "interval",
                "must not be longer than --during (the load would have no full interval)",
            ));
        }
        let probes = self.probe_span_ms() / self.spacing_ms;
        if probes > rr::MAX_SCHEDULE {
            return Err(config(
                "spacing",
                format!(
                    "{probes} probes exceed {}; raise --spacing or shorten the phases",
                    rr::MAX_SCHEDULE
                ),
            ));
        }
        Ok(())
    }

    /// How long the probes run, ms.
    pub fn probe_span_ms(&self) -> u64 {
        self.before_ms + self.during_ms + self.after_ms + self.drain_ms
    }

    /// The rr test that carries the probes: open loop at one probe per `spacing_ms` for the
    /// whole span, TCP_NODELAY and nothing else.
    pub fn probe_config(&self) -> RrConfig {
        RrConfig {
            req: self.req,
            resp: self.resp,
            depth: 1,
            rate: Some(1000.0 / self.spacing_ms as f64),
            poisson: false,
            seed: None,
            count: None,
            duration_ms: Some(self.probe_span_ms()),
            sizes: Vec::new(),
            opts: SockOpts {
                nodelay: true,
                ..SockOpts::default()
            },
            timeout_ms: self.timeout_ms,
            ..RrConfig::default()
        }
    }

    /// The stream test that carries the load.
    pub fn bulk_config(&self) -> StreamConfig {
        StreamConfig {
            flows: self.flows,
            direction: self.direction.stream(),
            duration_ms: Some(self.during_ms),
            bytes: None,
            omit_ms: 0,
            interval_ms: self.interval_ms,
            opts: self.opts.clone(),
            timeout_ms: self.timeout_ms,
            ..StreamConfig::default()
        }
    }
}

/// The headline figures of an rrul run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RrulSummary {
    /// How much the load inflated the probes' latency.
    pub inflation: Inflation,
    /// Bulk payload received, all directions, bit/s.
    pub throughput_bps: Option<f64>,
    /// Client to server, bit/s (up, both).
    pub up_bps: Option<f64>,
    /// Server to client, bit/s (down, both).
    pub down_bps: Option<f64>,
}

/// An rrul result.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RrulResult {
    /// Common record (options: the bulk flows'; CPU: probes and load together).
    #[serde(flatten)]
    pub meta: RunMeta,
    /// What was asked.
    pub config: RrulConfig,
    /// Headline figures.
    pub summary: RrulSummary,
    /// When the load really ran, CLOCK_MONOTONIC ns.
    pub load: LoadSpan,
    /// `before`, `during`, `after`, in that order.
    pub phases: Vec<Phase>,
    /// Probes due outside every phase (set-up before `before`, the tail after `after`).
    pub outside_transactions: u64,
    /// The load: the stream test's own result (intervals with tcp_info; facts `{}`).
    pub bulk: StreamResult,
    /// The probes: the rr test's own result over the whole span (facts `{}`; raw samples only
    /// in `--samples`).
    pub probes: RrResult,
}

impl RrulResult {
    /// The phase called `name`.
    pub fn phase(&self, name: PhaseName) -> Option<&Phase> {
        self.phases.iter().find(|p| p.name == name)
    }

    /// The probes' raw samples (empty after a JSON round trip).
    pub fn samples(&self) -> &[RrSample] {
        self.probes.points.first().map_or(&[], |p| &p.samples)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(cfg: RrulConfig, flag: &str) {
        let e = cfg.validate().expect_err("must fail").to_string();
        assert!(e.starts_with(&format!("invalid --{flag}:")), "{e}");
    }
    #[test]
    fn defaults_are_valid_and_compose_an_open_loop_rr_and_a_stream() {
        let cfg = RrulConfig::default();
        cfg.validate().expect("defaults");
        let p = cfg.probe_config();
        assert_eq!(p.rate, Some(100.0));
        assert_eq!(
            p.duration_ms,
            Some(2_000 + 6_000 + 2_000 + DEFAULT_DRAIN_MS)
        );
        assert!(p.opts.nodelay, "probes always TCP_NODELAY");
        assert_eq!((p.req, p.resp, p.depth), (64, 64, 1));
        let b = cfg.bulk_config();
        assert_eq!(b.direction, Direction::Bidir);
        assert_eq!(b.duration_ms, Some(6_000));
        assert_eq!(b.omit_ms, 0);
        let up = RrulConfig {
            direction: LoadDirection::Up,
            opts: SockOpts {
                congestion: Some("reno".into()),
                ..SockOpts::default()
            },
            ..RrulConfig::default()
        };
        assert_eq!(up.bulk_config().direction, Direction::Up);
        assert_eq!(up.bulk_config().opts.congestion.as_deref(), Some("reno"));
        assert_eq!(
            up.probe_config().opts.congestion,
            None,
            "bulk options stay on the bulk"
        );
    }
    #[test]
    fn bad_inputs_name_their_flag() {
        let d = RrulConfig::default;
        check(RrulConfig { flows: 0, ..d() }, "flows");
        check(
            RrulConfig {
                flows: 1_000,
                ..d()
            },
            "flows",
        );
        check(
            RrulConfig {
                spacing_ms: 0,
                ..d()
            },
            "spacing",
        );
        check(RrulConfig { req: 0, ..d() }, "req");
        check(
            RrulConfig {
                resp: MAX_PROBE_SIZE + 1,
                ..d()
            },
            "resp",
        );
        // 1400+1400 bytes every 10 ms = 2.24 Mbit/s of probes.
        check(
            RrulConfig {
                req: 1_400,
                resp: 1_400,
                ..d()
            },
            "spacing",
        );
        check(
            RrulConfig {
                before_ms: 50,
                ..d()
            },
            "before",
        );
        check(
            RrulConfig {
                during_ms: 0,
                ..d()
            },
            "during",
        );
        check(
            RrulConfig {
                after_ms: 99,
                ..d()
            },
            "after",
        );
        check(
            RrulConfig {
                after_ms: MAX_PHASE_MS + 1,
                ..d()
            },
            "after",
        );
        check(
            RrulConfig {
                interval_ms: 7_000,
                ..d()
            },
            "interval",
        );
        check(
            RrulConfig {
                interval_ms: 1,
                ..d()
            },
            "interval",
        );
        check(
            RrulConfig {
                timeout_ms: 0,
                ..d()
            },
            "timeout",
        );
        check(
            RrulConfig {
                drain_ms: MAX_PHASE_MS + 1,
                ..d()
            },
            "drain",
        );
        check(
            RrulConfig {
                opts: SockOpts {
                    congestion: Some("no such cc!".into()),
                    ..SockOpts::default()
                },
                ..d()
            },
            "cc",
        );
        // Exactly ten probes per phase is enough.
        RrulConfig {
            before_ms: 100,
            during_ms: 100,
            after_ms: 100,
            interval_ms: 100,
            ..d()
        }
        .validate()
        .expect("10 probes per phase");
    }
}
