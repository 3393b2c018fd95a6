//! Seeds: same seed → identical decisions; different seed or direction → different; one
//! element's settings never shift another element's draws.

mod common;

use common::model;
use tcplab_emu::{
    DirectionConfig, Distribution, Jitter, LinkConfig, LinkModel, Loss, QueueLimit, Reorder,
    Verdict,
};

const MS: u64 = 1_000_000;

/// Everything on at once.
fn busy() -> DirectionConfig {
    DirectionConfig {
        delay_ns: 5 * MS,
        jitter: Some(Jitter {
            amount_ns: MS,
            distribution: Distribution::Normal,
            correlation: 0.3,
            allow_reorder: false,
        }),
        loss: Some(Loss::GilbertElliott {
            p: 0.02,
            r: 0.3,
            one_minus_h: 0.5,
            one_minus_k: 0.001,
        }),
        rate_bps: Some(50_000_000),
        queue: Some(QueueLimit::Packets(20)),
        overhead_bytes: 24,
        reorder: Some(Reorder {
            probability: 0.05,
            gap: 0,
        }),
        duplicate: 0.02,
        corrupt: 0.02,
        queue_discipline: None,
    }
}

fn verdicts(cfg: &DirectionConfig, seed: u64) -> Vec<Verdict> {
    let mut m = model(cfg, seed);
    (0..20_000u64)
        .map(|k| m.arrive(1200, k * 150_000))
        .collect()
}

#[test]
fn same_seed_same_decisions_different_seed_different() {
    let cfg = busy();
    let a = verdicts(&cfg, 42);
    assert_eq!(a, verdicts(&cfg, 42));
    let b = verdicts(&cfg, 43);
    let differing = a.iter().zip(&b).filter(|(x, y)| x != y).count();
    assert!(differing > 10_000, "only {differing} of 20000 differ");
    // Every kind of decision occurred, so the comparison covered them all.
    let m = {
        let mut m = model(&cfg, 42);
        for k in 0..20_000u64 {
            m.arrive(1200, k * 150_000);
        }
        m
    };
    let c = m.counters();
    assert!(c.dropped_loss > 0 && c.dropped_queue_full > 0);
    assert!(c.duplicated > 0 && c.corrupted > 0 && c.reordered > 0);
}

#[test]
fn link_directions_draw_from_different_streams_and_report_the_seed() {
    let cfg = LinkConfig {
        forward: busy(),
        reverse: busy(),
        seed: None,
    };
    let mut link = LinkModel::new(&cfg, 7).unwrap();
    assert_eq!(link.seed(), 7);
    let mut fwd = Vec::new();
    let mut rev = Vec::new();
    for k in 0..2000u64 {
        fwd.push(link.forward.arrive(1200, k * 150_000));
        rev.push(link.reverse.arrive(1200, k * 150_000));
    }
    assert_ne!(fwd, rev);
    let pinned = LinkConfig {
        seed: Some(99),
        ..cfg
    };
    assert_eq!(LinkModel::new(&pinned, 7).unwrap().seed(), 99);
}

/// Packet k's jitter and corruption are the same with 0% and 20% loss, for every packet
/// that survives both (arrivals 1 s apart so ordering never binds).
#[test]
fn loss_settings_do_not_shift_other_elements_draws() {
    let base = DirectionConfig {
        delay_ns: 50 * MS,
        jitter: Some(Jitter {
            amount_ns: 10 * MS,
            distribution: Distribution::Pareto,
            correlation: 0.2,
            allow_reorder: false,
        }),
        corrupt: 0.3,
        ..Default::default()
    };
    let lossy = DirectionConfig {
        loss: Some(Loss::Bernoulli { probability: 0.2 }),
        ..base.clone()
    };
    let mut a = model(&base, 5);
    let mut b = model(&lossy, 5);
    let mut compared = 0;
    for k in 0..10_000u64 {
        let now = k * 1_000_000_000;
        let (va, vb) = (a.arrive(1500, now), b.arrive(1500, now));
        if let Verdict::Send(db) = vb {
            assert_eq!(va, Verdict::Send(db), "packet {k}");
            compared += 1;
        }
    }
    assert!((7_500..8_500).contains(&compared));
}

/// The I/O layer moves a model into its scheduling thread.
#[test]
fn models_can_move_to_another_thread() {
    fn assert_send<T: Send + 'static>() {}
    assert_send::<LinkModel>();
    assert_send::<tcplab_emu::DirectionModel>();
}

/// A duplicate is a second departure right behind the original (it takes its own
/// serialisation time at the bottleneck).
#[test]
fn duplicate_follows_the_original_through_the_bottleneck() {
    let cfg = DirectionConfig {
        delay_ns: MS,
        rate_bps: Some(100_000_000),
        duplicate: 1.0,
        ..Default::default()
    };
    let mut m = model(&cfg, 1);
    let Verdict::Send(d) = m.arrive(1500, 0) else {
        panic!("dropped");
    };
    assert_eq!(d.len(), 2);
    assert_eq!(d.first().at, 120_000 + MS);
    assert_eq!(d.second().map(|s| s.at), Some(240_000 + MS));
    assert_eq!(m.counters().duplicated, 1);
    assert_eq!(m.counters().packets_out, 2);
}
