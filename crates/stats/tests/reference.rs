//! Statistics against reference values from scipy 1.17.1 / numpy 2.4.6.
//!
//! The Python that produced each figure is quoted above the test that uses it. Data sets:
//! ```python
//! import numpy as np; from scipy import stats
//! a = np.array([0.28, 0.19, 0.75, 0.31, 0.22, 0.27, 0.25, 0.30, 0.24, 0.29])
//! b = np.array([0.35, 0.41, 0.38, 0.52, 0.33, 0.40, 0.37, 0.44])
//! ```

mod common;

use common::{Gen, assert_close};
use tcplab_stats::dist::{student_t_quantile, student_t_sf};
use tcplab_stats::{
    Alternative, Bootstrap, CiMethod, Objective, StatsError, Summary, holm_adjust, mann_whitney_u,
    mean_ci, mean_ci_log, mean_ci_t, quantile, speed_up, welch_t_test,
};

const A: [f64; 10] = [0.28, 0.19, 0.75, 0.31, 0.22, 0.27, 0.25, 0.30, 0.24, 0.29];
const B: [f64; 8] = [0.35, 0.41, 0.38, 0.52, 0.33, 0.40, 0.37, 0.44];

/// `a.mean(), a.std(ddof=1), np.median(a), np.percentile(a, [90, 99, 99.9])`
/// → 0.31, 0.15902480589168752, 0.275, [0.354, 0.7104, 0.74604]
#[test]
fn summary_matches_numpy() {
    let s = Summary::of(&A).unwrap();
    assert_eq!(s.n, 10);
    assert_close(s.mean, 0.31, 1e-12);
    assert_close(s.sd.unwrap(), 0.15902480589168752, 1e-12);
    assert_close(s.median, 0.275, 1e-12);
    assert_close(s.p90, 0.354, 1e-12);
    assert_close(s.p99, 0.7104, 1e-12);
    assert_close(s.p999, 0.74604, 1e-12);
    assert_eq!((s.min, s.max), (0.19, 0.75));
    assert_eq!(s.best(Objective::Minimise), 0.19);
    assert_eq!(s.worst(Objective::Minimise), 0.75);
    assert_eq!(s.best(Objective::Maximise), 0.75);
    assert_close(quantile(&A, 0.25).unwrap(), 0.2425, 1e-12); // np.percentile(a, 25)
}

/// `stats.t.interval(0.95, 9, loc=a.mean(), scale=stats.sem(a))`
/// → (0.19624050688473693, 0.4237594931152632); at 0.90: (0.21781630849022973, 0.40218369150977035)
#[test]
fn student_t_interval_matches_scipy() {
    let ci = mean_ci_t(&A, 0.95).unwrap();
    assert_close(ci.lower, 0.19624050688473693, 1e-9);
    assert_close(ci.upper, 0.4237594931152632, 1e-9);
    assert_eq!(ci.method, CiMethod::StudentT);
    let ci90 = mean_ci_t(&A, 0.90).unwrap();
    assert_close(ci90.lower, 0.21781630849022973, 1e-9);
    assert_close(ci90.upper, 0.40218369150977035, 1e-9);
}

