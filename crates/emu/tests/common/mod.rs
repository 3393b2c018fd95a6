//! Helpers shared by the integration tests.
#![allow(dead_code)]

use tcplab_emu::{Departures, DirectionConfig, DirectionModel, Nanos, Verdict};

/// A model of `cfg` with `seed`.
pub fn model(cfg: &DirectionConfig, seed: u64) -> DirectionModel {
    DirectionModel::new(cfg, seed).expect("valid config")
}

/// The departures of a packet that must be sent.
pub fn sent(v: Verdict) -> Departures {
    match v {
        Verdict::Send(d) => d,
        Verdict::Drop(c) => panic!("expected Send, got Drop({c:?})"),
    }
}

/// Offers `n` packets of `len` bytes at `now + k·gap` and returns each verdict.
pub fn offer(m: &mut DirectionModel, n: usize, len: u32, start: Nanos, gap: Nanos) -> Vec<Verdict> {
    (0..n as u64)
        .map(|k| m.arrive(len, start + k * gap))
        .collect()
}

/// Sample mean and (population) standard deviation.
pub fn mean_sd(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
    (mean, var.sqrt())
}

/// Lag-1 autocorrelation.
pub fn lag1(xs: &[f64]) -> f64 {
    let (mean, sd) = mean_sd(xs);
    let cov = xs
        .windows(2)
        .map(|w| (w[0] - mean) * (w[1] - mean))
        .sum::<f64>()
        / (xs.len() - 1) as f64;
    cov / (sd * sd)
}
