#![allow(clippy::unwrap_used, reason = "tests fail loudly on unexpected errors")]
//! Golden strings for the terminal table, Markdown, CSV and JSON. The figures in them are
//! hand-computed: mean and sd of {0.2, 0.3, 0.4} are 0.3 and 0.1; the 95% t interval is
//! x̄ ± t(0.975, 2)·s/√3 = x̄ ± 4.302653·s/√3 (0.3 ± 0.248 and 1.0 ± 0.497); the speed-up
//! estimate is 1.0 / 0.3 = 3.33.

use tcplab_report::{ConfigurationResult, ObjectiveSpec, ReportError, ReportInput, Table};
use tcplab_stats::{Bootstrap, Objective};

fn time() -> ObjectiveSpec {
    ObjectiveSpec {
        name: "time".into(),
        unit: "seconds".into(),
        goal: Objective::Minimise,
    }
}

/// sfperf's two knobs: the patched setting and the unpatched baseline.
fn sfperf(baseline: bool) -> ReportInput {
    let configs = vec![
        ConfigurationResult::new("s10 f0", &[("s", "10"), ("f", "0")], vec![0.8, 1.0, 1.2]),
        ConfigurationResult::new("s3 f1", &[("s", "3"), ("f", "1")], vec![0.2, 0.3, 0.4]),
    ];
    let mut input = ReportInput::new("sfperf", time(), configs);
    input.factor_order = vec!["s".into(), "f".into()];
    input.bootstrap = Bootstrap::new(2_000, 1);
    if baseline {
        input.baseline = Some("s10 f0".into());
    }
    input
}

#[test]
fn sfperf_text_table_without_baseline() {
    let table = Table::from_input(&sfperf(false)).unwrap();
    let method = table.method.clone().unwrap();
    assert!(method.contains("90th percentile"), "{method}");
    let expected = format!(
        "sfperf\n\
         objective: minimise time (seconds); 95% CI of the mean (Student t)\n\
         s:  3 f: 1  time: 0.300 +/- 0.100  best: 0.200  worst: 0.400 seconds  95% CI: [0.052, 0.548]  n: 3  group: 1  rank: 1\n\
         s: 10 f: 0  time: 1.000 +/- 0.200  best: 0.800  worst: 1.200 seconds  95% CI: [0.503, 1.497]  n: 3  group: 2  rank: 2\n\
         ranking: {method}\n"
    );
    assert_eq!(table.to_text(), expected);
}

#[test]
fn sfperf_text_table_with_baseline_speed_up() {
    let table = Table::from_input(&sfperf(true)).unwrap();
    let best = table.best().unwrap();
    assert_eq!(best.label, "s3 f1");
    let (x, lo, hi) = (
        best.speed_up.unwrap(),
        best.speed_up_lower.unwrap(),
        best.speed_up_upper.unwrap(),
    );
    assert!((x - 1.0 / 0.3).abs() < 1e-12);
    // Every bootstrap resample's ratio lies between 0.8/0.4 and 1.2/0.2.
    assert!(2.0 <= lo && lo < x && x < hi && hi <= 6.0, "{lo} {x} {hi}");
    let speed = format!("{x:.2}x [{lo:.2}, {hi:.2}]");
    let text = table.to_text();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[1],
        "objective: minimise time (seconds); 95% CI of the mean (Student t); speed-up vs baseline s: 10 f: 0 (bootstrap CI)"
    );
    let pad = speed.len() - "baseline".len();
    assert_eq!(
        lines[2],
        format!(
            "s:  3 f: 1  time: 0.300 +/- 0.100  best: 0.200  worst: 0.400 seconds  95% CI: [0.052, 0.548]  speed-up: {speed}  n: 3  group: 1  rank: 1"
        )
    );
    assert_eq!(
        lines[3],
        format!(
            "s: 10 f: 0  time: 1.000 +/- 0.200  best: 0.800  worst: 1.200 seconds  95% CI: [0.503, 1.497]  speed-up: {}baseline  n: 3  group: 2  rank: 2",
            " ".repeat(pad)
        )
    );
}

#[test]
fn sfperf_markdown() {
    let table = Table::from_input(&sfperf(false)).unwrap();
    let expected = format!(
        "**sfperf**\n\n\
         objective: minimise time (seconds); 95% CI of the mean (Student t)\n\n\
         | rank | group | s | f | n | time (seconds) mean ± sd | best | worst | 95% CI of mean |\n\
         | ---: | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: |\n\
         | 1 | 1 | 3 | 1 | 3 | 0.300 ± 0.100 | 0.200 | 0.400 | [0.052, 0.548] |\n\
         | 2 | 2 | 10 | 0 | 3 | 1.000 ± 0.200 | 0.800 | 1.200 | [0.503, 1.497] |\n\
         \nRanking: {}.\n",
        table.method.clone().unwrap()
    );
    assert_eq!(table.to_markdown(), expected);
}

