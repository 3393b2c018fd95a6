//! `periodic_stall`: every Nth message delayed by k timer ticks (seed 004: "Linux 2.2.2 TCP
//! delays every 41st small packet by 10-20 ms").
//!
//! Per-message one-way delays of every msgs run, and their receive gaps, go through
//! `tcplab_stats::analyse_stalls` (robust threshold, stall events, grid fit of the event
//! indices with a binomial test, tick clustering at the measured HZ). One-way delays show
//! stalls of paced messages; receive gaps show stalls that hold up a back-to-back stream,
//! whose one-way delays are dominated by queueing. Only per-message series are used, never interval averages,
//! so a beat between a reporting interval and some period (what flent users see) cannot show
//! up as a pattern; random stalls fail the periodicity test. With a size sweep, the size
//! threshold K is the smallest size from which on no run is periodic while a smaller one was.
//!
//! Periodic is not enough to blame a timer: a flow limited by its send buffer or receive
//! window also stalls once per buffer, waiting a round trip for ACKs; messages packed into
//! segments arrive a segment at a time; and on a path whose delay is itself a whole number of
//! ticks any stall of one RTT sits on the tick grid. Before calling a timer the cause, the rule
//! checks each of these ([`other_explanation`]); a stall one of them explains is reported as
//! info with that explanation instead.

use tcplab_stats::{StallAnalysis, StallConfig, analyse_stalls};

use crate::battery::{Context, DEFAULT_TCP_RMEM, DEFAULT_TCP_WMEM, Role};
use crate::finding::{Finding, SampleRefs, Severity};
use crate::rules::fixes::delack_fixes;
use crate::series::{Series, message_gap_series, message_series};

/// A median stall of this much is an error: seed 004's 10-20 ms stalls were 1000 times the
/// 17 µs message spacing and stalled MPI codes outright.
pub const ERROR_DELAY_S: f64 = 0.010;

/// Fewest messages in a run to look for a period: with the stats crate's 4-event minimum a
/// period up to 50 needs 200 messages, and fewer leave the binomial test without power.
pub const MIN_MESSAGES: usize = crate::limits::MIN_SWEEP_MESSAGES as usize;

/// Shortest median stall, in timer ticks, that this rule attributes to a timer. Shorter periodic
/// gaps are ACK clocking of a window-limited flow (a window's worth of messages, then a wait for
/// ACKs), which the buffer rules diagnose; a timer stall lasts at least about one tick.
pub const MIN_TIMER_TICKS: f64 = 0.75;

/// A stall within this share of the path's RTT (or one-way delay) is a wait for ACKs or for
/// the path itself, not a timer: 15% covers the queueing and scheduling around one RTT.
pub const RTT_MATCH_SHARE: f64 = 0.15;

/// Bytes per period within this range of a buffer's size (as a share of it) recur once per
/// buffer: a full buffer's worth sent, then a wait. Wide because the usable payload of a
/// buffer is a fraction of its size (skb overhead, tcp_adv_win_scale) that varies by kernel.
pub const BUFFER_MATCH: (f64, f64) = (0.25, 1.25);

/// What the kernel charges the send buffer for a small write sent on its own besides its
/// payload: the socket buffer's bookkeeping (`skb->truesize`: struct sk_buff, its shared info,
/// the head room), about this many bytes on x86-64 Linux 6.x.
pub const SKB_OVERHEAD: f64 = 768.0;

/// Bytes per period that are a whole number of segments, up to this many, within
/// [`SEGMENT_MATCH_SHARE`]: messages packed into full segments arrive a segment at a time, and
/// the gap between two is the next segment's arrival (seed 004's 41 messages of 1 byte are no
/// such multiple).
pub const SEGMENT_PERIOD_MAX: u32 = 4;

/// How close to a whole number of segments the bytes of a period must be.
pub const SEGMENT_MATCH_SHARE: f64 = 0.02;

/// One analysed run.
struct Analysed<'s> {
    series: &'s Series,
    analysis: StallAnalysis,
}

