#![allow(clippy::unwrap_used, reason = "tests fail loudly on unexpected errors")]
//! Studies side by side: configurations matched by their factors whatever their order or
//! labels, one set of labels over the union, ratios with known answers, the terminal table
//! within its width, and the page as well-formed XML.

mod common;

use tcplab_report::compare::{Change, CompareError, compare};
use tcplab_report::text::Layout;
use tcplab_report::{ConfigurationResult, ObjectiveSpec, ReportInput};
use tcplab_stats::{Bootstrap, Objective};

const RMEM: &str = "sysctl.all.\"net.ipv4.tcp_rmem\"";
const CC: &str = "socket.congestion";

fn throughput() -> ObjectiveSpec {
    ObjectiveSpec {
        name: "throughput_bps".into(),
        unit: "bit/s".into(),
        goal: Objective::Maximise,
    }
}

/// One configuration of a synthetic study: its factors and samples.
type Config<'a> = (Vec<(&'a str, &'a str)>, Vec<f64>);

/// A study as `report_input` makes it: its own short labels, a fast bootstrap.
fn study(name: &str, objective: ObjectiveSpec, configs: Vec<Config<'_>>) -> (String, ReportInput) {
    let configs = configs
        .into_iter()
        .enumerate()
        .map(|(i, (factors, samples))| ConfigurationResult::new(format!("c{i}"), &factors, samples))
        .collect();
    let mut input = ReportInput::new(format!("wan: {}", objective.name), objective, configs);
    input.bootstrap = Bootstrap::new(500, 7);
    input.factor_order = vec![RMEM.to_string(), CC.to_string()];
    input.shorten_labels();
    (name.to_string(), input)
}

/// Samples around `mean` (±1%), so every test below is significant at any sensible level.
fn around(mean: f64) -> Vec<f64> {
    vec![mean * 0.99, mean, mean * 1.01, mean * 0.995, mean * 1.005]
}

fn cc_study(name: &str, bbr: f64, cubic: f64, reno: f64) -> (String, ReportInput) {
    study(
        name,
        throughput(),
        vec![
            (vec![(CC, "bbr")], around(bbr)),
            (vec![(CC, "cubic")], around(cubic)),
            (vec![(CC, "reno")], around(reno)),
        ],
    )
}

#[test]
fn configurations_match_by_factors_whatever_their_order() {
    let a = cc_study("before", 900e6, 800e6, 700e6);
    // The same settings, listed in another order.
    let mut b = cc_study("after", 950e6, 600e6, 700e6);
    b.1.configurations.reverse();
    let c = compare(&[a, b]).unwrap();
    assert_eq!(c.rows.len(), 3, "every configuration matched once");
    // The first study's rank order: bbr (900), cubic (800), reno (700).
    let labels: Vec<&str> = c.rows.iter().map(|r| r.label.as_str()).collect();
    assert_eq!(labels, ["cc=bbr", "cc=cubic", "cc=reno"]);
    for r in &c.rows {
        assert!(r.cells.iter().all(Option::is_some), "{r:?}");
    }
    let b_cell = |row: usize| c.rows[row].cells[1].as_ref().unwrap();
    let bbr = b_cell(0).vs_first.as_ref().unwrap();
    assert!((bbr.estimate - 950.0 / 900.0).abs() < 1e-9, "{bbr:?}");
    assert_eq!(bbr.change, Change::Faster);
    assert_eq!(b_cell(1).vs_first.as_ref().unwrap().change, Change::Slower);
    let reno = b_cell(2).vs_first.as_ref().unwrap();
    assert_eq!(reno.change, Change::NotSignificant);
    assert!((reno.estimate - 1.0).abs() < 1e-12);
    assert_eq!(
        c.verdicts(),
        [
            "after vs before: 1 of 3 configurations faster, 1 slower, 1 without a significant difference; median ratio 1.00x."
        ]
    );
}

#[test]
fn a_configuration_only_in_the_second_study_comes_last_with_dashes() {
    let a = study(
        "a",
        throughput(),
        vec![
            (vec![(CC, "bbr")], around(900e6)),
            (vec![(CC, "cubic")], around(800e6)),
        ],
    );
    let b = cc_study("b", 900e6, 800e6, 500e6);
    let c = compare(&[a, b]).unwrap();
    assert_eq!(c.rows.len(), 3);
    let last = &c.rows[2];
    assert_eq!(last.label, "cc=reno");
    assert!(last.cells[0].is_none());
    assert!(last.cells[1].as_ref().unwrap().vs_first.is_none());
    let text = c.to_text();
    let reno = text.lines().find(|l| l.starts_with("cc=reno")).unwrap();
    assert!(
        reno.split_whitespace().nth(1) == Some("-"),
        "{reno}\n{text}"
    );
    assert!(
        c.verdicts()[0].contains("(1 only in one of the two)"),
        "{:?}",
        c.verdicts()
    );
}

