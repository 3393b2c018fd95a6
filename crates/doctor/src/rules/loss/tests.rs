use super::*;
use crate::battery::{Battery, PathInfo};
use crate::finding::FixKind;
use crate::synth::{self, StreamSim};

fn lossy(cc: &str, loss: f64, bps: f64) -> Battery {
    let mut sim = StreamSim::healthy(bps, 30_000);
    sim.loss = loss;
    sim.congestion = cc.into();
    Battery {
        stream: Some(sim.run()),
        facts: Some(synth::facts(250)),
        path: PathInfo {
            configured_rtt_ms: Some(30.0),
            rate_bps: Some(100e6),
            loss: Some(loss),
            ..PathInfo::default()
        },
        ..Battery::default()
    }
}

#[test]
fn mathis_bound_matches_the_formula() {
    // 1448 B, 30 ms, 1%: 1448*8/0.03 * 1.22474/0.1 = 4.72915 Mbit/s.
    let b = mathis_bps(1448.0, 0.030, 0.01);
    assert!((b - 4_729_148.2).abs() < 1.0, "{b}");
}

#[test]
fn cubic_at_the_mathis_bound_gets_bbr() {
    let b = lossy("cubic", 0.01, 4.5e6);
    let f = check(&Context::new(&b));
    assert_eq!(f.len(), 1);
    let f = &f[0];
    assert_eq!(f.severity, Severity::Error);
    let p = f.figure("loss_rate").unwrap();
    assert!((p - 0.01 / 1.01).abs() < 1e-4, "{p}");
    let bound = f.figure("mathis_bound_bps").unwrap();
    assert!((bound - mathis_bps(1448.0, 0.030, p)).abs() < 1.0);
    let ratio = f.figure("throughput_over_mathis").unwrap();
    assert!((0.9..1.0).contains(&ratio), "{ratio}");
    assert!(f.figure("loss_state_samples").unwrap() >= 2.0);
    assert!(
        matches!(&f.fixes[0].kind, FixKind::SetSockOpt { option, value } if option == "TCP_CONGESTION" && value == "bbr")
    );
    assert_eq!(f.fixes[1].lines, ["net.ipv4.tcp_congestion_control = bbr"]);
}

#[test]
fn bbr_retransmitting_heavily_gets_cubic() {
    let b = lossy("bbr", 0.05, 80e6);
    let f = check(&Context::new(&b));
    assert_eq!(f[0].severity, Severity::Warning);
    assert!(f[0].figure("throughput_over_mathis").unwrap() > 10.0);
    assert!(matches!(&f[0].fixes[0].kind, FixKind::SetSockOpt { value, .. } if value == "cubic"));
}

#[test]
fn bbr_far_above_the_bound_on_a_path_of_unknown_rate_is_not_limited_by_its_loss() {
    // A real host: no configured rate, so nothing shows the flow fell short; BBR overruns
    // a shallow queue at full rate as well.
    let mut b = lossy("bbr", 0.05, 80e6);
    b.path.rate_bps = None;
    assert!(check(&Context::new(&b)).is_empty());
}

#[test]
fn a_flow_waiting_for_its_receiver_is_not_limited_by_its_loss() {
    // Start-up losses, then a reader that holds the window shut most of the time.
    let mut b = lossy("cubic", 0.01, 4.5e6);
    for i in b.stream.as_mut().unwrap().intervals.iter_mut() {
        if let Some(t) = i.tcp_info.as_mut() {
            t.rwnd_limited_us = t.busy_us * 8 / 10;
        }
    }
    assert!(check(&Context::new(&b)).is_empty());
}

#[test]
fn drops_at_the_queue_alone_are_not_path_loss() {
    // At the Mathis bound (reported without the account: cubic_at_the_mathis_bound_gets_bbr).
    let mut b = lossy("cubic", 0.01, 4.5e6);
    let account = tcplab_results::emulator::RunAccount {
        forward_drops: tcplab_results::emulator::ModelDrops {
            frames: 500,
            loss: 0,
            queue_full: 40,
        },
        ..Default::default()
    };
    b.stream.as_mut().unwrap().meta.facts.emulator = Some(crate::synth::emulated(
        tcplab_emu::LinkConfig::default(),
        account,
    ));
    assert!(check(&Context::new(&b)).is_empty());
}