/// The rule.
pub fn check(ctx: &Context<'_>) -> Vec<Finding> {
    let mut series = message_series(ctx.battery);
    series.extend(message_gap_series(ctx.battery));
    let config = StallConfig::new(Some(ctx.hz));
    let analysed: Vec<Analysed<'_>> = series
        .iter()
        .filter(|s| s.values.len() >= MIN_MESSAGES)
        .filter_map(|s| {
            analyse_stalls(&s.values, &config)
                .ok()
                .map(|analysis| Analysed {
                    series: s,
                    analysis,
                })
        })
        .collect();
    let timer_length = |a: &&Analysed<'_>| {
        let excesses: Vec<f64> = a.analysis.events.iter().map(|e| e.excess).collect();
        let delay = tcplab_stats::quantile(&excesses, 0.5).unwrap_or(0.0);
        tcplab_stats::in_ticks(delay, ctx.hz) >= MIN_TIMER_TICKS
    };
    let Some(hit) = analysed
        .iter()
        .filter(|a| a.analysis.periodic)
        .filter(timer_length)
        .min_by_key(|a| a.series.size)
    else {
        return Vec::new();
    };
    let mut f = finding(ctx, hit, &analysed);
    if let Some((cause, why)) = other_explanation(ctx, hit) {
        f.severity = Severity::Info;
        f.explained_by = match cause.as_str() {
            "once per send buffer" => Some("sndbuf_limited".into()),
            "once per receive window" => Some("rwnd_limited".into()),
            _ => None,
        };
        f.title = format!("{} — not a timer: {cause}", f.title);
        f.explanation = format!(
            "Message stalls recur on a fixed grid of message indices, but not because of a timer: {why} Fix what limits the flow instead (the other findings say what)."
        );
        f.fixes.clear();
    }
    vec![f]
}

