//! One self-contained HTML page: the verdict, the results table, every plot inline as SVG, the
//! scenario and the facts. No scripts, no external assets; print CSS keeps figures whole.
//! The page is also well-formed XML (XHTML syntax) so tests and tools can parse it.

use crate::error::ReportError;
use crate::model::{ConfigurationResult, ReportInput};
use crate::num::fixed;
use crate::plot::{self, BoxPlot, TimeMetric};
use crate::table::Table;
use serde_json::Value;

/// The stylesheet: readable on screen, black on white and unbroken figures on paper.
const CSS: &str = "\
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,'DejaVu Sans',sans-serif;color:#111;\
background:#fff;margin:0 auto;max-width:1100px;padding:1.5rem;line-height:1.45}\
h1{font-size:1.8rem;margin:0 0 .3rem}h2{font-size:1.35rem;border-bottom:2px solid #333;\
padding-bottom:.2rem;margin-top:2rem}\
.verdict{font-size:1.1rem;background:#eef5fb;border-left:4px solid #0072b2;padding:.6rem .9rem}\
nav a{margin-right:1rem;color:#0a4f8a}\
.scroll{overflow-x:auto}table{border-collapse:collapse;margin:.6rem 0;font-size:.92rem}\
th,td{border:1px solid #bbb;padding:.25rem .55rem;text-align:left;vertical-align:top}\
th{background:#f0f0f0}td.reason{overflow-wrap:anywhere;min-width:11em}td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}\
tr.group1 td{background:#f3faf5}\
figure{margin:1.2rem 0;page-break-inside:avoid;break-inside:avoid}\
figure svg{width:100%;height:auto;border:1px solid #ddd}\
figcaption{font-size:.92rem;color:#333}\
pre{background:#f6f6f6;border:1px solid #ddd;padding:.7rem;overflow-x:auto;font-size:.85rem}\
.method,.note{font-size:.92rem;color:#333}\
@media print{body{max-width:none;padding:0;font-size:10pt}.scroll{overflow:visible}nav{display:none}\
.verdict{background:none;border:1px solid #000}h2{break-after:avoid}\
tr.group1 td{background:none;font-weight:bold}pre{white-space:pre-wrap;overflow:visible}}";

/// Renders the whole report. Every number comes from [`Table::from_input`] (`tcplab_stats`).
pub fn render(input: &ReportInput) -> Result<String, ReportError> {
    render_with_table(input, &Table::from_input(input)?)
}

/// Renders the report around a table the caller already computed from the same `input` (the
/// `report` command prints the table too, and the bootstrap need not run twice).
pub fn render_with_table(input: &ReportInput, table: &Table) -> Result<String, ReportError> {
    let figures = figures(input, table)?;
    let mut out = String::with_capacity(64 * 1024);
    out.push_str(
        "<!DOCTYPE html>\n<html lang=\"en\" xmlns=\"http://www.w3.org/1999/xhtml\">\n<head>\n",
    );
    out.push_str("<meta charset=\"utf-8\"/>\n");
    out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>\n");
    out.push_str(&format!("<title>{}</title>\n", escape(&input.title)));
    out.push_str(&format!("<style>{CSS}</style>\n</head>\n<body>\n"));
    out.push_str(&format!("<h1>{}</h1>\n", escape(&input.title)));
    out.push_str(&format!(
        "<p class=\"verdict\" id=\"verdict\">{}</p>\n",
        escape(&verdict(table))
    ));
    out.push_str(
        "<nav><a href=\"#results\">Results</a><a href=\"#plots\">Plots</a>\
         <a href=\"#scenario\">Scenario</a><a href=\"#facts\">Facts</a></nav>\n",
    );
    out.push_str(&results_section(table, input));
    out.push_str(&plots_section(&figures));
    out.push_str(&format!(
        "<section id=\"scenario\">\n<h2>Scenario</h2>\n<pre>{}</pre>\n</section>\n",
        escape(if input.scenario_text.is_empty() {
            "(not recorded)"
        } else {
            &input.scenario_text
        })
    ));
    out.push_str(&facts_section(&input.facts));
    out.push_str("</body>\n</html>\n");
    Ok(out)
}

