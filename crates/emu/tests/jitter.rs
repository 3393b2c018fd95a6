//! Jitter: realised spread and mean per distribution, tables, correlation, ordering.
//!
//! Arrivals are 1 s apart unless said otherwise, far more than any jitter here, so the
//! no-reordering rule never binds and the realised delays are the drawn ones.

mod common;

use common::{lag1, mean_sd, model, sent};
use proptest::prelude::*;
use tcplab_emu::{DirectionConfig, DistTable, Distribution, Jitter, Reorder};

const MS: u64 = 1_000_000;
const S: u64 = 1_000_000_000;

fn jittery(
    delay: u64,
    amount: u64,
    distribution: Distribution,
    correlation: f64,
) -> DirectionConfig {
    DirectionConfig {
        delay_ns: delay,
        jitter: Some(Jitter {
            amount_ns: amount,
            distribution,
            correlation,
            allow_reorder: false,
        }),
        ..Default::default()
    }
}

/// Realised one-way delays (ns) of `n` packets 1 s apart.
fn delays(cfg: &DirectionConfig, seed: u64, n: u64) -> Vec<f64> {
    let mut m = model(cfg, seed);
    (0..n)
        .map(|k| (sent(m.arrive(100, k * S)).first().at - k * S) as f64)
        .collect()
}

#[test]
fn normal_sd_is_within_one_percent() {
    let d = delays(
        &jittery(100 * MS, 10 * MS, Distribution::Normal, 0.0),
        1,
        200_000,
    );
    let (mean, sd) = mean_sd(&d);
    assert!((mean - 100e6).abs() < 0.1e6, "mean {mean}");
    assert!((sd / 10e6 - 1.0).abs() < 0.01, "sd {sd}");
}

#[test]
fn uniform_is_bounded_with_sd_over_root_three() {
    let d = delays(
        &jittery(100 * MS, 10 * MS, Distribution::Uniform, 0.0),
        2,
        200_000,
    );
    assert!(d.iter().all(|&x| (90e6..=110e6).contains(&x)));
    let (mean, sd) = mean_sd(&d);
    assert!((mean - 100e6).abs() < 0.05e6, "mean {mean}");
    assert!((sd / (10e6 / 3f64.sqrt()) - 1.0).abs() < 0.01, "sd {sd}");
}

/// netem's pareto: Z = 4/3((1−u)^(−1/3) − 1.5), capped at 32767/8192. Closed form of the
/// capped mean: −2/(3·x_c²) with x_c = 1.5 + 0.75·32767/8192, i.e. −0.032923; sd 0.82085.
/// Standard error over 2·10^5 draws ≈ 0.0018.
#[test]
fn pareto_mean_and_sd_match_the_capped_closed_form() {
    let d = delays(
        &jittery(100 * MS, 10 * MS, Distribution::Pareto, 0.0),
        3,
        200_000,
    );
    let z: Vec<f64> = d.iter().map(|x| (x - 100e6) / 10e6).collect();
    let (mean, sd) = mean_sd(&z);
    assert!((mean + 0.032_923).abs() < 0.006, "mean {mean}");
    assert!((sd - tcplab_emu::dist::PARETO_Z_SD).abs() < 0.01, "sd {sd}");
    // Right-skewed: the minimum is −2/3, the tail reaches the cap.
    let min = z.iter().copied().fold(f64::INFINITY, f64::min);
    assert!((min + 2.0 / 3.0).abs() < 0.01, "min {min}");
}

/// netem's paretonormal: Z = g/4 + 3/4·pareto(Φ(g)), capped. Mean −0.021505 and sd 0.84947
/// by numerical integration over g (independent of this crate's code).
#[test]
fn paretonormal_mean_and_sd_match_numerical_integration() {
    let d = delays(
        &jittery(100 * MS, 10 * MS, Distribution::Paretonormal, 0.0),
        4,
        200_000,
    );
    let z: Vec<f64> = d.iter().map(|x| (x - 100e6) / 10e6).collect();
    let (mean, sd) = mean_sd(&z);
    assert!((mean + 0.021_505).abs() < 0.006, "mean {mean}");
    assert!((sd - 0.849_47).abs() < 0.01, "sd {sd}");
}

