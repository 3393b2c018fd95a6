use super::*;

fn pair(src: &str, dst: &str, workload: &str, figures: Vec<(Figure, f64)>) -> PairState {
    PairState {
        src: src.into(),
        dst: dst.into(),
        workload: workload.into(),
        last_run_unix_s: 1_796_000_000.5,
        last_outcome: Outcome::Complete,
        runs: [12, 1, 2],
        figures,
        emulator_trustworthy: None,
        regressed: Vec::new(),
        cause: None,
    }
}

fn page() -> String {
    let mut slow = pair("h2", "h1", "stream", vec![(Figure::ThroughputBps, 4.7e8)]);
    slow.regressed = vec![Figure::ThroughputBps];
    slow.cause = Some("rwnd_limited".into());
    slow.emulator_trustworthy = Some(true);
    render(&Snapshot {
        hosts: 3,
        hosts_up: 2,
        lag_s: 1.5,
        pairs: vec![
            pair(
                "h1",
                "h2",
                "stream",
                vec![(Figure::ThroughputBps, 9.4e8), (Figure::Retransmits, 3.0)],
            ),
            slow,
            pair(
                "h1",
                "h3",
                "rr",
                vec![(Figure::LatencyP50S, 2.0e-4), (Figure::LatencyP99S, 1.1e-3)],
            ),
        ],
    })
    .unwrap()
}

#[test]
fn the_page_is_openmetrics_with_types_units_and_eof() {
    let text = page();
    assert!(text.ends_with("# EOF\n"), "{text}");
    for line in [
        "# TYPE tcplab_pair_throughput_bits_per_second gauge",
        "# UNIT tcplab_pair_throughput_bits_per_second bits_per_second",
        "tcplab_pair_throughput_bits_per_second{src=\"h1\",dst=\"h2\",workload=\"stream\"} 940000000.0",
        "tcplab_pair_latency_seconds{src=\"h1\",dst=\"h3\",workload=\"rr\",quantile=\"0.99\"} 0.0011",
        "tcplab_pair_runs_total{src=\"h1\",dst=\"h2\",workload=\"stream\",outcome=\"failed\"} 2",
        "tcplab_pair_regression{src=\"h2\",dst=\"h1\",workload=\"stream\",figure=\"throughput_bps\",cause=\"rwnd_limited\"} 1",
        "tcplab_pair_regression{src=\"h1\",dst=\"h2\",workload=\"stream\",figure=\"throughput_bps\",cause=\"none\"} 0",
        "tcplab_pair_emulator_trustworthy{src=\"h2\",dst=\"h1\",workload=\"stream\"} 1",
        "tcplab_monitor_schedule_lag_seconds 1.5",
        "tcplab_monitor_hosts_up 2",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "missing {line:?} in\n{text}"
        );
    }
}

#[test]
fn labels_are_bounded_by_the_fleet_not_by_the_runs() {
    // Every label value is a host name, a workload, a quantile, an outcome or a figure name:
    // a thousand more runs add no series.
    let text = page();
    let series = |t: &str| t.lines().filter(|l| !l.starts_with('#')).count();
    let before = series(&text);
    let mut many = pair("h1", "h2", "stream", vec![(Figure::ThroughputBps, 9.4e8)]);
    many.runs = [1_000, 0, 0];
    let again = render(&Snapshot {
        hosts: 3,
        hosts_up: 3,
        lag_s: 0.0,
        pairs: vec![many],
    })
    .unwrap();
    assert!(series(&again) < before, "{again}");
}

#[test]
fn a_host_name_that_needs_escaping_is_escaped() {
    let text = render(&Snapshot {
        hosts: 2,
        hosts_up: 2,
        lag_s: 0.0,
        pairs: vec![pair(
            "a\"b",
            "c\\d",
            "stream",
            vec![(Figure::ThroughputBps, 1.0)],
        )],
    })
    .unwrap();
    assert!(text.contains("src=\"a\\\"b\""), "{text}");
    assert!(text.contains("dst=\"c\\\\d\""), "{text}");
}
