//! Which direction of the objective is better.

use serde::{Deserialize, Serialize};

/// Whether smaller (time, per-message cost, latency) or larger (throughput, transactions/s)
/// values of the objective are better.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Objective {
    /// Smaller is better (e.g. seconds per message).
    #[serde(alias = "minimize", alias = "min")]
    Minimise,
    /// Larger is better (e.g. bits per second).
    #[serde(alias = "maximize", alias = "max")]
    Maximise,
}

impl Objective {
    /// True when `a` is strictly better than `b` under this objective.
    pub fn better(self, a: f64, b: f64) -> bool {
        match self {
            Objective::Minimise => a < b,
            Objective::Maximise => a > b,
        }
    }

    /// Orders two values best-first (for sorting); NaN-free inputs are assumed, NaN sorts last.
    pub fn cmp_best_first(self, a: f64, b: f64) -> std::cmp::Ordering {
        let ord = match self {
            Objective::Minimise => a.partial_cmp(&b),
            Objective::Maximise => b.partial_cmp(&a),
        };
        ord.unwrap_or_else(|| a.is_nan().cmp(&b.is_nan()))
    }

    /// The value of a pair that is best under this objective.
    pub fn best_of(self, a: f64, b: f64) -> f64 {
        if self.better(b, a) { b } else { a }
    }

    /// The quantile level that describes the *bad* tail at `q` (e.g. q = 0.9): the q-quantile
    /// when minimising (slow runs are high), the (1 − q)-quantile when maximising.
    pub fn pessimistic_quantile(self, q: f64) -> f64 {
        match self {
            Objective::Minimise => q,
            Objective::Maximise => 1.0 - q,
        }
    }
}
