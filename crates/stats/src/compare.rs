//! Two-sample comparison tests: Welch's t-test and the Mann-Whitney U test, plus Holm's
//! correction for a family of comparisons.
//!
//! Conventions follow scipy (`ttest_ind(equal_var=False)`, `mannwhitneyu`), whose outputs the
//! tests of this module reproduce: the alternative is about the first sample `a` relative to the
//! second `b` (`Less`: a tends to be smaller).

use crate::dist::{normal_sf, student_t_cdf, student_t_sf};
use crate::error::{StatsError, check_min_len, check_samples};
use crate::summary::{mean, sample_variance};
use serde::{Deserialize, Serialize};

/// The alternative hypothesis, stated for sample `a` against sample `b`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Alternative {
    /// a and b differ (either direction).
    TwoSided,
    /// a tends to be smaller than b.
    Less,
    /// a tends to be larger than b.
    Greater,
}

/// Which two-sample test to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TestKind {
    /// Welch's unequal-variance t-test on the means.
    Welch,
    /// Mann-Whitney U (Wilcoxon rank-sum), normal approximation with tie and continuity
    /// correction, exact when both samples are small and untied.
    MannWhitney,
}

impl TestKind {
    /// Short name for reason texts and reports.
    pub fn name(self) -> &'static str {
        match self {
            TestKind::Welch => "Welch t-test",
            TestKind::MannWhitney => "Mann-Whitney U",
        }
    }
}

/// Outcome of a two-sample test.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TestResult {
    /// Which test produced this.
    pub test: TestKind,
    /// The alternative tested.
    pub alternative: Alternative,
    /// Welch: t; Mann-Whitney: U₁, the U statistic of sample `a`.
    pub statistic: f64,
    /// Welch: Welch–Satterthwaite degrees of freedom; Mann-Whitney: `None`.
    pub df: Option<f64>,
    /// p-value under the null hypothesis of no difference.
    pub p_value: f64,
    /// Mann-Whitney: true when the exact null distribution was used.
    pub exact: bool,
}

/// Runs the test `kind` of `a` against `b`.
pub fn compare(
    kind: TestKind,
    a: &[f64],
    b: &[f64],
    alternative: Alternative,
) -> Result<TestResult, StatsError> {
    match kind {
        TestKind::Welch => welch_t_test(a, b, alternative),
        TestKind::MannWhitney => mann_whitney_u(a, b, alternative),
    }
}

/// Welch's t-test (Welch 1947, Biometrika 34:28): t = (x̄ₐ − x̄_b)/√(sₐ²/nₐ + s_b²/n_b) with
/// the Welch–Satterthwaite degrees of freedom
/// ν = (sₐ²/nₐ + s_b²/n_b)² / ((sₐ²/nₐ)²/(nₐ−1) + (s_b²/n_b)²/(n_b−1)).
///
/// Needs n ≥ 2 in each sample. When both samples have zero variance the statistic is ±∞ (means
/// differ: p = 0 or 1 by direction) or 0 (means equal: p = 1 two-sided, ½ one-sided), and ν is
/// taken as nₐ + n_b − 2.
pub fn welch_t_test(
    a: &[f64],
    b: &[f64],
    alternative: Alternative,
) -> Result<TestResult, StatsError> {
    check_samples("first sample", a)?;
    check_samples("second sample", b)?;
    check_min_len("first sample", a, 2)?;
    check_min_len("second sample", b, 2)?;
    let (na, nb) = (a.len() as f64, b.len() as f64);
    let (ma, mb) = (mean(a), mean(b));
    let va = sample_variance(a, ma).unwrap_or(0.0) / na;
    let vb = sample_variance(b, mb).unwrap_or(0.0) / nb;
    let se2 = va + vb;
    let (t, df) = if se2 > 0.0 {
        let df = se2 * se2 / (va * va / (na - 1.0) + vb * vb / (nb - 1.0));
        ((ma - mb) / se2.sqrt(), df)
    } else {
        let t = match ma.partial_cmp(&mb) {
            Some(std::cmp::Ordering::Less) => f64::NEG_INFINITY,
            Some(std::cmp::Ordering::Greater) => f64::INFINITY,
            _ => 0.0,
        };
        (t, na + nb - 2.0)
    };
    let p_value = match alternative {
        Alternative::Less => student_t_cdf(t, df)?,
        Alternative::Greater => student_t_sf(t, df)?,
        Alternative::TwoSided => (2.0 * student_t_sf(t.abs(), df)?).min(1.0),
    };
    Ok(TestResult {
        test: TestKind::Welch,
        alternative,
        statistic: t,
        df: Some(df),
        p_value,
        exact: false,
    })
}

/// Largest n₁·n₂ for which the exact U distribution is tabulated (its support has n₁n₂+1 points).
const EXACT_MAX_CELLS: usize = 100_000;