/// Empirical table round trip: fit a table to bimodal delays (70% at 20 ms, 30% at 50 ms),
/// write it as netem text, parse it back, and the emulator reproduces the two modes.
#[test]
fn empirical_table_round_trip_reproduces_the_samples() {
    let samples: Vec<f64> = (0..1000)
        .map(|i| if i % 10 < 7 { 20e6 } else { 50e6 })
        .collect();
    let fit = DistTable::from_samples(&samples).unwrap();
    assert!((fit.mean - 29e6).abs() < 1.0);
    assert!((fit.sd - 30e6 * (0.21f64).sqrt()).abs() < 1.0);
    let text = fit.table.to_dist_text();
    let table = DistTable::parse(&text).unwrap();
    assert_eq!(table, fit.table);

    let cfg = jittery(
        fit.mean.round() as u64,
        fit.sd.round() as u64,
        Distribution::Table(table),
        0.0,
    );
    let d = delays(&cfg, 5, 100_000);
    // Table entries are rounded to 1/8192 of the sd (1.7 µs here).
    let near = |x: f64, target: f64| (x - target).abs() < 2_000.0;
    assert!(d.iter().all(|&x| near(x, 20e6) || near(x, 50e6)));
    let high = d.iter().filter(|&&x| near(x, 50e6)).count() as f64 / d.len() as f64;
    assert!((high - 0.3).abs() < 0.01, "share at 50 ms: {high}");
}

/// Correlation ρ on the latent Gaussian: lag-1 autocorrelation is ρ for normal and
/// (6/π)·asin(ρ/2) = 0.48258 for uniform at ρ = 0.5; 0 without correlation. The spread is
/// unchanged by correlation (netem's formula shrinks it). SE of lag-1 ≈ 0.002.
#[test]
fn correlation_sets_lag1_autocorrelation_and_keeps_the_spread() {
    let normal = delays(
        &jittery(100 * MS, 10 * MS, Distribution::Normal, 0.5),
        6,
        200_000,
    );
    let r = lag1(&normal);
    assert!((r - 0.5).abs() < 0.01, "normal lag-1 {r}");
    let (_, sd) = mean_sd(&normal);
    assert!((sd / 10e6 - 1.0).abs() < 0.02, "normal sd {sd}");

    let uniform = delays(
        &jittery(100 * MS, 10 * MS, Distribution::Uniform, 0.5),
        7,
        200_000,
    );
    let r = lag1(&uniform);
    assert!((r - 0.482_58).abs() < 0.01, "uniform lag-1 {r}");

    let strong = delays(
        &jittery(100 * MS, 10 * MS, Distribution::Normal, 0.9),
        8,
        200_000,
    );
    let (_, sd) = mean_sd(&strong);
    assert!((lag1(&strong) - 0.9).abs() < 0.01);
    assert!((sd / 10e6 - 1.0).abs() < 0.03, "sd at ρ = 0.9: {sd}");

    let none = delays(
        &jittery(100 * MS, 10 * MS, Distribution::Normal, 0.0),
        9,
        200_000,
    );
    assert!(lag1(&none).abs() < 0.01);
}

/// Departure times of `n` packets `gap` ns apart.
fn departures(cfg: &DirectionConfig, seed: u64, n: u64, gap: u64) -> Vec<u64> {
    let mut m = model(cfg, seed);
    (0..n)
        .flat_map(|k| match m.arrive(1000, k * gap) {
            tcplab_emu::Verdict::Send(d) => d.iter().map(|d| d.at).collect::<Vec<_>>(),
            tcplab_emu::Verdict::Drop(_) => Vec::new(),
        })
        .collect()
}

/// The same jitter with reordering allowed does reorder (so the property below can fail).
#[test]
fn jitter_allowed_to_reorder_does_reorder() {
    let mut cfg = jittery(10 * MS, 5 * MS, Distribution::Normal, 0.0);
    if let Some(j) = cfg.jitter.as_mut() {
        j.allow_reorder = true;
    }
    let m = model(&cfg, 1);
    assert!(m.may_reorder());
    let d = departures(&cfg, 1, 10_000, 100_000);
    assert!(d.windows(2).filter(|w| w[1] < w[0]).count() > 1000);
}

