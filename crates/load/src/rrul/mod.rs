//! rrul — latency under load (flent's RRUL idea): bulk flows up, down or both while small
//! request/response probes run beside them; the probes' latency before, during and after the
//! load shows how much the path's queues inflate it (bufferbloat).
//!
//! It is a composition of two existing tests over the existing control protocol, so it runs
//! against any `tcplab serve`:
//! - one **rr** test (its own control connection) carries the probes over the whole span:
//!   `--before` + `--during` + `--after` + `--drain` (room for the queue the load leaves);
//! - one **stream** test carries the load; it starts `--before` after the probes did.
//!
//! The probes are **open loop on a fixed schedule** (rr's `--rate`), one every `--spacing`,
//! with latency taken from each probe's *intended* send time. A closed loop with a pause would
//! send fewer probes exactly when latency is high (a 600 ms queue turns 100 probes/s into 1.5),
//! so the loaded phase would be under-sampled and each probe's wait for its predecessor would
//! go unmeasured — coordinated omission. On a schedule the number of probes per phase depends
//! only on the phase's length, and a probe that queues behind an earlier one is charged the
//! wait. The schedule is fixed rather than Poisson so every run's phases hold the same number
//! of probes. Probes are small (64/64 bytes) and TCP_NODELAY, and [`RrulConfig::validate`]
//! keeps their payload under [`MAX_PROBE_BPS`], so they do not load the path they measure.
//! They share one TCP connection, as an application's requests would: a probe dropped by a
//! full drop-tail queue holds the ones behind it until TCP repairs the loss, which shows in
//! the loaded tail (on a reno-filled 1000-packet queue, p99 near 1.6 s beside 0.6 s of queue).
//! `--rt-priority` raises every thread of the run, the bulk flows' too.
//!
//! The phases are split by CLOCK_MONOTONIC stamps against the *measured* edges of the load
//! ([`phase::LoadSpan`]): it started when the stream's flows did (learned from the stream's
//! interval callback) and ended when the stream test was over (every byte delivered, the
//! server's report in), so the queue's drain after the senders stop counts as load. The
//! splitting itself is pure ([`phase`]); the human form is in `text.rs`.

