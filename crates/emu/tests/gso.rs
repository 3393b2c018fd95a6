//! GSO super-packets as trains of wire packets (`DirectionModel::arrive_train`), in virtual
//! time, and which configurations need per-packet granularity (`needs_per_packet`).

mod common;

use common::{model, sent};
use tcplab_emu::{DirectionConfig, DropCause, LinkConfig, Loss, QueueLimit, Reorder, Verdict};

const US: u64 = 1_000;
const MS: u64 = 1_000_000;

fn link_100mbit(queue: u32) -> DirectionConfig {
    DirectionConfig {
        delay_ns: 10 * MS,
        rate_bps: Some(100_000_000),
        queue: Some(QueueLimit::Packets(queue)),
        ..Default::default()
    }
}

/// A 10-segment train of 1500-byte wire packets at 100 Mbit/s leaves the bottleneck exactly
/// when the 10th packet would (10 × 120 µs), then 10 ms of propagation; the next train starts
/// behind it.
#[test]
fn a_ten_segment_train_departs_when_ten_packets_would_finish() {
    let cfg = link_100mbit(1000);
    let mut train = model(&cfg, 1);
    let mut packets = model(&cfg, 1);
    let t0 = 5 * MS;
    let d = sent(train.arrive_train(15_000, 10, t0));
    assert_eq!(d.first().at, t0 + 1_200 * US + 10 * MS);
    let last = (0..10)
        .map(|_| sent(packets.arrive(1500, t0)).first().at)
        .last();
    assert_eq!(last, Some(d.first().at));
    let d2 = sent(train.arrive_train(3_000, 2, t0));
    assert_eq!(d2.first().at, t0 + 1_440 * US + 10 * MS);
    let c = train.counters();
    assert_eq!((c.packets_in, c.packets_out, c.bytes_in), (12, 12, 18_000));
    assert_eq!(c.queue.packets, 12, "every segment occupies the queue");
}

/// The queue limit counts segments: with 64 places, a 44-segment train fits, a second one
/// does not (88 > 64) and is dropped whole, counted as 44 packets; a 20-segment one fits.
#[test]
fn queue_limits_in_packets_count_segments() {
    let mut m = model(&link_100mbit(64), 1);
    assert!(matches!(m.arrive_train(44 * 1514, 44, 0), Verdict::Send(_)));
    assert_eq!(
        m.arrive_train(44 * 1514, 44, 0),
        Verdict::Drop(DropCause::QueueFull)
    );
    assert!(matches!(m.arrive_train(20 * 1514, 20, 0), Verdict::Send(_)));
    assert_eq!(
        m.arrive_train(1514, 1, 0),
        Verdict::Drop(DropCause::QueueFull)
    );
    let c = m.counters();
    assert_eq!(c.packets_in, 44 + 44 + 20 + 1);
    assert_eq!(c.dropped_queue_full, 45);
    assert_eq!(c.queue.max_packets, 64);
}

/// Without a rate a train is a single departure after the delay.
#[test]
fn without_a_rate_a_train_only_takes_the_delay() {
    let cfg = DirectionConfig {
        delay_ns: 10 * MS,
        ..Default::default()
    };
    let mut m = model(&cfg, 1);
    assert_eq!(sent(m.arrive_train(64_000, 44, 3)).first().at, 3 + 10 * MS);
}

#[test]
fn per_packet_elements_are_named_with_their_direction() {
    let mut link = LinkConfig::default();
    link.forward.delay_ns = 10 * MS;
    link.forward.rate_bps = Some(1_000_000_000);
    link.reverse.jitter = None;
    assert_eq!(link.needs_per_packet(), None);
    link.reverse.loss = Some(Loss::Bernoulli { probability: 0.0 });
    assert_eq!(link.needs_per_packet(), None, "0 % loss drops nothing");
    link.reverse.loss = Some(Loss::Bernoulli { probability: 0.01 });
    assert_eq!(link.needs_per_packet(), Some("reverse.loss"));
    link.forward.corrupt = 0.001;
    assert_eq!(link.needs_per_packet(), Some("forward.corrupt"));
    link.forward.reorder = Some(Reorder {
        probability: 0.1,
        gap: 0,
    });
    assert_eq!(link.needs_per_packet(), Some("forward.reorder"));
    link.forward.duplicate = 0.01;
    assert_eq!(link.forward.needs_per_packet(), Some("duplicate"));
}
