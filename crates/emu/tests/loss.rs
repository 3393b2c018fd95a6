//! Loss models against their exact or stationary figures.

mod common;

use common::model;
use tcplab_emu::{DirectionConfig, DropCause, Loss, LossPattern, Verdict};

fn lossy(loss: Loss) -> DirectionConfig {
    DirectionConfig {
        loss: Some(loss),
        ..Default::default()
    }
}

/// Loss decisions for `n` packets.
fn run(cfg: &DirectionConfig, seed: u64, n: u64) -> Vec<bool> {
    let mut m = model(cfg, seed);
    (0..n)
        .map(|k| m.arrive(1500, k * 1000) == Verdict::Drop(DropCause::Loss))
        .collect()
}

/// 1% Bernoulli over 10^6 packets: the count lies in the 99% binomial interval
/// 10000 ± 2.576·√(10^6·0.01·0.99) = [9744, 10256], for each of several seeds.
#[test]
fn bernoulli_one_percent_is_within_the_binomial_interval() {
    let cfg = lossy(Loss::Bernoulli { probability: 0.01 });
    for seed in [1, 2, 3, 0xdead_beef] {
        let lost = run(&cfg, seed, 1_000_000).iter().filter(|&&l| l).count();
        assert!((9744..=10256).contains(&lost), "seed {seed}: {lost} lost");
    }
}

/// Gilbert-Elliott p = 1%, r = 10%, 1-h = 70%, 1-k = 0.1%: stationary loss
/// π_bad = p/(p+r) = 1/11, loss = 10/11·0.001 + 1/11·0.7 = 0.064545...
/// Tolerance ±0.003 absolute: the chain's states are correlated (λ = 1−p−r = 0.89), so the
/// effective sample is about n·(1−λ)/(1+λ) ≈ 58 000 and the estimate's sd is ≈ 0.0009; 0.003
/// is over 3 sd.
#[test]
fn gilbert_elliott_matches_the_stationary_formula() {
    let loss = Loss::GilbertElliott {
        p: 0.01,
        r: 0.10,
        one_minus_h: 0.70,
        one_minus_k: 0.001,
    };
    let expected = loss.mean_loss();
    assert!((expected - 0.064_545_45).abs() < 1e-6);
    let cfg = lossy(loss);
    for seed in [1, 2, 3] {
        let lost = run(&cfg, seed, 1_000_000).iter().filter(|&&l| l).count();
        let rate = lost as f64 / 1e6;
        assert!((rate - expected).abs() < 0.003, "seed {seed}: {rate}");
    }
}

/// Simple Gilbert (1-h = 100%, 1-k = 0): a packet is lost exactly when the chain is bad, so
/// loss = p/(p+r) and loss bursts have mean length 1/r.
#[test]
fn simple_gilbert_bursts_have_mean_length_one_over_r() {
    let cfg = lossy(Loss::GilbertElliott {
        p: 0.01,
        r: 0.25,
        one_minus_h: 1.0,
        one_minus_k: 0.0,
    });
    let seq = run(&cfg, 9, 1_000_000);
    let lost = seq.iter().filter(|&&l| l).count() as f64;
    let bursts = seq.windows(2).filter(|w| !w[0] && w[1]).count() as f64;
    assert!((lost / 1e6 - 0.01 / 0.26).abs() < 0.002, "{}", lost / 1e6);
    assert!(
        (lost / bursts - 4.0).abs() < 0.1,
        "mean burst {}",
        lost / bursts
    );
}

/// A pattern is exact and repeats: every 41st packet of 10 000.
#[test]
fn pattern_drops_every_41st_packet() {
    let pattern = LossPattern::parse("# the 41st-packet stall\nperiod 41\ndrop 41\n").unwrap();
    let cfg = lossy(Loss::Pattern(pattern));
    let seq = run(&cfg, 1, 10_000);
    let dropped: Vec<usize> = (0..seq.len()).filter(|&i| seq[i]).map(|i| i + 1).collect();
    assert_eq!(dropped.len(), 10_000 / 41);
    assert!(dropped.iter().all(|n| n % 41 == 0));
}

/// A lost packet takes no room in the queue: loss is applied at the entry.
#[test]
fn lost_packets_do_not_occupy_the_queue() {
    let cfg = DirectionConfig {
        loss: Some(Loss::Bernoulli { probability: 1.0 }),
        rate_bps: Some(1_000_000),
        ..Default::default()
    };
    let mut m = model(&cfg, 1);
    for _ in 0..100 {
        assert_eq!(m.arrive(1500, 0), Verdict::Drop(DropCause::Loss));
    }
    assert_eq!(m.counters().queue.max_packets, 0);
    assert_eq!(m.counters().dropped_loss, 100);
}