fn any_distribution() -> impl Strategy<Value = Distribution> {
    prop_oneof![
        Just(Distribution::Uniform),
        Just(Distribution::Normal),
        Just(Distribution::Pareto),
        Just(Distribution::Paretonormal),
        Just(Distribution::Table(
            DistTable::new(vec![-32768, -8192, 0, 8192, 32767]).expect("valid table")
        )),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Jitter without reordering never reorders, whatever the seed, distribution, amount
    /// (up to 10× the delay), correlation, spacing, rate and duplication.
    #[test]
    fn jitter_without_reordering_never_reorders(
        seed in any::<u64>(),
        dist in any_distribution(),
        delay in 0u64..20 * MS,
        amount in 1u64..50 * MS,
        correlation in 0.0f64..0.95,
        gap in 1u64..2 * MS,
        rate in proptest::option::of(1_000_000u64..10_000_000_000),
        duplicate in 0.0f64..0.2,
    ) {
        let mut cfg = jittery(delay, amount, dist, correlation);
        cfg.rate_bps = rate;
        cfg.duplicate = duplicate;
        let m = model(&cfg, seed);
        prop_assert!(!m.may_reorder());
        let d = departures(&cfg, seed, 2000, gap);
        prop_assert!(d.windows(2).all(|w| w[0] <= w[1]));
    }
}

/// The reorder element makes every 5th packet overtake (and is reported by `may_reorder`).
#[test]
fn reorder_gap_makes_every_fifth_packet_overtake() {
    let cfg = DirectionConfig {
        delay_ns: 10 * MS,
        reorder: Some(Reorder {
            probability: 1.0,
            gap: 5,
        }),
        ..Default::default()
    };
    let mut m = model(&cfg, 1);
    assert!(m.may_reorder());
    let at: Vec<u64> = (0..20u64)
        .map(|k| sent(m.arrive(100, k * MS)).first().at)
        .collect();
    for (k, &t) in at.iter().enumerate() {
        let k = k as u64;
        let expected = if (k + 1) % 5 == 0 {
            k * MS
        } else {
            k * MS + 10 * MS
        };
        assert_eq!(t, expected, "packet {}", k + 1);
    }
    assert_eq!(m.counters().reordered, 4);
}

/// The model's own account of the delay it gave (`DirectionModel::realised`) agrees with the
/// departures exactly, and shows what order-keeping does to a flow: with packets 1 s apart
/// nothing is held back and the realised sd is the configured one; with packets 12 µs apart
/// (1500 B at 1 Gbit/s) against a 2 ms normal jitter nearly every packet waits for a slower
/// one ahead, and the realised sd falls below half the configured one (0.80 ms of 2).
#[test]
fn realised_delay_agrees_with_the_departures_and_shows_order_keeping() {
    let cfg = jittery(10 * MS, 2 * MS, Distribution::Normal, 0.0);
    for (gap, n) in [(S, 20_000u64), (12_000, 20_000)] {
        let mut m = model(&cfg, 7);
        let d: Vec<f64> = (0..n)
            .map(|k| (sent(m.arrive(1500, k * gap)).first().at - k * gap) as f64)
            .collect();
        let (mean, sd) = mean_sd(&d);
        let line = m
            .realised(n * gap)
            .delay_line
            .expect("a delayed direction reports its delay line");
        assert_eq!(line.count, n);
        assert!(
            (line.mean_ns - mean).abs() < 1e-3 * mean,
            "{} vs {mean}",
            line.mean_ns
        );
        assert!(
            (line.sd_ns - sd).abs() < 1e-3 * sd + 1.0,
            "{} vs {sd}",
            line.sd_ns
        );
        assert_eq!(line.configured_sd_ns, Some(2e6));
        assert_eq!(line.clamped_at_zero, 0, "10 ms is 5 sd from zero");
        if gap == S {
            assert_eq!(line.held_for_order, 0);
            assert!((line.sd_ns / 2e6 - 1.0).abs() < 0.03, "sd {}", line.sd_ns);
        } else {
            assert!(
                line.held_for_order > n * 9 / 10,
                "{} held",
                line.held_for_order
            );
            assert!(line.sd_ns < 1e6, "sd {} under order-keeping", line.sd_ns);
            assert!(
                line.mean_ns > 13e6,
                "mean {}: most wait for a slow one",
                line.mean_ns
            );
        }
        assert!(m.realised(n * gap).queue.is_none(), "no rate, no queue");
    }
}
