use super::*;
use crate::limits;

fn req(secs: u64) -> Request {
    Request::new(Duration::from_secs(secs))
}

fn kinds(parts: &[Part]) -> Vec<PartKind> {
    parts.iter().map(Part::kind).collect()
}

#[test]
fn the_plan_runs_every_part_once_in_order() {
    let parts = plan(&req(60));
    assert_eq!(
        kinds(&parts),
        [
            PartKind::Stream,
            PartKind::Train,
            PartKind::Msgs,
            PartKind::MsgsSweep,
            PartKind::Rrul,
            PartKind::Rr,
            PartKind::Crr
        ]
    );
    let mut r = req(60);
    r.trap_count = 300;
    r.http = true;
    let with = kinds(&plan(&r));
    assert_eq!(with[3], PartKind::MsgsTrap);
    assert_eq!(with.last(), Some(&PartKind::Http));
}

#[test]
fn part_kinds_keep_the_names_batteries_were_stored_with() {
    for (kind, name) in [
        (PartKind::Stream, "stream"),
        (PartKind::MsgsSweep, "msgs sweep"),
        (PartKind::MsgsTrap, "msgs trap"),
        (PartKind::Crr, "crr"),
    ] {
        assert_eq!(
            serde_json::to_value(kind).expect("json"),
            serde_json::json!(name)
        );
        assert_eq!(kind.name(), name);
    }
}

#[test]
fn every_part_is_sized_so_its_rules_can_judge_it() {
    // Whatever the budget and the rate, each msgs part carries what its rules ask for.
    for secs in [10, 24, 40, 60, 300] {
        for rate in [None, Some(5e6), Some(50e6), Some(1e9)] {
            let mut r = req(secs);
            r.rate_bps = rate;
            for part in plan(&r) {
                match (part.kind(), part.spec()) {
                    (PartKind::Msgs, WorkloadSpec::Msgs(c)) => {
                        assert!(c.count >= limits::MIN_MESSAGES, "{secs} {rate:?}")
                    }
                    (PartKind::MsgsSweep, WorkloadSpec::Msgs(c)) => {
                        assert!(c.count >= limits::MIN_SWEEP_MESSAGES, "{secs} {rate:?}");
                        assert_eq!(c.sizes, limits::SWEEP_SIZES);
                    }
                    (PartKind::Train, WorkloadSpec::Msgs(c)) => {
                        assert!(c.count >= limits::TRAIN_MIN_COUNT);
                        assert_eq!(c.gap_us, 0, "back to back");
                        assert_eq!(c.opts.congestion.as_deref(), Some(limits::TRAIN_CONGESTION));
                    }
                    (PartKind::Stream, WorkloadSpec::Stream(c)) => {
                        assert_eq!(c.interval_ms, limits::STREAM_INTERVAL_MS);
                        let intervals = (c.duration_ms.unwrap_or(0) - c.omit_ms) / c.interval_ms;
                        assert!(intervals as usize >= limits::MIN_STREAM_INTERVALS, "{secs}");
                    }
                    (PartKind::MsgsTrap | PartKind::Rrul | PartKind::Rr | PartKind::Crr, _) => {}
                    (kind, spec) => panic!("{kind} runs {:?}", spec.kind()),
                }
            }
        }
    }
}

/// A battery so far whose bulk flow saw `rtt_ms` and carried `bps`.
fn after_stream(rtt_ms: f64, bps: f64) -> Battery {
    let mut s = crate::synth::StreamSim::healthy(bps, (rtt_ms * 1e3) as u32).run();
    for i in s.intervals.iter_mut() {
        if let Some(t) = i.tcp_info.as_mut() {
            t.min_rtt_us = (rtt_ms * 1e3) as u32;
        }
    }
    Battery {
        stream: Some(s),
        ..Battery::default()
    }
}

#[test]
fn rr_and_crr_last_long_enough_for_their_transactions_on_a_long_path() {
    // 120 ms round trips: 100 transactions need 12 s, whatever the budget's share.
    let r = req(40);
    let so_far = after_stream(120.0, 10e6);
    let mut rr = Part::new(PartKind::Rr, WorkloadSpec::Rr(RrConfig::default()));
    refine(&mut rr, &r, &so_far);
    let WorkloadSpec::Rr(c) = rr.spec else {
        unreachable!()
    };
    let d = c.duration_ms.expect("bounded") as f64 / 1e3;
    assert!(d >= 100.0 * 0.120, "{d}");
    let crr = CrrConfig {
        concurrency: 2,
        ..CrrConfig::default()
    };
    let mut crr = Part::new(PartKind::Crr, WorkloadSpec::Crr(crr));
    refine(&mut crr, &r, &so_far);
    let WorkloadSpec::Crr(c) = crr.spec else {
        unreachable!()
    };
    let d = c.duration_ms.expect("bounded") as f64 / 1e3;
    assert!(d >= 100.0 * 2.0 * 0.120 / 2.0, "{d}");
    // A short path keeps the budget's share.
    let so_far = after_stream(1.0, 10e6);
    let mut rr = Part::new(PartKind::Rr, WorkloadSpec::Rr(RrConfig::default()));
    refine(&mut rr, &r, &so_far);
    let WorkloadSpec::Rr(c) = rr.spec else {
        unreachable!()
    };
    assert_eq!(c.duration_ms, Some(4_000));
}

#[test]
fn messages_are_paced_at_half_the_path_rate() {
    // A 1-byte message alone in a segment is 91 bytes on the wire: 145.6 µs at 10 Mbit/s
    // is half the link.
    assert_eq!(msgs_gap_us(1, Some(10e6)), 146);
    assert_eq!(msgs_gap_us(1448, Some(100e6)), 247);
    assert_eq!(msgs_gap_us(1448, Some(1e9)), MSGS_MIN_GAP_US);
    assert_eq!(msgs_gap_us(1, Some(1e9)), MSGS_MIN_GAP_US);
    assert_eq!(msgs_gap_us(1448, None), MSGS_MIN_GAP_US);
    // Without a configured rate, from what the stream carried.
    let mut msgs = Part::new(PartKind::Msgs, WorkloadSpec::Msgs(MsgsConfig::default()));
    refine(&mut msgs, &req(40), &after_stream(20.0, 10e6));
    let WorkloadSpec::Msgs(c) = msgs.spec else {
        unreachable!()
    };
    assert_eq!(c.gap_us, 146);
}

#[test]
fn the_http_part_takes_crr_s_slice_on_top() {
    let mut r = req(60);
    let without = plan(&r);
    r.http = true;
    let with = plan(&r);
    assert_eq!(&with[..without.len()], &without[..], "nothing else moves");
    let Some(WorkloadSpec::Http(http)) = with.last().map(Part::spec) else {
        panic!("http last")
    };
    assert_eq!(http.server.kind, ServerKind::Builtin);
    let cfg = &http.config;
    assert!(cfg.per_request());
    assert_eq!(cfg.duration_ms, Some(6_000));
    cfg.validate().expect("the battery's HTTP run is valid");
}
