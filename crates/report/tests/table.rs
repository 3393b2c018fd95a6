#![allow(clippy::unwrap_used, reason = "tests fail loudly on unexpected errors")]
//! Golden strings for the terminal table, Markdown, CSV and JSON. The figures in them are
//! hand-computed: mean and sd of {0.2, 0.3, 0.4} are 0.3 and 0.1; the 95% interval of the
//! mean, every run being above zero, is on the log scale (stats' `mean_ci_log`: [0.124, 0.757]
//! and [0.603, 1.681], from the formula in Python); the speed-up estimate is 1.0 / 0.3 = 3.33.

use tcplab_report::text::Layout;
use tcplab_report::{ConfigurationResult, ObjectiveSpec, ReportError, ReportInput, Table};
use tcplab_stats::{Bootstrap, Objective};

fn time() -> ObjectiveSpec {
    ObjectiveSpec {
        name: "time".into(),
        unit: "seconds".into(),
        goal: Objective::Minimise,
    }
}

/// sfperf's two knobs: the patched setting and the unpatched baseline, with short labels.
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
    input.shorten_labels();
    input
}

#[test]
fn sfperf_text_table_without_baseline() {
    let table = Table::from_input(&sfperf(false)).unwrap();
    let method = table.method.clone().unwrap();
    assert!(method.contains("90th percentile"), "{method}");
    let expected = "sfperf\n\
         objective: minimise time (s); 95% CI of the mean (log scale)\n\
         rank  grp  configuration       time (s)   best  worst          95% CI  n\n   \
         1    1  s=3 f=1        0.300 ± 0.100  0.200  0.400  [0.124, 0.757]  3\n   \
         2    2  s=10 f=0       1.000 ± 0.200  0.800  1.200  [0.603, 1.681]  3\n\
         ranking: minimise; ordered by the pessimistic 90th percentile; settings not significantly different\n  \
         from their group's leader (two-sided Welch t-test, Holm-adjusted, alpha = 0.05) share its group\n";
    assert_eq!(table.to_text(), expected);
}

#[test]
fn sfperf_text_table_with_baseline_speed_up() {
    let table = Table::from_input(&sfperf(true)).unwrap();
    let best = table.best().unwrap();
    assert_eq!(best.label, "s=3 f=1");
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
        "objective: minimise time (s); 95% CI of the mean (log scale); speed-up vs the baseline, s=10 f=0"
    );
    assert_eq!(lines[2], "  (bootstrap CI)");
    assert!(lines[4].ends_with(&format!("  {speed}  3")), "{}", lines[4]);
    assert!(
        lines[5].contains("  s=10 f=0 (baseline)  1.000 ± 0.200")
            && lines[5].ends_with("baseline  3"),
        "{}",
        lines[5]
    );
}

/// The widths a table is asked to fit, and what goes first when it cannot.
#[test]
fn text_tables_fit_their_width_dropping_the_least_needed_columns() {
    let table = Table::from_input(&sfperf(true)).unwrap();
    for width in [40, 60, 80, 100, 140] {
        let text = table.to_text_with(&Layout {
            width,
            color: false,
        });
        for l in text.lines() {
            assert!(
                l.chars().count() <= width,
                "{width}: {l:?} is {} wide",
                l.chars().count()
            );
        }
        // The configuration and the objective always stay.
        assert!(
            text.contains("s=3 f=1") && text.contains("0.300 ± 0.100"),
            "{text}"
        );
    }
    let narrow = table.to_text_with(&Layout {
        width: 60,
        color: false,
    });
    assert!(
        !narrow.contains("best") && !narrow.contains("worst"),
        "{narrow}"
    );
    let wide = table.to_text_with(&Layout {
        width: 140,
        color: false,
    });
    assert!(wide.contains("best") && wide.contains("speed-up"), "{wide}");
}

#[test]
fn colour_only_on_request() {
    let table = Table::from_input(&sfperf(true)).unwrap();
    assert!(!table.to_text().contains('\x1b'));
    let tty = table.to_text_with(&Layout {
        width: 100,
        color: true,
    });
    // Group 1 in green, the header bold.
    assert!(tty.contains("\x1b[32m   1    1  s=3 f=1"), "{tty:?}");
    assert!(tty.contains("\x1b[1mrank"), "{tty:?}");
}