/// One sentence naming the consistently fast choice and its speed-up over the baseline.
pub fn verdict(table: &Table) -> String {
    let Some(best) = table.best() else {
        return "No configuration produced samples; see the table for the reasons.".to_string();
    };
    let dec = table.decimals();
    let mut s = format!(
        "Consistently fast: {} — {} {} ± {} {} (n = {}, rank 1 of {}",
        table.setting_name(best),
        table.objective.name,
        fixed(best.mean, dec),
        fixed(best.sd, dec),
        table.objective.unit,
        best.n,
        table.rows.iter().filter(|r| r.rank.is_some()).count(),
    );
    let peers = table.rows.iter().filter(|r| r.group == Some(1)).count();
    if peers > 1 {
        s.push_str(&format!("; {} settings share group 1", peers));
    }
    s.push(')');
    if best.baseline {
        s.push_str(". The baseline itself ranks first.");
    } else if let (Some(x), Some(lo), Some(hi)) =
        (best.speed_up, best.speed_up_lower, best.speed_up_upper)
    {
        let base = table
            .rows
            .iter()
            .find(|r| r.baseline)
            .map(|b| table.setting_name(b));
        s.push_str(&format!(
            ". Speed-up over the baseline{}: {}x ({}% CI {}–{}).",
            base.map(|b| format!(" ({b})")).unwrap_or_default(),
            fixed(Some(x), 2),
            table.percent(),
            fixed(Some(lo), 2),
            fixed(Some(hi), 2)
        ));
    } else {
        s.push('.');
    }
    s
}

/// A rendered plot and its caption.
struct Figure {
    id: String,
    caption: String,
    svg: String,
}

/// Every plot the data supports, in reading order.
fn figures(input: &ReportInput, table: &Table) -> Result<Vec<Figure>, ReportError> {
    let mut figs = sweep_figures(input, table)?;
    figs.extend(distribution_figures(input, table)?);
    figs.extend(delay_figures(input)?);
    for metric in TimeMetric::ALL {
        if metric.present_in(&input.intervals) {
            figs.push(Figure {
                id: format!("time-{}", slug(metric.label())),
                caption: format!("{} per interval, one line per flow or run.", metric.label()),
                svg: plot::time_series(&input.intervals, metric)?,
            });
        }
    }
    Ok(figs)
}

/// Objective vs each numeric factor (the ones asked for, or every one with 3+ values).
fn sweep_figures(input: &ReportInput, table: &Table) -> Result<Vec<Figure>, ReportError> {
    let plots = plot::sweep_plots(table, &input.sweep_plots)?;
    Ok(plots
        .into_iter()
        .map(|(factor, svg)| Figure {
            id: format!("sweep-{}", slug(&factor)),
            caption: format!(
                "{} vs {factor}: mean per configuration with its {}% CI as a band; one line per combination of the other factors.",
                table.objective.name,
                table.percent()
            ),
            svg,
        })
        .collect())
}

/// The box plot of every configuration that ran, and the CDF of the best-ranked ones.
fn distribution_figures(input: &ReportInput, table: &Table) -> Result<Vec<Figure>, ReportError> {
    let boxes: Vec<(String, Vec<f64>)> = table
        .rows
        .iter()
        .filter(|r| r.n > 0)
        .filter_map(|r| {
            let c = input.configurations.iter().find(|c| c.label == r.label)?;
            Some((r.label.clone(), c.samples.clone()))
        })
        .collect();
    if boxes.is_empty() {
        return Ok(Vec::new());
    }
    let shown = cdf_configurations(input, table);
    let cdf_caption = if shown.len() < boxes.len() {
        format!(
            "Empirical CDF of the per-repetition objective for the {CDF_LINES} best-ranked configurations and the baseline."
        )
    } else {
        "Empirical CDF of the per-repetition objective, one line per configuration.".into()
    };
    let box_figure = Figure {
        id: "boxes".into(),
        caption: "Distribution per configuration, in rank order: box = quartiles, thick bar = median, cross = mean, whiskers to 1.5 IQR, circles = outliers.".into(),
        svg: plot::box_plot(&BoxPlot {
            title: format!("{} per configuration", table.objective.name),
            value_label: format!("{} ({})", table.objective.name, table.objective.unit),
            boxes,
        })?,
    };
    let cdf_figure = Figure {
        id: "cdf-objective".into(),
        caption: cdf_caption,
        svg: plot::objective_cdf(&input.objective, &shown)?,
    };
    Ok(vec![box_figure, cdf_figure])
}

