//! The page's sections: results (table, reasons, key), plots, facts.

use super::escape;
use super::figures::Figure;
use crate::label::Key;
use crate::model::ReportInput;
use crate::table::Table;
use serde_json::Value;
use std::collections::BTreeMap;

/// The best and worst columns: on a narrow screen they give way (as the terminal table drops
/// them first), so the table fits the page instead of scrolling.
fn is_optional(column: usize) -> bool {
    column == 5 || column == 6
}

pub(super) fn results_section(table: &Table, input: &ReportInput) -> String {
    let (headers, rows) = table.grid();
    let mut s = String::from("<section id=\"results\">\n<h2>Results</h2>\n");
    s.push_str(&format!(
        "<p>{}.</p>\n<div class=\"scroll\">\n<table>\n<thead><tr>",
        escape(&table.heading())
    ));
    for (i, h) in headers.iter().enumerate() {
        let cls = if is_optional(i) { " class=\"opt\"" } else { "" };
        s.push_str(&format!("<th scope=\"col\"{cls}>{}</th>", escape(h)));
    }
    s.push_str("</tr></thead>\n<tbody>\n");
    for (row, cells) in table.rows.iter().zip(rows) {
        let class = if row.group == Some(1) {
            " class=\"group1\""
        } else {
            ""
        };
        s.push_str(&format!("<tr{class}>"));
        for (i, c) in cells.iter().enumerate() {
            let cls = if is_optional(i) {
                " class=\"num opt\""
            } else if table.is_numeric_column(i) {
                " class=\"num\""
            } else if i == 2 {
                " class=\"label\""
            } else {
                ""
            };
            s.push_str(&format!("<td{cls}>{}</td>", escape(c)));
        }
        s.push_str("</tr>\n");
    }
    s.push_str("</tbody>\n</table>\n</div>\n");
    let reasons = table.reasons();
    if !reasons.is_empty() {
        s.push_str("<ul class=\"reasons\">\n");
        for (label, reason) in reasons {
            s.push_str(&format!(
                "<li><span class=\"label\">{}</span>: {}</li>\n",
                escape(&label),
                escape(&reason)
            ));
        }
        s.push_str("</ul>\n");
    }
    s.push_str(&key_table(table));
    if let Some(m) = &table.method {
        s.push_str(&format!(
            "<p class=\"method\">Ranking method: {}.</p>\n",
            escape(m)
        ));
    }
    for note in &input.notes {
        s.push_str(&format!("<p class=\"note\">{}</p>\n", escape(note)));
    }
    s.push_str("</section>\n");
    s
}

pub(super) fn plots_section(figures: &[Figure]) -> String {
    let mut s = String::from("<section id=\"plots\">\n<h2>Plots</h2>\n");
    if figures.is_empty() {
        s.push_str("<p>No data to plot.</p>\n");
    }
    for (i, f) in figures.iter().enumerate() {
        s.push_str(&format!(
            "<figure id=\"{}\">\n{}\n<figcaption>Figure {}. {}</figcaption>\n</figure>\n",
            f.id,
            f.svg.trim(),
            i + 1,
            escape(&f.caption)
        ));
    }
    s.push_str("</section>\n");
    s
}

/// The facts as a two-column table; nested objects become dotted keys ("sysctl.net.ipv4.tcp_rmem").
pub(super) fn facts_section(facts: &Value) -> String {
    let mut rows = Vec::new();
    flatten("", facts, &mut rows);
    let mut s = String::from("<section id=\"facts\">\n<h2>Facts</h2>\n");
    if rows.is_empty() {
        s.push_str("<p>No facts were recorded.</p>\n");
    } else {
        s.push_str("<table class=\"facts\">\n<thead><tr><th scope=\"col\">fact</th><th scope=\"col\">value</th></tr></thead>\n<tbody>\n");
        for (k, v) in rows {
            s.push_str(&format!(
                "<tr><td>{}</td><td>{}</td></tr>\n",
                escape(&k),
                escape(&v)
            ));
        }
        s.push_str("</tbody>\n</table>\n");
    }
    s.push_str("</section>\n");
    s
}

pub(crate) fn flatten(prefix: &str, v: &Value, out: &mut Vec<(String, String)>) {
    match v {
        Value::Null => {}
        Value::Object(map) => {
            for (k, child) in map {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&key, child, out);
            }
        }
        Value::String(s) => out.push((prefix.to_string(), s.clone())),
        other => out.push((prefix.to_string(), other.to_string())),
    }
}

/// The key from each short label to the full settings it stands for (only the factors that
/// vary; those every configuration shares are listed once below).
fn key_table(table: &Table) -> String {
    if table.key.is_trivial() {
        return String::new();
    }
    let rows: Vec<(String, &BTreeMap<String, String>)> = table
        .rows
        .iter()
        .map(|r| (table.marked_label(r), &r.factors))
        .collect();
    format!("<h3 id=\"key\">Key</h3>\n{}", key_html(&table.key, &rows))
}

/// The key's table, one row per (label, factors), then the settings every configuration
/// shares: the study report's key and the comparison's.
pub(crate) fn key_html(key: &Key, rows: &[(String, &BTreeMap<String, String>)]) -> String {
    let mut s = String::from(
        "<div class=\"scroll\">\n<table class=\"key\">\n<thead><tr><th scope=\"col\">configuration</th><th scope=\"col\">settings</th></tr></thead>\n<tbody>\n",
    );
    for (label, factors) in rows {
        let settings: Vec<String> = key
            .factors
            .iter()
            .map(|f| {
                let v = factors.get(&f.full).map_or("-", String::as_str);
                format!(
                    "<code>{}</code> = <code>{}</code>",
                    escape(&f.full),
                    escape(v)
                )
            })
            .collect();
        s.push_str(&format!(
            "<tr><td class=\"label\">{}</td><td>{}</td></tr>\n",
            escape(label),
            settings.join("<br/>")
        ));
    }
    s.push_str("</tbody>\n</table>\n</div>\n");
    if !key.common.is_empty() {
        let common: Vec<String> = key
            .common
            .iter()
            .map(|(k, v)| format!("<code>{}</code> = <code>{}</code>", escape(k), escape(v)))
            .collect();
        s.push_str(&format!(
            "<p class=\"note\">Same in every configuration: {}.</p>\n",
            common.join(", ")
        ));
    }
    s
}
