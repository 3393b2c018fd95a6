//! The comparison as terminal text and as Markdown.
//!
//! The terminal table has a line naming each study over its columns, then one row per
//! configuration: per study the mean ± sd in the display unit (its symbol heads the column), n
//! and the CI of the mean, and for every study after the first its ratio to the first ("1.12x
//! faster") with the ratio's CI. It fits the layout's width as the results table does (`crate::table::fit`): the CIs go
//! first (later studies' before the reference's), then n, then the ratios' CIs, then the later
//! studies' ratios; the means and the second study's ratio stay.

use super::{Cell, Change, Comparison};
use crate::num::fixed;
use crate::table::{Column, GAP, align_pm, cut, fit, md_escape, pad, physical_rows};
use crate::text::{Layout, Style, wrap};
use tcplab_stats::Objective;

/// Longest study name kept whole over its columns; a longer one is cut there (the heading
/// and the verdicts name it in full).
const MAX_NAME: usize = 16;
/// Most differing facts listed in the terminal; the HTML page and the JSON list them all.
const MAX_FACTS: usize = 24;

impl Comparison {
    /// The terminal text at 100 columns without colour (pipes, files, logs).
    pub fn to_text(&self) -> String {
        self.to_text_with(&Layout::default())
    }

    /// The terminal text laid out for `layout`: which studies, the objective, the table, the
    /// reasons of dropped and failed configurations, the verdicts, the facts that differ and
    /// the key from labels to settings.
    pub fn to_text_with(&self, layout: &Layout) -> String {
        let width = layout.width.max(40);
        let mut out = String::new();
        let push_wrapped = |out: &mut String, text: &str, indent: &str| {
            for l in wrap(text, width, indent) {
                out.push_str(&l);
                out.push('\n');
            }
        };
        out.push_str(&layout.paint(&self.title(), Style::Bold));
        out.push('\n');
        push_wrapped(&mut out, &self.heading(), "  ");
        out.push_str(&self.table_text(layout, width));
        for line in self.reasons() {
            for l in wrap(&line, width, "    ") {
                out.push_str(&layout.paint(&l, Style::Dim));
                out.push('\n');
            }
        }
        for v in self.verdicts() {
            push_wrapped(&mut out, &v, "  ");
        }
        out.push_str(&self.facts_text(width));
        if !self.key.is_trivial() {
            out.push_str("key:\n");
            for l in self.key.lines(width - 2) {
                out.push_str(&format!("  {l}\n"));
            }
        }
        out
    }

    /// "wan: throughput_bps: B, C vs A", the shared title first when the studies share one
    /// (when they do not, the titles are among the facts that differ).
    pub fn title(&self) -> String {
        let names: Vec<&str> = self.studies.iter().map(|s| s.name.as_str()).collect();
        let versus = format!("{} vs {}", names[1..].join(", "), names[0]);
        let first = &self.studies[0].title;
        if self.studies.iter().all(|s| s.title == *first) && !first.is_empty() {
            format!("{first}: {versus}")
        } else {
            versus
        }
    }

    /// One sentence: the objective and its unit, the intervals, what the ratios mean and how
    /// significance is decided.
    pub fn heading(&self) -> String {
        let goal = match self.objective.goal {
            Objective::Minimise => "minimise",
            Objective::Maximise => "maximise",
        };
        format!(
            "objective: {goal} {}; figures: {}{}, mean ± sd per study; {pct}% CI of the mean ({method}); ratio: speed-up over {first}'s mean (> 1: better) and its {pct}% bootstrap CI; faster/slower: Welch's t-test, Holm-adjusted per study, at {alpha}%",
            self.objective.name,
            self.title_name(),
            self.display().suffix(),
            pct = self.percent(),
            first = self.studies[0].name,
            alpha = crate::num::compact((1.0 - self.level) * 100.0),
            method = crate::table::ci_method_words(
                self.rows
                    .iter()
                    .flat_map(|r| r.cells.iter().flatten().map(|c| c.ci_method))
            ),
        )
    }

