//! tcplab's HTML reports as a person sees them: two studies run with the mock executor into a
//! real store, rendered through `to_report::report_input` → `html::render`, loaded in headless
//! Chromium at 1280 and 900 px, and checked by tests/browser/check.js: (1) nothing is wider than
//! the page, (2) legend labels are distinct within a plot, (3) every axis label names a unit in
//! parentheses, (4) every plot draws data and never says "no data", (5) every figure has a
//! caption. Needs Debian's chromium (apt-get install chromium); the test fails without it.
//!
//! Docs screenshots: `TCPLAB_SCREENSHOT_DIR=docs/img cargo test -p tcplab-study --test
//! report_browser` (or `crates/report/screenshot.sh --studies docs/img`) keeps each rendered page
//! (`demo.html`, `sweep.html`) and a full-page PNG of it at 1280 px (`demo.png`, `sweep.png`)
//! there, a relative directory taken from the workspace root, even when a check fails; without
//! the variable they go to a temporary directory that is removed.
#![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]

mod browser;

use std::path::Path;

use browser::studies;
use tcplab_report::model::ReportInput;

/// Renders `input`, checks it at 1280 and 900 px, keeps the page and a screenshot, and fails
/// with every finding.
fn check_report(kind: &str, input: &ReportInput) {
    let browser = browser::chromium();
    let html = tcplab_report::html::render(input).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let keep = std::env::var_os("TCPLAB_SCREENSHOT_DIR").map(|d| root.join(d));
    let out = keep.clone().unwrap_or_else(|| tmp.path().to_path_buf());
    std::fs::create_dir_all(&out).unwrap();
    let out = std::fs::canonicalize(&out).unwrap();
    let page = out.join(format!("{kind}.html"));
    std::fs::write(&page, &html).unwrap();
    let checked = browser::check(&browser, tmp.path(), kind, &html, &[1280, 900]).unwrap();
    for n in &checked.notes {
        eprintln!("note: {n}");
    }
    let png = out.join(format!("{kind}.png"));
    let height = checked.heights.iter().find(|(w, _)| *w == 1280).unwrap().1;
    browser::screenshot(&browser, tmp.path(), &page, height, &png).unwrap();
    if keep.is_some() {
        eprintln!("kept {} and {}", page.display(), png.display());
    }
    assert!(
        checked.failures.is_empty(),
        "the {kind} report fails {} browser check(s) (1 page width, 2 distinct legend labels, 3 axis units, 4 non-empty plots, 5 captions):\n  {}",
        checked.failures.len(),
        checked.failures.join("\n  ")
    );
}

/// The checker itself: a page with one problem of each kind fails each check, and a good
/// figure beside them passes.
#[test]
fn checker_finds_each_problem() {
    let svg = |body: &str| {
        format!(
            "<svg width=\"400\" height=\"200\" xmlns=\"http://www.w3.org/2000/svg\">{body}</svg>"
        )
    };
    let bad = svg(concat!(
        "<text class=\"legend\" x=\"9\" y=\"20\">cubic</text>",
        "<text class=\"legend\" x=\"9\" y=\"40\">cubic</text>",
        "<text class=\"axis-label\" x=\"9\" y=\"60\">time</text>",
        "<rect width=\"9\" height=\"9\" fill=\"#000000\"/><text x=\"99\" y=\"99\">no data</text>",
        "<text x=\"-40\" y=\"120\">cut label</text>"
    ));
    let good = svg(concat!(
        "<text class=\"legend\" x=\"9\" y=\"20\">cubic</text>",
        "<text class=\"legend\" x=\"9\" y=\"40\">bbr</text>",
        "<text class=\"axis-label\" x=\"9\" y=\"60\">time (s)</text>",
        "<path stroke=\"#0072b2\" d=\"M0 0L99 99\"/>"
    ));
    let html = format!(
        "<!DOCTYPE html><html><body><div id=\"banner\" style=\"width:2000px\">wide</div>\
         <div style=\"overflow-x:auto;width:300px\"><table id=\"scrolled\" style=\"width:900px\"><tr><td>x</td></tr></table></div>\
         <figure id=\"bad\">{bad}<figcaption> </figcaption></figure>\
         <figure id=\"good\">{good}<figcaption>Fine.</figcaption></figure></body></html>"
    );
    let tmp = tempfile::tempdir().unwrap();
    let checked = browser::check(&browser::chromium(), tmp.path(), "probe", &html, &[900]).unwrap();
    let all = checked.failures.join("\n");
    for want in [
        "1 (page width): the page scrolls sideways",
        "1 (page width): wider than the",
        "<div id=\"banner\"",
        "1 (page width): scrolls sideways inside its box (300 of 900 px shown)",
        "#bad @900px: 2 (legend and labels): 1 text(s) cut off by the plot's edge",
        "#bad: 2 (legend): legend label \"cubic\"",
        "#bad: 3 (axis units): axis label \"time\"",
        "#bad: 4 (non-empty): nothing is drawn in a data colour",
        "#bad: 4 (non-empty): the plot says \"no data\"",
        "#bad: 5 (caption)",
    ] {
        assert!(all.contains(want), "no {want:?} among:\n{all}");
    }
    assert!(!all.contains("#good"), "the good figure failed:\n{all}");
}

#[test]
fn demo_kind_report_reads_well_in_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let input = studies::demo(dir.path());
    assert_eq!(input.configurations.len(), 8);
    assert!(
        !input.intervals.is_empty(),
        "the mock's interval samples reach the report"
    );
    check_report("demo", &input);
}

#[test]
fn sweep_kind_report_reads_well_in_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let input = studies::balticgrid(dir.path());
    assert_eq!(input.configurations.len(), 54);
    assert!(
        !input.sweep_plots.is_empty(),
        "link.delay gives a sweep plot"
    );
    assert!(!input.message_delays.is_empty() && !input.latency_under_load.is_empty());
    check_report("sweep", &input);
}

/// Four varying factors (sfperf): long labels, per-message latency with stalls from real
/// msgs samples; legends must stay distinct and whole.
#[test]
fn long_labels_report_reads_well_in_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let input = studies::sfperf(dir.path());
    assert!(
        input
            .configurations
            .iter()
            .all(|c| c.label.split(' ').count() == 4),
        "four factors vary in every label"
    );
    assert!(input.message_delays.iter().any(|d| d.stall_us.is_some()));
    check_report("sfperf", &input);
}