#[test]
fn csv_and_json_carry_full_precision() {
    let table = Table::from_input(&sfperf(false)).unwrap();
    let csv = table.to_csv();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(
        lines[0],
        "rank,group,label,s,f,baseline,n,mean,sd,best,worst,median,p90,ci_lower,ci_upper,speed_up,speed_up_lower,speed_up_upper,status,reason"
    );
    assert!(
        lines[1].starts_with("1,1,s3 f1,3,1,false,3,0.3"),
        "{}",
        lines[1]
    );
    // p90 = 0.38 (type 7), CI = 0.3 ∓ 0.2484137711750333.
    assert!(
        lines[1].ends_with(",0.38,0.05158622882496666,0.5484137711750333,,,,ok,"),
        "{}",
        lines[1]
    );
    assert_eq!(lines.len(), 3);
    let json: serde_json::Value = serde_json::from_str(&table.to_json().unwrap()).unwrap();
    assert_eq!(json["rows"][0]["label"], "s3 f1");
    assert_eq!(json["rows"][1]["mean"], 1.0);
    assert_eq!(json["rows"][1]["group"], 2);
    assert_eq!(json["objective"]["goal"], "minimise");
    let nd = table.to_ndjson().unwrap();
    let labels: Vec<String> = nd
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["label"].to_string())
        .collect();
    assert_eq!(labels, ["\"s3 f1\"", "\"s10 f0\""]);
}

#[test]
fn one_configuration_one_sample_prints_dashes_not_nan() {
    let configs = vec![ConfigurationResult::new("only", &[], vec![0.25])];
    let table = Table::from_input(&ReportInput::new("one", time(), configs)).unwrap();
    let text = table.to_text();
    assert_eq!(
        text.lines().nth(2).unwrap(),
        "only  time: 0.250 +/- -  best: 0.250  worst: 0.250 seconds  95% CI: -  n: 1  group: 1  rank: 1"
    );
    let all = format!("{text}{}{}", table.to_markdown(), table.to_csv());
    assert!(!all.contains("NaN") && !all.contains("inf"), "{all}");
}

#[test]
fn failed_and_dropped_configurations_are_listed_with_their_reason() {
    let mut input = sfperf(false);
    let mut failed = ConfigurationResult::new("s9 f9", &[("s", "9"), ("f", "9")], vec![]);
    failed.failed = Some("sysctl tcp_delack_strategy: no such file".into());
    input.configurations.push(failed);
    input.configurations[0].dropped = Some("worse than s3 f1 after 3 runs (Welch p = 0.01)".into());
    let table = Table::from_input(&input).unwrap();
    let text = table.to_text();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[3].ends_with("rank: 2  dropped: worse than s3 f1 after 3 runs (Welch p = 0.01)"));
    assert_eq!(
        lines[4],
        "s:  9 f: 9  failed: sysctl tcp_delack_strategy: no such file"
    );
    let md = table.to_markdown();
    assert!(md.contains("| - | - | 9 | 9 | 0 | - | - | - | - | failed: sysctl tcp_delack_strategy: no such file |"), "{md}");
}

#[test]
fn maximising_orders_best_first_and_flips_best_and_worst() {
    let objective = ObjectiveSpec {
        name: "throughput".into(),
        unit: "Mbit/s".into(),
        goal: Objective::Maximise,
    };
    let configs = vec![
        ConfigurationResult::new("default", &[], vec![100.0, 110.0, 90.0, 105.0]),
        ConfigurationResult::new("tuned", &[], vec![940.0, 930.0, 945.0, 935.0]),
    ];
    let table = Table::from_input(&ReportInput::new("wan", objective, configs)).unwrap();
    assert_eq!(table.rows[0].label, "tuned");
    assert_eq!(table.rows[0].best, Some(945.0));
    assert_eq!(table.rows[0].worst, Some(930.0));
    let text = table.to_text();
    // Means 937.5 and 101.25 (sd 6.455 and 8.539): three significant digits of the smaller.
    assert!(
        text.contains(
            "\ntuned    throughput: 938 +/- 6  best: 945  worst: 930 Mbit/s  95% CI: [927, 948]"
        ),
        "{text}"
    );
    assert!(text.contains("\ndefault  throughput: 101 +/- 9  best: 110  worst:  90 Mbit/s"));
}

#[test]
fn bad_input_is_an_error_naming_the_field() {
    let mut input = sfperf(false);
    input.baseline = Some("nope".into());
    let e = Table::from_input(&input).unwrap_err();
    assert!(matches!(e, ReportError::UnknownBaseline { .. }));
    assert!(e.to_string().contains("s10 f0, s3 f1"), "{e}");

    let mut input = sfperf(false);
    input.configurations[1].samples[0] = f64::NAN;
    let e = Table::from_input(&input).unwrap_err().to_string();
    assert!(e.starts_with("configuration \"s3 f1\""), "{e}");

    let mut input = sfperf(false);
    input.configurations[1].label = "s10 f0".into();
    assert!(matches!(
        Table::from_input(&input),
        Err(ReportError::DuplicateLabel { .. })
    ));
}

#[test]
fn no_configurations_gives_an_empty_table() {
    let table = Table::from_input(&ReportInput::new("empty", time(), vec![])).unwrap();
    assert!(table.rows.is_empty());
    assert_eq!(
        table.to_text(),
        "empty\nobjective: minimise time (seconds); 95% CI of the mean (Student t)\n"
    );
}