#[test]
fn sfperf_markdown() {
    let table = Table::from_input(&sfperf(false)).unwrap();
    let expected = format!(
        "**sfperf**\n\n\
         objective: minimise time (s); 95% CI of the mean (log scale)\n\n\
         | rank | group | configuration | n | time (s) mean ± sd | best | worst | 95% CI of mean |\n\
         | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |\n\
         | 1 | 1 | s=3 f=1 | 3 | 0.300 ± 0.100 | 0.200 | 0.400 | [0.124, 0.757] |\n\
         | 2 | 2 | s=10 f=0 | 3 | 1.000 ± 0.200 | 0.800 | 1.200 | [0.603, 1.681] |\n\
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
        "rank,group,label,s,f,baseline,n,mean_s,sd_s,best_s,worst_s,median_s,p90_s,ci_lower_s,ci_upper_s,speed_up,speed_up_lower,speed_up_upper,status,reason"
    );
    assert!(
        lines[1].starts_with("1,1,s=3 f=1,3,1,false,3,0.3"),
        "{}",
        lines[1]
    );
    // p90 = 0.38 (type 7); the CI of the mean on the log scale, from the formula in Python
    // (stats' reference test): (0.12416389547515877, 0.7565055115021463).
    let fields: Vec<&str> = lines[1].split(',').collect();
    assert_eq!(fields[12], "0.38", "{}", lines[1]);
    let bound = |i: usize| fields[i].parse::<f64>().unwrap();
    assert!(
        (bound(13) - 0.12416389547515877).abs() < 1e-9,
        "{}",
        lines[1]
    );
    assert!(
        (bound(14) - 0.7565055115021463).abs() < 1e-9,
        "{}",
        lines[1]
    );
    assert!(lines[1].ends_with(",,,,ok,"), "{}", lines[1]);
    assert_eq!(lines.len(), 3);
    let json: serde_json::Value = serde_json::from_str(&table.to_json().unwrap()).unwrap();
    assert_eq!(json["rows"][0]["label"], "s=3 f=1");
    assert_eq!(json["rows"][1]["mean"], 1.0);
    assert_eq!(json["rows"][1]["group"], 2);
    assert_eq!(json["objective"]["goal"], "minimise");
    let nd = table.to_ndjson().unwrap();
    let labels: Vec<String> = nd
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["label"].to_string())
        .collect();
    assert_eq!(labels, ["\"s=3 f=1\"", "\"s=10 f=0\""]);
}

#[test]
fn one_configuration_one_sample_prints_dashes_not_nan() {
    let configs = vec![ConfigurationResult::new("only", &[], vec![0.25])];
    let table = Table::from_input(&ReportInput::new("one", time(), configs)).unwrap();
    let text = table.to_text();
    assert_eq!(
        text.lines().nth(3).unwrap(),
        "   1    1  only             250 ± -   250    250       -  1"
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
    input.configurations[0].dropped =
        Some("worse than s=3 f=1 after 3 runs (Welch p = 0.01)".into());
    input.shorten_labels();
    let table = Table::from_input(&input).unwrap();
    let text = table.to_text();
    let lines: Vec<&str> = text.lines().collect();
    // The rows say what happened; the reasons follow the table, one per line.
    assert!(lines[4].ends_with("3  dropped"), "{text}");
    assert!(
        lines[5].contains("s=9 f=9") && lines[5].ends_with("0  failed"),
        "{text}"
    );
    assert_eq!(
        lines[6],
        "s=10 f=0: dropped: worse than s=3 f=1 after 3 runs (Welch p = 0.01)"
    );
    assert_eq!(
        lines[7],
        "s=9 f=9: failed: sysctl tcp_delack_strategy: no such file"
    );
    let md = table.to_markdown();
    assert!(
        md.contains("| - | - | s=9 f=9 | 0 | - | - | - | - | failed |"),
        "{md}"
    );
    assert!(
        md.contains("- `s=9 f=9`: failed: sysctl tcp_delack_strategy: no such file"),
        "{md}"
    );
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
            "\n   1    1  tuned                      938 ± 6   945    930  [927, 948]  4\n"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "\n   2    2  default                    101 ± 9   110     90   [88, 116]  4\n"
        ),
        "{text}"
    );
}

