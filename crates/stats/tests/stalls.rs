//! Periodic-stall detection on synthetic per-message delay traces (seed 004's pattern:
//! every Nth message delayed by one or two timer ticks), and the cases that must NOT be
//! called periodic.

mod common;

use common::{Gen, assert_close};
use tcplab_stats::{StallConfig, Threshold, analyse_stalls, cluster_fraction, in_ticks};

const HZ: u32 = 250;
const TICK: f64 = 1.0 / HZ as f64; // 4 ms

/// Base per-message delay: 60 µs ± 8 µs (|normal|), as on a loopback path.
fn base_trace(g: &mut Gen, n: usize) -> Vec<f64> {
    (0..n).map(|_| g.normal(60e-6, 8e-6).abs()).collect()
}

/// Every `period`-th message from `phase` is delayed by 1 or 2 ticks (random) plus
/// ±0.2 ms of noise.
fn add_periodic(g: &mut Gen, trace: &mut [f64], period: usize, phase: usize) {
    for i in (phase..trace.len()).step_by(period) {
        let ticks = if g.uniform() < 0.5 { 1.0 } else { 2.0 };
        trace[i] += ticks * TICK + g.normal(0.0, 0.2e-3);
    }
}

#[test]
fn every_41st_message_delayed_by_ticks_is_found() {
    let mut g = Gen::new(41);
    let mut trace = base_trace(&mut g, 41 * 200);
    add_periodic(&mut g, &mut trace, 41, 17);
    let a = analyse_stalls(&trace, &StallConfig::new(Some(HZ))).unwrap();
    assert_eq!(a.events.len(), 200);
    let p = a.period.as_ref().unwrap();
    assert!(a.periodic);
    assert_eq!((p.period, p.phase, p.on_grid), (41, 17, 200));
    assert_close(p.on_grid_fraction, 1.0, 1e-12);
    assert_close(p.grid_coverage, 1.0, 1e-12);
    assert_close(p.gap_consistency, 1.0, 1e-12);
    assert!(p.p_value < 1e-100, "{}", p.p_value);
    let t = a.ticks.as_ref().unwrap();
    assert!(t.clustered);
    assert_close(t.tick, 0.004, 1e-15);
    let total: usize = t.multiples.iter().map(|m| m.1).sum();
    assert_eq!(total, 200);
    assert!(
        t.multiples
            .iter()
            .all(|&(k, c)| (k == 1 || k == 2) && c > 70),
        "{:?}",
        t.multiples
    );
    assert!(t.on_tick_fraction > 0.95);
}

#[test]
fn period_survives_missing_stalls_extra_stalls_and_head_of_line_runs() {
    let mut g = Gen::new(7);
    let mut trace = base_trace(&mut g, 41 * 300);
    for i in (5..trace.len()).step_by(41) {
        if g.uniform() < 0.25 {
            continue; // a quarter of the grid points do not stall
        }
        let excess = 2.0 * TICK + g.normal(0.0, 0.2e-3);
        // The stalled message holds up the next three, each a little less.
        for (k, slot) in trace.iter_mut().skip(i).take(4).enumerate() {
            *slot += excess * (1.0 - 0.2 * k as f64);
        }
    }
    for _ in 0..30 {
        // Random extra stalls off the grid.
        let i = (g.uniform() * trace.len() as f64) as usize;
        trace[i] += TICK;
    }
    let a = analyse_stalls(&trace, &StallConfig::new(Some(HZ))).unwrap();
    let p = a.period.as_ref().unwrap();
    assert!(a.periodic, "{p:?}");
    assert_eq!(p.period, 41);
    assert_eq!(p.phase, 5);
    assert!(
        p.grid_coverage > 0.65 && p.grid_coverage < 0.85,
        "{}",
        p.grid_coverage
    );
    assert!(p.on_grid_fraction > 0.8, "{}", p.on_grid_fraction);
    // Runs were merged: on-grid events have a run of 4 messages.
    let on_grid_run = a.events.iter().find(|e| e.index % 41 == 5).unwrap().run;
    assert_eq!(on_grid_run, 4);
}

#[test]
fn poisson_stalls_are_not_periodic() {
    // Same stall rate (1 in 41) and magnitudes, but each message stalls independently.
    // Twenty traces: none may come out periodic.
    for seed in 0..20 {
        let mut g = Gen::new(1000 + seed);
        let mut trace = base_trace(&mut g, 41 * 200);
        for d in trace.iter_mut() {
            if g.uniform() < 1.0 / 41.0 {
                *d += if g.uniform() < 0.5 { TICK } else { 2.0 * TICK };
            }
        }
        let a = analyse_stalls(&trace, &StallConfig::new(Some(HZ))).unwrap();
        assert!(
            a.events.len() > 120,
            "seed {seed}: {} events",
            a.events.len()
        );
        let p = a.period.as_ref().unwrap();
        assert!(!a.periodic, "seed {seed}: {p:?}");
        // The best grid is no better than chance: not significant, and its share of the
        // stalls is within a few points of the share its window would catch at random.
        assert!(p.p_value > 0.01, "seed {seed}: {p:?}");
        assert!(
            p.on_grid_fraction < p.chance_fraction + 0.15,
            "seed {seed}: {p:?}"
        );
        // The magnitudes are still whole ticks: that part is true and is reported.
        assert!(a.ticks.as_ref().unwrap().clustered);
    }
}

