use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;

/// One draw of a figure's noise.
type Draw = fn(&mut ChaCha8Rng) -> f64;

fn checked(r: Regression) -> RegressionCheck {
    match r {
        Regression::Checked(c) => c,
        other => panic!("expected a check, got {other:?}"),
    }
}

fn exact(window: usize, alpha: f64) -> RegressionConfig {
    RegressionConfig {
        window,
        alpha,
        min_relative_shift: 0.0,
        mad_multiple: 0.0,
        ..RegressionConfig::default()
    }
}

#[test]
fn the_p_value_is_the_share_of_subsets_at_least_as_bad() {
    // Latencies: the two newest are the two largest of 6, one subset of C(6, 2) = 15.
    let cfg = exact(2, 0.1);
    let c = checked(
        check_regression(
            &[1.0, 2.0, 3.0, 4.0],
            &[10.0, 11.0],
            Objective::Minimise,
            &cfg,
        )
        .unwrap(),
    );
    assert!((c.p_value - 1.0 / 15.0).abs() < 1e-12, "{c:?}");
    // The newest are the 2nd and 4th largest: {11,10}... subsets with sum >= 10+4 = 14:
    // {11,10} {11,4} {11,3} {10,4} -> 4 of 15.
    let c = checked(
        check_regression(
            &[1.0, 2.0, 3.0, 11.0],
            &[10.0, 4.0],
            Objective::Minimise,
            &cfg,
        )
        .unwrap(),
    );
    assert!((c.p_value - 4.0 / 15.0).abs() < 1e-12, "{c:?}");
    // Rates: lower is worse; the two lowest of 6 again give 1/15.
    let c = checked(
        check_regression(
            &[10.0, 11.0, 12.0, 13.0],
            &[1.0, 2.0],
            Objective::Maximise,
            &cfg,
        )
        .unwrap(),
    );
    assert!((c.p_value - 1.0 / 15.0).abs() < 1e-12, "{c:?}");
}

#[test]
fn ties_count_against_an_alarm() {
    // Every value equal: every subset ties the newest, p = 1.
    let cfg = exact(2, 0.1);
    let c = checked(check_regression(&[5.0; 6], &[5.0, 5.0], Objective::Minimise, &cfg).unwrap());
    assert_eq!(c.p_value, 1.0);
    assert!(!c.regressed);
}

#[test]
fn the_history_needed_follows_alpha_and_the_window() {
    let d = RegressionConfig::default();
    assert_eq!(
        d.history_needed(),
        19,
        "C(21,2) = 210 >= 200 > C(20,2) = 190"
    );
    assert_eq!(exact(1, 0.05).history_needed(), 19, "1/20 = 0.05");
    assert_eq!(
        exact(3, 0.005).history_needed(),
        9,
        "C(11,3) = 165 < 200 <= C(12,3) = 220"
    );
    let r = check_regression(&[1.0; 18], &[9.0, 9.0], Objective::Minimise, &d).unwrap();
    assert_eq!(r, Regression::TooLittleHistory { have: 18, need: 19 });
    assert!(!r.regressed());
}

/// The documented false-alarm bound, on unchanged pairs of several shapes: a quiet normal
/// figure, a heavy-tailed one (log-normal, as latencies), and a coarse one with many ties (as
/// counts). Alarms per check stay under alpha (plus four binomial standard deviations of the
/// draw); the size condition is off, so this is the test's own rate.
#[test]
fn an_unchanged_pair_raises_alarms_at_most_at_rate_alpha() {
    let cfg = exact(2, 0.005);
    let mut rng = ChaCha8Rng::seed_from_u64(48);
    let checks = 20_000;
    let shapes: [(&str, Draw); 3] = [
        ("normal", |r| 100.0 + 5.0 * normal(r)),
        ("log-normal", |r| (3.0 + 0.8 * normal(r)).exp()),
        ("coarse", |r| (normal(r) * 2.0).round()),
    ];
    for (name, draw) in shapes {
        let mut alarms = 0;
        for _ in 0..checks {
            let all: Vec<f64> = (0..32).map(|_| draw(&mut rng)).collect();
            let (history, recent) = all.split_at(30);
            for objective in [Objective::Minimise, Objective::Maximise] {
                if check_regression(history, recent, objective, &cfg)
                    .unwrap()
                    .regressed()
                {
                    alarms += 1;
                }
            }
        }
        let trials = 2.0 * checks as f64;
        let bound = cfg.alpha * trials + 4.0 * (cfg.alpha * trials).sqrt();
        assert!(
            f64::from(alarms) <= bound,
            "{name}: {alarms} alarms in {trials} checks, bound {bound:.0}"
        );
    }
}