#[test]
fn a_flow_above_its_mathis_bound_is_not_loss_limited() {
    // 5 Mbit/s where 1 % loss at 30 ms allows 4.7: the flow rides through its loss, and
    // with nothing else saying the path loses packets there is nothing to report.
    assert!(check(&Context::new(&lossy("cubic", 0.01, 5e6))).is_empty());
}

#[test]
fn the_paced_probes_tell_path_loss_from_the_flow_s_own_overrun() {
    // A reno flow at its bound on a path of unknown rate: its retransmissions alone.
    let mut b = lossy("reno", 0.01, 4.5e6);
    b.path.rate_bps = None;
    b.path.loss = None;
    let probes = |b: &mut Battery, sent: u64, retrans: u64| {
        synth::counters(
            b,
            PartKind::Msgs,
            Role::Client,
            &[("Tcp.OutSegs", sent), ("Tcp.RetransSegs", retrans)],
        );
    };
    // The paced messages lost 1 % too: the path's own loss.
    probes(&mut b, 20_000, 200);
    let f = check(&Context::new(&b));
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].figure("paced_loss_rate"), Some(0.01));
    // They lost nothing where 200 were due: the flow overran the bottleneck itself.
    probes(&mut b, 20_000, 0);
    assert!(check(&Context::new(&b)).is_empty());
    // A BBR flow far above its bound through a lossy path: the path still loses packets.
    let mut b = lossy("bbr", 0.005, 90e6);
    b.path = PathInfo::default();
    probes(&mut b, 30_000, 150);
    let f = check(&Context::new(&b));
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(
        f[0].title.starts_with("the path loses packets"),
        "{}",
        f[0].title
    );
    assert_eq!(f[0].severity, Severity::Warning);
}

#[test]
fn a_slow_flow_on_a_lossy_path_is_judged_at_the_path_s_loss() {
    // 6 Mbit/s at 50 ms under reno: too few retransmissions of its own to measure a rate
    // (5), while the paced messages lost 0.1 % of 20,000.
    let mut sim = StreamSim::healthy(6e6, 50_000);
    sim.loss = 0.0005;
    sim.congestion = "reno".into();
    let mut b = Battery {
        stream: Some(sim.run()),
        facts: Some(synth::facts(250)),
        ..Battery::default()
    };
    assert!(
        check(&Context::new(&b)).is_empty(),
        "nothing else says the path loses"
    );
    synth::counters(
        &mut b,
        PartKind::Msgs,
        Role::Client,
        &[("Tcp.OutSegs", 20_000), ("Tcp.RetransSegs", 20)],
    );
    let f = check(&Context::new(&b));
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].figure("loss_rate"), Some(0.001));
    assert!(
        f[0].evidence
            .iter()
            .any(|e| e.context.contains("too little to measure its own")),
        "{:?}",
        f[0].evidence
    );
    // 8.8 Mbit/s is reno's bound at 0.1 % and 50 ms: the flow at 6 is held by the loss.
    assert!(
        !f[0].title.starts_with("the path loses packets"),
        "{}",
        f[0].title
    );
}

#[test]
fn bursts_of_loss_bound_the_flow_by_their_events() {
    // 1 % of packets lost, 4 to a burst: a reno flow halves at 0.25 % of its segments.
    let mut b = lossy("reno", 0.01, 6e6);
    let segments: u64 = 50_000;
    for i in b.stream.as_mut().unwrap().intervals.iter_mut() {
        if let Some(t) = i.tcp_info.as_mut() {
            t.data_segs_out = segments as u32;
        }
    }
    synth::counters(
        &mut b,
        PartKind::Stream,
        Role::Client,
        &[
            ("TcpExt.TCPSackRecovery", segments / 400),
            ("Tcp.RetransSegs", segments / 100),
        ],
    );
    let f = check(&Context::new(&b));
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].figure("loss_event_rate"), Some(0.0025));
    let bound = f[0].figure("mathis_bound_bps").unwrap();
    assert!(
        (bound - mathis_bps(1448.0, 0.030, 0.0025)).abs() < 1.0,
        "{bound}"
    );
    assert!(f[0].title.contains("in bursts"), "{}", f[0].title);
}

