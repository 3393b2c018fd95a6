//! The disciplines on the rate server in virtual time, against what their specifications say
//! they do.

use super::server::{Served, Server};
use super::*;
use crate::rate::Bottleneck;

const MS: Nanos = 1_000_000;
const US: Nanos = 1_000;

fn server(cfg: AqmConfig, limit: QueueLimit, rate: u64) -> Server {
    Server::new(
        Discipline::new(&cfg, limit, Some(rate), 7, Direction::Forward),
        Some(rate),
        0,
    )
}

/// Feeds `arrivals` (time, packet) in order, then drains; returns what was served and dropped.
fn run(s: &mut Server, arrivals: &[(Nanos, Packet)]) -> (Vec<Served>, Vec<Dropped>) {
    let (mut out, mut dropped) = (Vec::new(), Vec::new());
    for (t, p) in arrivals {
        s.arrive(*p, *t, &mut out, &mut dropped);
    }
    s.advance(Nanos::MAX, &mut out, &mut dropped);
    (out, dropped)
}

/// A constant-rate source: `n` packets of `len` bytes of flow `flow`, every `gap` from `start`.
fn cbr(
    start: Nanos,
    gap: Nanos,
    n: u64,
    len: u32,
    flow: u32,
    ecn: Ecn,
    id0: u64,
) -> Vec<(Nanos, Packet)> {
    (0..n)
        .map(|i| (start + i * gap, Packet::new(id0 + i, len, flow, ecn)))
        .collect()
}

fn merged(mut a: Vec<(Nanos, Packet)>, b: Vec<(Nanos, Packet)>) -> Vec<(Nanos, Packet)> {
    a.extend(b);
    a.sort_by_key(|(t, p)| (*t, p.id));
    a
}

#[test]
fn drop_tail_on_the_server_leaves_exactly_when_the_bottleneck_says() {
    // The same arrivals through the arrival-time bottleneck and the dequeue-time server: every
    // departure and every refusal the same, to the ns.
    let rate = 97_000_000;
    let limit = QueueLimit::Packets(20);
    let mut s = server(AqmConfig::Droptail, limit, rate);
    let mut b = Bottleneck::new(Some(rate), 0, limit);
    let mut t = 0;
    let mut arrivals = Vec::new();
    for i in 0..3_000u64 {
        // Bursts and gaps: 30 back-to-back, then a pause (about twice the rate on average).
        t += if i % 30 == 0 { 700 * US } else { 3 * US };
        arrivals.push((
            t,
            Packet::new(i, 64 + (i as u32 * 37) % 1437, 1, Ecn::NotEct),
        ));
    }
    let (served, dropped) = run(&mut s, &arrivals);
    let mut expected = Vec::new();
    let mut refused = Vec::new();
    for (t, p) in &arrivals {
        match b.offer(p.len, *t) {
            Ok(leaves) => expected.push((p.id, leaves)),
            Err(_) => refused.push(p.id),
        }
    }
    let got: Vec<(u64, Nanos)> = served.iter().map(|s| (s.packet.id, s.leaves)).collect();
    assert_eq!(got, expected);
    assert_eq!(
        dropped.iter().map(|d| d.packet.id).collect::<Vec<_>>(),
        refused
    );
    assert!(!refused.is_empty(), "the test must reach the limit");
}

