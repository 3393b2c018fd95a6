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

/// The probes' phases, split by the load's measured edges (pure, `tcplab_results::rrul::phase`).
pub use tcplab_results::rrul::phase;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tcplab_results::facts::Facts;

use crate::clock::{now_ns, sleep_until_ns};
use crate::error::{LoadError, Result};
use crate::rr::{self, RrInterval, RrResult};
use crate::session::RunMeta;
use crate::stream::{self, IntervalReport, StreamConfig, StreamResult};
pub use tcplab_results::rrul::*;

/// Interval of the probes' live counter, used only to learn when they started, ms.
const PROBE_TICK_MS: u64 = 50;
/// The open loop schedules its first probe this long after it starts (rr's `open_loop`).
const OPEN_LOOP_LEAD_NS: u64 = 1_000_000;

/// Runs rrul against `target` (a `tcplab serve`, or the server of `tcplab_front::lab::run_on`).
pub fn run_client(
    cfg: &RrulConfig,
    target: SocketAddr,
    facts: Option<Facts>,
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
    // The probes open their session on a thread of their own: with this thread's credentials
    // (an agent's Run ask scopes its own key to the thread that runs the test).
    let auth = tcplab_auth::ClientAuth::current()?;
    std::thread::scope(|s| {
        let prober = s.spawn(|| {
            let on: &(dyn Fn(&RrInterval) + Sync) = &on_tick;
            auth.scoped(|| rr::run_client_live(&probe_cfg, target, None, PROBE_TICK_MS, Some(on)))
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
    let result = stream::run_client(cfg, target, None, Some(&on_interval));
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
    facts: Option<Facts>,
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
    let mut meta = crate::session::new_meta(target, facts);
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
    // The probes' test ran inside the load's on the same server: the load's view covers both
    // (adding the two would count the namespace's counters twice).
    meta.server_view = bulk.server_view.clone();
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