#[test]
fn no_stalls_means_no_events_and_no_verdicts() {
    let mut g = Gen::new(3);
    let trace = base_trace(&mut g, 10_000);
    let a = analyse_stalls(&trace, &StallConfig::new(Some(HZ))).unwrap();
    assert!(a.events.is_empty());
    assert_eq!(a.stalled_messages, 0);
    assert!(a.period.is_none() && !a.periodic && a.ticks.is_none());
    assert_close(a.median, 60e-6, 2e-6);
    // Robust threshold = median + max(5·σ̂, half a tick) = median + 2 ms here.
    assert_close(a.threshold - a.median, 2e-3, 1e-12);
}

/// A smooth oscillation of the delay (what an interval average turns a stall period into when
/// the two beat) is not a stall pattern: nothing crosses the robust threshold.
#[test]
fn a_smooth_beat_in_the_delays_is_not_a_stall_pattern() {
    let mut g = Gen::new(11);
    let trace: Vec<f64> = (0..8200)
        .map(|i| {
            let beat = 40e-6 * (std::f64::consts::TAU * i as f64 / 41.0).sin();
            (60e-6 + beat + g.normal(0.0, 5e-6)).abs()
        })
        .collect();
    let a = analyse_stalls(&trace, &StallConfig::new(Some(HZ))).unwrap();
    assert!(a.events.is_empty() && !a.periodic, "{:?}", a.period);
}

#[test]
fn stalls_of_arbitrary_size_are_not_tick_clustered() {
    let mut g = Gen::new(5);
    let mut trace = base_trace(&mut g, 41 * 100);
    for i in (0..trace.len()).step_by(41) {
        trace[i] += 2e-3 + g.uniform() * 20e-3; // uniform 2..22 ms
    }
    let a = analyse_stalls(&trace, &StallConfig::new(Some(HZ))).unwrap();
    assert!(a.periodic);
    let t = a.ticks.unwrap();
    assert!(!t.clustered, "{t:?}");
    assert!(
        t.on_tick_fraction > 0.3 && t.on_tick_fraction < 0.7,
        "{}",
        t.on_tick_fraction
    );
}

#[test]
fn fixed_threshold_and_no_hz() {
    let mut trace = vec![1e-3; 400];
    for i in (3..400).step_by(20) {
        trace[i] = 9e-3;
    }
    let mut cfg = StallConfig::new(None);
    cfg.threshold = Threshold::Fixed(5e-3);
    cfg.index_tolerance = 0;
    let a = analyse_stalls(&trace, &cfg).unwrap();
    assert_eq!(a.events.len(), 20);
    assert_eq!(
        a.period.as_ref().map(|p| (p.period, p.phase)),
        Some((20, 3))
    );
    assert!(a.periodic && a.ticks.is_none());
    // Too few events for a verdict.
    let short = &trace[..70];
    let b = analyse_stalls(short, &cfg).unwrap();
    assert_eq!(b.events.len(), 4);
    assert!(b.period.is_none() && !b.periodic, "{:?}", b.period);
    cfg.hz = Some(0);
    assert!(
        analyse_stalls(&trace, &cfg)
            .unwrap_err()
            .to_string()
            .contains("`hz`")
    );
}

/// Wilson interval reference, by the formula:
/// ```python
/// z = 1.959963984540054; n = 100; p = 0.3
/// c = (p + z*z/(2*n)) / (1 + z*z/n); h = z*math.sqrt(p*(1-p)/n + z*z/(4*n*n)) / (1 + z*z/n)
/// ```
/// → (0.2189488529493276, 0.3958485463334666)
#[test]
fn delayed_ack_cluster_fraction() {
    // 30 of 100 request/response times sit at the 40 ms delayed-ACK timer.
    let mut g = Gen::new(9);
    let mut samples: Vec<f64> = (0..70).map(|_| g.normal(0.2e-3, 0.02e-3)).collect();
    samples.extend((0..30).map(|_| 40e-3 + g.normal(0.0, 0.5e-3)));
    let c = cluster_fraction(&samples, 40e-3, 4e-3).unwrap();
    assert_eq!((c.inside, c.n), (30, 100));
    assert_close(c.fraction, 0.3, 1e-12);
    assert_close(c.lower, 0.2189488529493276, 1e-12);
    assert_close(c.upper, 0.3958485463334666, 1e-12);
    assert_close(in_ticks(40e-3, HZ), 10.0, 1e-12);
    assert!(cluster_fraction(&samples, 40e-3, -1.0).is_err());
    assert!(cluster_fraction(&[], 40e-3, 1.0).is_err());
}
