//! The report input of a real study (a lab, root): the per-run plots get a stream's intervals
//! at the studies' default 100 ms and msgs' per-message delays, from the runs the report says
//! it chose, and every series carries its configuration's short label.

#![allow(clippy::unwrap_used, reason = "tests fail loudly on unexpected errors")]

use tcplab_lab::StateDir;
use tcplab_study::executor::LabExecutor;
use tcplab_study::{Plan, PlanOptions, ScenarioFile, Store, SweepOptions, sweep};

const SCENARIO: &str = r#"
name = "series"
repetitions = 2
seed = 5
reset = "reset"
objective = { metric = "throughput_bps", goal = "maximise" }

[lab]
topology = "pair"

[[workload]]
kind = "stream"
duration = "1s"

[[workload]]
kind = "msgs"
count = 2000
size = 1

[[factor]]
name = "sysctl.all.\"net.ipv4.tcp_notsent_lowat\""
values = [16384, 131072]

[[factor]]
name = "socket.nodelay"
values = [false, true]
"#;

#[test]
fn a_lab_study_reports_100ms_intervals_and_short_labels_everywhere() {
    tcplab_lab::require_root("the study's lab tests").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = ScenarioFile::parse("series.toml", SCENARIO).unwrap();
    let plan = Plan::new(&file, PlanOptions::default()).unwrap();
    let store = Store::create(&dir.path().join("s.db"), &plan).unwrap();
    let mut exec = LabExecutor::new(StateDir::at(dir.path().join("state")), "rs");
    let report = sweep(&plan, &store, &mut exec, SweepOptions::default()).unwrap();
    assert_eq!(report.executed, 8);
    let input = tcplab_study::to_report::report_input(&store).unwrap();

    // 4 configurations (no baseline given): all four are the best four.
    let shown = input.runs_shown.clone().unwrap();
    assert!(shown.starts_with("Per-run plots show "), "{shown}");
    assert_eq!(input.intervals.len(), 4, "{:?}", labels(&input));
    assert_eq!(input.message_delays.len(), 4);

    for s in &input.intervals {
        let iv = &s.intervals;
        assert!(iv.len() >= 9, "1 s at 100 ms: {} intervals", iv.len());
        assert!(iv[0].t_s <= 0.1 + 1e-6, "{:?}", iv[0]);
        for w in iv.windows(2) {
            assert!(w[1].t_s - w[0].t_s <= 0.1 + 1e-6, "{}: {w:?}", s.label);
        }
        assert!(
            iv.iter()
                .all(|i| i.throughput_bps.is_some() && i.rtt_us.is_some())
        );
        assert!(
            iv.iter()
                .all(|i| i.retransmits.is_some() && i.cwnd_segments.is_some())
        );
        assert!(s.label.ends_with(" · stream"), "{}", s.label);
    }
    for d in &input.message_delays {
        assert_eq!(d.points.len(), 2000, "{}", d.label);
        assert_eq!(d.times_s.len(), 2000);
        assert!(d.stall_us.is_some());
        assert!(d.label.ends_with(" · msgs"), "{}", d.label);
    }

    // Short labels reached every series: each begins with a configuration's (short) label,
    // and none spells a factor's full name.
    let configs: Vec<&str> = input
        .configurations
        .iter()
        .map(|c| c.label.as_str())
        .collect();
    for label in labels(&input) {
        assert!(
            !label.contains("sysctl.") && !label.contains("net.ipv4"),
            "{label}"
        );
        assert!(
            configs
                .iter()
                .any(|c| label.starts_with(&format!("{c} · rep "))),
            "{label} begins with none of {configs:?}"
        );
    }
}

fn labels(input: &tcplab_report::ReportInput) -> Vec<String> {
    let mut v: Vec<String> = input.intervals.iter().map(|s| s.label.clone()).collect();
    v.extend(input.message_delays.iter().map(|d| d.label.clone()));
    v.extend(input.latency_under_load.iter().map(|l| l.label.clone()));
    v
}