    /// The aligned table: a line of study names over their columns, the headers, the rows.
    fn table_text(&self, layout: &Layout, width: usize) -> String {
        if self.rows.is_empty() {
            return "no configurations to compare\n".to_string();
        }
        let columns = fit(self.columns(), width);
        let widths: Vec<usize> = columns.iter().map(Column::width).collect();
        let line = |cells: Vec<String>, paint: bool| -> String {
            let parts: Vec<String> = cells
                .iter()
                .zip(&columns)
                .zip(&widths)
                .map(|((cell, col), w)| {
                    let padded = pad(cell, *w, col.right);
                    if paint && col.header != "configuration" {
                        layout.paint(&padded, change_style(cell))
                    } else {
                        padded
                    }
                })
                .collect();
            parts.join(GAP).trim_end().to_string()
        };
        let mut out = group_line(&columns, &widths);
        out.push('\n');
        let header: Vec<String> = columns.iter().map(|c| c.header.clone()).collect();
        out.push_str(&layout.paint(&line(header, false), Style::Bold));
        out.push('\n');
        for i in 0..self.rows.len() {
            let cells: Vec<String> = columns.iter().map(|c| c.cells[i].clone()).collect();
            for physical in physical_rows(&cells) {
                out.push_str(&line(physical, true));
                out.push('\n');
            }
        }
        out
    }

    /// Every column before fitting, each in its study's group: configuration; per study the
    /// objective (mean ± sd), n and the CI; per later study its ratio to the first and the
    /// ratio's CI. Markdown and HTML show them all.
    pub(crate) fn columns(&self) -> Vec<Column> {
        let col =
            |header: String, cells: Vec<String>, right: bool, priority: u8, group: &str| Column {
                header,
                cells,
                right,
                priority,
                group: group.to_string(),
            };
        let labels = self.rows.iter().map(|r| r.label.clone()).collect();
        let mut cols = vec![col("configuration".into(), labels, false, 10, "")];
        // The unit alone heads each study's figures: the objective is in the heading, and
        // "throughput (Mbit/s)" over every study would cost the ratios their room.
        let unit = self.display().symbol;
        let objective = if unit.is_empty() {
            "mean".to_string()
        } else {
            unit
        };
        let pct = format!("{}% CI", self.percent());
        for (s, study) in self.studies.iter().enumerate() {
            let g = study.name.as_str();
            // The reference study's n and CI outlast the others' when room runs out.
            let other = u8::from(s > 0);
            let each = |f: &dyn Fn(Option<&Cell>) -> String| -> Vec<String> {
                self.rows.iter().map(|r| f(r.cells[s].as_ref())).collect()
            };
            // Padded so the study's name fits over its columns even when only this one stays.
            let width = g.chars().count().min(MAX_NAME);
            cols.push(col(
                format!("{objective:>width$}"),
                self.mean_sd(s),
                true,
                10,
                g,
            ));
            cols.push(col(
                "n".into(),
                each(&|c| c.map_or("-".into(), |c| c.n.to_string())),
                true,
                4 - other,
                g,
            ));
            let ci = each(&|c| self.mean_ci(c));
            cols.push(col(pct.clone(), ci, true, 3 - other, g));
            if s > 0 {
                // The second study's ratios outlast the later studies' when room runs out.
                let later = u8::from(s > 1);
                cols.push(col("ratio".into(), each(&ratio_cell), true, 9 - later, g));
                cols.push(col(pct.clone(), each(&ratio_ci), true, 6 - later, g));
            }
        }
        cols
    }

    /// Study `s`'s "mean ± sd" cells, aligned on the ±; "-" where the study lacks the
    /// configuration, its status where it has no mean.
    fn mean_sd(&self, s: usize) -> Vec<String> {
        let parts = self
            .rows
            .iter()
            .map(|r| match &r.cells[s] {
                None => ("-".to_string(), String::new()),
                Some(c) if c.mean.is_none() => (c.status.clone(), String::new()),
                Some(c) => (
                    self.figure(c.mean),
                    c.sd.map_or_else(String::new, |sd| self.figure(Some(sd))),
                ),
            })
            .collect();
        align_pm(parts)
    }

    fn mean_ci(&self, c: Option<&Cell>) -> String {
        match c.map(|c| (c.ci_lower, c.ci_upper)) {
            Some((Some(lo), Some(hi))) => {
                format!("[{}, {}]", self.figure(Some(lo)), self.figure(Some(hi)))
            }
            _ => "-".to_string(),
        }
    }

    /// One figure in the display unit with the comparison's decimals.
    pub(crate) fn figure(&self, x: Option<f64>) -> String {
        let d = self.display();
        fixed(x.map(|v| d.scale(v)), self.decimals())
    }

    /// "A · label: failed: reason" for every cell with a reason.
    pub fn reasons(&self) -> Vec<String> {
        let mut out = Vec::new();
        for r in &self.rows {
            for (study, cell) in self.studies.iter().zip(&r.cells) {
                if let Some((c, reason)) = cell.as_ref().and_then(|c| Some((c, c.reason.as_ref()?)))
                {
                    out.push(format!(
                        "{} · {}: {}: {reason}",
                        study.name, r.label, c.status
                    ));
                }
            }
        }
        out
    }