/// CoDel under a persistent overload (twice the rate, not responsive): no drop until the
/// sojourn time has been above target for an interval; then drops spaced by the control law:
/// the n-th drop comes interval / sqrt(n - 1) after the one before (to within the dequeue
/// instants, one packet's serialisation apart).
#[test]
fn codel_spaces_its_drops_by_interval_over_the_square_root_of_the_count() {
    let rate = 10_000_000; // 1.2 ms per 1500-byte packet
    let mut s = server(
        AqmConfig::Codel(CodelParams::default()),
        QueueLimit::Packets(10_000),
        rate,
    );
    let arrivals = cbr(0, 600 * US, 2_000, 1500, 1, Ecn::NotEct, 0);
    let (served, dropped) = run(&mut s, &arrivals);
    assert!(!dropped.is_empty());
    // When each drop happened: the dequeue instant of the packet served right after it.
    let mut drop_times: Vec<Nanos> = Vec::new();
    for d in &dropped {
        assert_eq!(d.why, AqmDrop::Codel);
        let next = served
            .iter()
            .find(|s| s.packet.id > d.packet.id)
            .map(|s| s.starts)
            .unwrap();
        drop_times.push(next);
    }
    drop_times.dedup();
    // The sojourn first exceeds 5 ms when 5 ms of backlog has built: at about 10 ms, so the
    // first drop comes an interval later, not before.
    assert!(
        drop_times[0] >= 100 * MS,
        "first drop at {} ms",
        drop_times[0] / MS
    );
    let packet = 1_200 * US;
    for n in 1..8u32 {
        let gap = drop_times[n as usize] - drop_times[n as usize - 1];
        let law = (100.0 * MS as f64 / f64::from(n).sqrt()) as Nanos;
        assert!(
            gap.abs_diff(law) <= packet,
            "drop {n}: {} us after the last, the law says {} us",
            gap / US,
            law / US
        );
    }
    assert_eq!(
        s.discipline().counters().dropped_codel,
        dropped.len() as u64
    );
}

/// With ECN on, CoDel marks ECT packets where it would drop them: no ECT packet is dropped
/// below the queue's limit, and as many are marked as were dropped without ECN.
#[test]
fn codel_with_ecn_marks_instead_of_dropping() {
    let rate = 10_000_000;
    let ecn = CodelParams {
        ecn: true,
        ..CodelParams::default()
    };
    let mut s = server(AqmConfig::Codel(ecn), QueueLimit::Packets(100_000), rate);
    let arrivals = cbr(0, 600 * US, 2_000, 1500, 1, Ecn::Ect0, 0);
    let (served, dropped) = run(&mut s, &arrivals);
    assert!(dropped.is_empty(), "{} ECT packets dropped", dropped.len());
    let marked = served.iter().filter(|s| s.marked).count();
    assert!(marked > 5, "{marked} marks");
    assert_eq!(s.discipline().counters().marked, marked as u64);
    assert_eq!(s.discipline().counters().dropped_ect, 0);
    // Not-ECT packets on the same discipline are dropped.
    let mut s = server(AqmConfig::Codel(ecn), QueueLimit::Packets(100_000), rate);
    let (_, dropped) = run(&mut s, &cbr(0, 600 * US, 2_000, 1500, 1, Ecn::NotEct, 0));
    assert!(!dropped.is_empty());
}

fn sojourns(served: &[Served], flow: u32) -> Vec<Nanos> {
    served
        .iter()
        .filter(|s| s.packet.flow == flow)
        .map(|s| s.starts - s.packet.enqueued_at)
        .collect()
}

/// FQ-CoDel's sparse-flow priority: one bulk flow at twice the rate and a probe every 10 ms.
/// The probes wait at most for the packet on the wire (a new flow goes first), while the bulk
/// flow's packets queue for milliseconds; a drop-tail FIFO makes the probes wait as long.
#[test]
fn fq_codel_serves_a_sparse_flow_ahead_of_a_bulk_one() {
    let rate = 100_000_000; // 120 us per 1500-byte packet
    let bulk = cbr(0, 60 * US, 20_000, 1500, 1, Ecn::NotEct, 0);
    let probes = cbr(500 * US, 10 * MS, 100, 100, 2, Ecn::NotEct, 1_000_000);
    let arrivals = merged(bulk, probes);
    let mut fq = server(
        AqmConfig::FqCodel(FqCodelParams::default()),
        QueueLimit::Packets(10_240),
        rate,
    );
    let (served, _) = run(&mut fq, &arrivals);
    let probe = sojourns(&served, 2);
    assert_eq!(probe.len(), 100, "no probe lost");
    let worst = *probe.iter().max().unwrap();
    assert!(worst <= 121 * US, "a probe waited {} us", worst / US);
    let bulk_sojourn = sojourns(&served, 1);
    let late = bulk_sojourn[bulk_sojourn.len() / 2];
    assert!(
        late > 2 * MS,
        "the bulk flow's median sojourn {} us",
        late / US
    );
    assert!(fq.discipline().counters().flows_seen == 2);
    let mut fifo = server(AqmConfig::Droptail, QueueLimit::Packets(100_000), rate);
    let (served, _) = run(&mut fifo, &arrivals);
    let fifo_probe = sojourns(&served, 2);
    let median = fifo_probe[fifo_probe.len() / 2];
    assert!(median > 50 * worst, "a FIFO probe waits {} us", median / US);
}