pub mod phase;
mod text;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::clock::{now_ns, sleep_until_ns};
use crate::error::{LoadError, Result};
use crate::rr::{self, RrConfig, RrInterval, RrResult, RrSample};
use crate::session::RunMeta;
use crate::sockopt::SockOpts;
use crate::stream::{self, Direction, IntervalReport, StreamConfig, StreamResult};
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
/// Interval of the probes' live counter, used only to learn when they started, ms.
const PROBE_TICK_MS: u64 = 50;
/// The open loop schedules its first probe this long after it starts (rr's `open_loop`).
const OPEN_LOOP_LEAD_NS: u64 = 1_000_000;

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
#[serde(default)]
pub struct RrulConfig {
    /// Direction of the load (`--dir`).
    pub direction: LoadDirection,
    /// Bulk flows per direction (`--flows`).
    pub flows: u32,
    /// Idle phase before the load, ms (`--before`).
    pub before_ms: u64,
    /// Load phase, ms: how long the bulk flows send (`--during`).
    pub during_ms: u64,
    /// Idle phase after the load, ms (`--after`).
    pub after_ms: u64,
    /// How long the probes run past `before + during + after`, ms (`--drain`): room for the
    /// load's set-up and for the queue it filled (send buffers and the bottleneck) to drain
    /// after its senders stop, since the `after` phase starts only then. The probes' schedule
    /// is fixed when they start, so a load that drains for longer shortens `after` (the run
    /// says so); probes due after `after` ends are counted, not used.
    pub drain_ms: u64,
    /// Probe request size, bytes (`--req`).
    pub req: u32,
    /// Probe response size, bytes (`--resp`).
    pub resp: u32,
    /// One probe every this many ms, on a fixed schedule (`--spacing`).
    pub spacing_ms: u64,
    /// Interval of the load's reports and tcp_info samples, ms (`--interval`).
    pub interval_ms: u64,
    /// Socket options of the bulk flows, both sides (the probes always run TCP_NODELAY alone).
    pub opts: SockOpts,
    /// Idle timeout of every wait, ms (`--timeout`).
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
    pub fn validate(&self) -> Result<()> {
        if self.flows == 0 || self.flows > stream::MAX_FLOWS {
            return Err(LoadError::config(
                "flows",
                format!("{} is outside 1..={}", self.flows, stream::MAX_FLOWS),
            ));
        }
        if !(1..=10_000).contains(&self.spacing_ms) {
            return Err(LoadError::config(
                "spacing",
                "must be within 1 ms..=10 s between probes",
            ));
        }
        for (flag, v) in [("req", self.req), ("resp", self.resp)] {
            if !(1..=MAX_PROBE_SIZE).contains(&v) {
                return Err(LoadError::config(
                    flag,
                    format!("{v} bytes is outside 1..={MAX_PROBE_SIZE} for a probe"),
                ));
            }
        }
        let probe_bps = u64::from(self.req + self.resp) * 8 * 1000 / self.spacing_ms;
        if probe_bps > MAX_PROBE_BPS {
            return Err(LoadError::config(
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
            return Err(LoadError::config("timeout", "must be above 0"));
        }
        self.bulk_config().validate()?;
        self.probe_config().validate()
    }

    /// Each phase within bounds and long enough for [`MIN_PROBES_PER_PHASE`] probes.
    fn validate_phases(&self) -> Result<()> {
        let least = MIN_PROBES_PER_PHASE * self.spacing_ms;
        for (flag, v) in [
            ("before", self.before_ms),
            ("during", self.during_ms),
            ("after", self.after_ms),
        ] {
            if v < least {
                return Err(LoadError::config(
                    flag,
                    format!(
                        "{v} ms holds fewer than {MIN_PROBES_PER_PHASE} probes at --spacing {} \
                         ms; give at least {least} ms or a smaller --spacing",
                        self.spacing_ms
                    ),
                ));
            }
            if v > MAX_PHASE_MS {
                return Err(LoadError::config(flag, "must be at most 3600 s"));
            }
        }
        if self.drain_ms > MAX_PHASE_MS {
            return Err(LoadError::config("drain", "must be at most 3600 s"));
        }
        if self.interval_ms > self.during_ms {
            return Err(LoadError::config(
                "interval",
                "must not be longer than --during (the load would have no full interval)",
            ));
        }
        let probes = self.probe_span_ms() / self.spacing_ms;
        if probes > rr::MAX_SCHEDULE {
            return Err(LoadError::config(
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

/// Runs rrul against `target` (a `tcplab serve`, or the server of [`crate::lab::run_on`]).
pub fn run_client(
    cfg: &RrulConfig,
    target: SocketAddr,
    facts: serde_json::Value,
) -> Result<RrulResult> {
    cfg.validate()?;
    crate::net::check_opts(&target, &cfg.opts)?;
    let (probes, bulk, load) = run_tests(cfg, target)?;
    Ok(assemble(cfg, target, facts, probes, bulk, load))
}

/// Runs the probes on a thread of their own and, `--before` after they started, the load on
/// this one; returns both results and when the load really ran. The probes run their whole
/// span even when the load fails, so this returns within the span plus the timeouts.
fn run_tests(cfg: &RrulConfig, target: SocketAddr) -> Result<(RrResult, StreamResult, LoadSpan)> {
    let (probe_cfg, bulk_cfg) = (cfg.probe_config(), cfg.bulk_config());
    let started = AtomicU64::new(0);
    let waiter = std::thread::current();
    let on_tick = |iv: &RrInterval| {
        if started.load(Ordering::Acquire) == 0 {
            let t0 = now_ns().saturating_sub(secs_to_ns(iv.end_s)).max(1);
            started.store(t0, Ordering::Release);
            waiter.unpark();
        }
    };
    std::thread::scope(|s| {
        let prober = s.spawn(|| {
            let on: &(dyn Fn(&RrInterval) + Sync) = &on_tick;
            rr::run_client_live(
                &probe_cfg,
                target,
                serde_json::json!({}),
                PROBE_TICK_MS,
                Some(on),
            )
        });
        let timeout = Duration::from_millis(cfg.timeout_ms);
        let load = wait_started(&started, &prober, timeout).map(|t0| {
            sleep_until_ns(t0 + OPEN_LOOP_LEAD_NS + cfg.before_ms * 1_000_000);
            run_load(&bulk_cfg, target)
        });
        let probes = prober
            .join()
            .unwrap_or_else(|_| Err(LoadError::Protocol("the probe thread panicked".into())))?;
        match load {
            None => Err(LoadError::Protocol(format!(
                "the probes did not start within --timeout ({} s); is the server overloaded?",
                cfg.timeout_ms as f64 / 1e3
            ))),
            Some(load) => load.map(|(bulk, span)| (probes, bulk, span)),
        }
    })
}

/// Waits (bounded by `timeout`) until the probes' first live tick says when they started;
/// None if they ended (failed) or never ticked.
fn wait_started<T>(
    started: &AtomicU64,
    prober: &std::thread::ScopedJoinHandle<'_, T>,
    timeout: Duration,
) -> Option<u64> {
    let deadline = now_ns() + timeout.as_nanos() as u64 + PROBE_TICK_MS * 1_000_000;
    // Each pass parks until woken or 10 ms pass; the count bounds spurious wake-ups too.
    for _ in 0..1_000_000 {
        let t0 = started.load(Ordering::Acquire);
        if t0 != 0 {
            return Some(t0);
        }
        let now = now_ns();
        if prober.is_finished() || now >= deadline {
            return None;
        }
        std::thread::park_timeout(Duration::from_nanos((deadline - now).min(10_000_000)));
    }
    None
}

/// Runs the stream test and measures when it really ran: the start is the flows' own start
/// (the earliest `now - end_s` over its interval callbacks, each an upper bound on it), the end
/// the instant the test returned (every receiver had read its end of file and, for the up
/// direction, the server had said so: the drain of the queue is inside).
fn run_load(cfg: &StreamConfig, target: SocketAddr) -> Result<(StreamResult, LoadSpan)> {
    let first = AtomicU64::new(u64::MAX);
    let on_interval = |iv: &IntervalReport| {
        let t0 = now_ns().saturating_sub(secs_to_ns(iv.end_s));
        first.fetch_min(t0, Ordering::AcqRel);
    };
    let called = now_ns();
    let result = stream::run_client(cfg, target, serde_json::json!({}), Some(&on_interval));
    let end_ns = now_ns();
    let start_ns = match first.load(Ordering::Acquire) {
        u64::MAX => called,
        t => t.clamp(called, end_ns),
    };
    result.map(|r| (r, LoadSpan { start_ns, end_ns }))
}

fn secs_to_ns(s: f64) -> u64 {
    (s.max(0.0) * 1e9).round() as u64
}

/// Splits the probes into phases and builds the result.
fn assemble(
    cfg: &RrulConfig,
    target: SocketAddr,
    facts: serde_json::Value,
    probes: RrResult,
    bulk: StreamResult,
    load: LoadSpan,
) -> RrulResult {
    let samples = probes.points.first().map_or(&[][..], |p| &p.samples);
    let span = phase::ProbeSpan::of(samples, cfg.spacing_ms * 1_000_000);
    let windows = phase::windows(
        load,
        span,
        cfg.before_ms * 1_000_000,
        cfg.after_ms * 1_000_000,
    );
    let ([before, during, after], outside) = phase::split(samples, windows);
    let inflation = phase::inflation(&before.latency_us, &during.latency_us, &after.latency_us);
    let mut meta = RunMeta::new(target, facts);
    merge_meta(&mut meta, &probes.meta, &bulk.meta);
    for p in [&before, &during, &after] {
        if p.transactions == 0 {
            meta.cut(format!(
                "no probe was answered in the {0} phase ({1:.3} s long); lengthen it \
                 (--{0}) or check the probes' own result",
                p.name.as_str(),
                p.duration_s()
            ));
        }
    }
    let summary = RrulSummary {
        inflation,
        throughput_bps: bulk.summary.throughput_bps,
        up_bps: bulk.summary.up_bps,
        down_bps: bulk.summary.down_bps,
    };
    RrulResult {
        meta,
        config: cfg.clone(),
        summary,
        load,
        phases: vec![before, during, after],
        outside_transactions: outside,
        bulk,
        probes,
    }
}

/// The run's record from its two tests: the bulk flows' options, both tests' CPU, and the
/// first reason either was cut short.
fn merge_meta(meta: &mut RunMeta, probes: &RunMeta, bulk: &RunMeta) {
    meta.options = bulk.options.clone();
    meta.server_options = bulk.server_options.clone();
    meta.client_cpu_s = probes.client_cpu_s + bulk.client_cpu_s;
    meta.server_cpu_s = probes.server_cpu_s + bulk.server_cpu_s;
    let both = |a: Option<f64>, b: Option<f64>| a.zip(b).map(|(a, b)| a + b);
    meta.client_cpu_wait_s = both(probes.client_cpu_wait_s, bulk.client_cpu_wait_s);
    meta.server_cpu_wait_s = both(probes.server_cpu_wait_s, bulk.server_cpu_wait_s);
    for (who, m) in [("probes", probes), ("load", bulk)] {
        if !m.complete {
            meta.cut(format!(
                "{who}: {}",
                m.incomplete_reason.as_deref().unwrap_or("cut short")
            ));
        }
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

    #[test]
    fn the_record_takes_the_bulk_options_and_the_first_cut() {
        let probes = RunMeta {
            complete: false,
            incomplete_reason: Some("waiting for response 7: timed out".into()),
            client_cpu_s: 0.25,
            client_cpu_wait_s: Some(0.5),
            server_cpu_wait_s: None,
            ..RunMeta::default()
        };
        let bulk = RunMeta {
            complete: false,
            incomplete_reason: Some("server: gone".into()),
            client_cpu_s: 1.5,
            client_cpu_wait_s: Some(0.25),
            server_cpu_wait_s: Some(1.0),
            options: Some(crate::sockopt::AppliedOpts {
                congestion: "reno".into(),
                ..Default::default()
            }),
            ..RunMeta::default()
        };
        let mut meta = RunMeta {
            complete: true,
            ..RunMeta::default()
        };
        merge_meta(&mut meta, &probes, &bulk);
        assert_eq!(meta.client_cpu_s, 1.75);
        assert_eq!(meta.client_cpu_wait_s, Some(0.75));
        assert_eq!(
            meta.server_cpu_wait_s, None,
            "a wait unknown in one stays unknown"
        );
        assert_eq!(meta.options.map(|o| o.congestion).as_deref(), Some("reno"));
        assert!(!meta.complete);
        assert_eq!(
            meta.incomplete_reason.as_deref(),
            Some("probes: waiting for response 7: timed out")
        );
    }
}
