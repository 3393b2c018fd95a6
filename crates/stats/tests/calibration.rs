//! Behaviour over many simulated experiments: tests hold their level under the null, and a
//! multi-round race never drops the true best while it drops clearly worse configurations.

mod common;

use common::Gen;
use tcplab_stats::{
    Alternative, Objective, RaceConfig, Samples, TestKind, mann_whitney_u, mean_ci, race_round,
    welch_t_test,
};

/// Under the null (same normal distribution, unequal sizes), about 5% of p-values fall below
/// 0.05. With 4000 trials the binomial sd of the rate is 0.0034, so [0.035, 0.065] is ±4.4 sd.
#[test]
fn tests_hold_their_level_under_the_null() {
    let mut g = Gen::new(2024);
    let trials = 4000;
    let (mut welch, mut mw) = (0, 0);
    for _ in 0..trials {
        let a = g.normals(7, 5.0, 1.0);
        let b = g.normals(12, 5.0, 1.0);
        if welch_t_test(&a, &b, Alternative::TwoSided).unwrap().p_value < 0.05 {
            welch += 1;
        }
        if mann_whitney_u(&a, &b, Alternative::TwoSided)
            .unwrap()
            .p_value
            < 0.05
        {
            mw += 1;
        }
    }
    let (rw, rm) = (welch as f64 / trials as f64, mw as f64 / trials as f64);
    assert!((0.035..=0.065).contains(&rw), "Welch rejection rate {rw}");
    // Mann-Whitney's exact test is discrete, so its rate sits a little under 5%.
    assert!(
        (0.030..=0.060).contains(&rm),
        "Mann-Whitney rejection rate {rm}"
    );
}

/// The log-scale interval of the mean covers the true mean of log-normal data (σ = 0.5 on the
/// log scale, n = 10) in about 95 % of experiments (a plain simulation of the formula gave
/// 0.951), and never reaches below zero. 4000 trials: ±0.015 is ±4.4 binomial sd.
#[test]
fn log_scale_interval_covers_the_mean_of_skewed_data() {
    let mut g = Gen::new(95);
    let sigma: f64 = 0.5;
    let true_mean = (sigma * sigma / 2.0).exp();
    let trials = 4000;
    let mut covered = 0;
    for _ in 0..trials {
        let xs: Vec<f64> = g.normals(10, 0.0, sigma).iter().map(|y| y.exp()).collect();
        let ci = mean_ci(&xs, 0.95).unwrap();
        assert!(ci.lower > 0.0, "{ci:?}");
        covered += usize::from(ci.contains(true_mean));
    }
    let rate = covered as f64 / trials as f64;
    assert!((0.935..=0.965).contains(&rate), "coverage {rate}");
}

/// Welch detects a 1.5 sd shift with n = 10 per group most of the time. One-sided power of the
/// t-test at α = 0.05 by the noncentral t (Welch's is within a hair of it for equal n and sd):
/// ```python
/// df = 18; nc = 1.5 * math.sqrt(10 / 2)
/// 1 - stats.nct.cdf(stats.t.ppf(0.95, df), df, nc)   # → 0.9428636327766824
/// ```
/// 1000 trials: binomial sd 0.0073, so > 0.91 is 4.4 sd below the expectation.
#[test]
fn welch_has_power_against_a_real_shift() {
    let mut g = Gen::new(7);
    let hits = (0..1000)
        .filter(|_| {
            let a = g.normals(10, 0.0, 1.0);
            let b = g.normals(10, 1.5, 1.0);
            welch_t_test(&a, &b, Alternative::Less).unwrap().p_value < 0.05
        })
        .count();
    assert!(hits > 910, "power {}", hits as f64 / 1000.0);
}

/// Eight configurations raced round by round (one repetition each per round, up to 15),
/// minimise; `c0` is the true best. Over 50 seeded races the best is never dropped, and the
/// clearly worse ones (≥ 30% slower, sd 5%) are all gone by the end.
#[test]
fn multi_round_race_keeps_the_best_and_drops_the_clearly_worse() {
    let means = [1.00, 1.01, 1.03, 1.30, 1.40, 1.60, 2.00, 3.00];
    let names = ["c0", "c1", "c2", "c3", "c4", "c5", "c6", "c7"];
    let config = RaceConfig {
        alpha: 0.01,
        ..RaceConfig::new(Objective::Minimise)
    };
    for seed in 0..50 {
        let mut g = Gen::new(300 + seed);
        let mut samples: Vec<Vec<f64>> = vec![Vec::new(); means.len()];
        let mut alive = [true; 8];
        for _round in 0..15 {
            for (i, m) in means.iter().enumerate() {
                if alive[i] {
                    samples[i].push(g.normal(*m, 0.05 * m));
                }
            }
            let live: Vec<usize> = (0..8).filter(|&i| alive[i]).collect();
            let input: Vec<Samples<'_>> = live
                .iter()
                .map(|&i| Samples {
                    name: names[i],
                    values: &samples[i],
                })
                .collect();
            let round = race_round(&input, &config).unwrap();
            for dropped in round.dropped() {
                let i = names.iter().position(|n| *n == dropped).unwrap();
                alive[i] = false;
            }
        }
        assert!(alive[0], "seed {seed}: the true best was dropped");
        assert!(
            alive[3..].iter().all(|a| !a),
            "seed {seed}: alive {alive:?}"
        );
    }
}

/// The same race with Mann-Whitney (exact for small n) also converges.
#[test]
fn race_with_mann_whitney_drops_separated_configurations() {
    let mut g = Gen::new(5);
    let a = g.normals(8, 1.0, 0.05);
    let b = g.normals(8, 2.0, 0.05);
    let config = RaceConfig {
        test: TestKind::MannWhitney,
        ..RaceConfig::new(Objective::Minimise)
    };
    let input = [
        Samples {
            name: "a",
            values: &a,
        },
        Samples {
            name: "b",
            values: &b,
        },
    ];
    let round = race_round(&input, &config).unwrap();
    // Complete separation, 8 vs 8, one-sided exact p = 1/C(16, 8) = 1/12870.
    assert!((round.verdicts[1].p_value.unwrap() - 1.0 / 12870.0).abs() < 1e-15);
    assert_eq!(round.dropped().collect::<Vec<_>>(), vec!["b"]);
}
