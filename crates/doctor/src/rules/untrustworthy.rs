//! `untrustworthy`: reasons not to believe the other findings.
//! - `untrustworthy.emulator`: the emulator fell behind its schedule (crates/emu-io fidelity).
//! - `untrustworthy.cpu`: a side's data threads, or the whole machine, were CPU-saturated, so
//!   the figures measure the CPU, not TCP.
//! - `untrustworthy.cpu_wait`: rr's threads spent a noticeable share of each transaction
//!   runnable but off the CPU, so its latency is partly the host's scheduler.
//! - `untrustworthy.samples`: runs cut short, too few samples, or no per-message stamps.

use crate::battery::Context;
use crate::finding::{Finding, Fix, Severity};
use crate::plan::PartKind;

/// A side's data threads busy this share of (wall time × threads) are CPU-bound: above it a
/// thread rarely waits for the network, so TCP is not what limits it. The same limit the
/// emulator uses for its own workers (emu-io `Thresholds::max_cpu_ratio`).
pub const CPU_SATURATED: f64 = 0.9;

/// A paced msgs run is judged for CPU only when its messages are at least this far apart, µs:
/// the pacer sleeps to about 100 µs before each write and spins the rest, so closer messages
/// keep its thread busy by design, whatever the path does.
pub const PACED_IDLE_GAP_US: u64 = 1_000;

pub use crate::limits::{
    MIN_MESSAGES, MIN_STREAM_INTERVALS, MIN_SWEEP_MESSAGES, MIN_TRANSACTIONS, MIN_TRAP_MESSAGES,
};

/// rr's CPU wait per transaction (client and server threads together) at or above this share
/// of its median latency is flagged: a transaction then waits for a CPU long enough to move
/// the figures that other rules and users read as the network's.
pub const CPU_WAIT_SHARE: f64 = 0.05;

/// ... and only when it is at least this long per transaction, µs (below it the wait is
/// smaller than the run-to-run spread of a loopback round trip).
pub const CPU_WAIT_MIN_US: f64 = 20.0;

/// A wait of this share of the median latency or more makes the finding a warning: the
/// latency figures are then off by a quarter or more, enough to change what a user concludes.
/// Below it the finding is info: worth knowing beside the figures, not a problem to act on.
pub const CPU_WAIT_WARNING_SHARE: f64 = 0.25;

/// The rule.
pub fn check(ctx: &Context<'_>) -> Vec<Finding> {
    [emulator(ctx), cpu(ctx), cpu_wait(ctx), samples(ctx)]
        .into_iter()
        .flatten()
        .collect()
}

fn emulator(ctx: &Context<'_>) -> Option<Finding> {
    let fid = ctx.battery.fidelity.as_ref().filter(|f| !f.trustworthy)?;
    let mut f = Finding::new(
        "untrustworthy.emulator",
        Severity::Critical,
        "the link emulator fell behind its schedule: the path was not the one configured",
    );
    f.push(
        "emulator_reasons",
        fid.reasons.len() as f64,
        "reasons",
        fid.reasons.join("; "),
    );
    f.explanation = format!(
        "The emulator released packets late, dropped them itself or ran out of CPU ({}), so delays, rates and losses differed from the configuration and every other finding may be an artefact. Re-run with a lower rate, fewer flows, or the emulator on its own core.",
        fid.reasons.join("; ")
    );
    f.rests_on = fid.late_parts.clone();
    f.fixes.push(Fix::other("re-run at a lower rate or with fewer flows, or give the emulator a CPU of its own (fewer parallel jobs)", "the lab"));
    Some(f)
}

/// Per result: (name, CPU seconds of the client's data threads, of the server's, wall seconds,
/// data threads per side).
fn cpu_loads(ctx: &Context<'_>) -> Vec<(&'static str, f64, f64, f64, f64)> {
    let b = ctx.battery;
    let mut v = Vec::new();
    if let Some(r) = &b.stream {
        v.push((
            "stream",
            r.meta.client_cpu_s,
            r.meta.server_cpu_s,
            r.elapsed_s,
            f64::from(r.config.flows.max(1)),
        ));
    }
    // Unpaced msgs and crr are closed loops that run as fast as the CPU allows: a busy client is
    // what they measure (per-message and per-connection cost), not a flaw of the measurement.
    for (name, r) in [("msgs", &b.msgs), ("msgs sweep", &b.msgs_sweep)] {
        if let Some(r) = r.as_ref().filter(|r| r.config.gap_us >= PACED_IDLE_GAP_US) {
            let wall: f64 = r.runs.iter().map(|x| x.total_s).sum();
            v.push((name, r.meta.client_cpu_s, r.meta.server_cpu_s, wall, 1.0));
        }
    }
    if let Some(r) = &b.rr {
        let wall: f64 = r.points.iter().map(|p| p.elapsed_s).sum();
        v.push(("rr", r.meta.client_cpu_s, r.meta.server_cpu_s, wall, 1.0));
    }
    v
}

