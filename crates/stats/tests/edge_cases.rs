//! n = 1, all-equal, empty and non-finite input: defined answers or errors, never panics.

use tcplab_stats::{
    Alternative, Bootstrap, CiMethod, Objective, StatsError, Summary, mann_whitney_u, mean_ci_t,
    quantile, speed_up, welch_t_test,
};

#[test]
fn empty_input_is_an_error_naming_the_fix() {
    let e = Summary::of(&[]).unwrap_err();
    assert_eq!(e, StatsError::Empty { what: "samples" });
    assert!(e.to_string().contains("at least one finite value"));
    assert!(mean_ci_t(&[], 0.95).is_err());
    assert!(
        Bootstrap::default()
            .median_ci(&[], CiMethod::Percentile)
            .is_err()
    );
    assert!(welch_t_test(&[], &[1.0, 2.0], Alternative::TwoSided).is_err());
}

#[test]
fn non_finite_samples_are_reported_by_index() {
    let e = Summary::of(&[1.0, f64::NAN, 2.0]).unwrap_err();
    assert!(matches!(e, StatsError::NonFinite { index: 1, .. }));
    assert!(e.to_string().contains("sample #1"));
    assert!(Summary::of(&[f64::INFINITY]).is_err());
    assert!(mann_whitney_u(&[1.0], &[f64::NAN], Alternative::TwoSided).is_err());
}

#[test]
fn one_sample_has_no_spread() {
    let s = Summary::of(&[0.42]).unwrap();
    assert_eq!((s.n, s.mean, s.sd), (1, 0.42, None));
    assert_eq!(
        (s.min, s.max, s.median, s.p90, s.p99, s.p999),
        (0.42, 0.42, 0.42, 0.42, 0.42, 0.42)
    );
    assert_eq!(s.standard_error(), None);
    let e = mean_ci_t(&[0.42], 0.95).unwrap_err();
    assert_eq!(
        e,
        StatsError::TooFew {
            what: "samples",
            need: 2,
            got: 1
        }
    );
    // The bootstrap of one value is that value.
    let ci = Bootstrap::new(200, 1)
        .mean_ci(&[0.42], CiMethod::Bca)
        .unwrap();
    assert_eq!((ci.lower, ci.upper), (0.42, 0.42));
}

#[test]
fn all_equal_samples_give_zero_width_intervals() {
    let xs = [3.0; 6];
    let s = Summary::of(&xs).unwrap();
    assert_eq!(s.sd, Some(0.0));
    let ci = mean_ci_t(&xs, 0.95).unwrap();
    assert_eq!((ci.lower, ci.upper), (3.0, 3.0));
    for m in [CiMethod::Percentile, CiMethod::Bca] {
        let b = Bootstrap::new(500, 2).median_ci(&xs, m).unwrap();
        assert_eq!((b.lower, b.upper), (3.0, 3.0));
    }
    // Welch with zero variances: equal means → p = 1, different means → p = 0.
    let same = welch_t_test(&xs, &xs, Alternative::TwoSided).unwrap();
    assert_eq!(same.p_value, 1.0);
    let diff = welch_t_test(&xs, &[4.0; 3], Alternative::Less).unwrap();
    assert_eq!((diff.statistic, diff.p_value), (f64::NEG_INFINITY, 0.0));
    let mw = mann_whitney_u(&xs, &xs, Alternative::TwoSided).unwrap();
    assert_eq!(mw.p_value, 1.0);
    let sp = speed_up(&xs, &xs, Objective::Minimise, &Bootstrap::new(200, 3)).unwrap();
    assert_eq!(
        (sp.ratio.lower, sp.ratio.estimate, sp.ratio.upper),
        (1.0, 1.0, 1.0)
    );
}

#[test]
fn bad_parameters_name_the_parameter() {
    let e = mean_ci_t(&[1.0, 2.0], 1.5).unwrap_err();
    assert!(e.to_string().contains("`level`"), "{e}");
    let e = Bootstrap::new(10, 0)
        .mean_ci(&[1.0, 2.0], CiMethod::Percentile)
        .unwrap_err();
    assert!(e.to_string().contains("`resamples`"), "{e}");
    let e = Bootstrap::new(1000, 0)
        .mean_ci(&[1.0, 2.0], CiMethod::StudentT)
        .unwrap_err();
    assert!(e.to_string().contains("mean_ci"), "{e}");
    assert!(quantile(&[1.0], 1.01).is_err());
    assert!(welch_t_test(&[1.0], &[1.0, 2.0], Alternative::TwoSided).is_err());
}
