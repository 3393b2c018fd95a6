//! Formatting of a [`Table`]: the sfperf-style terminal block, and a grid of cells shared by
//! Markdown and HTML.
//!
//! sfperf printed `s:  3 f: 1  time:    0.28 +/-   0.10 best:   0.19 worst:   0.75 seconds`;
//! the terminal line keeps that order and reading, then adds the CI of the mean, the speed-up
//! over the baseline with its CI, n, the significance group and the rank.

use super::{Table, TableRow};
use crate::num::{compact, fixed};
use tcplab_stats::Objective;

/// One piece of a terminal line: a literal prefix and a value padded to its column's width.
struct Segment {
    prefix: String,
    value: String,
    right: bool,
    /// False for free text at the end of a line (reasons): it neither pads nor widens a column.
    pad: bool,
}

impl Segment {
    fn num(prefix: impl Into<String>, value: String) -> Segment {
        Segment {
            prefix: prefix.into(),
            value,
            right: true,
            pad: true,
        }
    }

    fn text(prefix: impl Into<String>, value: String) -> Segment {
        Segment {
            prefix: prefix.into(),
            value,
            right: false,
            pad: true,
        }
    }

    fn reason(prefix: &str, value: String) -> Segment {
        Segment {
            prefix: prefix.to_string(),
            value,
            right: false,
            pad: false,
        }
    }
}

impl Table {
    /// The terminal table: a heading, one sfperf-style line per configuration in rank order,
    /// and the ranking method. Columns are aligned; missing figures print as "-".
    pub fn to_text(&self) -> String {
        let lines: Vec<Vec<Segment>> = self.rows.iter().map(|r| self.segments(r)).collect();
        let widths = column_widths(&lines);
        let mut out = format!("{}\n{}\n", self.title, self.heading());
        for line in &lines {
            let mut s = String::new();
            for (seg, width) in line.iter().zip(&widths) {
                s.push_str(&seg.prefix);
                if !seg.pad {
                    s.push_str(&seg.value);
                } else if seg.right {
                    s.push_str(&format!("{:>width$}", seg.value));
                } else {
                    s.push_str(&format!("{:<width$}", seg.value));
                }
            }
            out.push_str(s.trim_end());
            out.push('\n');
        }
        if let Some(m) = &self.method {
            out.push_str(&format!("ranking: {m}\n"));
        }
        out
    }

    /// GitHub-flavoured Markdown: the heading sentence, then a pipe table of [`Table::grid`].
    pub fn to_markdown(&self) -> String {
        let (headers, rows) = self.grid();
        let mut out = format!("**{}**\n\n{}\n\n", md_escape(&self.title), self.heading());
        out.push_str(&format!("| {} |\n", headers.join(" | ")));
        let aligns: Vec<&str> = headers
            .iter()
            .enumerate()
            .map(|(i, _)| {
                if self.is_numeric_column(i) {
                    "---:"
                } else {
                    "---"
                }
            })
            .collect();
        out.push_str(&format!("| {} |\n", aligns.join(" | ")));
        for row in rows {
            let cells: Vec<String> = row.iter().map(|c| md_escape(c)).collect();
            out.push_str(&format!("| {} |\n", cells.join(" | ")));
        }
        if let Some(m) = &self.method {
            out.push_str(&format!("\nRanking: {m}.\n"));
        }
        out
    }

    /// One sentence: direction, objective, unit, confidence level and baseline.
    pub fn heading(&self) -> String {
        let goal = match self.objective.goal {
            Objective::Minimise => "minimise",
            Objective::Maximise => "maximise",
        };
        let mut s = format!(
            "objective: {goal} {} ({}); {}% CI of the mean (Student t)",
            self.objective.name,
            self.objective.unit,
            self.percent()
        );
        if let Some(b) = self.baseline_row() {
            s.push_str(&format!(
                "; speed-up vs baseline {} (bootstrap CI)",
                self.setting_name(b)
            ));
        }
        s
    }

    /// Column headers and cell texts, for Markdown and HTML. The speed-up column appears only
    /// with a baseline, the status column only when a configuration was dropped or failed.
    pub fn grid(&self) -> (Vec<String>, Vec<Vec<String>>) {
        let dec = self.decimals();
        let mut headers = vec!["rank".to_string(), "group".to_string()];
        if self.factor_names.is_empty() {
            headers.push("configuration".to_string());
        } else {
            headers.extend(self.factor_names.iter().cloned());
        }
        headers.push("n".to_string());
        headers.push(format!(
            "{} ({}) mean ± sd",
            self.objective.name, self.objective.unit
        ));
        headers.extend(["best".to_string(), "worst".to_string()]);
        headers.push(format!("{}% CI of mean", self.percent()));
        if self.baseline.is_some() {
            headers.push(format!("speed-up ({}% CI)", self.percent()));
        }
        let with_status = self.rows.iter().any(|r| r.status != "ok");
        if with_status {
            headers.push("status".to_string());
        }
        let rows = self
            .rows
            .iter()
            .map(|r| {
                let mut cells = vec![opt_usize(r.rank), opt_usize(r.group)];
                if self.factor_names.is_empty() {
                    cells.push(r.label.clone());
                } else {
                    cells.extend(self.factor_values(r));
                }
                cells.push(r.n.to_string());
                cells.push(match r.mean {
                    Some(_) => format!("{} ± {}", fixed(r.mean, dec), fixed(r.sd, dec)),
                    None => "-".to_string(),
                });
                cells.push(fixed(r.best, dec));
                cells.push(fixed(r.worst, dec));
                cells.push(ci_text(r.ci_lower, r.ci_upper, dec));
                if self.baseline.is_some() {
                    cells.push(speed_up_text(r));
                }
                if with_status {
                    cells.push(status_text(r));
                }
                cells
            })
            .collect();
        (headers, rows)
    }