#[test]
fn factors_that_differ_between_studies_lengthen_the_labels() {
    // Each study alone varies only cc (its labels are "cc=..."); together rmem varies too.
    let buffers = |rmem: &'static str, name: &str| {
        study(
            name,
            throughput(),
            vec![
                (vec![(RMEM, rmem), (CC, "bbr")], around(900e6)),
                (vec![(RMEM, rmem), (CC, "cubic")], around(800e6)),
            ],
        )
    };
    let a = buffers("4096 87380 174760", "small");
    let b = buffers("4096 87380 7561216", "large");
    assert_eq!(a.1.configurations[0].label, "cc=bbr");
    let c = compare(&[a, b]).unwrap();
    let labels: Vec<&str> = c.rows.iter().map(|r| r.label.as_str()).collect();
    assert_eq!(
        labels,
        [
            "rmem=170k cc=bbr",
            "rmem=170k cc=cubic",
            "rmem=7.6M cc=bbr",
            "rmem=7.6M cc=cubic"
        ]
    );
    assert!(c.rows[..2].iter().all(|r| r.cells[1].is_none()));
    assert!(c.rows[2..].iter().all(|r| r.cells[0].is_none()));
    assert_eq!(c.key.factors[0].full, RMEM);
}

#[test]
fn ratios_follow_the_objective_direction() {
    let time = ObjectiveSpec {
        name: "total_s".into(),
        unit: "s".into(),
        goal: Objective::Minimise,
    };
    let a = study(
        "a",
        time.clone(),
        vec![(vec![("nodelay", "1")], around(0.4))],
    );
    let b = study("b", time, vec![(vec![("nodelay", "1")], around(0.2))]);
    let c = compare(&[a, b]).unwrap();
    let r = c.rows[0].cells[1]
        .as_ref()
        .unwrap()
        .vs_first
        .clone()
        .unwrap();
    // Half the time is twice as fast: 0.4 / 0.2.
    assert!((r.estimate - 2.0).abs() < 1e-9, "{r:?}");
    assert!(r.lower <= r.estimate && r.estimate <= r.upper);
    assert!(r.lower > 1.9 && r.upper < 2.1, "{r:?}");
    assert_eq!(r.change, Change::Faster);
    assert!(r.p_value.unwrap() < 1e-6);
    // One configuration: Holm changes nothing.
    assert_eq!(r.p_value, r.p_adjusted);
    assert!(c.to_text().contains("2.00x faster"), "{}", c.to_text());
}

#[test]
fn single_runs_get_a_ratio_but_no_verdict() {
    let a = study("a", throughput(), vec![(vec![("x", "1")], vec![100e6])]);
    let b = study("b", throughput(), vec![(vec![("x", "1")], vec![150e6])]);
    let c = compare(&[a, b]).unwrap();
    let r = c.rows[0].cells[1]
        .as_ref()
        .unwrap()
        .vs_first
        .clone()
        .unwrap();
    assert!((r.estimate - 1.5).abs() < 1e-12);
    assert_eq!((r.p_value, r.change), (None, Change::NotSignificant));
}

#[test]
fn different_objectives_are_refused_naming_both() {
    let a = cc_study("a", 1e6, 1e6, 1e6);
    let time = ObjectiveSpec {
        name: "total_s".into(),
        unit: "s".into(),
        goal: Objective::Minimise,
    };
    let b = study("b", time, vec![(vec![(CC, "bbr")], around(1.0))]);
    let err = compare(&[a, b]).unwrap_err();
    assert!(matches!(err, CompareError::Objectives { .. }));
    let msg = err.to_string();
    assert!(
        msg.contains("b: objective minimise total_s differs from a's maximise throughput_bps"),
        "{msg}"
    );
    let one = cc_study("a", 1e6, 1e6, 1e6);
    assert!(matches!(
        compare(&[one]),
        Err(CompareError::Count { got: 1 })
    ));
}

