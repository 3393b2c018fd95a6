//! The bottleneck in virtual time: drop-tail, exact spacing, no drift, occupancy, reconfigure.

mod common;

use common::{model, offer, sent};
use tcplab_emu::{DirectionConfig, DropCause, QueueLimit, Verdict};

const US: u64 = 1_000;
const MS: u64 = 1_000_000;

fn rate_cfg(rate_bps: u64, queue: QueueLimit, overhead: u32) -> DirectionConfig {
    DirectionConfig {
        rate_bps: Some(rate_bps),
        queue: Some(queue),
        overhead_bytes: overhead,
        ..Default::default()
    }
}

/// 100 Mbit/s, 64-packet queue, 100 × 1500 B at t = 0. The limit counts the packet on the
/// wire, so packets 0..=63 are accepted and 64..=99 dropped; packet k leaves the bottleneck
/// at (k+1) × 120 µs, then 10 ms of propagation.
#[test]
fn burst_into_64_packet_queue_drops_exactly_the_overflow() {
    let mut cfg = rate_cfg(100_000_000, QueueLimit::Packets(64), 0);
    cfg.delay_ns = 10 * MS;
    let mut m = model(&cfg, 1);
    let verdicts = offer(&mut m, 100, 1500, 0, 0);
    for (k, v) in verdicts.iter().enumerate() {
        if k < 64 {
            let d = sent(*v);
            assert_eq!(d.len(), 1);
            assert_eq!(
                d.first().at,
                (k as u64 + 1) * 120 * US + 10 * MS,
                "packet {k}"
            );
        } else {
            assert_eq!(*v, Verdict::Drop(DropCause::QueueFull), "packet {k}");
        }
    }
    let c = m.counters();
    assert_eq!(c.packets_in, 100);
    assert_eq!(c.packets_out, 64);
    assert_eq!(c.dropped(DropCause::QueueFull), 36);
    assert_eq!(c.dropped(DropCause::Loss), 0);
    assert_eq!(c.queue.max_packets, 64);
    assert_eq!(c.queue.max_bytes, 64 * 1500);
}

/// Once the head has left, one more packet fits: the queue is drop-tail on occupancy.
#[test]
fn room_frees_when_the_head_finishes_serialising() {
    let mut m = model(&rate_cfg(100_000_000, QueueLimit::Packets(64), 0), 1);
    offer(&mut m, 64, 1500, 0, 0);
    assert_eq!(
        m.arrive(1500, 120 * US - 1),
        Verdict::Drop(DropCause::QueueFull)
    );
    let d = sent(m.arrive(1500, 120 * US));
    assert_eq!(d.first().at, 65 * 120 * US);
}

/// Byte limits count frame bytes: 64 KiB holds 43 frames of 1500 B.
#[test]
fn byte_limit_holds_what_fits() {
    let mut m = model(&rate_cfg(100_000_000, QueueLimit::Bytes(65_536), 24), 1);
    let v = offer(&mut m, 50, 1500, 0, 0);
    let accepted = v.iter().filter(|v| matches!(v, Verdict::Send(_))).count();
    assert_eq!(accepted, 43);
    // With 24 B overhead each takes (1524 × 8) / 100 Mbit/s = 121.92 µs.
    let last = sent(v[42]).first().at;
    assert_eq!(last, 43 * 121_920);
}

/// 1 Gbit/s, 1 B overhead: a 1500 B frame takes exactly 12 008 ns; a million back-to-back
/// frames end at exactly 12.008 s.
#[test]
fn one_gbit_with_overhead_is_exact_over_a_million_packets() {
    let mut m = model(
        &rate_cfg(1_000_000_000, QueueLimit::Packets(1_000_000), 1),
        1,
    );
    let mut last = 0;
    for k in 0..1_000_000u64 {
        let at = sent(m.arrive(1500, 0)).first().at;
        assert_eq!(at, (k + 1) * 12_008);
        last = at;
    }
    assert_eq!(last, 12_008_000_000);
}

