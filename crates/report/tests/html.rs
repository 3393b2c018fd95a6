#![allow(clippy::unwrap_used, reason = "tests fail loudly on unexpected errors")]
//! The HTML page parses as XML, holds every section, the table, inline SVGs, facts and the
//! scenario, references nothing outside itself, and survives edge cases.

mod common;

use common::wan_input;
use tcplab_report::{ConfigurationResult, ObjectiveSpec, ReportInput, html};
use tcplab_stats::Objective;

fn parse(page: &str) -> roxmltree::Document<'_> {
    let opts = roxmltree::ParsingOptions {
        allow_dtd: true,
        ..Default::default()
    };
    roxmltree::Document::parse_with_options(page, opts)
        .unwrap_or_else(|e| panic!("HTML is not well-formed: {e}"))
}

fn by_id<'a>(doc: &'a roxmltree::Document<'a>, id: &str) -> roxmltree::Node<'a, 'a> {
    doc.descendants()
        .find(|n| n.attribute("id") == Some(id))
        .unwrap_or_else(|| panic!("no element with id {id}"))
}

fn text_of(node: roxmltree::Node<'_, '_>) -> String {
    node.descendants()
        .filter(|n| n.is_text())
        .filter_map(|n| n.text())
        .collect()
}

#[test]
fn full_report_has_every_section() {
    let input = wan_input();
    let page = html::render(&input).unwrap();
    let doc = parse(&page);
    for id in ["verdict", "results", "plots", "scenario", "facts"] {
        by_id(&doc, id);
    }
    assert_eq!(
        doc.descendants()
            .find(|n| n.has_tag_name("title"))
            .and_then(|n| n.text()),
        Some("WAN <buffers> & RTT")
    );
    // The consistently fast choice is named with its speed-up over the baseline.
    let verdict = text_of(by_id(&doc, "verdict"));
    // Five settings reach the 940 Mbit/s cap (every tuned one, and default at 1 ms: 2 Mbit
    // per ms of RTT is 2000 Mbit/s) with identical samples, so five share group 1.
    assert!(
        verdict.starts_with("Consistently fast: buffers=default rtt=1ms — throughput 936.9"),
        "{verdict}"
    );
    assert!(
        verdict.contains("(n = 3, rank 1 of 8; 5 settings share group 1)"),
        "{verdict}"
    );
    assert!(
        verdict.contains("Speed-up over the baseline (buffers=default rtt=20ms)"),
        "{verdict}"
    );
    // One table row per configuration, plus the header row.
    let results = by_id(&doc, "results");
    let rows = results
        .descendants()
        .filter(|n| n.has_tag_name("tr"))
        .count();
    assert_eq!(rows, 1 + input.configurations.len());
    assert!(text_of(results).contains("Ranking method: maximise; ordered by"));
    // Figures: the sweep, box plot, objective CDF, delay scatter, delay CDF, 3 time series.
    let plots = by_id(&doc, "plots");
    let svgs = plots
        .descendants()
        .filter(|n| n.has_tag_name("svg"))
        .count();
    assert_eq!(svgs, 8);
    by_id(&doc, "sweep-rtt");
    by_id(&doc, "delay-scatter");
    by_id(&doc, "time-throughput");
    // Scenario verbatim (escaped), facts flattened.
    assert!(text_of(by_id(&doc, "scenario")).contains("# <&>"));
    let facts = text_of(by_id(&doc, "facts"));
    assert!(facts.contains("sysctl.net.ipv4.tcp_rmem") && facts.contains("4096 131072 6291456"));
    assert!(facts.contains("hz250"), "{facts}");
    // Self-contained and print-friendly.
    assert!(
        !page.contains("src=\"http") && !page.contains("href=\"http") && !page.contains("<script")
    );
    assert!(page.contains("@media print"));
    assert!(!page.contains("NaN"));
}

#[test]
fn minimal_report_renders() {
    let objective = ObjectiveSpec {
        name: "time".into(),
        unit: "seconds".into(),
        goal: Objective::Minimise,
    };
    let one = ReportInput::new(
        "one",
        objective.clone(),
        vec![ConfigurationResult::new("only", &[], vec![0.3])],
    );
    let page = html::render(&one).unwrap();
    let doc = parse(&page);
    assert!(
        text_of(by_id(&doc, "verdict"))
            .starts_with("Consistently fast: only — time 300 ± - ms (n = 1, rank 1 of 1)")
    );
    assert!(text_of(by_id(&doc, "facts")).contains("No facts were recorded."));
    assert!(text_of(by_id(&doc, "scenario")).contains("(not recorded)"));

    let none = ReportInput::new("none", objective, vec![]);
    let page = html::render(&none).unwrap();
    let doc = parse(&page);
    assert!(text_of(by_id(&doc, "verdict")).starts_with("No configuration produced samples"));
    assert!(text_of(by_id(&doc, "plots")).contains("No data to plot."));
}

#[test]
fn objective_cdf_shows_the_best_seven_and_the_baseline() {
    let objective = ObjectiveSpec {
        name: "time".into(),
        unit: "seconds".into(),
        goal: Objective::Minimise,
    };
    let configs = (0..12)
        .map(|i| {
            let x = f64::from(i);
            ConfigurationResult::new(format!("c{i:02}"), &[], vec![x, x + 0.1, x + 0.2])
        })
        .collect();
    let mut input = ReportInput::new("twelve", objective, configs);
    input.baseline = Some("c11".into());
    let page = html::render(&input).unwrap();
    let doc = parse(&page);
    let figure = by_id(&doc, "cdf-objective");
    let labels = text_of(figure);
    for shown in ["c00", "c06", "c11"] {
        assert!(labels.contains(shown), "{shown} missing: {labels}");
    }
    for hidden in ["c07", "c10"] {
        assert!(!labels.contains(hidden), "{hidden} shown: {labels}");
    }
    assert!(labels.contains("for the 7 best-ranked configurations and the baseline"));
    // The box plot still has every configuration.
    assert!(text_of(by_id(&doc, "boxes")).contains("c10"));
}