/// The modified Cox interval (Olsson 2005) on the logs, from the formula in plain Python:
/// `y = np.log(x); c = y.mean() + y.var(ddof=1)/2; h = stats.t.ppf(0.975, n-1) *
/// np.sqrt(y.var(ddof=1)/n + y.var(ddof=1)**2/(2*(n-1))); np.exp([c - h, c + h])`
/// → a: (0.23388878282600173, 0.4045324139810915); [1.8, 3.5]: (0.0263163187, 298.632112)
#[test]
fn log_scale_interval_matches_the_formula_and_stays_above_zero() {
    let ci = mean_ci_log(&A, 0.95).unwrap();
    assert_close(ci.lower, 0.23388878282600173, 1e-9);
    assert_close(ci.upper, 0.4045324139810915, 1e-9);
    assert_close(ci.estimate, 0.31, 1e-12);
    assert_eq!(ci.method, CiMethod::LogScale);
    let two = mean_ci(&[1.8, 3.5], 0.95).unwrap();
    assert_close(two.lower, 0.026316318734194127, 1e-7);
    assert_close(two.upper, 298.6321127203326, 1e-6);
    assert!(mean_ci_t(&[1.8, 3.5], 0.95).unwrap().lower < 0.0);
    // A zero or a negative value is not on a log scale: Student's t.
    let with_zero = mean_ci(&[0.0, 1.0, 2.0], 0.95).unwrap();
    assert_eq!(with_zero.method, CiMethod::StudentT);
    assert!(mean_ci_log(&[0.0, 1.0], 0.95).is_err());
    let same = mean_ci(&[2.5, 2.5, 2.5], 0.95).unwrap();
    assert_eq!((same.lower, same.upper), (2.5, 2.5));
}

/// `stats.t.ppf(0.975, df), stats.t.sf(2.5, df)` for df in [1, 2, 5, 10, 30, 7.3]
#[test]
fn student_t_quantiles_match_scipy() {
    let table = [
        (1.0, 12.706204736174694, 0.12111894159084341),
        (2.0, 4.302652729749462, 0.06480586011075541),
        (5.0, 2.5705818356363146, 0.02724504967118813),
        (10.0, 2.228138851986274, 0.01572342211830441),
        (30.0, 2.0422724563012378, 0.009057824534033344),
        (7.3, 2.345066736547703, 0.019825117332800214),
    ];
    for (df, q, sf) in table {
        assert_close(student_t_quantile(0.975, df).unwrap(), q, 1e-8 * q);
        assert_close(student_t_sf(2.5, df).unwrap(), sf, 1e-10);
    }
    assert!(student_t_quantile(1.0, 5.0).is_err());
    assert!(student_t_quantile(0.5, 0.0).is_err());
}

/// `stats.ttest_ind(a, b, equal_var=False, alternative=alt)` → statistic, df, pvalue:
/// two-sided -1.650960427861911 11.956710068836788 0.12474752125597402
/// less      p = 0.06237376062798701;  greater p = 0.937626239372013
#[test]
fn welch_matches_scipy() {
    let r = welch_t_test(&A, &B, Alternative::TwoSided).unwrap();
    assert_close(r.statistic, -1.650960427861911, 1e-12);
    assert_close(r.df.unwrap(), 11.956710068836788, 1e-9);
    assert_close(r.p_value, 0.12474752125597402, 1e-10);
    let less = welch_t_test(&A, &B, Alternative::Less).unwrap();
    assert_close(less.p_value, 0.06237376062798701, 1e-10);
    let greater = welch_t_test(&A, &B, Alternative::Greater).unwrap();
    assert_close(greater.p_value, 0.937626239372013, 1e-10);
}

/// ```python
/// x = [1, 2, 2, 3, 4, 4, 4, 5, 6, 7, 8, 9]; y = [3, 4, 5, 5, 6, 7, 8, 8, 9, 10, 11, 12, 12]
/// stats.mannwhitneyu(x, y, alternative=alt, method="asymptotic")
/// ```
/// → U1 = 33.5; two-sided 0.016198705850929102, less 0.008099352925464551,
///   greater 0.9930347995485043
#[test]
fn mann_whitney_asymptotic_with_ties_matches_scipy() {
    let x = [1., 2., 2., 3., 4., 4., 4., 5., 6., 7., 8., 9.];
    let y = [3., 4., 5., 5., 6., 7., 8., 8., 9., 10., 11., 12., 12.];
    let cases = [
        (Alternative::TwoSided, 0.016198705850929102),
        (Alternative::Less, 0.008099352925464551),
        (Alternative::Greater, 0.9930347995485043),
    ];
    for (alt, p) in cases {
        let r = mann_whitney_u(&x, &y, alt).unwrap();
        assert_eq!(r.statistic, 33.5);
        assert!(!r.exact);
        assert_close(r.p_value, p, 1e-12);
    }
}

