//! The long-run path against the exact one: the same threshold, stall count and quantiles,
//! a bounded scatter that keeps every stretch's extremes, and short runs left exactly as the
//! text path reads them.

use super::*;
use crate::to_report::series;
use tcplab_results::Report;
use tcplab_results::crr::{CrrResult, CrrSample};
use tcplab_results::msgs::{MsgsResult, MsgsRun};

/// A msgs run of `n` messages 2 µs apart on a 40 µs path, every 41st held 20 ms (sfperf's
/// stall), one message at 90 ms; the last three never received.
fn msgs_run(size: u32, n: u64) -> MsgsRun {
    let t0 = 9_000_000_000u64;
    let send: Vec<u64> = (0..n).map(|i| t0 + i * 2_000).collect();
    let recv = send
        .iter()
        .enumerate()
        .take(n as usize - 3)
        .map(|(i, s)| {
            let base = 40_000 + (i as u64 * 7919) % 3_000;
            match i {
                _ if i == n as usize / 2 => s + 90_000_000,
                _ if i % 41 == 40 => s + 20_000_000 + base,
                _ => s + base,
            }
        })
        .collect::<Vec<u64>>();
    MsgsRun {
        size,
        send_ns: send.into(),
        recv_ns: recv.into(),
        ..Default::default()
    }
}

fn packed(reports: &[Report]) -> Vec<u8> {
    let mut blob = Vec::new();
    for r in reports {
        crate::codec::pack(r, &mut blob).unwrap();
    }
    blob
}

fn msgs(runs: Vec<MsgsRun>) -> Report {
    Report::Msgs(MsgsResult {
        runs,
        ..Default::default()
    })
}

/// The delays of the first message section as the text path reads them, from the unpacked
/// text.
fn exact(blob: &[u8]) -> MessageDelays {
    let text = String::from_utf8(crate::codec::unpack(blob).unwrap()).unwrap();
    let (_, sections) = &series::parse_workloads(&text)[0];
    series::message_delays("m", sections, None).unwrap()
}

/// Small limits, so the tests run the long path on runs that are quick to build.
const SMALL: Limits = Limits {
    exact_rows: 20_000,
    stretches: 500,
};

fn near(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * b.abs().max(1e-9)
}

#[test]
fn a_short_run_splits_into_its_whole_text() {
    let blob = packed(&[msgs(vec![msgs_run(1, 5_000)])]);
    let split = split_with(&blob, None, SMALL).unwrap();
    assert!(split.delays.is_empty());
    assert_eq!(split.text.as_bytes(), crate::codec::unpack(&blob).unwrap());
}

#[test]
fn a_long_run_keeps_the_exact_figures_in_a_bounded_scatter() {
    let n = SMALL.exact_rows as u64 + 40_003;
    let blob = packed(&[msgs(vec![msgs_run(1, n)])]);
    let want = exact(&blob);
    let split = split_with(&blob, None, SMALL).unwrap();
    assert!(
        split.text.len() < 1_000,
        "the long table stays out of the text"
    );
    let got = &split.delays[&0];

    let want_stalls = want
        .points
        .iter()
        .filter(|p| p.1 > want.stall_us.unwrap())
        .count() as u64;
    assert!(near(got.stall_us.unwrap(), want.stall_us.unwrap(), 1e-3));
    assert_eq!(got.stalls, Some(want_stalls));
    assert!(want_stalls > n / 50, "{want_stalls} stalls");

    assert!(
        got.points.len() <= 4 * SMALL.stretches,
        "{} points",
        got.points.len()
    );
    assert_eq!(got.points.len(), got.times_s.len());
    assert!(got.points.windows(2).all(|w| w[0].0 < w[1].0), "in order");
    let max = |d: &MessageDelays| d.points.iter().map(|p| p.1).fold(f64::MIN, f64::max);
    let min = |d: &MessageDelays| d.points.iter().map(|p| p.1).fold(f64::MAX, f64::min);
    assert_eq!(max(got), max(&want), "the slowest message is kept");
    assert_eq!(min(got), min(&want), "the fastest message is kept");
    let (seq, _) = *got.points.iter().find(|p| p.1 == max(got)).unwrap();
    assert_eq!(seq, n / 2);
    let i = got.points.iter().position(|p| p.0 == seq).unwrap();
    assert_eq!(got.times_s[i], want.times_s[seq as usize]);

    let mut sorted: Vec<f64> = want.points.iter().map(|p| p.1).collect();
    sorted.sort_by(f64::total_cmp);
    assert_eq!(got.distribution_us.len(), CDF_STEPS + 1);
    for (k, q) in [(1_000, 0.5), (1_800, 0.9), (1_990, 0.995)] {
        let exact = sorted[((sorted.len() - 1) as f64 * q) as usize];
        assert!(
            near(got.distribution_us[k], exact, 2e-3),
            "q{q}: {} vs {exact}",
            got.distribution_us[k]
        );
    }
    assert_eq!(got.distribution_us[CDF_STEPS], *sorted.last().unwrap());
}

#[test]
fn only_the_drawn_table_of_a_workload_is_streamed_and_other_long_tables_are_left_out() {
    let long = SMALL.exact_rows as u64 + 10;
    let crr = Report::Crr(CrrResult {
        samples: (0..long)
            .map(|i| CrrSample {
                start_ns: i * 1_000,
                connected_ns: i * 1_000 + 100,
                done_ns: i * 1_000 + 300,
            })
            .collect(),
        ..Default::default()
    });
    let blob = packed(&[
        msgs(vec![
            msgs_run(1, long),
            msgs_run(16, long),
            msgs_run(64, 1_000),
        ]),
        crr,
        msgs(vec![msgs_run(1, 2_000)]),
    ]);
    let split = split_with(&blob, None, SMALL).unwrap();
    assert_eq!(split.delays.keys().copied().collect::<Vec<_>>(), vec![0]);
    let parts = series::parse_workloads_at(&split.text);
    let found: Vec<(&str, Vec<&str>)> = parts
        .iter()
        .map(|(_, w, s)| (w.as_str(), s.iter().map(|s| s.kind.as_str()).collect()))
        .collect();
    assert_eq!(
        found,
        vec![
            ("msgs", vec!["message"]),
            ("crr", vec!["time_wait"]),
            ("msgs", vec!["message"]),
        ]
    );
    assert_eq!(parts[0].2[0].attrs["size"], "64");
    assert_eq!(parts[0].0, 0);

    let series = crate::to_report::series_of("cfg", split, None);
    let labels: Vec<(&str, usize)> = series
        .message_delays
        .iter()
        .map(|d| (d.label.as_str(), d.points.len()))
        .collect();
    assert_eq!(labels.len(), 2, "{labels:?}");
    assert_eq!(labels[0].0, "cfg · workload 0");
    assert!(
        series.message_delays[0].stalls.is_some(),
        "the long one first"
    );
    assert_eq!(labels[1], ("cfg · workload 2", 1_997));
}

#[test]
fn a_damaged_blob_is_an_error() {
    let mut blob = packed(&[msgs(vec![msgs_run(1, 100)])]);
    blob.truncate(blob.len() - 7);
    assert!(split_with(&blob, None, SMALL).is_err());
}