/// Deficit round robin with a quantum shares the link by bytes, not packets: two saturating
/// flows of 1500- and 500-byte packets get equal bytes.
#[test]
fn fq_codel_shares_the_link_by_bytes() {
    let rate = 100_000_000;
    let big = cbr(0, 50 * US, 4_000, 1500, 1, Ecn::Ect0, 0);
    let small = cbr(0, 17 * US, 12_000, 500, 2, Ecn::Ect0, 100_000);
    let mut fq = server(
        AqmConfig::FqCodel(FqCodelParams::default()),
        QueueLimit::Packets(100_000),
        rate,
    );
    let mut out = Vec::new();
    let mut dropped = Vec::new();
    for (t, p) in merged(big, small) {
        fq.arrive(p, t, &mut out, &mut dropped);
    }
    // While both are backlogged (the first 150 ms), the bytes each got.
    let until = 150 * MS;
    let bytes = |flow: u32| -> u64 {
        out.iter()
            .filter(|s| s.packet.flow == flow && s.leaves <= until)
            .map(|s| u64::from(s.packet.len))
            .sum()
    };
    let (a, b) = (bytes(1) as f64, bytes(2) as f64);
    assert!((a / b - 1.0).abs() < 0.05, "{a} vs {b} bytes");
}

/// Over the memory limit, FQ-CoDel drops from the fattest flow's head, not the arriving
/// packet's flow.
#[test]
fn fq_codel_over_its_memory_limit_drops_from_the_fattest_flow() {
    let params = FqCodelParams {
        memory_limit_bytes: 150_000,
        ..FqCodelParams::default()
    };
    // A slow link so the queue builds: flow 1 sends 200 packets at once, flow 2 a few.
    let mut fq = server(
        AqmConfig::FqCodel(params),
        QueueLimit::Packets(10_240),
        1_000_000,
    );
    let mut arrivals = cbr(0, 1, 200, 1500, 1, Ecn::NotEct, 0);
    arrivals.extend(cbr(1_000, 1, 5, 1500, 2, Ecn::NotEct, 1_000));
    let (mut out, mut dropped) = (Vec::new(), Vec::new());
    for (t, p) in &arrivals {
        fq.arrive(*p, *t, &mut out, &mut dropped);
    }
    assert!(!dropped.is_empty());
    assert!(
        dropped
            .iter()
            .all(|d| d.packet.flow == 1 && d.why == AqmDrop::Memory)
    );
    assert!(fq.backlog().bytes <= 150_000 + 1500);
    // The drops are from the head: the oldest packets of flow 1.
    assert_eq!(
        dropped[0].packet.id, 1,
        "packet 0 is on the wire, 1 was the head"
    );
}