/// ```python
/// xs = [1.1, 2.3, 0.7, 3.9, 2.8]; ys = [4.2, 3.3, 5.0, 4.8, 6.1, 2.9]
/// stats.mannwhitneyu(xs, ys, alternative=alt, method="exact")
/// stats.mannwhitneyu(a, b)   # auto → exact (n2 = 8, no ties)
/// ```
/// → U1 = 2; two-sided 0.017316017316017316, less 0.008658008658008658,
///   greater 0.9956709956709956; (a, b): U1 = 8, p = 0.0030622971799442386
#[test]
fn mann_whitney_exact_matches_scipy() {
    let xs = [1.1, 2.3, 0.7, 3.9, 2.8];
    let ys = [4.2, 3.3, 5.0, 4.8, 6.1, 2.9];
    let cases = [
        (Alternative::TwoSided, 0.017316017316017316),
        (Alternative::Less, 0.008658008658008658),
        (Alternative::Greater, 0.9956709956709956),
    ];
    for (alt, p) in cases {
        let r = mann_whitney_u(&xs, &ys, alt).unwrap();
        assert_eq!(r.statistic, 2.0);
        assert!(r.exact);
        assert_close(r.p_value, p, 1e-12);
    }
    let r = mann_whitney_u(&A, &B, Alternative::TwoSided).unwrap();
    assert_eq!(r.statistic, 8.0);
    assert_close(r.p_value, 0.0030622971799442386, 1e-12);
}

/// Holm by hand (identical to statsmodels `multipletests(p, method="holm")`):
/// ```python
/// p = np.array([0.01, 0.04, 0.03, 0.005, 0.2]); o = np.argsort(p); m = len(p)
/// adj = np.maximum.accumulate(np.minimum(1, (m - np.arange(m)) * p[o]))
/// ```
/// → [0.04, 0.09, 0.09, 0.025, 0.2]
#[test]
fn holm_matches_reference() {
    let adj = holm_adjust(&[0.01, 0.04, 0.03, 0.005, 0.2]);
    for (got, want) in adj.iter().zip([0.04, 0.09, 0.09, 0.025, 0.2]) {
        assert_close(*got, want, 1e-12);
    }
    assert!(holm_adjust(&[]).is_empty());
    assert_eq!(holm_adjust(&[0.7, 0.6]), vec![1.0, 1.0]);
}

/// 40 exponential values, rounded to 4 places:
/// ```python
/// rng = np.random.default_rng(20261122); x = np.round(rng.exponential(1.0, 40), 4)
/// stats.bootstrap((x,), f, method=m, n_resamples=100000, confidence_level=0.95, rng=1)
/// ```
/// mean percentile (0.5925125, 1.2759701874999998); mean BCa (0.6381737418817357,
/// 1.3768894593061154); median percentile and BCa (0.26675, 0.81585).
/// Our stream differs from numpy's, so the bounds agree within Monte-Carlo error only.
const EXP40: [f64; 40] = [
    0.0111, 1.9286, 0.0785, 0.5393, 0.2271, 0.6821, 1.391, 2.3439, 1.5928, 0.2726, 1.0201, 0.2219,
    0.1566, 0.1644, 1.1711, 5.8227, 0.8988, 0.0472, 0.7329, 0.117, 1.6999, 0.7016, 0.9465, 0.4922,
    0.4264, 3.419, 0.2099, 0.5862, 0.2974, 0.3392, 0.4613, 0.1946, 0.1249, 0.0578, 2.6743, 0.4976,
    0.1647, 1.5154, 1.4448, 0.2609,
];

