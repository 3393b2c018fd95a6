//! How likely one collective meets a stall. An all-to-all among N processes sends one message
//! on each of the N·(N−1) ordered pairs, and it is as slow as its slowest message: one stalled
//! message stalls the whole collective (seed 004). With pair i's stall rate q_i = k_i/n_i
//! (stalled messages of its test over messages sent), and pairs taken as independent,
//! P(at least one stall) = 1 − Π(1 − q_i).
//!
//! The interval treats stalls as rare events: each pair's count is Poisson, so their total K
//! is Poisson too, and Garwood's exact interval for K (the gamma quantiles behind the
//! chi-square form; Garwood 1936) bounds the expected stalls per collective S = Σ q_i by
//! scaling it with S/K (with K = 0, by the mean 1/n_i). P's bounds are 1 − e^(−S_bound). With no
//! stall seen anywhere the point estimate is 0 and the upper bound says how rare a stall may
//! still be given the messages sent.

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, Gamma};

use crate::StatsError;

/// One pair's count: messages that stalled out of those sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PairStalls {
    /// Stalled messages.
    pub stalled: u64,
    /// Messages of the test.
    pub messages: u64,
}

/// The probability that one all-to-all meets at least one stall.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CollectiveStall {
    /// 1 − Π(1 − k_i/n_i).
    pub probability: f64,
    /// Lower end of the 95 % interval.
    pub low: f64,
    /// Upper end of the 95 % interval.
    pub high: f64,
    /// Pairs that entered the estimate.
    pub pairs: usize,
    /// Stalled messages over all pairs.
    pub stalls: u64,
}

/// [`CollectiveStall`] over `pairs` at 95 %. Errors: no pairs, a pair with no messages or more
/// stalls than messages.
pub fn all_to_all_stall(pairs: &[PairStalls]) -> Result<CollectiveStall, StatsError> {
    if pairs.is_empty() {
        return Err(StatsError::Empty { what: "pairs" });
    }
    if let Some(p) = pairs
        .iter()
        .find(|p| p.messages == 0 || p.stalled > p.messages)
    {
        return Err(StatsError::InvalidParameter {
            name: "pair stalls",
            value: format!("{} stalled of {}", p.stalled, p.messages),
            expected: "between 0 and the pair's messages, which must be at least 1",
        });
    }
    let log_clear: f64 = pairs
        .iter()
        .map(|p| (-(p.stalled as f64) / p.messages as f64).ln_1p())
        .sum();
    let probability = -log_clear.exp_m1();
    let total: u64 = pairs.iter().map(|p| p.stalled).sum();
    let rate_sum: f64 = pairs
        .iter()
        .map(|p| p.stalled as f64 / p.messages as f64)
        .sum();
    let per_stall = if total > 0 {
        rate_sum / total as f64
    } else {
        pairs.iter().map(|p| 1.0 / p.messages as f64).sum::<f64>() / pairs.len() as f64
    };
    let (k_low, k_high) = garwood(total, 0.95)?;
    let to_p = |k: f64| -(-k * per_stall).exp_m1();
    Ok(CollectiveStall {
        probability,
        low: to_p(k_low).min(probability),
        high: to_p(k_high).max(probability).min(1.0),
        pairs: pairs.len(),
        stalls: total,
    })
}

/// Garwood's exact two-sided interval for a Poisson mean given `k` events.
fn garwood(k: u64, level: f64) -> Result<(f64, f64), StatsError> {
    let tail = (1.0 - level) / 2.0;
    let quantile = |shape: f64, p: f64| {
        Gamma::new(shape, 1.0)
            .map(|g| g.inverse_cdf(p))
            .map_err(|_| StatsError::InvalidParameter {
                name: "stalls",
                value: shape.to_string(),
                expected: "a count the gamma quantile takes (finite)",
            })
    };
    let low = if k == 0 {
        0.0
    } else {
        quantile(k as f64, tail)?
    };
    let high = quantile(k as f64 + 1.0, 1.0 - tail)?;
    Ok((low, high))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn pairs(n: usize, stalled: u64, messages: u64) -> Vec<PairStalls> {
        vec![PairStalls { stalled, messages }; n]
    }

    #[test]
    fn one_stalled_pair_in_a_clean_mesh_sets_the_point_estimate() {
        let mut p = pairs(11, 0, 100_000);
        p.push(PairStalls {
            stalled: 1_000,
            messages: 100_000,
        });
        let c = all_to_all_stall(&p).unwrap();
        assert!((c.probability - 0.01).abs() < 1e-12, "{c:?}");
        // 1,000 events are known to about ±6 %.
        assert!(c.low > 0.009 && c.low < 0.01, "{c:?}");
        assert!(c.high > 0.01 && c.high < 0.0115, "{c:?}");
    }

    #[test]
    fn no_stall_anywhere_gives_zero_and_an_upper_bound_that_shrinks_with_messages() {
        let few = all_to_all_stall(&pairs(240, 0, 1_000)).unwrap();
        let many = all_to_all_stall(&pairs(240, 0, 100_000)).unwrap();
        assert_eq!((few.probability, few.low), (0.0, 0.0));
        // Garwood's upper bound for 0 events is 3.69: 3.69 expected stalls in 1,000 messages.
        assert!(
            (few.high - (1.0 - (-3.689 / 1_000.0f64).exp())).abs() < 1e-4,
            "{few:?}"
        );
        assert!(few.high > many.high * 50.0, "{few:?} {many:?}");
    }

    #[test]
    fn the_interval_covers_the_truth_in_about_95_percent_of_meshes() {
        // 20 pairs, each stalling 1 message in 2,000 on average: P = 1 − (1 − 5e-4)^20.
        let truth = 1.0 - (1.0f64 - 5e-4).powi(20);
        let mut rng = ChaCha8Rng::seed_from_u64(99);
        let meshes = 200;
        let mut covered = 0;
        for _ in 0..meshes {
            let p: Vec<PairStalls> = (0..20)
                .map(|_| PairStalls {
                    stalled: (0..2_000).filter(|_| rng.random::<f64>() < 5e-4).count() as u64,
                    messages: 2_000,
                })
                .collect();
            let c = all_to_all_stall(&p).unwrap();
            covered += u32::from(c.low <= truth && truth <= c.high);
        }
        // Garwood is conservative: at least nominal coverage (190 of 200 would be 95 %).
        assert!(covered >= 183, "covered {covered} of {meshes}");
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        assert!(all_to_all_stall(&[]).is_err());
        assert!(all_to_all_stall(&pairs(1, 2, 1)).is_err());
        assert!(all_to_all_stall(&pairs(1, 0, 0)).is_err());
    }

    #[test]
    fn a_pair_that_always_stalls_makes_every_collective_stall() {
        let c = all_to_all_stall(&pairs(3, 10, 10)).unwrap();
        assert_eq!(c.probability, 1.0);
        assert!(c.high <= 1.0);
    }
}