#[test]
fn bad_input_is_an_error_naming_the_field() {
    let mut input = sfperf(false);
    input.baseline = Some("nope".into());
    let e = Table::from_input(&input).unwrap_err();
    assert!(matches!(e, ReportError::UnknownBaseline { .. }));
    assert!(e.to_string().contains("s=10 f=0, s=3 f=1"), "{e}");

    let mut input = sfperf(false);
    input.configurations[1].samples[0] = f64::NAN;
    let e = Table::from_input(&input).unwrap_err().to_string();
    assert!(e.starts_with("configuration \"s=3 f=1\""), "{e}");

    let mut input = sfperf(false);
    input.configurations[1].label = "s=10 f=0".into();
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
        "empty\nobjective: minimise time (s); 95% CI of the mean (log scale)\n"
    );
}

/// Four varying factors make labels wider than a third of the terminal: they wrap onto more
/// lines instead of pushing rank, n and the speed-up out, and no word of any label is lost.
#[test]
fn long_labels_wrap_rather_than_crowd_out_the_figures() {
    let mut configs = Vec::new();
    for nodelay in ["false", "true"] {
        for cork in ["0", "1"] {
            let label = format!("{nodelay} {cork}");
            let factors = [
                ("socket.nodelay", nodelay),
                ("sysctl.all.\"net.ipv4.tcp_autocorking\"", cork),
                ("socket.quickack", "true"),
                (
                    "socket.delack_max_us",
                    if cork == "0" { "8000" } else { "20000" },
                ),
            ];
            let base = if nodelay == "true" { 6.0 } else { 2.0 };
            configs.push(ConfigurationResult::new(
                label,
                &factors,
                vec![base, base + 0.2, base + 0.1],
            ));
        }
    }
    configs[0]
        .factors
        .insert("socket.quickack".into(), "false".into());
    let mut input = ReportInput::new("sfperf", time(), configs);
    input.baseline = Some("false 0".into());
    input.shorten_labels();
    let table = Table::from_input(&input).unwrap();
    let text = table.to_text_with(&Layout {
        width: 80,
        color: false,
    });
    assert!(text.lines().all(|l| l.chars().count() <= 80), "{text}");
    let header = text.lines().find(|l| l.starts_with("rank")).unwrap();
    assert!(
        header.contains("speed-up") && header.ends_with(" n"),
        "{text}"
    );
    for row in &table.rows {
        for word in row.label.split(' ') {
            assert!(text.contains(word), "{word} of {} lost:\n{text}", row.label);
        }
    }
}

/// An interval of the mean never reaches below zero for a figure that cannot (every run above
/// zero: on the log scale); a configuration with a run at zero gets Student's t, and the
/// heading says which.
#[test]
fn intervals_respect_the_scale_and_the_heading_names_the_method() {
    let configs = vec![
        // Two runs far apart: Student's t would give [-8.2, 13.5].
        ConfigurationResult::new("a", &[], vec![1.8, 3.5]),
        ConfigurationResult::new("b", &[], vec![0.0, 1.0, 2.0]),
    ];
    let table = Table::from_input(&ReportInput::new("scale", time(), configs)).unwrap();
    let a = table.rows.iter().find(|r| r.label == "a").unwrap();
    assert!(
        a.ci_lower.unwrap() > 0.0 && a.ci_upper.unwrap() > 3.5,
        "{a:?}"
    );
    let b = table.rows.iter().find(|r| r.label == "b").unwrap();
    assert!(b.ci_lower.unwrap() < 0.0, "{b:?}");
    assert!(
        table
            .heading()
            .ends_with("CI of the mean (log scale; Student t where a figure is not above zero)"),
        "{}",
        table.heading()
    );
}