#[test]
fn loss_that_does_not_limit_the_flow_is_not_reported() {
    // Far above the Mathis bound (e.g. a burst of losses at start-up, or a veth backlog
    // dropping a few segments of an 8 Gbit/s flow): loss is not the limit, so no finding.
    let b = lossy("cubic", 0.001, 60e6);
    assert!(check(&Context::new(&b)).is_empty());
}

#[test]
fn few_retransmits_after_warm_up_use_the_whole_connection() {
    // 1.0427 Mbit/s at 1%: 1,303 bytes (0.9 segments) retransmitted per 1 s interval:
    // 9 segments in the 10 measured intervals, 10 with the 2 warm-up intervals.
    let b = lossy("cubic", 0.01, 1.0427e6);
    let f = check(&Context::new(&b));
    assert_eq!(f.len(), 1, "{f:#?}");
    assert!(
        f[0].evidence[0].context.contains("whole connection"),
        "{:?}",
        f[0].evidence
    );
    assert_eq!(f[0].figure("retransmitted_segments"), Some(10.0));
}

/// The sender's kernel counters: `retrans` segments retransmitted, `duplicates` of them
/// reported back by the receiver as duplicates (D-SACK).
fn dsack(b: &mut Battery, retrans: u64, duplicates: u64) {
    synth::counters(
        b,
        PartKind::Stream,
        Role::Client,
        &[
            ("Tcp.RetransSegs", retrans),
            ("TcpExt.TCPDSACKRecvSegs", duplicates),
        ],
    );
}

#[test]
fn retransmissions_the_receiver_already_had_are_not_loss() {
    // A path that reorders: every retransmission was a duplicate, nothing was lost.
    let mut b = lossy("cubic", 0.01, 4.5e6);
    dsack(&mut b, 400, 400);
    assert!(check(&Context::new(&b)).is_empty());
    // Half of them duplicates: the loss is half the retransmitted share.
    dsack(&mut b, 400, 200);
    let f = check(&Context::new(&b));
    assert_eq!(f.len(), 1, "{f:?}");
    let p = f[0].figure("loss_rate").unwrap();
    assert!((p - 0.005 / 1.005).abs() < 2e-4, "{p}");
    assert_eq!(f[0].figure("spurious_retransmit_share"), Some(0.5));
}

#[test]
fn silent_without_loss_or_on_a_full_path() {
    assert!(check(&Context::new(&lossy("cubic", 0.0, 95e6))).is_empty());
    assert!(check(&Context::new(&lossy("cubic", 0.01, 95e6))).is_empty());
}

/// The stream's facts as an emulated lab records them: Gilbert-Elliott loss on the way to
/// the server, and `drops` of `frames` dropped by it during the run.
fn emulated(b: &mut Battery, frames: u64, drops: u64) {
    let mut link = tcplab_emu::LinkConfig::default();
    link.forward.loss = Some(tcplab_emu::Loss::GilbertElliott {
        p: 0.003,
        r: 0.25,
        one_minus_h: 0.7,
        one_minus_k: 0.0,
    });
    let account = tcplab_results::emulator::RunAccount {
        forward_drops: tcplab_results::emulator::ModelDrops {
            frames,
            loss: drops,
            queue_full: 0,
        },
        ..Default::default()
    };
    if let Some(s) = b.stream.as_mut() {
        s.meta.facts.emulator = Some(crate::synth::emulated(link, account));
    }
}

#[test]
fn a_lossy_path_is_named_even_when_bbr_keeps_the_rate() {
    // BBR at 96 Mbit/s of 100 through 0.8% bursty loss: not limited, but the path loses.
    let mut b = lossy("bbr", 0.008, 96e6);
    emulated(&mut b, 100_000, 800);
    let f = check(&Context::new(&b));
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].severity, Severity::Warning);
    assert!(
        f[0].title.starts_with("the path loses packets"),
        "{}",
        f[0].title
    );
    assert!(
        f[0].title.contains("in bursts (Gilbert-Elliott)"),
        "{}",
        f[0].title
    );
    assert_eq!(f[0].figure("path_loss_drops"), Some(800.0));
    // The same flow without the emulator's account: nothing limits it, nothing to say.
    assert!(check(&Context::new(&lossy("bbr", 0.008, 96e6))).is_empty());
    // An emulated path that dropped only a handful: not lossy on its own evidence.
    let mut b = lossy("bbr", 0.008, 96e6);
    emulated(&mut b, 100_000, 3);
    assert!(check(&Context::new(&b)).is_empty());
}