fn cpu(ctx: &Context<'_>) -> Option<Finding> {
    let cores = ctx.facts.as_ref().map_or(1, |f| f.cpu.count.max(1)) as f64;
    let mut worst: Option<(&str, &str, f64)> = None;
    for (name, client, server, wall, threads) in cpu_loads(ctx) {
        if wall <= 0.0 {
            continue;
        }
        let usable = threads.min(cores);
        for (side, cpu) in [("client", client), ("server", server)] {
            let ratio = cpu / (wall * usable);
            if ratio >= CPU_SATURATED && worst.is_none_or(|w| ratio > w.2) {
                worst = Some((name, side, ratio));
            }
        }
        let machine = (client + server) / (wall * cores);
        if machine >= CPU_SATURATED && worst.is_none_or(|w| machine > w.2) {
            worst = Some((name, "machine", machine));
        }
    }
    let (name, side, ratio) = worst?;
    let mut f = Finding::new(
        "untrustworthy.cpu",
        Severity::Warning,
        format!(
            "{name}: the {side} was CPU-saturated ({:.0}% busy)",
            ratio * 100.0
        ),
    );
    f.push(
        "cpu_busy_fraction",
        ratio,
        "fraction",
        format!("{side} data-thread CPU time / (wall time x threads), {cores:.0} CPUs"),
    );
    f.explanation = "The measuring threads (or the machine) were busy nearly all the time, so the figures show the CPU's limit rather than TCP's; findings about throughput and latency from this run may not hold on a path with spare CPU.".into();
    f.fixes.push(Fix::other(
        "re-run with fewer flows or connections than CPUs, larger writes, or on a quieter machine",
        "the measurement",
    ));
    Some(f)
}

fn cpu_wait(ctx: &Context<'_>) -> Option<Finding> {
    let r = ctx.battery.rr.as_ref()?;
    let n = r.summary.transactions;
    let p50 = r.summary.latency_us.p50?;
    if n == 0 || p50 <= 0.0 {
        return None;
    }
    let per = |s: Option<f64>| s.map(|s| s * 1e6 / n as f64);
    let (client, server) = (per(r.meta.client_cpu_wait_s), per(r.meta.server_cpu_wait_s));
    let wait = client.unwrap_or(0.0) + server.unwrap_or(0.0);
    if wait < CPU_WAIT_MIN_US || wait < CPU_WAIT_SHARE * p50 {
        return None;
    }
    let side = |v: Option<f64>| v.map_or("not counted".to_string(), |v| format!("{v:.1} µs"));
    let severity = if wait >= CPU_WAIT_WARNING_SHARE * p50 {
        Severity::Warning
    } else {
        Severity::Info
    };
    let mut f = Finding::new(
        "untrustworthy.cpu_wait",
        severity,
        format!(
            "rr: its threads waited {wait:.0} µs per transaction for a CPU ({:.0}% of the median latency)",
            100.0 * wait / p50
        ),
    );
    f.push(
        "cpu_wait_us_per_transaction",
        wait,
        "µs",
        format!(
            "client {}, server {} (schedstat run delay / {n} transactions)",
            side(client),
            side(server)
        ),
    );
    f.push("latency_p50_us", p50, "µs", "rr median latency");
    f.rests_on = vec![PartKind::Rr];
    f.explanation = format!(
        "The rr threads were runnable but off the CPU for {wait:.0} µs per transaction on average (client {}, server {}), against a median latency of {p50:.0} µs. That time is the host's scheduler (other tasks, or the emulator's real-time workers, held the CPUs), not the network, so the latency figures overstate the path by up to that much.",
        side(client),
        side(server)
    );
    f.fixes.push(Fix::other(
        "re-run with fewer competing tasks than CPUs, or raise the measuring threads' priority (e.g. chrt -f 20 tcplab rr ...) to take the scheduler out of the figure",
        "the measurement",
    ));
    Some(f)
}

/// Whether the latency-under-load run has probes before and during the load, all the rules
/// read of it: an empty after phase (a lossy path's load that drained late) leaves them whole.
fn rrul_read_whole(b: &crate::battery::Battery) -> bool {
    b.rrul.as_ref().is_some_and(|r| {
        r.phases
            .iter()
            .filter(|p| p.name != tcplab_results::rrul::PhaseName::After)
            .all(|p| p.transactions > 0)
            && r.phases.len() == 3
    })
}