/// What explains a periodic stall other than a timer, as (short cause, sentence); `None` when
/// only a timer does: the stall is clustered on whole ticks, is not one path delay or RTT long,
/// and its period is neither a buffer nor a few segments of bytes.
fn other_explanation(ctx: &Context<'_>, hit: &Analysed<'_>) -> Option<(String, String)> {
    let a = &hit.analysis;
    let period = a.period.as_ref()?.period;
    let bytes = period as f64 * f64::from(hit.series.size);
    let excesses: Vec<f64> = a.events.iter().map(|e| e.excess).collect();
    let stall = tcplab_stats::quantile(&excesses, 0.5).unwrap_or(0.0);
    let within = |v: f64, of: f64| of > 0.0 && v >= BUFFER_MATCH.0 * of && v <= BUFFER_MATCH.1 * of;
    let (wmem, _) = ctx.triple(Role::Client, "net.ipv4.tcp_wmem", DEFAULT_TCP_WMEM);
    let sndbuf = hit.series.sndbuf.map_or(wmem[2] as f64, f64::from);
    if within(bytes, sndbuf) {
        return Some((
            "once per send buffer".into(),
            format!(
                "each period carries {bytes:.0} bytes and the sender's send buffer holds {sndbuf:.0}: the sender fills its buffer, then waits a round trip for ACKs to free it."
            ),
        ));
    }
    // Small writes sent at once (Nagle off) each wait for their ACK in a buffer of their own,
    // and the send buffer is charged the buffer's memory, not the payload: a few dozen 1-byte
    // messages fill a small one. Autotuning grows the buffer with the window up to tcp_wmem's
    // maximum, so only a maximum that small can hold the sender back.
    let charged = period as f64 * (f64::from(hit.series.size) + SKB_OVERHEAD);
    let held = wmem[2] as f64;
    if within(charged, held) {
        return Some((
            "once per send buffer".into(),
            format!(
                "each period holds {period} messages of {} bytes, which take about {charged:.0} bytes of the sender's memory ({:.0} bytes each with its buffer), and its send buffer holds at most {held:.0}: the sender fills its buffer, then waits a round trip for ACKs to free it.",
                hit.series.size,
                f64::from(hit.series.size) + SKB_OVERHEAD
            ),
        ));
    }
    let (rmem, _) = ctx.triple(Role::Server, "net.ipv4.tcp_rmem", DEFAULT_TCP_RMEM);
    let rcvbuf = hit.series.rcvbuf.map_or(rmem[2] as f64, f64::from);
    if within(bytes, rcvbuf) {
        return Some((
            "once per receive window".into(),
            format!(
                "each period carries {bytes:.0} bytes and the receiver's buffer holds {rcvbuf:.0}: the sender fills the window, then waits for it to open."
            ),
        ));
    }
    let mss = ctx.sender_mss().unwrap_or(1448.0);
    let segments = (bytes / mss).round();
    if (1.0..=f64::from(SEGMENT_PERIOD_MAX)).contains(&segments)
        && (bytes - segments * mss).abs() <= SEGMENT_MATCH_SHARE * mss
    {
        return Some((
            "a segment at a time".into(),
            format!(
                "each period carries {bytes:.0} bytes, {segments:.0} full segment(s) of {mss:.0}: messages packed into segments arrive together, and the gap is the next segment's arrival."
            ),
        ));
    }
    let tick = ctx.tick_s();
    let on_grid = |v: f64| (v / tick - (v / tick).round()).abs() <= 0.25 && v >= 0.75 * tick;
    if let Some((rtt, _)) = ctx.rtt_s() {
        for (what, d) in [("round trip", rtt), ("one-way delay", rtt / 2.0)] {
            if (stall - d).abs() <= RTT_MATCH_SHARE * d {
                return Some((
                    format!("one {what}"),
                    format!(
                        "each stall lasts {:.1} ms, the path's {what} ({:.1} ms): the sender waits for ACKs, so the stall is the path's delay, whatever the tick grid says.",
                        stall * 1e3,
                        d * 1e3
                    ),
                ));
            }
            // A path delay that is itself a whole number of ticks puts any wait of a few
            // path delays on the tick grid: clustering is then no evidence of a timer.
            let k = (stall / d).round();
            if on_grid(d) && (1.0..=4.0).contains(&k) && (stall - k * d).abs() <= 0.25 * tick {
                return Some((
                    format!("{k:.0} x the {what}"),
                    format!(
                        "each stall lasts {:.1} ms, {k:.0} times the path's {what} ({:.1} ms), which is itself a whole number of {:.0} ms ticks: the stalls sit on the tick grid because the path's delay does.",
                        stall * 1e3,
                        d * 1e3,
                        tick * 1e3
                    ),
                ));
            }
        }
    }
    if !a.ticks.as_ref().is_some_and(|t| t.clustered) {
        return Some((
            "not on the tick grid".into(),
            format!(
                "the stalls ({:.1} ms) are not whole numbers of {} ms timer ticks, as a timer's would be.",
                stall * 1e3,
                1e3 / f64::from(ctx.hz)
            ),
        ));
    }
    None
}

/// Seed 004's K: the smallest size from which on no analysed run is periodic, when a smaller
/// one is; `None` when the largest size still stalls or only one size was run.
pub fn size_threshold(runs: &[(u32, bool)]) -> Option<u32> {
    let mut sorted = runs.to_vec();
    sorted.sort_by_key(|r| r.0);
    let last_periodic = sorted.iter().rposition(|r| r.1)?;
    sorted.get(last_periodic + 1).map(|r| r.0)
}

