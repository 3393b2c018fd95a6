//! Thin, panic-free wrappers over the reference distributions (Student t and standard normal).
//!
//! The CDFs and quantiles come from the `statrs` crate: Student t via the regularised incomplete
//! beta function I_x(a, b) (continued fraction, Press et al., *Numerical Recipes*, 3rd ed., §6.4)
//! and its inverse; the normal via erfc. `statrs` asserts on out-of-range probabilities, so every
//! wrapper here checks its arguments first and returns a `StatsError` instead of panicking.

use crate::error::{StatsError, check_unit_open};
use statrs::distribution::{ContinuousCDF, Normal, StudentsT};

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