fn samples(ctx: &Context<'_>) -> Option<Finding> {
    let b = ctx.battery;
    let mut notes: Vec<String> = b
        .metas()
        .into_iter()
        .filter(|(_, m)| !m.complete)
        .map(|(n, m)| {
            format!(
                "{n} cut short: {}",
                m.incomplete_reason.as_deref().unwrap_or("no reason given")
            )
        })
        .collect();
    for (name, r, plain) in [
        ("msgs", &b.msgs, MIN_MESSAGES),
        ("msgs sweep", &b.msgs_sweep, MIN_SWEEP_MESSAGES),
    ] {
        // A write-write-read run waits a round trip per message by design: fewer messages say
        // as much (each either stalls on the timer or does not). The sweep looks for the size
        // at which stalls start, not for tails: the plan sizes it for that, and so is it judged.
        let min = |r: &tcplab_results::msgs::MsgsResult| match r.config.pattern {
            tcplab_results::msgs::Pattern::WriteWriteRead => MIN_TRAP_MESSAGES,
            tcplab_results::msgs::Pattern::Write => plain,
        };
        for (run, min) in r
            .iter()
            .flat_map(|r| r.runs.iter().map(move |run| (run, min(r))))
        {
            if run.received < min {
                notes.push(format!(
                    "{name} size {}: {} messages (< {min})",
                    run.size, run.received
                ));
            }
            if run.send_ns.is_empty() || run.recv_ns.is_empty() {
                notes.push(format!(
                    "{name} size {}: no per-message stamps; stall rules skipped",
                    run.size
                ));
            }
        }
    }
    if let Some(why) = b.ends.as_ref().and_then(|e| e.unanswered.as_ref()) {
        notes.push(format!("{why}; its host's sysctls are unknown"));
    }
    if let Some(s) = &b.stream {
        let measured = s
            .intervals
            .iter()
            .filter(|i| !i.omitted)
            .map(|i| i.index)
            .collect::<std::collections::BTreeSet<_>>()
            .len();
        if measured < MIN_STREAM_INTERVALS {
            notes.push(format!(
                "stream: {measured} measured intervals (< {MIN_STREAM_INTERVALS})"
            ));
        }
    }
    if let Some(r) =
        b.rr.as_ref()
            .filter(|r| r.summary.transactions < MIN_TRANSACTIONS)
    {
        notes.push(format!(
            "rr: {} transactions (< {MIN_TRANSACTIONS})",
            r.summary.transactions
        ));
    }
    if let Some(r) = b
        .crr
        .as_ref()
        .filter(|r| r.summary.transactions < MIN_TRANSACTIONS)
    {
        notes.push(format!(
            "crr: {} connections (< {MIN_TRANSACTIONS})",
            r.summary.transactions
        ));
    }
    if notes.is_empty() {
        return None;
    }
    // A run cut short means something failed on the path or a host: worth a warning. Few
    // samples alone (a long RTT in a short budget) only limit what the other rules could
    // judge, and they stayed silent where they could not.
    let read_whole = |n: &str| n == "rrul" && rrul_read_whole(b);
    let cut_short = b.metas().iter().any(|(n, m)| !m.complete && !read_whole(n));
    let mut f = Finding::new(
        "untrustworthy.samples",
        if cut_short {
            Severity::Warning
        } else {
            Severity::Info
        },
        format!(
            "{} part(s) of the battery have too little data to judge",
            notes.len()
        ),
    );
    f.push("problems", notes.len() as f64, "count", notes.join("; "));
    f.explanation = format!(
        "Some results are too small or incomplete for their figures to be reliable, and rules that need them stayed silent: {}.",
        notes.join("; ")
    );
    f.fixes.push(Fix::other("re-run with a longer duration or more messages/transactions, and with per-message timestamps on", "the measurement"));
    Some(f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::battery::{Battery, EmulatorFidelity};
    use crate::synth::{self, MsgSim, StreamSim};

    fn healthy() -> Battery {
        Battery {
            stream: Some(StreamSim::healthy(900e6, 1_000).run()),
            msgs: Some(synth::msgs(vec![MsgSim::new(5_000, 1).run(|_| 0)], false)),
            crr: Some(synth::crr(1_000, 500.0, |_| 90_000)),
            facts: Some(synth::facts(250)),
            fidelity: Some(EmulatorFidelity {
                trustworthy: true,
                reasons: Vec::new(),
                late_parts: Vec::new(),
            }),
            ..Battery::default()
        }
    }

    #[test]
    fn silent_on_a_healthy_battery() {
        assert!(check(&Context::new(&healthy())).is_empty());
    }

    #[test]
    fn emulator_behind_schedule_is_critical() {
        let mut b = healthy();
        b.fidelity = Some(EmulatorFidelity {
            trustworthy: false,
            reasons: vec!["a->b: lateness p99 450 µs above 100 µs (max 2100 µs)".into()],
            late_parts: Vec::new(),
        });
        let f = check(&Context::new(&b));
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].id, "untrustworthy.emulator");
        assert_eq!(f[0].severity, Severity::Critical);
        assert!(f[0].evidence[0].context.contains("lateness p99 450"));
    }

    #[test]
    fn cpu_saturated_sender() {
        let mut b = healthy();
        if let Some(s) = b.stream.as_mut() {
            s.meta.client_cpu_s = s.elapsed_s * 0.97;
        }
        let f = check(&Context::new(&b));
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].id, "untrustworthy.cpu");
        assert!((f[0].figure("cpu_busy_fraction").unwrap() - 0.97).abs() < 1e-12);
    }

    /// An rr of 500 transactions at a 20 ms median whose threads waited `client_s`/`server_s`.
    fn rr_waiting(client_s: Option<f64>, server_s: Option<f64>) -> Battery {
        let mut b = healthy();
        let mut r = synth::rr(64, &[20_000_000; 500], true);
        r.summary.latency_us.p50 = Some(20_000.0);
        r.meta.client_cpu_wait_s = client_s;
        r.meta.server_cpu_wait_s = server_s;
        b.rr = Some(r);
        b
    }

    #[test]
    fn rr_threads_waiting_for_a_cpu_are_flagged_with_each_side() {
        // 0.04 s + 0.46 s over 500 transactions: 80 + 920 = 1000 µs each, 5% of 20 ms.
        let f = check(&Context::new(&rr_waiting(Some(0.04), Some(0.46))));
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].id, "untrustworthy.cpu_wait");
        let wait = f[0].figure("cpu_wait_us_per_transaction").unwrap();
        assert!((wait - 1000.0).abs() < 1e-9, "{wait}");
        assert_eq!(f[0].figure("latency_p50_us"), Some(20_000.0));
        assert!(
            f[0].evidence[0]
                .context
                .contains("client 80.0 µs, server 920.0 µs")
        );
    }

    #[test]
    fn rr_cpu_wait_below_either_threshold_or_not_counted_is_silent() {
        // 999 µs per transaction: just under 5% of the median.
        assert!(check(&Context::new(&rr_waiting(Some(0.0), Some(0.4995)))).is_empty());
        // A wait that is 5% of a 200 µs median but only 10 µs long.
        let mut b = rr_waiting(Some(0.0025), Some(0.0025));
        if let Some(r) = b.rr.as_mut() {
            r.summary.latency_us.p50 = Some(200.0);
        }
        assert!(check(&Context::new(&b)).is_empty());
        // A kernel without schedstat: nothing to judge.
        assert!(check(&Context::new(&rr_waiting(None, None))).is_empty());
        // One side counted is judged on that side alone.
        let f = check(&Context::new(&rr_waiting(None, Some(1.0))));
        assert_eq!(f.len(), 1);
        assert!(f[0].evidence[0].context.contains("client not counted"));
    }

    #[test]
    fn too_few_samples_and_cut_short() {
        let mut b = healthy();
        b.msgs = Some(synth::msgs(vec![MsgSim::new(100, 1).run(|_| 0)], false));
        if let Some(c) = b.crr.as_mut() {
            c.meta.complete = false;
            c.meta.incomplete_reason = Some("server went away".into());
        }
        let f = check(&Context::new(&b));
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].id, "untrustworthy.samples");
        assert_eq!(f[0].figure("problems"), Some(2.0));
        assert!(f[0].explanation.contains("server went away"));
        assert!(f[0].explanation.contains("100 messages"));
    }

    /// A latency-under-load run cut short, with `before`, `during`, `after` probes per phase.
    fn rrul_cut(probes: [u64; 3]) -> Battery {
        use tcplab_results::rrul::{Phase, PhaseName, RrulResult};
        let mut r = RrulResult::default();
        r.meta.complete = false;
        r.meta.incomplete_reason = Some("no probe was answered in the after phase".into());
        r.phases = [PhaseName::Before, PhaseName::During, PhaseName::After]
            .into_iter()
            .zip(probes)
            .map(|(name, transactions)| Phase {
                name,
                transactions,
                ..Phase::default()
            })
            .collect();
        let mut b = healthy();
        b.rrul = Some(r);
        b
    }

    #[test]
    fn an_empty_after_phase_is_info_and_an_empty_load_phase_a_warning() {
        let f = check(&Context::new(&rrul_cut([100, 500, 0])));
        assert_eq!(f[0].id, "untrustworthy.samples");
        assert_eq!(f[0].severity, Severity::Info);
        let f = check(&Context::new(&rrul_cut([100, 0, 0])));
        assert_eq!(f[0].severity, Severity::Warning);
    }
}
