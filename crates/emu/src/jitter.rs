//! The jitter source: a stream of variates Z, optionally correlated.
//!
//! Correlation is applied to the latent Gaussian as an AR(1) process,
//! `g[n] = ρ·g[n−1] + √(1−ρ²)·e[n]`, which keeps `g` standard normal, so every distribution
//! keeps its shape and spread (netem's `next = (1−ρ)·rand + ρ·last` shrinks the spread of
//! correlated jitter instead). The lag-1 correlation of the delays is exactly ρ for normal and
//! `(6/π)·asin(ρ/2)` for uniform.

use rand_distr::{Distribution as _, StandardNormal};

use crate::rng::Rng;
use crate::{Distribution, Jitter, Nanos};

/// Draws jitter offsets in ns for one direction.
#[derive(Debug, Clone)]
pub struct JitterSource {
    amount: f64,
    distribution: Distribution,
    rho: f64,
    innovation: f64,
    latent: Option<f64>,
    rng: Rng,
}

impl JitterSource {
    /// A source for `cfg` drawing from `rng`.
    pub(crate) fn new(cfg: Option<&Jitter>, rng: Rng) -> Self {
        let mut s = Self {
            amount: 0.0,
            distribution: Distribution::Uniform,
            rho: 0.0,
            innovation: 1.0,
            latent: None,
            rng,
        };
        s.reconfigure(cfg);
        s
    }

    /// Applies new settings, keeping the stream and (for correlation) the last latent value.
    pub(crate) fn reconfigure(&mut self, cfg: Option<&Jitter>) {
        match cfg {
            Some(j) => {
                self.amount = j.amount_ns as f64;
                self.distribution = j.distribution.clone();
                self.rho = j.correlation;
                self.innovation = (1.0 - j.correlation * j.correlation).sqrt();
            }
            None => {
                self.amount = 0.0;
                self.rho = 0.0;
                self.innovation = 1.0;
            }
        }
    }

    /// The next variate Z (exactly one latent draw, so the stream stays aligned with packet
    /// numbers).
    pub fn next_z(&mut self) -> f64 {
        let e: f64 = StandardNormal.sample(&mut self.rng);
        let g = match self.latent {
            Some(last) if self.rho > 0.0 => self.rho * last + self.innovation * e,
            _ => e,
        };
        self.latent = Some(g);
        self.distribution.z(g)
    }

    /// The next offset in ns, `amount × Z` rounded; may be negative. 0 without a draw when
    /// the amount is 0.
    pub fn next_offset(&mut self) -> i64 {
        if self.amount == 0.0 {
            // Disabled: no draw, so an idle element costs nothing per packet.
            return 0;
        }
        let z = self.next_z();
        (self.amount * z).round() as i64
    }

    /// The configured amount in ns.
    pub fn amount(&self) -> Nanos {
        self.amount as Nanos
    }
}