#[test]
fn a_halved_throughput_is_flagged_at_its_second_result_and_not_its_first() {
    let cfg = RegressionConfig::default();
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let history: Vec<f64> = (0..30).map(|_| 940.0 + 20.0 * normal(&mut rng)).collect();
    let c =
        checked(check_regression(&history, &[470.0, 455.0], Objective::Maximise, &cfg).unwrap());
    assert!(c.regressed, "{c:?}");
    assert!(c.worse_by > 0.45 && c.worse_by < 0.55, "{c:?}");
    // One bad result beside a normal one: no alarm.
    let c =
        checked(check_regression(&history, &[941.0, 455.0], Objective::Maximise, &cfg).unwrap());
    assert!(!c.regressed, "{c:?}");
    // Better, not worse: no alarm however clear.
    let c =
        checked(check_regression(&history, &[1900.0, 1950.0], Objective::Maximise, &cfg).unwrap());
    assert!(!c.regressed && c.worse_by < 0.0, "{c:?}");
}

#[test]
fn a_clear_but_small_change_is_not_a_regression() {
    // A very quiet pair whose latency rose 5 %: clear to the test, below the 20 % floor.
    let history: Vec<f64> = (0..30).map(|i| 20.0 + 0.01 * f64::from(i % 3)).collect();
    let c = checked(
        check_regression(
            &history,
            &[21.0, 21.0],
            Objective::Minimise,
            &RegressionConfig::default(),
        )
        .unwrap(),
    );
    assert!(c.p_value <= 0.005, "{c:?}");
    assert!(!c.regressed, "{c:?}");
    // A noisy pair: a 30 % rise is within three of its robust standard deviations.
    let noisy: Vec<f64> = (0..30)
        .map(|i| 20.0 + 8.0 * f64::from(i % 5) - 16.0)
        .collect();
    let c = checked(
        check_regression(
            &noisy,
            &[27.0, 27.0],
            Objective::Minimise,
            &RegressionConfig::default(),
        )
        .unwrap(),
    );
    assert!(!c.regressed && c.worse_needed > 0.3, "{c:?}");
}

#[test]
fn only_the_newest_history_counts() {
    // An old, much slower stretch is beyond max_history: the baseline is the recent level.
    let cfg = RegressionConfig {
        max_history: 30,
        ..RegressionConfig::default()
    };
    let mut history = vec![100.0; 40];
    history.extend((0..30).map(|i| 1000.0 + f64::from(i)));
    let c =
        checked(check_regression(&history, &[700.0, 690.0], Objective::Maximise, &cfg).unwrap());
    assert_eq!(c.history_used, 30);
    assert!(c.regressed, "{c:?}");
}

#[test]
fn bad_input_and_parameters_are_errors_that_name_them() {
    let d = RegressionConfig::default();
    let e = check_regression(&[1.0; 20], &[f64::NAN, 1.0], Objective::Minimise, &d).unwrap_err();
    assert!(e.to_string().contains("recent results"), "{e}");
    let e = check_regression(&[1.0; 20], &[1.0], Objective::Minimise, &d).unwrap_err();
    assert!(e.to_string().contains("needs at least 2"), "{e}");
    for (cfg, name) in [
        (RegressionConfig { window: 5, ..d }, "window"),
        (RegressionConfig { alpha: 0.0, ..d }, "alpha"),
        (
            RegressionConfig {
                max_history: 10,
                ..d
            },
            "max_history",
        ),
        (
            RegressionConfig {
                min_relative_shift: f64::NAN,
                ..d
            },
            "min_relative_shift",
        ),
        (
            RegressionConfig {
                mad_multiple: -1.0,
                ..d
            },
            "mad_multiple",
        ),
    ] {
        let e = check_regression(&[1.0; 20], &[1.0; 2], Objective::Minimise, &cfg)
            .map(|_| ())
            .unwrap_err();
        assert!(e.to_string().contains(name), "{name}: {e}");
    }
}

/// A standard normal draw (Box-Muller), so the test needs no distribution crate.
fn normal(rng: &mut ChaCha8Rng) -> f64 {
    let u: f64 = rng.random_range(f64::EPSILON..1.0);
    let v: f64 = rng.random();
    (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
}
