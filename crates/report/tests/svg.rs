#![allow(clippy::unwrap_used, reason = "tests fail loudly on unexpected errors")]
//! Every plot parses as XML and carries its title, axis labels and legend entries; odd data
//! (empty series, one point, NaN, zeros on a log axis) never panics.

mod common;

use common::{assert_texts, svg_texts, wan_input};
use tcplab_report::plot::{self, Axis, BoxPlot, Mark, TimeMetric, XyPlot, XySeries, render_xy};
use tcplab_report::{MessageDelays, SweepPlotSpec, Table};

#[test]
fn sweep_plot_has_title_axes_legend_and_log_ticks() {
    let table = Table::from_input(&wan_input()).unwrap();
    let spec = SweepPlotSpec {
        factor: "rtt".into(),
        log_x: None,
    };
    let svg = plot::sweep_plot(&table, &spec).unwrap();
    assert_texts(
        &svg,
        &[
            "throughput vs rtt",
            "rtt (ms)",
            "throughput, mean and 95% CI (Mbit/s)",
            "buffers=default",
            "buffers=tuned",
        ],
    );
    // 1..40 ms spans more than a decade, so the axis is logarithmic: 1, 10 are ticks, 15 is not.
    let texts = svg_texts(&svg);
    assert!(texts.iter().any(|t| t == "10") && !texts.iter().any(|t| t == "15"));
    // One translucent CI band per line.
    assert_eq!(svg.matches("<polygon opacity=\"0.18\"").count(), 2);
    // The automatic choice finds the same single numeric factor.
    let auto = plot::sweep_plots(&table, &[]).unwrap();
    assert_eq!(auto.len(), 1);
    assert_eq!(auto[0].0, "rtt");
}

#[test]
fn sweep_plot_rejects_a_non_numeric_factor() {
    let table = Table::from_input(&wan_input()).unwrap();
    let spec = SweepPlotSpec {
        factor: "buffers".into(),
        log_x: Some(false),
    };
    let e = plot::sweep_plot(&table, &spec).unwrap_err().to_string();
    assert!(
        e.contains("\"buffers\"") && e.contains("not a number"),
        "{e}"
    );
}

#[test]
fn delay_scatter_and_cdf() {
    let input = wan_input();
    let svg = plot::delay_scatter(&input.message_delays, None).unwrap();
    assert_texts(
        &svg,
        &[
            "Per-message latency",
            "message (sequence number)",
            "latency (ms)",
            "nodelay=0",
        ],
    );
    // 500 points, none thinned: one marker each plus one in the legend.
    assert_eq!(svg.matches("<circle").count(), 501);
    let cdf = plot::delay_cdf(&input.message_delays).unwrap();
    assert_texts(
        &cdf,
        &["CDF of per-message latency", "values ≤ x (%)", "nodelay=0"],
    );
}

#[test]
fn box_plot_lists_every_configuration() {
    let svg = plot::box_plot(&BoxPlot {
        title: "time per configuration".into(),
        value_label: "time (seconds)".into(),
        boxes: vec![
            ("s=3 f=1".into(), vec![0.19, 0.28, 0.31, 0.75]),
            ("s=10 f=0".into(), vec![0.19, 0.79, 3.01]),
            ("one sample".into(), vec![0.5]),
            ("empty".into(), vec![]),
        ],
    })
    .unwrap();
    assert_texts(
        &svg,
        &[
            "time per configuration",
            "time (seconds)",
            "s=3 f=1",
            "s=10 f=0",
            "one sample",
            "empty",
        ],
    );
}

#[test]
fn time_series_per_metric() {
    let input = wan_input();
    for metric in [TimeMetric::Throughput, TimeMetric::Cwnd, TimeMetric::Rtt] {
        assert!(metric.present_in(&input.intervals));
        let svg = plot::time_series(&input.intervals, metric).unwrap();
        assert_texts(&svg, &["time (s)", "buffers=tuned rtt=20ms"]);
        let texts = svg_texts(&svg);
        assert!(
            texts
                .iter()
                .any(|t| t.starts_with(metric.label()) && t.ends_with(')')),
            "{texts:?}"
        );
    }
    assert!(!TimeMetric::Retransmits.present_in(&input.intervals));
}

