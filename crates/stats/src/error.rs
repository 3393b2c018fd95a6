//! The one error type of the crate.
//!
//! Every variant names the input (`what`) or parameter (`name`) it is about and says what would
//! be accepted, so a caller (the study runner, doctor, the CLI) can show it to a user unchanged.

use thiserror::Error;

/// Why a statistic could not be computed from the data or parameters given.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum StatsError {
    /// The sample set is empty.
    #[error("{what}: no samples; give at least one finite value")]
    Empty {
        /// Which input was empty (e.g. "baseline samples").
        what: &'static str,
    },
    /// A sample is NaN or infinite; statistics over it would be meaningless.
    #[error("{what}: sample #{index} is {value}, not a finite number; drop or fix it first")]
    NonFinite {
        /// Which input holds the value.
        what: &'static str,
        /// Zero-based position of the first offending sample.
        index: usize,
        /// The offending value.
        value: f64,
    },
    /// The method needs more samples than were given.
    #[error("{what}: {got} sample(s) but this needs at least {need}; run more repetitions")]
    TooFew {
        /// Which input is too small.
        what: &'static str,
        /// The minimum the method needs.
        need: usize,
        /// How many were given.
        got: usize,
    },
    /// A parameter is outside its valid range.
    #[error("parameter `{name}` = {value}: must be {expected}")]
    InvalidParameter {
        /// The parameter's name as the caller knows it (e.g. "level", "resamples").
        name: &'static str,
        /// The rejected value, formatted.
        value: String,
        /// What would be accepted (e.g. "in (0, 1)").
        expected: &'static str,
    },
    /// One named setting (configuration) of a ranking or race has bad samples.
    #[error("setting `{name}`: {source}")]
    Setting {
        /// The setting's name as the caller gave it.
        name: String,
        /// What is wrong with its samples.
        #[source]
        source: Box<StatsError>,
    },
    /// A ratio's denominator is zero, so the ratio is undefined.
    #[error("{what}: mean is zero, so the ratio is undefined; check the objective's units")]
    ZeroDenominator {
        /// Which mean was zero.
        what: &'static str,
    },
}

/// Checks that `xs` is non-empty and all finite; the common guard of every entry point.
pub(crate) fn check_samples(what: &'static str, xs: &[f64]) -> Result<(), StatsError> {
    if xs.is_empty() {
        return Err(StatsError::Empty { what });
    }
    match xs.iter().position(|x| !x.is_finite()) {
        Some(index) => Err(StatsError::NonFinite {
            what,
            index,
            value: xs[index],
        }),
        None => Ok(()),
    }
}

/// Checks that a confidence/significance level lies strictly inside (0, 1).
pub(crate) fn check_unit_open(name: &'static str, value: f64) -> Result<(), StatsError> {
    if value > 0.0 && value < 1.0 {
        Ok(())
    } else {
        Err(StatsError::InvalidParameter {
            name,
            value: value.to_string(),
            expected: "strictly between 0 and 1",
        })
    }
}

/// Checks that there are at least `need` samples.
pub(crate) fn check_min_len(what: &'static str, xs: &[f64], need: usize) -> Result<(), StatsError> {
    if xs.len() < need {
        Err(StatsError::TooFew {
            what,
            need,
            got: xs.len(),
        })
    } else {
        Ok(())
    }
}