/// Mann-Whitney U test (Mann & Whitney 1947, Ann. Math. Stat. 18:50).
///
/// U₁ = R₁ − n₁(n₁+1)/2 with R₁ the sum of `a`'s mid-ranks in the pooled sample. The p-value is
/// exact (the null distribution of U by the q-binomial generating function, Andrews 1976,
/// *The Theory of Partitions*, Thm 3.1) when there are no ties and either sample has at most 8
/// values (scipy's `method="auto"` rule) and n₁n₂ ≤ 100 000; otherwise it is the normal approximation with the tie
/// correction σ² = n₁n₂/12 · ((n+1) − Σ(tᵢ³ − tᵢ)/(n(n−1))) and a continuity correction of ½.
///
/// All values tied (σ = 0) gives p = 1.
pub fn mann_whitney_u(
    a: &[f64],
    b: &[f64],
    alternative: Alternative,
) -> Result<TestResult, StatsError> {
    check_samples("first sample", a)?;
    check_samples("second sample", b)?;
    let (n1, n2) = (a.len(), b.len());
    let (ranks, tie_term, has_ties) = pooled_midranks(a, b);
    let r1: f64 = ranks[..n1].iter().sum();
    let (n1f, n2f) = (n1 as f64, n2 as f64);
    let u1 = r1 - n1f * (n1f + 1.0) / 2.0;
    let u2 = n1f * n2f - u1;
    let (u, factor) = match alternative {
        Alternative::Greater => (u1, 1.0),
        Alternative::Less => (u2, 1.0),
        Alternative::TwoSided => (u1.max(u2), 2.0),
    };
    let exact = !has_ties && (n1 <= 8 || n2 <= 8) && n1 * n2 <= EXACT_MAX_CELLS;
    let sf = if exact {
        exact_u_sf(n1, n2, u.round() as usize)
    } else {
        asymptotic_u_sf(u, n1f, n2f, tie_term)
    };
    Ok(TestResult {
        test: TestKind::MannWhitney,
        alternative,
        statistic: u1,
        df: None,
        p_value: (sf * factor).clamp(0.0, 1.0),
        exact,
    })
}

/// Normal approximation of P(U ≥ u) with tie and continuity correction.
fn asymptotic_u_sf(u: f64, n1: f64, n2: f64, tie_term: f64) -> f64 {
    let n = n1 + n2;
    let var = n1 * n2 / 12.0 * ((n + 1.0) - tie_term / (n * (n - 1.0)));
    if var <= 0.0 {
        return 1.0;
    }
    normal_sf((u - n1 * n2 / 2.0 - 0.5) / var.sqrt())
}

/// Exact P(U ≥ u) for untied samples of sizes n1, n2.
///
/// The number of arrangements with U = k is the coefficient of q^k in the Gaussian binomial
/// [n1+n2 choose n1]_q = Π_{i=1..n1} (1 − q^{n2+i})/(1 − q^i); each step keeps a polynomial
/// with non-negative integer coefficients, held in f64 (exact below 2^53, beyond that a
/// relative rounding error near 1e-16, negligible for a p-value).
fn exact_u_sf(n1: usize, n2: usize, u: usize) -> f64 {
    let max_u = n1 * n2;
    let mut c = vec![0.0_f64; max_u + 1];
    c[0] = 1.0;
    for i in 1..=n1 {
        let m = n2 + i;
        for k in (m..=max_u).rev() {
            c[k] -= c[k - m];
        }
        for k in i..=max_u {
            c[k] += c[k - i];
        }
    }
    let total: f64 = c.iter().sum();
    let tail: f64 = c.iter().skip(u.min(max_u + 1)).sum();
    tail / total
}

/// Mid-ranks (1-based) of the pooled sample a ++ b, the tie term Σ(t³ − t) over tie groups,
/// and whether any tie exists.
fn pooled_midranks(a: &[f64], b: &[f64]) -> (Vec<f64>, f64, bool) {
    let pooled: Vec<f64> = a.iter().chain(b).copied().collect();
    let mut order: Vec<usize> = (0..pooled.len()).collect();
    order.sort_by(|&i, &j| pooled[i].total_cmp(&pooled[j]));
    let mut ranks = vec![0.0; pooled.len()];
    let (mut tie_term, mut has_ties) = (0.0, false);
    let mut start = 0;
    while start < order.len() {
        let mut end = start + 1;
        while end < order.len() && pooled[order[end]] == pooled[order[start]] {
            end += 1;
        }
        let t = (end - start) as f64;
        if end - start > 1 {
            has_ties = true;
            tie_term += t * t * t - t;
        }
        let midrank = (start + 1 + end) as f64 / 2.0;
        for &idx in &order[start..end] {
            ranks[idx] = midrank;
        }
        start = end;
    }
    (ranks, tie_term, has_ties)
}

/// Holm's step-down adjusted p-values (Holm 1979, Scand. J. Statist. 6:65), in input order:
/// with p₍₁₎ ≤ … ≤ p₍ₘ₎, p̃₍ᵢ₎ = max_{j ≤ i} min(1, (m − j + 1)·p₍ⱼ₎). Rejecting p̃ < α controls
/// the family-wise error rate at α for any dependence between the tests.
pub fn holm_adjust(p_values: &[f64]) -> Vec<f64> {
    let m = p_values.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&i, &j| p_values[i].total_cmp(&p_values[j]));
    let mut adjusted = vec![0.0; m];
    let mut running = 0.0_f64;
    for (rank, &idx) in order.iter().enumerate() {
        let scaled = ((m - rank) as f64 * p_values[idx]).min(1.0);
        running = running.max(scaled);
        adjusted[idx] = running;
    }
    adjusted
}