/// PIE under a persistent overload (1.25 times the rate, not responsive): it lets the first
/// burst through (150 ms of allowance), then steers the queue delay towards its 15 ms target,
/// dropping about the excess (a fifth of the packets).
#[test]
fn pie_holds_the_queue_delay_near_its_target_under_overload() {
    let rate = 10_000_000; // 1.2 ms per packet
    let mut s = server(
        AqmConfig::Pie(PieParams::default()),
        QueueLimit::Packets(10_000),
        rate,
    );
    let arrivals = cbr(0, 960 * US, 20_000, 1500, 1, Ecn::NotEct, 0);
    let (served, dropped) = run(&mut s, &arrivals);
    assert!(dropped.iter().all(|d| d.why == AqmDrop::Early));
    let first_drop = dropped.first().map(|d| d.packet.enqueued_at).unwrap();
    assert!(
        first_drop >= 150 * MS,
        "first drop at {} ms",
        first_drop / MS
    );
    // The second half of the run: the mean queue delay near target, the drops near the excess.
    let half: Vec<Nanos> = served
        .iter()
        .filter(|s| s.starts > 10_000 * MS)
        .map(|s| s.starts - s.packet.enqueued_at)
        .collect();
    let mean = half.iter().sum::<Nanos>() as f64 / half.len() as f64 / 1e6;
    assert!(
        (5.0..=30.0).contains(&mean),
        "mean queue delay {mean:.1} ms"
    );
    let share = dropped.len() as f64 / arrivals.len() as f64;
    assert!((0.15..=0.26).contains(&share), "dropped {share:.3}");
}

/// RED keeps its average between the thresholds under a moderate overload and drops early;
/// with ECN it marks those packets instead, and drops ECT packets only at the hard limit.
#[test]
fn red_drops_early_and_with_ecn_marks_instead() {
    let rate = 10_000_000;
    let params = RedParams::default(); // 30 kB .. 90 kB
    let limit = QueueLimit::Bytes(300_000);
    let arrivals = cbr(0, 1_100 * US, 10_000, 1500, 1, Ecn::Ect0, 0);
    let mut s = server(AqmConfig::Red(params), limit, rate);
    let (_, dropped) = run(&mut s, &arrivals);
    let early = dropped.iter().filter(|d| d.why == AqmDrop::Early).count();
    assert!(early > 100, "{early} early drops");
    assert_eq!(early, dropped.len(), "the limit is never reached");
    let mut s = server(
        AqmConfig::Red(RedParams {
            ecn: true,
            ..params
        }),
        limit,
        rate,
    );
    let (served, dropped) = run(&mut s, &arrivals);
    let marked = served.iter().filter(|s| s.marked).count();
    // Marked packets stay in the queue, so the average climbs higher and some reach the limit;
    // the point is that early action became marks.
    assert!(marked > 100, "{marked} marks");
    assert!(
        dropped.iter().all(|d| d.why == AqmDrop::Overlimit),
        "{dropped:?}"
    );
}

#[test]
fn names_and_bad_parameters_are_refused_naming_the_field() {
    for name in ["droptail", "red", "codel", "fq_codel", "pie"] {
        let cfg = AqmConfig::named(name).unwrap();
        assert_eq!(cfg.name(), name);
        cfg.validate().unwrap();
    }
    let e = AqmConfig::named("cake").unwrap_err().to_string();
    assert!(e.contains("cake") && e.contains("fq_codel"), "{e}");
    let e = AqmConfig::Codel(CodelParams {
        target_ns: 200 * MS,
        ..CodelParams::default()
    })
    .validate()
    .unwrap_err()
    .to_string();
    assert!(e.contains("codel.target"), "{e}");
    let e = AqmConfig::Red(RedParams {
        min_th_bytes: 9,
        max_th_bytes: 9,
        ..RedParams::default()
    })
    .validate()
    .unwrap_err()
    .to_string();
    assert!(e.contains("red.min_th"), "{e}");
    // The description reads back as written.
    let cfg = AqmConfig::FqCodel(FqCodelParams::default());
    let back: AqmConfig = serde_json::from_str(&serde_json::to_string(&cfg).unwrap()).unwrap();
    assert_eq!(back, cfg);
}