    /// "facts that differ:" and one wrapped line per fact, at most [`MAX_FACTS`].
    fn facts_text(&self, width: usize) -> String {
        if self.facts.is_empty() {
            return "facts: no recorded fact differs between the studies\n".to_string();
        }
        let mut out = String::from("facts that differ:\n");
        for f in self.facts.iter().take(MAX_FACTS) {
            for l in wrap(&self.fact_line(f), width - 2, "    ") {
                out.push_str(&format!("  {l}\n"));
            }
        }
        if self.facts.len() > MAX_FACTS {
            out.push_str(&format!(
                "  … and {} more (--html or --json lists them all)\n",
                self.facts.len() - MAX_FACTS
            ));
        }
        out
    }

    /// "kernel: A 6.1.0 · B 6.8.0" ("(none)" where a study did not record it).
    fn fact_line(&self, f: &super::FactDifference) -> String {
        let values: Vec<String> = self
            .studies
            .iter()
            .zip(&f.values)
            .map(|(s, v)| format!("{} {}", s.name, v.as_deref().unwrap_or("(none)")))
            .collect();
        format!("{}: {}", f.fact, values.join(" · "))
    }

    /// GitHub-flavoured Markdown: the heading, a pipe table of every column (headers prefixed
    /// by their study), the verdicts, the facts that differ and the key.
    pub fn to_markdown(&self) -> String {
        let mut out = format!("**{}**\n\n{}\n\n", md_escape(&self.title()), self.heading());
        let columns = self.columns();
        let headers: Vec<String> = columns
            .iter()
            .map(|c| md_escape(format!("{} {}", c.group, c.header.trim()).trim()))
            .collect();
        let aligns: Vec<&str> = columns
            .iter()
            .map(|c| if c.right { "---:" } else { "---" })
            .collect();
        out.push_str(&format!(
            "| {} |\n| {} |\n",
            headers.join(" | "),
            aligns.join(" | ")
        ));
        for i in 0..self.rows.len() {
            let cells: Vec<String> = columns.iter().map(|c| md_escape(&c.cells[i])).collect();
            out.push_str(&format!("| {} |\n", cells.join(" | ")));
        }
        out.push('\n');
        for line in self.reasons().iter().chain(&self.verdicts()) {
            out.push_str(&format!("- {}\n", md_escape(line)));
        }
        if !self.facts.is_empty() {
            out.push_str("\nFacts that differ:\n\n");
            for f in &self.facts {
                out.push_str(&format!("- {}\n", md_escape(&self.fact_line(f))));
            }
        }
        if !self.key.is_trivial() {
            out.push_str("\nKey:\n\n");
            for l in self.key.lines(usize::MAX / 2) {
                out.push_str(&format!("- {}\n", md_escape(&l)));
            }
        }
        out
    }
}

/// The study names over their columns, each followed by a rule to the end of its group:
/// `before ───────  after ──────────`.
fn group_line(columns: &[Column], widths: &[usize]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < columns.len() {
        let group = &columns[i].group;
        let j = (i..columns.len())
            .find(|&j| columns[j].group != *group)
            .unwrap_or(columns.len());
        let span = widths[i..j].iter().sum::<usize>() + GAP.len() * (j - i - 1);
        let text = if group.is_empty() {
            String::new()
        } else {
            let name = cut(group, span);
            let rule = "─".repeat(span.saturating_sub(name.chars().count() + 1));
            format!("{name} {rule}").trim_end().to_string()
        };
        parts.push(pad(&text, span, false));
        i = j;
    }
    parts.join(GAP).trim_end().to_string()
}

/// "1.12x faster", "0.89x slower", "1.01x" (no significant difference), or "-".
fn ratio_cell(c: Option<&Cell>) -> String {
    let Some(r) = c.and_then(|c| c.vs_first.as_ref()) else {
        return "-".to_string();
    };
    let x = format!("{}x", fixed(Some(r.estimate), 2));
    match r.change {
        Change::Faster => format!("{x} faster"),
        Change::Slower => format!("{x} slower"),
        Change::NotSignificant => x,
    }
}

/// "[1.05, 1.20]", or "-".
fn ratio_ci(c: Option<&Cell>) -> String {
    match c.and_then(|c| c.vs_first.as_ref()) {
        Some(r) => format!("[{}, {}]", fixed(Some(r.lower), 2), fixed(Some(r.upper), 2)),
        None => "-".to_string(),
    }
}

/// Significant changes stand out on a colour terminal: better green, worse red.
fn change_style(cell: &str) -> Style {
    if cell.ends_with(" faster") {
        Style::Good
    } else if cell.ends_with(" slower") {
        Style::Bad
    } else {
        Style::Plain
    }
}
