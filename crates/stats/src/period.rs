//! Is a set of event indices periodic? Finds the period N and phase φ that put the most
//! events on the grid {φ + kN} and tests that count against chance.
//!
//! Method: candidate periods are the differences between each event and its next three events
//! (so stray events between grid events do not hide the period). For a candidate N the events'
//! residues modulo N are counted in a circular window of ±`tolerance` and the best phase φ is
//! kept. Under the null hypothesis that events fall on messages independently of their index
//! (Bernoulli/Poisson placement), the number on a fixed window is Binomial(m, W/N) with
//! W = 2·tolerance + 1, so the tail P(X ≥ k) = I_{W/N}(k, m − k + 1) (regularised incomplete
//! beta) is its p-value. Choosing the best phase among N and the best of C candidates is paid for
//! with a Bonferroni factor N·C. The candidate with the smallest adjusted p-value wins, which
//! also picks N over its divisors (a divisor N/2 puts the same events on the grid at twice the
//! chance rate) and over its multiples (2N puts only half of them on the grid).
//!
//! Only per-message indices go in: a pattern that appears only in interval averages (the
//! "sampling beat" between a reporting interval and a stall period) cannot be seen here at all.

use serde::{Deserialize, Serialize};
use statrs::function::beta::beta_reg;
use std::collections::HashMap;

/// Most candidate periods examined (the most frequent differences), to bound the work.
const MAX_CANDIDATES: usize = 256;

/// How far ahead each event looks for candidate differences.
const LOOKAHEAD: usize = 3;

/// The best-fitting grid for a set of event indices.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PeriodFit {
    /// Period N, in messages.
    pub period: usize,
    /// Phase φ in [0, N): grid points are φ + kN.
    pub phase: usize,
    /// Events within ±tolerance of a grid point.
    pub on_grid: usize,
    /// on_grid / all events.
    pub on_grid_fraction: f64,
    /// The on-grid fraction expected by chance, (2·tolerance + 1)/N.
    pub chance_fraction: f64,
    /// on_grid / grid points inside the series: how often the grid point actually stalled.
    pub grid_coverage: f64,
    /// Fraction of gaps between consecutive on-grid events that equal N (±2·tolerance),
    /// the rest being multiples where grid points did not stall.
    pub gap_consistency: f64,
    /// Bonferroni-adjusted binomial p-value of the on-grid count (see module docs).
    pub p_value: f64,
}

/// Fits the best grid to sorted, distinct `events` (indices into a series of `len` messages).
///
/// Returns `None` when fewer than `min_events` events exist or no candidate period leaves room
/// for `min_events` grid points in the series.
pub fn fit_period(
    events: &[usize],
    len: usize,
    tolerance: usize,
    min_events: usize,
) -> Option<PeriodFit> {
    let min_events = min_events.max(2);
    if events.len() < min_events {
        return None;
    }
    // A period must be at least twice the tolerance window, else the window alone covers
    // half the residues and "on the grid" means little.
    let width = 2 * tolerance + 1;
    let max_period = len / min_events;
    let candidates = candidate_periods(events, (2 * width).max(2), max_period);
    let factor = candidates.len() as f64;
    candidates
        .into_iter()
        .map(|n| fit_one(events, len, n, tolerance))
        .min_by(|a, b| {
            a.1.total_cmp(&b.1)
                .then(b.0.on_grid.cmp(&a.0.on_grid))
                .then(a.0.period.cmp(&b.0.period))
        })
        .map(|(mut fit, p_phase)| {
            fit.p_value = (p_phase * factor).min(1.0);
            fit
        })
}

/// The most frequent differences e[j+k] − e[j] (k = 1..=LOOKAHEAD) within [min, max].
fn candidate_periods(events: &[usize], min: usize, max: usize) -> Vec<usize> {
    let mut counts: HashMap<usize, usize> = HashMap::new();
    for (j, &e) in events.iter().enumerate() {
        for &later in events.iter().skip(j + 1).take(LOOKAHEAD) {
            let d = later - e;
            if (min..=max).contains(&d) {
                *counts.entry(d).or_default() += 1;
            }
        }
    }
    let mut by_count: Vec<(usize, usize)> = counts.into_iter().collect();
    by_count.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    by_count.truncate(MAX_CANDIDATES);
    by_count.into_iter().map(|(d, _)| d).collect()
}

