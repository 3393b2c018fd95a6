use super::*;
use crate::synth::{self, StreamSim};

fn within(v: f64, want: f64, share: f64) -> bool {
    (v - want).abs() <= share * want
}

#[test]
fn a_train_that_fills_the_bottleneck_measures_its_rate() {
    // A window of 4 BDPs: the bottleneck is busy throughout, arrivals coalesced 20 at a time.
    for rate in [5e6, 80e6, 1e9] {
        let t = synth::train(rate, 0.020, 4.0 * rate / 8.0 * 0.020, 4_000, 20);
        let d = dispersion(&t).expect("a rate");
        assert!(within(d.rate_bps, rate, 0.05), "{rate}: {d:?}");
    }
}

#[test]
fn a_window_limited_train_still_shows_the_path_under_its_bursts() {
    // A receive window of a fifth of the BDP on a 200 Mbit/s, 34 ms path: the flow averages
    // 40 Mbit/s, each window arrives at 200 (seed 002's case, and the issue's).
    let rate = 200e6;
    let t = synth::train(rate, 0.034, 0.2 * rate / 8.0 * 0.034, 3_000, 8);
    let average = train_throughput(&t).expect("throughput");
    assert!(average < 0.3 * rate, "{average}");
    let d = dispersion(&t).expect("a rate");
    assert!(within(d.rate_bps, rate, 0.1), "{d:?}");
    assert!(d.share > 0.5, "{d:?}");
}

#[test]
fn too_few_arrivals_or_bursts_give_no_rate() {
    let t = synth::train(100e6, 0.010, 1e7, 10, 1);
    assert_eq!(dispersion(&t), None);
    assert_eq!(dispersion_of(&[], 1448), None);
    // All in one instant: no span to measure.
    assert_eq!(dispersion_of(&vec![5; 100], 1448), None);
}

fn battery_with(stream: Option<StreamResult>, train: Option<MsgsResult>) -> Battery {
    Battery {
        stream,
        train,
        ..Battery::default()
    }
}

#[test]
fn the_rate_combines_its_methods_and_says_how_sure() {
    // A flow held at 40 Mbit/s by its window on a 200 Mbit/s path: the train shows 200, the
    // flow's throughput is only a floor.
    let mut held = StreamSim::healthy(40e6, 34_000);
    held.rwnd_share = 0.6;
    let train = synth::train(200e6, 0.034, 0.2 * 200e6 / 8.0 * 0.034, 3_000, 8);
    let e = of(&battery_with(Some(held.run()), Some(train.clone())));
    let r = e.rate.expect("a rate");
    assert!(within(r.value, 200e6, 0.01), "{r:?}");
    assert_eq!(r.sure, Sure::Firm, "a dominant spacing stands on its own");
    assert!(r.how.contains("dispersion"), "{}", r.how);
    // A short train's few spacings need a second method: a BBR sender whose window did not
    // hold it, beside it.
    let short = synth::train(200e6, 0.034, 0.2 * 200e6 / 8.0 * 0.034, 400, 8);
    let r = of(&battery_with(Some(held.run()), Some(short.clone())))
        .rate
        .expect("rate");
    assert_eq!(r.sure, Sure::Rough, "{r:?}");
    let mut bbr = StreamSim::healthy(150e6, 34_000).run();
    for i in bbr.intervals.iter_mut() {
        if let Some(t) = i.tcp_info.as_mut() {
            t.cc_bw_bps = 190_000_000;
        }
    }
    let r = of(&battery_with(Some(bbr), Some(short)))
        .rate
        .expect("rate");
    assert_eq!(r.sure, Sure::Firm, "{r:?}");
    assert!(r.low >= 189e6 && r.high <= 201e6, "{r:?}");
    // Nothing but the flow itself: a floor.
    let r = of(&battery_with(Some(held.run()), None))
        .rate
        .expect("rate");
    assert_eq!(r.sure, Sure::Floor);
    assert!(!r.bounded());
    assert_eq!(r.value, 40e6);
}

#[test]
fn a_flow_that_stood_a_queue_with_no_window_holding_it_filled_the_link() {
    let mut s = StreamSim::healthy(95e6, 30_000).run();
    for i in s.intervals.iter_mut() {
        if let Some(t) = i.tcp_info.as_mut() {
            t.min_rtt_us = 20_000;
        }
    }
    let r = of(&battery_with(Some(s.clone()), None)).rate.expect("rate");
    assert!(r.bounded() && within(r.value, 95e6, 1e-9), "{r:?}");
    assert!(r.how.contains("filled the link"), "{}", r.how);
    // The same flow held by its receiver's window did not fill it.
    let mut held = StreamSim::healthy(95e6, 30_000);
    held.rwnd_share = 0.5;
    let mut s = held.run();
    for i in s.intervals.iter_mut() {
        if let Some(t) = i.tcp_info.as_mut() {
            t.min_rtt_us = 20_000;
        }
    }
    assert_eq!(
        of(&battery_with(Some(s), None)).rate.map(|r| r.sure),
        Some(Sure::Floor)
    );
}

#[test]
fn a_method_below_what_a_flow_carried_is_overruled() {
    // A train cut short reads 10 Mbit/s where the bulk flow carried 90.
    let train = synth::train(10e6, 0.010, 1e9, 2_000, 4);
    let s = StreamSim::healthy(90e6, 10_000).run();
    let r = of(&battery_with(Some(s), Some(train))).rate.expect("rate");
    assert_eq!(r.sure, Sure::Floor, "{r:?}");
    assert_eq!(r.value, 90e6);
}

#[test]
fn the_base_rtt_prefers_min_rtt_checked_against_idle_latency() {
    let mut b = battery_with(Some(StreamSim::healthy(50e6, 25_000).run()), None);
    if let Some(s) = b.stream.as_mut() {
        for i in s.intervals.iter_mut() {
            if let Some(t) = i.tcp_info.as_mut() {
                t.min_rtt_us = 20_000;
            }
        }
    }
    let mut rr = tcplab_results::rr::RrResult::default();
    rr.summary.latency_us.p50 = Some(21_000.0);
    b.rr = Some(rr.clone());
    let e = of(&b).base_rtt.expect("rtt");
    assert!(
        within(e.value, 0.020, 1e-9) && e.sure == Sure::Firm,
        "{e:?}"
    );
    // A min_rtt under half the idle latency came from a packet that overtook the others.
    rr.summary.latency_us.p50 = Some(50_000.0);
    b.rr = Some(rr);
    let e = of(&b).base_rtt.expect("rtt");
    assert!(within(e.value, 0.050, 1e-9), "{e:?}");
    // The standing queue: the bulk flow's 25 ms against 50 ms idle reads as none.
    assert_eq!(of(&b).standing_queue.map(|q| q.value), Some(0.0));
}