/// 3 Gbit/s makes each 1501 B (1500 + 1) frame 4002⅔ ns: the remainder is carried, so packet
/// k leaves at ⌊k·12008/3⌋ exactly and a million packets do not drift (rounding each packet
/// up would be 333 µs late, down 667 µs early). Arrivals every 4 µs keep the link busy.
#[test]
fn sub_nanosecond_remainder_does_not_drift() {
    let mut m = model(&rate_cfg(3_000_000_000, QueueLimit::Packets(1000), 1), 1);
    for k in 0..1_000_000u64 {
        let at = sent(m.arrive(1500, k * 4000)).first().at;
        assert_eq!(at, (k + 1) * 12_008 / 3, "packet {k}");
    }
    assert_eq!(m.counters().dropped_queue_full, 0);
    // The backlog grew by 2⅔ ns per packet: about 666 packets queued at the end.
    assert!((660..=670).contains(&m.counters().queue.packets));
}

/// A burst of 64 at t = 0: 64 packets for 120 µs, 63 for the next, ... → mean 32.5 over
/// the 7.68 ms it takes to drain.
#[test]
fn occupancy_is_time_weighted() {
    let mut m = model(&rate_cfg(100_000_000, QueueLimit::Packets(64), 0), 1);
    offer(&mut m, 64, 1500, 0, 0);
    let s = m.queue_stats_at(64 * 120 * US);
    assert_eq!(s.packet_ns, 120_000 * (64 * 65 / 2));
    assert_eq!(s.packets, 0);
    assert!((s.mean_packets() - 32.5).abs() < 1e-9);
    assert!((s.mean_bytes() - 32.5 * 1500.0).abs() < 1e-6);
}

/// Reconfiguring a live link: queued packets keep their departures, nothing is dropped by
/// the change, the smaller limit refuses arrivals until the queue drains, the new rate
/// applies to new packets only, and a shorter delay never lets a packet overtake.
#[test]
fn reconfigure_keeps_queued_packets() {
    let mut cfg = rate_cfg(100_000_000, QueueLimit::Packets(64), 0);
    cfg.delay_ns = 10 * MS;
    let mut m = model(&cfg, 1);
    let before: Vec<u64> = offer(&mut m, 10, 1500, 0, 0)
        .into_iter()
        .map(|v| sent(v).first().at)
        .collect();
    assert_eq!(before[9], 1200 * US + 10 * MS);

    let mut slow = rate_cfg(10_000_000, QueueLimit::Packets(2), 0);
    slow.delay_ns = MS;
    m.reconfigure(&slow, 0).unwrap();
    assert_eq!(
        m.counters().dropped_queue_full,
        0,
        "the change itself drops nothing"
    );
    assert_eq!(
        m.counters().queue.packets,
        10,
        "queued packets are still there"
    );

    // 10 queued > limit 2: refused until 9 have left.
    assert_eq!(m.arrive(1500, 0), Verdict::Drop(DropCause::QueueFull));
    // At 9 × 120 µs one packet is left (it leaves at 1.2 ms): this one fits, waits for it,
    // then takes 1.2 ms at 10 Mbit/s; the new 1 ms delay would put it before the last old
    // packet (11.2 ms), so it leaves right after: 2.4 + 1 = 3.4 ms < 11.2 ms → 11.2 ms.
    let d = sent(m.arrive(1500, 1080 * US));
    assert_eq!(d.first().at, before[9]);
    // Long after: the new settings alone.
    let d = sent(m.arrive(1500, 100 * MS));
    assert_eq!(d.first().at, 100 * MS + 1200 * US + MS);
}

/// An invalid reconfiguration changes nothing.
#[test]
fn invalid_reconfigure_is_rejected_whole() {
    let cfg = rate_cfg(100_000_000, QueueLimit::Packets(64), 0);
    let mut m = model(&cfg, 1);
    let bad = DirectionConfig {
        rate_bps: Some(0),
        delay_ns: 5 * MS,
        ..Default::default()
    };
    let e = m.reconfigure(&bad, 0).unwrap_err();
    assert_eq!(
        e.to_string(),
        "rate_bps: rate must be more than 0 and at most 400gbit"
    );
    assert_eq!(m.config(), &cfg);
    assert_eq!(sent(m.arrive(1500, 0)).first().at, 120 * US);
}
