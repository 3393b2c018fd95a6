//! One self-contained HTML page: the verdict, the results table, every plot inline as SVG, the
//! scenario and the facts. No scripts, no external assets; print CSS keeps figures whole.
//! The page is also well-formed XML (XHTML syntax) so tests and tools can parse it.

mod figures;
mod sections;

use crate::error::ReportError;
use crate::model::ReportInput;
use crate::num::fixed;
use crate::table::Table;
use sections::{facts_section, plots_section, results_section};
pub(crate) use sections::{flatten, key_html};

/// The stylesheet: readable on screen, black on white and unbroken figures on paper.
pub(crate) const CSS: &str = "\
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,'DejaVu Sans',sans-serif;color:#111;\
background:#fff;margin:0 auto;max-width:1100px;padding:1.5rem;line-height:1.45}\
h1{font-size:1.8rem;margin:0 0 .3rem}h2{font-size:1.35rem;border-bottom:2px solid #333;\
padding-bottom:.2rem;margin-top:2rem}\
.verdict{font-size:1.1rem;background:#eef5fb;border-left:4px solid #0072b2;padding:.6rem .9rem}\
nav a{margin-right:1rem;color:#0a4f8a}\
.scroll{overflow-x:auto}table{border-collapse:collapse;margin:.6rem 0;font-size:.92rem}\
th,td{border:1px solid #bbb;padding:.25rem .55rem;text-align:left;vertical-align:top}\
th{background:#f0f0f0}td.label{font-family:ui-monospace,'DejaVu Sans Mono',monospace;font-size:.88rem}\
.reasons{font-size:.88rem;color:#333;overflow-wrap:anywhere}.reasons .label{font-family:ui-monospace,'DejaVu Sans Mono',monospace}\
table.key td,table.facts td{overflow-wrap:anywhere}table.facts td:first-child{overflow-wrap:normal;white-space:nowrap}h3{font-size:1.1rem;margin:1.2rem 0 .3rem}td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}\
tr.group1 td{background:#f3faf5}\
figure{margin:1.2rem 0;page-break-inside:avoid;break-inside:avoid}\
figure svg{width:100%;height:auto;border:1px solid #ddd}\
figcaption{font-size:.92rem;color:#333}\
pre{background:#f6f6f6;border:1px solid #ddd;padding:.7rem;white-space:pre-wrap;overflow-wrap:anywhere;font-size:.85rem}\
@media (max-width:1000px){.opt{display:none}}\
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
    let figures = figures::figures(input, table)?;
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
    let d = table.display();
    let mut s = format!(
        "Consistently fast: {} — {} {} ± {} {} (n = {}, rank 1 of {}",
        best.label,
        table.title_name(),
        fixed(best.mean.map(|v| d.scale(v)), dec),
        fixed(best.sd.map(|v| d.scale(v)), dec),
        d.symbol,
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
            .map(|b| b.label.clone());
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
    use super::sections::flatten;
    use super::*;
    use serde_json::Value;

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
