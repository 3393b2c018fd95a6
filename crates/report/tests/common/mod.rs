//! Shared helpers of the integration tests: XML parsing and a small study input.
#![allow(dead_code, reason = "each test binary uses a different subset")]
#![allow(clippy::unwrap_used, reason = "tests fail loudly on unexpected errors")]

use tcplab_report::{
    ConfigurationResult, IntervalSample, IntervalSeries, MessageDelays, ObjectiveSpec, ReportInput,
};
use tcplab_stats::{Bootstrap, Objective};

/// Parses `svg` as XML (panicking with the parser's message) and returns every text the
/// reader sees: <text> contents and the <title>, trimmed.
pub fn svg_texts(svg: &str) -> Vec<String> {
    let doc = roxmltree::Document::parse(svg).unwrap_or_else(|e| panic!("SVG is not XML: {e}"));
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    doc.descendants()
        .filter(|n| n.has_tag_name("text") || n.has_tag_name("title"))
        .filter_map(|n| n.text())
        .map(|t| t.trim().to_string())
        .collect()
}

/// Asserts that each of `wanted` is one of the SVG's texts.
pub fn assert_texts(svg: &str, wanted: &[&str]) {
    let texts = svg_texts(svg);
    for w in wanted {
        assert!(texts.iter().any(|t| t == w), "{w:?} not among {texts:?}");
    }
    assert!(!svg.contains("NaN"), "SVG holds NaN");
}

/// BalticGrid-like: throughput vs rtt for two buffer settings, 3 repetitions each.
pub fn wan_input() -> ReportInput {
    let mut configs = Vec::new();
    for (buffers, window_mbit) in [("default", 2.0_f64), ("tuned", 70.0)] {
        for rtt in [1.0, 5.0, 20.0, 40.0] {
            let limit = (window_mbit / (rtt / 1000.0)).min(940.0);
            configs.push(ConfigurationResult::new(
                format!("{buffers} {rtt}ms"),
                &[("buffers", buffers), ("rtt", &format!("{rtt}ms"))],
                vec![limit * 0.98, limit, limit * 1.01],
            ));
        }
    }
    let objective = ObjectiveSpec {
        name: "throughput".into(),
        unit: "Mbit/s".into(),
        goal: Objective::Maximise,
    };
    let mut input = ReportInput::new("WAN <buffers> & RTT", objective, configs);
    input.baseline = Some("default 20ms".into());
    input.bootstrap = Bootstrap::new(500, 3);
    input.scenario_text = "[factors]\nrtt = [\"1ms\", \"5ms\", \"20ms\", \"40ms\"] # <&>".into();
    input.facts = serde_json::json!({"kernel": "6.18.0", "hz": 250, "sysctl": {"net.ipv4.tcp_rmem": "4096 131072 6291456"}});
    input.message_delays = vec![MessageDelays {
        label: "nodelay=0".into(),
        points: (0..500u64)
            .map(|i| (i, if i % 41 == 40 { 8_000.0 } else { 30.0 }))
            .collect(),
        ..MessageDelays::default()
    }];
    input.intervals = vec![IntervalSeries {
        label: "tuned 20ms".into(),
        intervals: (1..=5)
            .map(|t| IntervalSample {
                t_s: f64::from(t),
                throughput_bps: Some(900e6),
                cwnd_segments: Some(1500.0),
                rtt_us: Some(21_000.0),
                retransmits: None,
            })
            .collect(),
    }];
    input.shorten_labels();
    input
}