/// Fits period `n`: best phase and its counts, with the binomial tail p-value adjusted for the
/// choice of phase (× n) but not yet for the choice of period. Unclamped, so candidates whose
/// p-values would all clamp to 1 are still ordered sensibly.
fn fit_one(events: &[usize], len: usize, n: usize, tol: usize) -> (PeriodFit, f64) {
    let mut hist = vec![0usize; n];
    for &e in events {
        hist[e % n] += 1;
    }
    let window =
        |phi: usize| -> usize { (0..=2 * tol).map(|d| hist[(phi + n - tol + d) % n]).sum() };
    // Best window; among equal windows the one centred on the most populated residue, so the
    // phase is the stalls' own index rather than a neighbour that the tolerance also reaches.
    let (phase, on_grid) = (0..n)
        .map(|phi| (phi, window(phi)))
        .max_by(|a, b| {
            a.1.cmp(&b.1)
                .then(hist[a.0].cmp(&hist[b.0]))
                .then(b.0.cmp(&a.0))
        })
        .unwrap_or((0, 0));
    let m = events.len();
    let chance = ((2 * tol + 1) as f64 / n as f64).min(1.0);
    let p_single = binomial_tail(on_grid, m, chance);
    let grid_points = if phase < len {
        (len - 1 - phase) / n + 1
    } else {
        0
    };
    let on: Vec<usize> = events
        .iter()
        .copied()
        .filter(|&e| circular_distance(e % n, phase, n) <= tol)
        .collect();
    let fit = PeriodFit {
        period: n,
        phase,
        on_grid,
        on_grid_fraction: on_grid as f64 / m as f64,
        chance_fraction: chance,
        grid_coverage: if grid_points == 0 {
            0.0
        } else {
            (on_grid as f64 / grid_points as f64).min(1.0)
        },
        gap_consistency: gap_consistency(&on, n, tol),
        p_value: 1.0, // set by the caller once the number of candidates is known
    };
    (fit, p_single * n as f64)
}

/// P(X ≥ k) for X ~ Binomial(m, p), as the regularised incomplete beta I_p(k, m − k + 1).
fn binomial_tail(k: usize, m: usize, p: f64) -> f64 {
    if k == 0 {
        return 1.0;
    }
    if k > m || p <= 0.0 {
        return 0.0;
    }
    if p >= 1.0 {
        return 1.0;
    }
    // beta_reg panics only for a or b <= 0 or x outside [0, 1], all excluded above.
    beta_reg(k as f64, (m - k + 1) as f64, p)
}

fn circular_distance(a: usize, b: usize, n: usize) -> usize {
    let d = a.abs_diff(b);
    d.min(n - d)
}

/// Fraction of consecutive gaps among on-grid events that equal n within ±2·tol.
fn gap_consistency(on: &[usize], n: usize, tol: usize) -> f64 {
    if on.len() < 2 {
        return 0.0;
    }
    let good = on
        .windows(2)
        .filter(|w| (w[1] - w[0]).abs_diff(n) <= 2 * tol)
        .count();
    good as f64 / (on.len() - 1) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_grid_is_found_with_its_phase() {
        let events: Vec<usize> = (0..50).map(|k| 7 + 41 * k).collect();
        let fit = fit_period(&events, 41 * 50 + 10, 0, 4).unwrap();
        assert_eq!(fit.period, 41);
        assert_eq!(fit.phase, 7);
        assert_eq!(fit.on_grid, 50);
        assert!((fit.gap_consistency - 1.0).abs() < 1e-12);
        assert!(fit.p_value < 1e-50, "{}", fit.p_value);
    }

    #[test]
    fn binomial_tail_matches_closed_form() {
        // P(X >= 2), X ~ Bin(3, 0.5) = 4/8.
        assert!((binomial_tail(2, 3, 0.5) - 0.5).abs() < 1e-12);
        assert!((binomial_tail(3, 3, 0.1) - 0.001).abs() < 1e-12);
        assert_eq!(binomial_tail(0, 3, 0.1), 1.0);
    }
}