/// Three studies with long labels: the widest case the tests draw.
fn three_studies() -> Vec<(String, ReportInput)> {
    let configs = |scale: f64| {
        [
            "4096 87380 174760",
            "4096 87380 6291456",
            "4096 87380 7561216",
        ]
        .iter()
        .flat_map(|rmem| {
            ["bbr", "cubic"].map(|cc| {
                let base = if cc == "bbr" { 900e6 } else { 700e6 };
                (vec![(RMEM, *rmem), (CC, cc)], around(base * scale))
            })
        })
        .collect::<Vec<_>>()
    };
    let mut out = vec![
        study("kernel-6.1", throughput(), configs(1.0)),
        study("kernel-6.8", throughput(), configs(1.1)),
        study("kernel-6.12", throughput(), configs(0.9)),
    ];
    for (i, (_, input)) in out.iter_mut().enumerate() {
        input.facts = serde_json::json!({"kernel": format!("6.{i}"), "hz": 250});
    }
    out
}

#[test]
fn the_terminal_table_fits_80_and_100_columns() {
    let c = compare(&three_studies()).unwrap();
    for width in [80, 100] {
        let text = c.to_text_with(&Layout {
            width,
            color: false,
        });
        for line in text.lines() {
            assert!(line.chars().count() <= width, "{width}: {line:?}\n{text}");
        }
        assert!(text.contains("throughput (Mbit/s)"), "{text}");
        assert!(
            text.contains("kernel-6.8 ─"),
            "study names over their columns:\n{text}"
        );
        assert!(text.contains("speed-up over kernel-6.1's mean"), "{text}");
        assert!(text.contains("1.10x faster"), "{text}");
        assert!(
            text.contains("kernel: kernel-6.1 6.0 · kernel-6.8 6.1 · kernel-6.12 6.2"),
            "{text}"
        );
        assert!(
            !text.contains("hz:"),
            "facts that agree are not listed:\n{text}"
        );
    }
    let wide = c.to_text_with(&Layout {
        width: 250,
        color: false,
    });
    assert!(
        wide.contains("95% CI"),
        "nothing dropped when there is room:\n{wide}"
    );
}

#[test]
fn the_page_is_well_formed_and_complete() {
    let c = compare(&three_studies()).unwrap();
    let page = c.to_html().unwrap();
    let doc = roxmltree::Document::parse_with_options(
        &page,
        roxmltree::ParsingOptions {
            allow_dtd: true,
            ..Default::default()
        },
    )
    .unwrap_or_else(|e| panic!("HTML is not well-formed: {e}"));
    for id in ["verdict", "results", "plots", "facts", "key"] {
        assert!(
            doc.descendants().any(|n| n.attribute("id") == Some(id)),
            "no #{id}"
        );
    }
    let texts_of = |class: &str| -> Vec<String> {
        doc.descendants()
            .filter(|n| n.has_tag_name("text") && n.attribute("class") == Some(class))
            .filter_map(|n| n.text())
            .map(|t| t.trim().to_string())
            .collect()
    };
    assert_eq!(
        texts_of("legend"),
        ["kernel-6.1", "kernel-6.8", "kernel-6.12"]
    );
    assert_eq!(texts_of("axis-label"), ["throughput (Mbit/s)"]);
    let verdict = doc
        .descendants()
        .find(|n| n.attribute("id") == Some("verdict"))
        .unwrap();
    let verdict: String = verdict.descendants().filter_map(|n| n.text()).collect();
    assert!(
        verdict.starts_with("kernel-6.8 vs kernel-6.1: 6 of 6 configurations faster"),
        "{verdict}"
    );
    assert!(
        page.contains("sysctl.all.&quot;net.ipv4.tcp_rmem&quot;"),
        "the key's full names"
    );
    assert!(!page.contains("NaN"));
}

#[test]
fn json_carries_base_units_under_the_metric_name() {
    let c = compare(&three_studies()).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&c.to_json().unwrap()).unwrap();
    assert_eq!(doc["objective"]["metric"], "throughput_bps");
    assert_eq!(doc["objective"]["unit"], "bit/s");
    let row = &doc["configurations"][0];
    let second = &row["studies"][1];
    let mean = second["throughput_bps"]["mean"].as_f64().unwrap();
    assert!((mean - 990e6).abs() < 1.0, "base units: {mean}");
    assert_eq!(second["vs_first"]["change"], "faster");
    assert!(row["studies"][0]["vs_first"].is_null());
    assert_eq!(doc["facts_that_differ"][0]["fact"], "kernel");
    let md = c.to_markdown();
    assert!(
        md.contains("| configuration | kernel-6.1 Mbit/s | kernel-6.1 n |"),
        "{md}"
    );
}
