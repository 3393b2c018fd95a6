use super::*;
use crate::aqm::CodelParams;
use crate::{DirectionModel, Distribution, Jitter, Loss, QueueLimit, Verdict};

const MS: Nanos = 1_000_000;
const US: Nanos = 1_000;

fn path() -> DirectionConfig {
    DirectionConfig {
        delay_ns: 20 * MS,
        rate_bps: Some(20_000_000),
        queue: Some(QueueLimit::Packets(40)),
        loss: Some(Loss::Bernoulli { probability: 0.02 }),
        jitter: Some(Jitter {
            amount_ns: 300 * US,
            distribution: Distribution::Normal,
            correlation: 0.0,
            allow_reorder: false,
        }),
        duplicate: 0.01,
        corrupt: 0.01,
        ..DirectionConfig::default()
    }
}

/// Bursty arrivals of varied sizes, about 2.3 times the rate on average.
fn arrivals() -> Vec<(Nanos, Frame)> {
    let mut t = 0;
    (0..5_000u64)
        .map(|i| {
            t += if i % 20 == 0 { 2 * MS } else { 40 * US };
            let len = 64 + (i as u32 * 53) % 1450;
            (
                t,
                Frame {
                    id: i,
                    len,
                    flow: (i % 3) as u32,
                    ecn: Ecn::NotEct,
                },
            )
        })
        .collect()
}

/// With drop-tail as its discipline, the deferred chain decides exactly what the arrival-time
/// model does: the same losses, refusals, duplicates, corruptions and departures to the ns.
#[test]
fn drop_tail_deferred_equals_the_arrival_time_model() {
    let cfg = path();
    let mut model = DirectionModel::new(&cfg, 11).unwrap();
    let mut deferred =
        DeferredDirection::new(&cfg, AqmConfig::Droptail, 11, Direction::Forward).unwrap();
    let mut expected: Vec<(u64, bool, Result<Departure, DeferredDrop>)> = Vec::new();
    let mut decided = Vec::new();
    for (t, f) in arrivals() {
        match model.arrive(f.len, t) {
            Verdict::Drop(crate::DropCause::Loss) => {
                expected.push((f.id, false, Err(DeferredDrop::Loss)))
            }
            Verdict::Drop(crate::DropCause::QueueFull) => {
                expected.push((f.id, false, Err(DeferredDrop::QueueFull)))
            }
            Verdict::Send(d) => {
                for (k, dep) in d.iter().enumerate() {
                    expected.push((f.id, k == 1, Ok(*dep)));
                }
            }
        }
        deferred.offer(f, t, &mut decided);
    }
    deferred.advance(Nanos::MAX, &mut decided);
    let mut got: Vec<(u64, bool, Result<Departure, DeferredDrop>)> = decided
        .iter()
        .map(|d| match *d {
            Decision::Depart {
                id,
                copy,
                departure,
                mark_ce,
            } => {
                assert!(!mark_ce);
                (id, copy, Ok(departure))
            }
            Decision::Drop { id, copy, cause } => (id, copy, Err(cause)),
        })
        .collect();
    // The arrival-time model counts a refused duplicate without a verdict: drop those here.
    got.retain(|(_, copy, r)| !(*copy && r.is_err()));
    got.sort_by_key(|(id, copy, _)| (*id, *copy));
    expected.sort_by_key(|(id, copy, _)| (*id, *copy));
    assert_eq!(got.len(), expected.len());
    for (g, e) in got.iter().zip(&expected) {
        assert_eq!(g, e);
    }
    let (a, b) = (model.counters(), deferred.counters());
    assert_eq!(
        (
            a.dropped_loss,
            a.dropped_queue_full,
            a.duplicated,
            a.corrupted,
            a.packets_out
        ),
        (
            b.dropped_loss,
            b.dropped_queue_full,
            b.duplicated,
            b.corrupted,
            b.packets_out
        )
    );
    assert!(
        a.dropped_queue_full > 0 && a.duplicated > 0,
        "the test reaches every element"
    );
    assert_eq!(deferred.queued(), 0);
}

/// CoDel with ECN behind a 20 ms delay line: every departure is its serialisation end plus
/// the delay; ECT packets are marked, never dropped below the limit.
#[test]
fn codel_with_ecn_marks_and_the_delay_line_follows_the_link() {
    let cfg = DirectionConfig {
        delay_ns: 20 * MS,
        rate_bps: Some(10_000_000),
        queue: Some(QueueLimit::Packets(10_000)),
        ..DirectionConfig::default()
    };
    let codel = AqmConfig::Codel(CodelParams {
        ecn: true,
        ..CodelParams::default()
    });
    let mut d = DeferredDirection::new(&cfg, codel, 1, Direction::Forward).unwrap();
    let mut out = Vec::new();
    for i in 0..3_000u64 {
        let f = Frame {
            id: i,
            len: 1500,
            flow: 1,
            ecn: Ecn::Ect0,
        };
        d.offer(f, i * 600 * US, &mut out);
        if let Some(due) = d.next_due().filter(|t| *t <= i * 600 * US) {
            d.advance(due, &mut out);
        }
    }
    d.advance(Nanos::MAX, &mut out);
    assert!(
        out.iter().all(|x| matches!(x, Decision::Depart { .. })),
        "an ECT packet dropped"
    );
    let marks = out
        .iter()
        .filter(|x| matches!(x, Decision::Depart { mark_ce: true, .. }))
        .count();
    assert!(marks > 5, "{marks} marks");
    assert_eq!(d.counters().marked_ce, marks as u64);
    assert_eq!(d.discipline().marked, marks as u64);
    // Back to back at 1.2 ms a packet, 20 ms later: the k-th departure at 20 ms + (k+1) x 1.2 ms.
    let first: Vec<Nanos> = out
        .iter()
        .take(3)
        .map(|x| match x {
            Decision::Depart { departure, .. } => departure.at,
            Decision::Drop { .. } => 0,
        })
        .collect();
    assert_eq!(first, [21_200 * US, 22_400 * US, 23_600 * US]);
}

#[test]
fn a_discipline_without_a_rate_is_refused_naming_the_flags() {
    let e = DeferredDirection::new(
        &DirectionConfig::default(),
        AqmConfig::named("fq_codel").unwrap(),
        1,
        Direction::Forward,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("--queue-discipline") && e.contains("--rate"),
        "{e}"
    );
}
