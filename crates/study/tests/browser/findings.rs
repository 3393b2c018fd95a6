//! The checker's findings as failure messages and notes, each naming the page, the width, the
//! check (1 page width, 2 distinct legend labels, 3 axis units, 4 non-empty plots, 5 captions)
//! and the figure or element.

use std::collections::BTreeSet;

use serde_json::Value;

fn element(e: &Value) -> String {
    format!(
        "<{} id={:?} class={:?}> {:?}: left {} px, right {} px, width {} px",
        e["tag"].as_str().unwrap_or("?"),
        e["id"].as_str().unwrap_or(""),
        e["class"].as_str().unwrap_or(""),
        e["text"].as_str().unwrap_or(""),
        e["left"],
        e["right"],
        e["width"]
    )
}

fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// Every check's failures for one page at one width, each naming the page, the check and the
/// figure or element.
pub fn failures(page: &str, width: u32, v: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let (client, scroll) = (&v["client_width"], &v["scroll_width"]);
    if v["scroll_width"].as_u64() > v["client_width"].as_u64() {
        out.push(format!("{page} @{width}px: 1 (page width): the page scrolls sideways: scrollWidth {scroll} px > clientWidth {client} px"));
    }
    let wide = v["wide"].as_array().cloned().unwrap_or_default();
    for e in wide.iter().take(12) {
        out.push(format!(
            "{page} @{width}px: 1 (page width): wider than the {client} px page: {}",
            element(e)
        ));
    }
    if wide.len() > 12 {
        out.push(format!(
            "{page} @{width}px: 1 (page width): ... and {} more elements past the right edge",
            wide.len() - 12
        ));
    }
    // A box that scrolls sideways hides part of what it holds: a person reads a table or a
    // listing whole or not at all, so it fails like an element past the page's edge.
    for b in v["scrolled"].as_array().into_iter().flatten() {
        out.push(format!(
            "{page} @{width}px: 1 (page width): scrolls sideways inside its box ({} of {} px shown): {}",
            b["client_width"],
            b["scroll_width"],
            element(b)
        ));
    }
    for f in v["figures"].as_array().into_iter().flatten() {
        let id = f["id"].as_str().unwrap_or("(no id)");
        let fig = format!("{page}: figure #{id}");
        for p in f["plots"].as_array().into_iter().flatten() {
            let cut = strings(&p["cut_texts"]);
            if !cut.is_empty() {
                out.push(format!(
                    "{fig} @{width}px: 2 (legend and labels): {} text(s) cut off by the plot's edge, e.g. {:?}",
                    cut.len(),
                    &cut[..cut.len().min(3)]
                ));
            }
        }
        if f["caption"].as_str().is_none_or(str::is_empty) {
            out.push(format!("{fig}: 5 (caption): no figcaption or an empty one"));
        }
        let plots = f["plots"].as_array().cloned().unwrap_or_default();
        if plots.is_empty() {
            out.push(format!("{fig}: 4 (non-empty): the figure holds no <svg>"));
        }
        for p in &plots {
            // Legend entries and a box plot's category labels each name one series or box.
            for (kind, key) in [("legend", "legend"), ("category", "categories")] {
                let names = strings(&p[key]);
                let (mut seen, mut told) = (BTreeSet::new(), BTreeSet::new());
                for l in &names {
                    if !seen.insert(*l) && told.insert(*l) {
                        out.push(format!("{fig}: 2 (legend): {kind} label {l:?} appears more than once among {names:?}"));
                    }
                }
            }
            let axes = strings(&p["axis_labels"]);
            if axes.is_empty() {
                out.push(format!("{fig}: 3 (axis units): no <text class=\"axis-label\"> in the plot (a plot always has axes)"));
            }
            for a in axes.iter().filter(|a| !has_unit(a)) {
                out.push(format!(
                    "{fig}: 3 (axis units): axis label {a:?} names no unit in parentheses"
                ));
            }
            if p["data_marks"].as_u64() == Some(0) {
                out.push(format!(
                    "{fig}: 4 (non-empty): nothing is drawn in a data colour"
                ));
            }
            if p["no_data"].as_bool() == Some(true) {
                out.push(format!("{fig}: 4 (non-empty): the plot says \"no data\""));
            }
        }
    }
    out
}

/// Whether an axis label names a unit: a non-empty `(...)`.
fn has_unit(label: &str) -> bool {
    label
        .find('(')
        .and_then(|i| label[i..].find(')').map(|j| j > 1))
        .unwrap_or(false)
}

/// Page facts worth printing beside a pass: size and figure count.
pub fn notes(page: &str, width: u32, v: &Value) -> Vec<String> {
    vec![format!(
        "{page} @{width}px: {} figures, page {}x{} px",
        v["figures"].as_array().map_or(0, Vec::len),
        v["client_width"],
        v["scroll_height"]
    )]
}