/// The stall scatter and the delay CDF, when per-message delays were recorded.
fn delay_figures(input: &ReportInput) -> Result<Vec<Figure>, ReportError> {
    if input.message_delays.iter().all(|d| d.points.is_empty()) {
        return Ok(Vec::new());
    }
    Ok(vec![
        Figure {
            id: "delay-scatter".into(),
            caption: "Per-message one-way delay against sequence number: periodic stalls appear as regular rows of points far above the floor.".into(),
            svg: plot::delay_scatter(&input.message_delays, None)?,
        },
        Figure {
            id: "delay-cdf".into(),
            caption: "Empirical CDF of the per-message delay.".into(),
            svg: plot::delay_cdf(&input.message_delays)?,
        },
    ])
}

/// Most CDF lines drawn besides the baseline: with it, one per palette colour (8), so no two
/// lines share a colour.
const CDF_LINES: usize = 7;

/// The best-ranked [`CDF_LINES`] configurations that ran, plus the baseline if it is not among
/// them, in rank order.
fn cdf_configurations(input: &ReportInput, table: &Table) -> Vec<ConfigurationResult> {
    let find = |label: &str| input.configurations.iter().find(|c| c.label == label);
    let mut shown: Vec<ConfigurationResult> = table
        .rows
        .iter()
        .filter(|r| r.n > 0)
        .take(CDF_LINES)
        .filter_map(|r| find(&r.label).cloned())
        .collect();
    if let Some(base) = table.rows.iter().find(|r| r.baseline && r.n > 0) {
        if !shown.iter().any(|c| c.label == base.label) {
            shown.extend(find(&base.label).cloned());
        }
    }
    shown
}

fn results_section(table: &Table, input: &ReportInput) -> String {
    let (headers, rows) = table.grid();
    let mut s = String::from("<section id=\"results\">\n<h2>Results</h2>\n");
    s.push_str(&format!(
        "<p>{}.</p>\n<div class=\"scroll\">\n<table>\n<thead><tr>",
        escape(&table.heading())
    ));
    for h in &headers {
        s.push_str(&format!("<th scope=\"col\">{}</th>", escape(h)));
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
            let cls = if table.is_numeric_column(i) {
                " class=\"num\""
            } else if headers.get(i).is_some_and(|h| h == "status") {
                " class=\"reason\""
            } else {
                ""
            };
            s.push_str(&format!("<td{cls}>{}</td>", escape(c)));
        }
        s.push_str("</tr>\n");
    }
    s.push_str("</tbody>\n</table>\n</div>\n");
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

fn plots_section(figures: &[Figure]) -> String {
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
fn facts_section(facts: &Value) -> String {
    let mut rows = Vec::new();
    flatten("", facts, &mut rows);
    let mut s = String::from("<section id=\"facts\">\n<h2>Facts</h2>\n");
    if rows.is_empty() {
        s.push_str("<p>No facts were recorded.</p>\n");
    } else {
        s.push_str("<table>\n<thead><tr><th scope=\"col\">fact</th><th scope=\"col\">value</th></tr></thead>\n<tbody>\n");
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

fn flatten(prefix: &str, v: &Value, out: &mut Vec<(String, String)>) {
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

/// Escapes text for HTML/XML content and attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() && c != '\n' && c != '\t' => {}
            c => out.push(c),
        }
    }
    out
}

/// An id-safe version of `s`: lowercase letters, digits and dashes.
fn slug(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_and_slugs() {
        assert_eq!(escape("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
        assert_eq!(slug("throughput (Mbit/s)"), "throughput-mbit-s");
    }

    #[test]
    fn facts_flatten_to_dotted_keys() {
        let v: Value = serde_json::json!({"kernel": "6.18", "hz": 250, "sysctl": {"net.ipv4.tcp_rmem": "4096 131072 6291456"}});
        let mut rows = Vec::new();
        flatten("", &v, &mut rows);
        assert_eq!(
            rows,
            vec![
                ("hz".to_string(), "250".to_string()),
                ("kernel".to_string(), "6.18".to_string()),
                (
                    "sysctl.net.ipv4.tcp_rmem".to_string(),
                    "4096 131072 6291456".to_string()
                ),
            ]
        );
    }
}
