//! Seeded generators for synthetic test data (no external distribution crate needed).

#![allow(dead_code)]

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// A seeded source of uniform, normal and exponential variates.
pub struct Gen(ChaCha8Rng);

impl Gen {
    pub fn new(seed: u64) -> Gen {
        Gen(ChaCha8Rng::seed_from_u64(seed))
    }

    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        self.0.random::<f64>()
    }

    /// Normal by Box-Muller.
    pub fn normal(&mut self, mean: f64, sd: f64) -> f64 {
        let u1 = 1.0 - self.uniform(); // (0, 1]
        let u2 = self.uniform();
        mean + sd * (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// Exponential with the given mean, by inversion.
    pub fn exponential(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.uniform()).ln()
    }

    /// `n` normal variates.
    pub fn normals(&mut self, n: usize, mean: f64, sd: f64) -> Vec<f64> {
        (0..n).map(|_| self.normal(mean, sd)).collect()
    }
}

/// |a − b| ≤ tol, with a readable failure message.
#[track_caller]
pub fn assert_close(actual: f64, expected: f64, tol: f64) {
    assert!(
        (actual - expected).abs() <= tol,
        "actual {actual} differs from expected {expected} by more than {tol}"
    );
}