#[test]
fn bootstrap_mean_matches_scipy_within_monte_carlo_error() {
    let boot = Bootstrap::new(20_000, 7);
    let pct = boot.mean_ci(&EXP40, CiMethod::Percentile).unwrap();
    assert_close(pct.lower, 0.5925125, 0.015);
    assert_close(pct.upper, 1.2759701874999998, 0.02);
    let bca = boot.mean_ci(&EXP40, CiMethod::Bca).unwrap();
    assert_close(bca.lower, 0.6381737418817357, 0.015);
    assert_close(bca.upper, 1.3768894593061154, 0.025);
    // BCa shifts the interval of a right-skewed mean to the right, as it should.
    assert!(bca.lower > pct.lower + 0.02 && bca.upper > pct.upper + 0.05);
    assert_close(bca.estimate, EXP40.iter().sum::<f64>() / 40.0, 1e-12);
}

#[test]
fn bootstrap_median_matches_scipy() {
    let boot = Bootstrap::new(20_000, 11);
    for method in [CiMethod::Percentile, CiMethod::Bca] {
        let ci = boot.median_ci(&EXP40, method).unwrap();
        assert_close(ci.lower, 0.26675, 0.03);
        assert_close(ci.upper, 0.81585, 0.03);
        assert_close(ci.estimate, 0.49490, 1e-12); // np.median(x)
    }
}

#[test]
fn bootstrap_is_reproducible_from_its_seed() {
    let a = Bootstrap::new(2_000, 42)
        .median_ci(&EXP40, CiMethod::Percentile)
        .unwrap();
    let b = Bootstrap::new(2_000, 42)
        .median_ci(&EXP40, CiMethod::Percentile)
        .unwrap();
    let c = Bootstrap::new(2_000, 43)
        .mean_ci(&EXP40, CiMethod::Percentile)
        .unwrap();
    let d = Bootstrap::new(2_000, 42)
        .mean_ci(&EXP40, CiMethod::Percentile)
        .unwrap();
    assert_eq!(a, b);
    assert_ne!((c.lower, c.upper), (d.lower, d.upper));
}

/// ```python
/// cand, base = a, b
/// stats.bootstrap((base, cand), lambda b, c, axis=-1: b.mean(axis=-1) / c.mean(axis=-1),
///                 method="percentile", n_resamples=100000, rng=3, vectorized=True)
/// ```
/// → ratio 1.290322580645161, CI (0.9389810426540284, 1.6949999999999998)
#[test]
fn speed_up_matches_scipy() {
    let boot = Bootstrap::new(20_000, 5);
    let s = speed_up(&B, &A, Objective::Minimise, &boot).unwrap();
    assert_close(s.ratio.estimate, 1.290322580645161, 1e-12);
    assert_close(s.ratio.lower, 0.9389810426540284, 0.02);
    assert_close(s.ratio.upper, 1.6949999999999998, 0.03);
    assert!(!s.significant_gain(), "the CI includes 1");
    // Maximise orientation: candidate/baseline.
    let up = speed_up(
        &[100.0, 110.0, 90.0],
        &[200.0, 210.0, 190.0],
        Objective::Maximise,
        &boot,
    )
    .unwrap();
    assert_close(up.ratio.estimate, 2.0, 1e-12);
    assert!(up.significant_gain());
    assert!(matches!(
        speed_up(&[1.0], &[0.0, 0.0], Objective::Minimise, &boot),
        Err(StatsError::ZeroDenominator { .. })
    ));
}

/// Coverage of the t interval on normal data: about 95% of 2000 intervals contain the mean.
#[test]
fn student_t_interval_covers_at_its_level() {
    let mut g = Gen::new(99);
    let hits = (0..2000)
        .filter(|_| {
            mean_ci_t(&g.normals(8, 10.0, 3.0), 0.95)
                .unwrap()
                .contains(10.0)
        })
        .count();
    let coverage = hits as f64 / 2000.0;
    assert!((0.935..=0.965).contains(&coverage), "coverage {coverage}");
}
