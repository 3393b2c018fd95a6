//! The comparison as one self-contained HTML page in the style of the study report
//! ([`crate::html`]: its stylesheet, its escaping, well-formed XML): the verdicts, the table
//! with a header row per study, the dot-and-whisker plot, the facts that differ and the key.

use super::Comparison;
use crate::error::ReportError;
use crate::html::{CSS, escape, key_html};
use std::collections::BTreeMap;

impl Comparison {
    /// Renders the page: every column of the comparison (the terminal drops some to fit),
    /// the plot, the facts that differ and the key.
    pub fn to_html(&self) -> Result<String, ReportError> {
        let svg = self.plot()?;
        let title = self.title();
        let mut out = String::with_capacity(64 * 1024);
        out.push_str(
            "<!DOCTYPE html>\n<html lang=\"en\" xmlns=\"http://www.w3.org/1999/xhtml\">\n<head>\n",
        );
        out.push_str("<meta charset=\"utf-8\"/>\n");
        out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>\n");
        out.push_str(&format!("<title>{}</title>\n", escape(&title)));
        out.push_str(&format!("<style>{CSS}</style>\n</head>\n<body>\n"));
        out.push_str(&format!("<h1>{}</h1>\n", escape(&title)));
        out.push_str(&format!(
            "<p class=\"verdict\" id=\"verdict\">{}</p>\n",
            escape(&self.verdicts().join(" "))
        ));
        out.push_str(
            "<nav><a href=\"#results\">Comparison</a><a href=\"#plots\">Plot</a>\
             <a href=\"#facts\">Facts that differ</a><a href=\"#key\">Key</a></nav>\n",
        );
        out.push_str(&self.results_section());
        out.push_str(&format!(
            "<section id=\"plots\">\n<h2>Plot</h2>\n<figure id=\"comparison-plot\">\n{}\n<figcaption>Figure 1. Each study's mean (dot) and the {}% CI of the mean (whisker) per configuration, in the table's order.</figcaption>\n</figure>\n</section>\n",
            svg.trim(),
            self.percent()
        ));
        out.push_str(&self.facts_section());
        out.push_str(&self.key_section());
        out.push_str("</body>\n</html>\n");
        Ok(out)
    }

    /// The table (a row of study names over their columns, then the headers), and the
    /// reasons of dropped and failed configurations.
    fn results_section(&self) -> String {
        let columns = self.columns();
        let mut s = String::from("<section id=\"results\">\n<h2>Comparison</h2>\n");
        s.push_str(&format!(
            "<p>{}.</p>\n<div class=\"scroll\">\n<table>\n<thead><tr>",
            escape(&self.heading())
        ));
        s.push_str("<th scope=\"col\" rowspan=\"2\">configuration</th>");
        for study in &self.studies {
            let span = columns.iter().filter(|c| c.group == study.name).count();
            s.push_str(&format!(
                "<th scope=\"colgroup\" colspan=\"{span}\">{}</th>",
                escape(&study.name)
            ));
        }
        s.push_str("</tr>\n<tr>");
        for c in columns.iter().skip(1) {
            s.push_str(&format!(
                "<th scope=\"col\">{}</th>",
                escape(c.header.trim())
            ));
        }
        s.push_str("</tr></thead>\n<tbody>\n");
        for i in 0..self.rows.len() {
            s.push_str("<tr>");
            for (k, c) in columns.iter().enumerate() {
                let class = match (k, c.right) {
                    (0, _) => " class=\"label\"",
                    (_, true) => " class=\"num\"",
                    _ => "",
                };
                s.push_str(&format!("<td{class}>{}</td>", escape(&c.cells[i])));
            }
            s.push_str("</tr>\n");
        }
        s.push_str("</tbody>\n</table>\n</div>\n");
        let reasons = self.reasons();
        if !reasons.is_empty() {
            s.push_str("<ul class=\"reasons\">\n");
            for r in reasons {
                s.push_str(&format!("<li>{}</li>\n", escape(&r)));
            }
            s.push_str("</ul>\n");
        }
        s.push_str("</section>\n");
        s
    }

    /// A table with a column per study of every fact whose value differs.
    fn facts_section(&self) -> String {
        let mut s = String::from("<section id=\"facts\">\n<h2>Facts that differ</h2>\n");
        if self.facts.is_empty() {
            s.push_str("<p>No recorded fact differs between the studies.</p>\n</section>\n");
            return s;
        }
        s.push_str(
            "<div class=\"scroll\">\n<table class=\"key\">\n<thead><tr><th scope=\"col\">fact</th>",
        );
        for study in &self.studies {
            s.push_str(&format!("<th scope=\"col\">{}</th>", escape(&study.name)));
        }
        s.push_str("</tr></thead>\n<tbody>\n");
        for f in &self.facts {
            s.push_str(&format!("<tr><td>{}</td>", escape(&f.fact)));
            for v in &f.values {
                s.push_str(&format!(
                    "<td>{}</td>",
                    escape(v.as_deref().unwrap_or("(none)"))
                ));
            }
            s.push_str("</tr>\n");
        }
        s.push_str("</tbody>\n</table>\n</div>\n</section>\n");
        s
    }

    /// Each label with the full settings of the factors that vary, then those every
    /// configuration shares.
    fn key_section(&self) -> String {
        let rows: Vec<(String, &BTreeMap<String, String>)> = self
            .rows
            .iter()
            .map(|r| (r.label.clone(), &r.factors))
            .collect();
        format!(
            "<section id=\"key\">\n<h2>Key</h2>\n{}</section>\n",
            key_html(&self.key, &rows)
        )
    }
}