    /// True for the grid columns that hold numbers (right-aligned, never wrapped): rank,
    /// group, n, the figures and the speed-up.
    pub(crate) fn is_numeric_column(&self, index: usize) -> bool {
        let names = self.factor_names.len().max(1);
        let first_figure = 2 + names;
        let figures = if self.baseline.is_some() { 6 } else { 5 };
        index < 2 || (first_figure..first_figure + figures).contains(&index)
    }

    fn segments(&self, row: &TableRow) -> Vec<Segment> {
        let mut segs = Vec::new();
        if self.factor_names.is_empty() {
            segs.push(Segment::text("", row.label.clone()));
        } else {
            for (i, (name, value)) in self
                .factor_names
                .iter()
                .zip(self.factor_values(row))
                .enumerate()
            {
                let sep = if i == 0 { "" } else { " " };
                let prefix = format!("{sep}{name}: ");
                if self.numeric_factor(name) {
                    segs.push(Segment::num(prefix, value));
                } else {
                    segs.push(Segment::text(prefix, value));
                }
            }
        }
        if row.status == "failed" {
            let reason = row.reason.clone().unwrap_or_default();
            segs.push(Segment::reason("  failed: ", reason));
            return segs;
        }
        let dec = self.decimals();
        segs.push(Segment::num(
            format!("  {}: ", self.objective.name),
            fixed(row.mean, dec),
        ));
        segs.push(Segment::num(" +/- ", fixed(row.sd, dec)));
        segs.push(Segment::num("  best: ", fixed(row.best, dec)));
        segs.push(Segment::num("  worst: ", fixed(row.worst, dec)));
        segs.push(Segment::text(" ", self.objective.unit.clone()));
        segs.push(Segment::num(
            format!("  {}% CI: ", self.percent()),
            ci_text(row.ci_lower, row.ci_upper, dec),
        ));
        if self.baseline.is_some() {
            segs.push(Segment::num("  speed-up: ", speed_up_text(row)));
        }
        segs.push(Segment::num("  n: ", row.n.to_string()));
        segs.push(Segment::num("  group: ", opt_usize(row.group)));
        segs.push(Segment::num("  rank: ", opt_usize(row.rank)));
        if let Some(reason) = &row.reason {
            segs.push(Segment::reason("  dropped: ", reason.clone()));
        }
        segs
    }

    fn factor_values(&self, row: &TableRow) -> Vec<String> {
        self.factor_names
            .iter()
            .map(|f| row.factors.get(f).cloned().unwrap_or_else(|| "-".into()))
            .collect()
    }

    /// True when every value of factor `name` is a number (optionally with a unit).
    fn numeric_factor(&self, name: &str) -> bool {
        self.rows
            .iter()
            .filter_map(|r| r.factors.get(name))
            .all(|v| crate::plot::parse_number(v).is_some())
    }

    fn baseline_row(&self) -> Option<&TableRow> {
        self.rows.iter().find(|r| r.baseline)
    }

    /// The confidence level as a percentage ("95").
    pub(crate) fn percent(&self) -> String {
        compact(self.level * 100.0)
    }
}

/// Width of each segment column: the widest value among the lines that have that column.
fn column_widths(lines: &[Vec<Segment>]) -> Vec<usize> {
    let columns = lines.iter().map(Vec::len).max().unwrap_or(0);
    (0..columns)
        .map(|i| {
            lines
                .iter()
                .filter_map(|l| l.get(i))
                .filter(|s| s.pad)
                .map(|s| s.value.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect()
}

fn opt_usize(x: Option<usize>) -> String {
    x.map_or_else(|| "-".to_string(), |v| v.to_string())
}

fn ci_text(lower: Option<f64>, upper: Option<f64>, dec: usize) -> String {
    match (lower, upper) {
        (Some(l), Some(u)) => format!("[{}, {}]", fixed(Some(l), dec), fixed(Some(u), dec)),
        _ => "-".to_string(),
    }
}

/// "2.80x [2.10, 3.70]", "baseline", or "-" when undefined.
fn speed_up_text(row: &TableRow) -> String {
    if row.baseline {
        return "baseline".to_string();
    }
    match (row.speed_up, row.speed_up_lower, row.speed_up_upper) {
        (Some(s), Some(l), Some(u)) => format!(
            "{}x [{}, {}]",
            fixed(Some(s), 2),
            fixed(Some(l), 2),
            fixed(Some(u), 2)
        ),
        _ => "-".to_string(),
    }
}

fn status_text(row: &TableRow) -> String {
    match &row.reason {
        Some(r) => format!("{}: {r}", row.status),
        None => row.status.clone(),
    }
}

/// Escapes the characters that would break a Markdown table cell.
fn md_escape(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}
