//! Thin, panic-free wrappers over the reference distributions (Student t, standard normal and
//! Poisson).
//!
//! The CDFs and quantiles come from the `statrs` crate: Student t via the regularised incomplete
//! beta function I_x(a, b) (continued fraction, Press et al., *Numerical Recipes*, 3rd ed., §6.4)
//! and its inverse; the normal via erfc. `statrs` asserts on out-of-range probabilities, so every
//! wrapper here checks its arguments first and returns a `StatsError` instead of panicking.

use crate::error::{StatsError, check_unit_open};
use statrs::distribution::{ContinuousCDF, DiscreteCDF, Gamma, Normal, Poisson, StudentsT};

/// The quantile t such that P(T ≤ t) = p for Student's t with `df` degrees of freedom.
pub fn student_t_quantile(p: f64, df: f64) -> Result<f64, StatsError> {
    check_unit_open("probability", p)?;
    Ok(student_t(df)?.inverse_cdf(p))
}

/// The survival function P(T > t) of Student's t with `df` degrees of freedom.
pub fn student_t_sf(t: f64, df: f64) -> Result<f64, StatsError> {
    Ok(student_t(df)?.sf(t))
}

/// The CDF P(T ≤ t) of Student's t with `df` degrees of freedom.
pub fn student_t_cdf(t: f64, df: f64) -> Result<f64, StatsError> {
    Ok(student_t(df)?.cdf(t))
}

/// The standard normal survival function P(Z > z).
pub fn normal_sf(z: f64) -> f64 {
    Normal::standard().sf(z)
}

/// The standard normal CDF P(Z ≤ z).
pub fn normal_cdf(z: f64) -> f64 {
    Normal::standard().cdf(z)
}

/// The standard normal quantile Φ⁻¹(p).
pub fn normal_quantile(p: f64) -> Result<f64, StatsError> {
    check_unit_open("probability", p)?;
    Ok(Normal::standard().inverse_cdf(p))
}

/// P(X ≥ k) for X Poisson with mean `mean`: how likely `k` or more events are when `mean` are
/// expected (1 for k = 0; 0 for k ≥ 1 when nothing is expected, and for a mean that is not a
/// finite non-negative number).
pub fn poisson_at_least(k: u64, mean: f64) -> f64 {
    if k == 0 {
        return 1.0;
    }
    if !(mean.is_finite() && mean > 0.0) {
        return 0.0;
    }
    Poisson::new(mean).map_or(0.0, |p| p.sf(k - 1))
}

/// The exact one-sided upper confidence bound of a Poisson mean after `k` events were counted
/// (Garwood): the mean m with P(X ≤ k | m) = 1 - `confidence`, the Gamma(k + 1, 1) quantile at
/// `confidence`. 0 events at 95 % give about 3.0, the "rule of three".
pub fn poisson_mean_upper(k: u64, confidence: f64) -> Result<f64, StatsError> {
    check_unit_open("confidence", confidence)?;
    let shape = k as f64 + 1.0;
    let gamma = Gamma::new(shape, 1.0).map_err(|_| StatsError::InvalidParameter {
        name: "events",
        value: k.to_string(),
        expected: "a count small enough for a finite Gamma shape",
    })?;
    Ok(gamma.inverse_cdf(confidence))
}

fn student_t(df: f64) -> Result<StudentsT, StatsError> {
    if !(df.is_finite() && df > 0.0) {
        return Err(invalid_df(df));
    }
    StudentsT::new(0.0, 1.0, df).map_err(|_| invalid_df(df))
}

fn invalid_df(df: f64) -> StatsError {
    StatsError::InvalidParameter {
        name: "degrees of freedom",
        value: df.to_string(),
        expected: "a finite number > 0 (at least two samples per group)",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poisson_tail_matches_the_closed_form() {
        // P(X >= 2 | 1.5) = 1 - e^-1.5 (1 + 1.5)
        let want = 1.0 - (-1.5f64).exp() * 2.5;
        assert!((poisson_at_least(2, 1.5) - want).abs() < 1e-12);
        // P(X >= 1 | 0.1) = 1 - e^-0.1
        assert!((poisson_at_least(1, 0.1) - (1.0 - (-0.1f64).exp())).abs() < 1e-12);
        assert_eq!(poisson_at_least(0, 0.0), 1.0);
        assert_eq!(poisson_at_least(3, 0.0), 0.0);
        assert_eq!(poisson_at_least(3, f64::NAN), 0.0);
        assert!(poisson_at_least(6, 0.5) < 1e-4);
    }

    #[test]
    fn poisson_upper_bound_is_garwoods() {
        // k = 0: -ln(0.05) = 2.9957; k = 1 at 95 %: 4.7439; k = 10: 16.962 (chi-square 0.95 on 22 df, halved; Garwood's tables).
        assert!((poisson_mean_upper(0, 0.95).unwrap() - 2.995_732).abs() < 1e-5);
        assert!((poisson_mean_upper(1, 0.95).unwrap() - 4.743_865).abs() < 1e-5);
        assert!((poisson_mean_upper(10, 0.95).unwrap() - 16.962).abs() < 1e-3);
        assert!(poisson_mean_upper(3, 1.0).is_err());
    }
}