#[test]
fn empty_and_degenerate_data_never_panic() {
    let empty = plot::delay_scatter(&[], None).unwrap();
    assert_texts(&empty, &["no data"]);
    let no_points = plot::delay_scatter(
        &[MessageDelays {
            label: "nothing".into(),
            points: vec![],
            ..MessageDelays::default()
        }],
        Some(true),
    )
    .unwrap();
    assert_texts(&no_points, &["no data", "nothing"]);
    let boxes = plot::box_plot(&BoxPlot {
        title: "none".into(),
        value_label: "x".into(),
        boxes: vec![],
    })
    .unwrap();
    assert_texts(&boxes, &["none", "no data"]);

    // NaN, infinity and (on a log axis) zero and negatives are left out; one point remains.
    let odd = XyPlot {
        title: "odd".into(),
        x: Axis::scaled("x", true),
        y: Axis::scaled("y", true),
        series: vec![XySeries {
            label: "s".into(),
            points: vec![
                (f64::NAN, 1.0),
                (0.0, 1.0),
                (-1.0, 2.0),
                (f64::INFINITY, 3.0),
                (5.0, 5.0),
            ],
            band: vec![(5.0, 4.0, 6.0)],
            mark: Mark::LineAndPoints,
        }],
    };
    let svg = render_xy(&odd).unwrap();
    assert_texts(&svg, &["odd", "x", "y", "s"]);
    assert!(!svg_texts(&svg).iter().any(|t| t == "no data"));
    assert_eq!(svg.matches("<circle").count(), 2); // the point and its legend marker
}

#[test]
fn text_is_escaped() {
    let svg = render_xy(&XyPlot {
        title: "a <b> & \"c\"".into(),
        x: Axis::linear("x & y"),
        y: Axis::linear("<y>"),
        series: vec![XySeries {
            label: "s<1>".into(),
            points: vec![(1.0, 1.0), (2.0, 3.0)],
            band: vec![],
            mark: Mark::Line,
        }],
    })
    .unwrap();
    assert_texts(&svg, &["a <b> & \"c\"", "x & y", "<y>", "s<1>"]);
}

#[test]
fn stalls_are_marked_and_counted_over_time() {
    let delays = MessageDelays {
        label: "cc=bbr · rep 2".into(),
        points: (0..400u64)
            .map(|i| (i, if i % 41 == 40 { 19_800.0 } else { 35.0 }))
            .collect(),
        times_s: (0..400).map(|i| f64::from(i) * 0.01).collect(),
        stall_us: Some(1_000.0),
        ..MessageDelays::default()
    };
    let svg = plot::delay_scatter(&[delays], None).unwrap();
    // Nine stalls among 400 messages, counted in their own legend entry; time on x.
    assert_texts(
        &svg,
        &[
            "time (s)",
            "cc=bbr · rep 2",
            "cc=bbr · rep 2: 9 stalls > 1 ms",
        ],
    );
    assert_eq!(svg.matches("class=\"legend\"").count(), 2);
    assert_eq!(svg.matches("class=\"axis-label\"").count(), 2);
}

#[test]
fn a_thinned_run_counts_its_whole_runs_stalls_and_draws_its_whole_runs_cdf() {
    // A long run as the study reads it: a few kept points, the stall count and the quantiles
    // of every message.
    let thinned = MessageDelays {
        label: "long".into(),
        points: vec![(0, 30.0), (40, 20_000.0), (90_000, 31.0)],
        times_s: vec![0.0, 0.1, 200.0],
        stall_us: Some(1_000.0),
        stalls: Some(48_780),
        distribution_us: (0..=100).map(|k| 30.0 + f64::from(k) * 2.0).collect(),
    };
    let svg = plot::delay_scatter(std::slice::from_ref(&thinned), None).unwrap();
    assert_texts(&svg, &["long: 48780 stalls > 1 ms"]);
    let whole = MessageDelays {
        points: thinned
            .distribution_us
            .iter()
            .enumerate()
            .map(|(i, &us)| (i as u64, us))
            .collect(),
        ..thinned.clone()
    };
    assert_eq!(
        plot::delay_cdf(&[thinned]).unwrap(),
        plot::delay_cdf(&[MessageDelays {
            distribution_us: Vec::new(),
            ..whole
        }])
        .unwrap()
    );
}

#[test]
fn latency_under_load_shares_one_time_axis() {
    use tcplab_report::{LatencyUnderLoad, TimeLine};
    let run = LatencyUnderLoad {
        label: "doctor · rrul".into(),
        throughput: vec![TimeLine {
            label: "flow 1 ↑".into(),
            points: (0..50).map(|i| (f64::from(i) * 0.1 + 1.0, 900e6)).collect(),
        }],
        probes: (0..70)
            .map(|i| {
                let t = f64::from(i) * 0.1;
                (
                    t,
                    if (1.0..6.0).contains(&t) {
                        45_000.0
                    } else {
                        30_000.0
                    },
                )
            })
            .collect(),
        idle_latency_us: Some(30_000.0),
        load_s: Some((1.0, 6.0)),
    };
    let svg = plot::latency_under_load(&run).unwrap();
    assert_texts(
        &svg,
        &[
            "Latency under load: doctor · rrul",
            "throughput (Mbit/s)",
            "latency (ms)",
            "time (s)",
            "flow 1 ↑",
            "probe latency",
            "idle latency 30 ms",
            "load running",
        ],
    );
    // One x description for both panels, a y description each.
    assert_eq!(svg.matches("class=\"axis-label\"").count(), 3);
}