fn finding(ctx: &Context<'_>, hit: &Analysed<'_>, all: &[Analysed<'_>]) -> Finding {
    let a = &hit.analysis;
    let s = hit.series;
    let excesses: Vec<f64> = a.events.iter().map(|e| e.excess).collect();
    let delay = tcplab_stats::quantile(&excesses, 0.5).unwrap_or(0.0);
    let ticks = tcplab_stats::in_ticks(delay, ctx.hz);
    let period = a.period.as_ref().map_or(0, |p| p.period);
    let severity = if delay >= ERROR_DELAY_S {
        Severity::Error
    } else {
        Severity::Warning
    };
    let mut f = Finding::new(
        "periodic_stall",
        severity,
        format!(
            "every {} {}-byte message stalls by {:.1} ms ({ticks:.1} jiffies)",
            ordinal(period),
            s.size,
            delay * 1e3
        ),
    );
    f.push(
        "period_messages",
        period as f64,
        "messages",
        format!(
            "N: stall events recur every N messages ({}, {}s)",
            s.source, s.measure
        ),
    );
    if let Some(p) = &a.period {
        f.push(
            "phase",
            p.phase as f64,
            "messages",
            "index of the first grid point",
        );
        f.push(
            "on_grid_fraction",
            p.on_grid_fraction,
            "fraction",
            format!(
                "{} of {} stall events on the grid; chance {:.4}",
                p.on_grid,
                a.events.len(),
                p.chance_fraction
            ),
        );
        f.push(
            "grid_coverage",
            p.grid_coverage,
            "fraction",
            "share of grid points that stalled",
        );
        f.push(
            "period_p_value",
            p.p_value,
            "p",
            "binomial, Bonferroni-adjusted; periodic below 0.001",
        );
    }
    f.push(
        "stall_events",
        a.events.len() as f64,
        "events",
        format!(
            "{} messages in all above {:.3} ms",
            a.stalled_messages,
            a.threshold * 1e3
        ),
    );
    f.push(
        "stall_delay_ms",
        delay * 1e3,
        "ms",
        "median excess of a stall over the median delay",
    );
    f.push("stall_delay_ticks", ticks, "jiffies", ctx.hz_note());
    if let Some(t) = &a.ticks {
        f.push(
            "on_tick_fraction",
            t.on_tick_fraction,
            "fraction",
            format!(
                "stalls within ±¼ jiffy of a whole number of jiffies (clustered: {})",
                t.clustered
            ),
        );
    }
    f.push(
        "median_delay_ms",
        a.median * 1e3,
        "ms",
        format!("median {} of the run", s.measure),
    );
    f.push("message_size", f64::from(s.size), "bytes", "the run shown");
    push_threshold(ctx, &mut f, all);
    f.samples.push(SampleRefs::new(
        s.source.clone(),
        a.events.iter().map(|e| e.index),
    ));
    f.explanation = format!(
        "Message stalls recur on a fixed grid of message indices, each a whole number of timer \
         ticks long: a timer (delayed ACK, retransmission or probe) ends each stall, not the \
         network. Seed 004 saw this as every 41st message delayed 1-2 jiffies. Small writes \
         waiting for an ACK are the usual cause: turn Nagle off, make the receiver ACK at once, \
         or coalesce messages into writes{}.",
        threshold_clause(all)
    );
    f.fixes = delack_fixes(ctx, s.sender_nodelay, s.delack_max_supported);
    f
}

/// `41` → `41st`, `12` → `12th`.
fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// Per size, whether any of its series (one-way delays, receive gaps, msgs or sweep) was
/// periodic.
fn verdicts(all: &[Analysed<'_>]) -> Vec<(u32, bool)> {
    let mut by_size: std::collections::BTreeMap<u32, bool> = std::collections::BTreeMap::new();
    for a in all {
        *by_size.entry(a.series.size).or_default() |= a.analysis.periodic;
    }
    by_size.into_iter().collect()
}

fn threshold_clause(all: &[Analysed<'_>]) -> String {
    size_threshold(&verdicts(all)).map_or(String::new(), |k| {
        format!(" of at least {k} bytes (no larger size stalled)")
    })
}

fn push_threshold(ctx: &Context<'_>, f: &mut Finding, all: &[Analysed<'_>]) {
    let v = verdicts(all);
    let sizes = |want: bool| -> String {
        let s: Vec<String> = v
            .iter()
            .filter(|r| r.1 == want)
            .map(|r| r.0.to_string())
            .collect();
        if s.is_empty() {
            "none".into()
        } else {
            s.join(", ")
        }
    };
    if v.len() > 1 {
        f.push(
            "sizes_periodic",
            v.iter().filter(|r| r.1).count() as f64,
            "runs",
            format!(
                "periodic at sizes {}; clean at {}",
                sizes(true),
                sizes(false)
            ),
        );
    }
    if let Some(k) = size_threshold(&v) {
        f.push(
            "size_threshold_bytes",
            f64::from(k),
            "bytes",
            "K: smallest size from which on no run stalls periodically",
        );
    }
    let load_k = ctx
        .battery
        .msgs_sweep
        .as_ref()
        .and_then(|m| m.threshold_size);
    if let Some(k) = load_k {
        f.push(
            "load_threshold_bytes",
            f64::from(k),
            "bytes",
            "tcplab-load's stall-count threshold for the sweep",
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::battery::Battery;
    use crate::synth::{self, MsgSim, SplitMix, StreamSim};
    use tcplab_results::stamps::Stamps;

    const MS: u64 = 1_000_000;

    /// Seed 004 on a HZ=100 kernel: every 41st message (index 40, 81, ...) delayed 1 or 2
    /// jiffies; messages paced 1 ms apart queue behind the stalled one.
    fn seed004(count: usize, size: u32) -> tcplab_results::msgs::MsgsRun {
        let mut sim = MsgSim::new(count, size);
        sim.spacing_ns = MS;
        sim.run(|i| {
            if i % 41 == 40 {
                if (i / 41) % 2 == 0 { 10 * MS } else { 20 * MS }
            } else {
                0
            }
        })
    }

    fn battery() -> Battery {
        Battery {
            facts: Some(synth::facts(100)),
            ..Battery::default()
        }
    }

    #[test]
    fn finds_every_41st_message_and_its_jiffies() {
        let mut b = battery();
        b.msgs = Some(synth::msgs(vec![seed004(4100, 16)], false));
        let f = check(&Context::new(&b));
        assert_eq!(f.len(), 1);
        let f = &f[0];
        assert_eq!(f.id, "periodic_stall");
        assert_eq!(f.figure("period_messages"), Some(41.0));
        assert_eq!(f.figure("phase"), Some(40.0));
        assert_eq!(f.figure("stall_events"), Some(100.0));
        let ticks = f.figure("stall_delay_ticks").unwrap();
        assert!((1.0..=2.05).contains(&ticks), "ticks {ticks}");
        assert!(f.figure("on_grid_fraction").unwrap() > 0.99);
        assert_eq!(f.severity, Severity::Error, "delay >= 10 ms");
        assert_eq!(f.samples[0].indices[..3], [40, 81, 122]);
        assert_eq!(f.samples[0].total, 100);
        assert!(
            f.title.contains("every 41st 16-byte message"),
            "{}",
            f.title
        );
    }

    #[test]
    fn back_to_back_stream_is_found_in_the_receive_gaps() {
        // 1-byte messages 2 µs apart, 1 µs each at the receiver: the stream never drains after
        // a 1-jiffy stall, so one-way delays only ramp; the gaps show every 41st message.
        let mut sim = MsgSim::new(8_200, 1);
        sim.spacing_ns = 2_000;
        sim.stall_blocks_stream = true;
        let run = sim.run(|i| if i % 41 == 40 { 10 * MS } else { 0 });
        let ow = crate::series::one_way_delays(&run).unwrap();
        assert!(ow[8_199] > ow[4_000], "one-way delays ramp up");
        let mut b = battery();
        b.msgs = Some(synth::msgs(vec![run], false));
        let f = check(&Context::new(&b));
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].figure("period_messages"), Some(41.0));
        assert!((f[0].figure("stall_delay_ticks").unwrap() - 1.0).abs() < 0.01);
        assert!(
            f[0].evidence[0].context.contains("receive gap"),
            "{:?}",
            f[0].evidence[0]
        );
    }

    #[test]
    fn size_sweep_gives_the_threshold_k() {
        let mut b = battery();
        let clean = |size| {
            let mut sim = MsgSim::new(4100, size);
            sim.spacing_ns = MS;
            sim.run(|_| 0)
        };
        b.msgs_sweep = Some(synth::msgs(
            vec![seed004(4100, 16), seed004(4100, 64), clean(128), clean(256)],
            false,
        ));
        let f = check(&Context::new(&b));
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].figure("size_threshold_bytes"), Some(128.0));
        assert_eq!(f[0].figure("sizes_periodic"), Some(2.0));
        assert_eq!(f[0].figure("message_size"), Some(16.0));
        assert!(f[0].explanation.contains("at least 128 bytes"));
    }

    /// Every `period`-th message of `size` bytes stalls `stall_ns` (the stream behind it waits).
    fn every(period: usize, size: u32, stall_ns: u64) -> tcplab_results::msgs::MsgsRun {
        let mut sim = MsgSim::new(period * 100, size);
        sim.spacing_ns = 20_000;
        sim.stall_blocks_stream = true;
        sim.run(|i| {
            if i % period == period - 1 {
                stall_ns
            } else {
                0
            }
        })
    }

    fn with_path(rtt_ms: f64, wmem_max: u64) -> Battery {
        let mut b = battery();
        b.facts = Some(synth::facts(250));
        if let Some(f) = b.facts.as_mut() {
            for h in f.hosts.values_mut() {
                h.sysctls
                    .insert("net.ipv4.tcp_wmem".into(), format!("4096 16384 {wmem_max}"));
            }
        }
        b.path.configured_rtt_ms = Some(rtt_ms);
        b
    }

    #[test]
    fn a_stall_once_per_send_buffer_is_not_a_timer() {
        // The path: 64 KiB send buffers, 40 ms RTT; every 46th 1448-byte message
        // waits 20.5 ms, which is also five jiffies at HZ=250.
        let mut b = with_path(40.0, 65_536);
        b.msgs = Some(synth::msgs(vec![every(46, 1448, 20_500_000)], true));
        let f = check(&Context::new(&b));
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].severity, Severity::Info);
        assert!(
            f[0].title.contains("not a timer: once per send buffer"),
            "{}",
            f[0].title
        );
        assert!(
            f[0].explanation.contains("send buffer holds 65536"),
            "{}",
            f[0].explanation
        );
        assert!(f[0].fixes.is_empty(), "no timer fixes for a buffer stall");
        assert_eq!(f[0].explained_by.as_deref(), Some("sndbuf_limited"));
    }

    #[test]
    fn small_writes_fill_a_small_send_buffer_by_their_memory() {
        // 35 KiB send buffers on a 70 ms path: every 44th 1-byte message waits 57 ms (the
        // ACKs' round trip, less the time the 44 took), which is also on the tick grid. 44
        // bytes are no buffer, but 44 buffers of 769 bytes are.
        let mut b = with_path(70.0, 35_840);
        b.msgs = Some(synth::msgs(vec![every(44, 1, 56_000_000)], true));
        let f = check(&Context::new(&b));
        assert_eq!(f[0].severity, Severity::Info, "{}", f[0].title);
        assert!(
            f[0].title.contains("once per send buffer"),
            "{}",
            f[0].title
        );
        assert!(
            f[0].explanation.contains("769 bytes"),
            "{}",
            f[0].explanation
        );
        // With the default maximum (4 MiB) the same period is a timer's, as seed 004's 41.
        let mut b = with_path(1.0, 4_194_304);
        b.msgs = Some(synth::msgs(vec![every(44, 1, 8_000_000)], true));
        assert_eq!(check(&Context::new(&b))[0].severity, Severity::Warning);
    }

    #[test]
    fn a_stall_of_one_round_trip_is_not_a_timer() {
        // 8 ms stalls (two jiffies) on an 8 ms path, period far from any buffer.
        let mut b = with_path(8.0, 4_194_304);
        b.msgs = Some(synth::msgs(vec![every(41, 16, 8_000_000)], true));
        let f = check(&Context::new(&b));
        assert_eq!(f[0].severity, Severity::Info);
        assert!(f[0].title.contains("one round trip"), "{}", f[0].title);
    }

    #[test]
    fn a_path_delay_on_the_tick_grid_is_no_evidence() {
        // One-way 12 ms (3 jiffies), stalls of 24 ms (two one-way delays, 6 jiffies).
        let mut b = with_path(24.0, 4_194_304);
        b.msgs = Some(synth::msgs(vec![every(41, 16, 48_000_000)], true));
        let f = check(&Context::new(&b));
        assert_eq!(f[0].severity, Severity::Info);
        assert!(f[0].title.contains("2 x the round trip"), "{}", f[0].title);
    }

    #[test]
    fn stalls_off_the_tick_grid_are_not_a_timer_and_a_real_one_still_is() {
        let mut b = with_path(1.0, 4_194_304);
        b.msgs = Some(synth::msgs(vec![every(41, 16, 6_000_000)], true));
        let f = check(&Context::new(&b));
        assert_eq!(f[0].severity, Severity::Info);
        assert!(
            f[0].title.contains("not on the tick grid"),
            "{}",
            f[0].title
        );
        // Seed 004's 1-2 jiffies on a 1 ms path: a timer.
        let mut b = with_path(1.0, 4_194_304);
        b.msgs = Some(synth::msgs(vec![every(41, 16, 8_000_000)], true));
        let f = check(&Context::new(&b));
        assert_eq!(f[0].severity, Severity::Warning);
        assert!(!f[0].fixes.is_empty());
    }

    #[test]
    fn ordinals() {
        let got: Vec<String> = [1, 2, 3, 4, 11, 12, 13, 21, 41, 102].map(ordinal).into();
        assert_eq!(
            got,
            [
                "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "41st", "102nd"
            ]
        );
    }

    #[test]
    fn threshold_needs_a_clean_size_above_the_last_stalling_one() {
        assert_eq!(size_threshold(&[(16, true), (128, false)]), Some(128));
        assert_eq!(
            size_threshold(&[(128, false), (16, true), (64, true)]),
            Some(128)
        );
        assert_eq!(size_threshold(&[(16, true), (128, true)]), None);
        assert_eq!(size_threshold(&[(16, false), (128, false)]), None);
        assert_eq!(
            size_threshold(&[(16, true), (64, false), (128, true), (256, false)]),
            Some(256)
        );
    }

    #[test]
    fn silent_on_random_stalls_of_the_same_size_and_rate() {
        let mut rng = SplitMix::new(41);
        let stalls: Vec<u64> = (0..4100)
            .map(|_| {
                if rng.below(41) == 0 {
                    10 * MS + rng.below(2) * 10 * MS
                } else {
                    0
                }
            })
            .collect();
        assert!(stalls.iter().filter(|&&s| s > 0).count() > 60);
        let mut sim = MsgSim::new(4100, 16);
        sim.spacing_ns = MS;
        let mut b = battery();
        b.msgs = Some(synth::msgs(vec![sim.run(|i| stalls[i])], false));
        assert!(check(&Context::new(&b)).is_empty());
    }

    #[test]
    fn silent_on_interval_beats_and_on_healthy_messages() {
        // A stream whose interval averages beat (alternate high/low) and msgs without
        // per-message stamps: nothing per-message, so nothing periodic is claimed.
        let mut b = battery();
        let mut s = StreamSim::healthy(900e6, 1_000).run();
        for (k, i) in s.intervals.iter_mut().enumerate() {
            i.bps = Some(if k % 2 == 0 { 950e6 } else { 400e6 });
        }
        b.stream = Some(s);
        let mut run = seed004(4100, 16);
        run.send_ns = Stamps::default();
        run.recv_ns = Stamps::default();
        run.stalls = 100;
        run.stall_every = Some(41.0);
        b.msgs = Some(synth::msgs(vec![run], false));
        assert!(check(&Context::new(&b)).is_empty());
        let mut sim = MsgSim::new(4100, 16);
        sim.spacing_ns = MS;
        b.msgs = Some(synth::msgs(vec![sim.run(|_| 0)], false));
        assert!(check(&Context::new(&b)).is_empty());
    }
}
