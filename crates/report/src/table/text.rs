//! Formatting of a [`Table`]: the terminal table, and a grid of cells shared by Markdown and
//! HTML.
//!
//! The terminal table has one aligned row per configuration under a header row, the objective
//! in the unit its magnitude asks for (`throughput (Mbit/s)`), and fits the layout's width
//! (100 columns unless the terminal says otherwise): when it would not, the columns a reader
//! misses least go first (best, worst, group), then the labels wrap onto several lines, then
//! the CI, n and speed-up go; racing's reasons and the key follow the table.

use super::{Table, TableRow};
use crate::num::{compact, fixed};
use crate::text::{Layout, Style, wrap};
use tcplab_stats::Objective;

/// One column of a terminal table (this one, and the comparison of studies in
/// [`crate::compare`], which fits its columns the same way).
pub(crate) struct Column {
    pub(crate) header: String,
    pub(crate) cells: Vec<String>,
    pub(crate) right: bool,
    /// Columns with the lowest priority are dropped first when the table is too wide; the
    /// configuration and the objective (priority 10) are never dropped.
    pub(crate) priority: u8,
    /// A caption over a run of columns (the study a comparison's columns belong to); empty
    /// for none.
    pub(crate) group: String,
}

impl Column {
    /// The widest line of the header and the cells (a wrapped cell counts by its lines).
    pub(crate) fn width(&self) -> usize {
        self.cells
            .iter()
            .chain(std::iter::once(&self.header))
            .flat_map(|c| c.lines())
            .map(|l| l.chars().count())
            .max()
            .unwrap_or(0)
    }
}

/// The physical lines of one table row whose cells may hold several lines (a wrapped
/// label): line `j` has each cell's `j`-th line, or nothing.
pub(crate) fn physical_rows(cells: &[String]) -> Vec<Vec<String>> {
    let split: Vec<Vec<&str>> = cells.iter().map(|c| c.lines().collect()).collect();
    let height = split.iter().map(Vec::len).max().unwrap_or(1).max(1);
    (0..height)
        .map(|j| {
            split
                .iter()
                .map(|lines| lines.get(j).map_or(String::new(), |l| (*l).to_string()))
                .collect()
        })
        .collect()
}

/// Space between columns.
pub(crate) const GAP: &str = "  ";
/// The configuration column is never wrapped narrower than this many characters.
const MIN_LABEL: usize = 16;
/// A label column this wide still reads well wrapped onto two or three lines: columns are
/// dropped only to keep the labels at least this wide.
const COMFORTABLE_LABEL: usize = 26;
/// Columns of this priority or lower go before the labels are wrapped (best, worst, group).
const FIRST_TO_GO: u8 = 5;

impl Table {
    /// The terminal table at 100 columns without colour (pipes, files, logs).
    pub fn to_text(&self) -> String {
        self.to_text_with(&Layout::default())
    }

    /// The terminal table laid out for `layout`: title, objective, the aligned rows, then the
    /// racing and failure reasons, the key from labels to settings, and the ranking method.
    pub fn to_text_with(&self, layout: &Layout) -> String {
        let width = layout.width.max(40);
        let mut out = String::new();
        out.push_str(&layout.paint(&self.title, Style::Bold));
        out.push('\n');
        for l in wrap(&self.heading(), width, "  ") {
            out.push_str(&l);
            out.push('\n');
        }
        if self.rows.is_empty() {
            return out;
        }
        let columns = fit(self.columns(), width);
        let widths: Vec<usize> = columns.iter().map(Column::width).collect();
        let header: Vec<String> = columns.iter().map(|c| c.header.clone()).collect();
        let line = |cells: &[String]| -> String {
            let parts: Vec<String> = cells
                .iter()
                .zip(&columns)
                .zip(&widths)
                .map(|((cell, col), w)| pad(cell, *w, col.right))
                .collect();
            parts.join(GAP).trim_end().to_string()
        };
        out.push_str(&layout.paint(&line(&header), Style::Bold));
        out.push('\n');
        for (i, row) in self.rows.iter().enumerate() {
            let cells: Vec<String> = columns.iter().map(|c| c.cells[i].clone()).collect();
            for physical in physical_rows(&cells) {
                out.push_str(&layout.paint(&line(&physical), row_style(row)));
                out.push('\n');
            }
        }
        for (label, reason) in self.reasons() {
            for l in wrap(&format!("{label}: {reason}"), width, "    ") {
                out.push_str(&layout.paint(&l, Style::Dim));
                out.push('\n');
            }
        }
        if !self.key.is_trivial() {
            out.push_str("key:\n");
            for l in self.key.lines(width - 2) {
                out.push_str(&format!("  {l}\n"));
            }
        }
        if let Some(m) = &self.method {
            for l in wrap(&format!("ranking: {m}"), width, "  ") {
                out.push_str(&l);
                out.push('\n');
            }
        }
        out
    }

    /// GitHub-flavoured Markdown: the heading sentence, a pipe table of [`Table::grid`], the
    /// reasons and the key.
    pub fn to_markdown(&self) -> String {
        let (headers, rows) = self.grid();
        let mut out = format!("**{}**\n\n{}\n\n", md_escape(&self.title), self.heading());
        out.push_str(&format!("| {} |\n", headers.join(" | ")));
        let aligns: Vec<&str> = (0..headers.len())
            .map(|i| {
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
        let reasons = self.reasons();
        if !reasons.is_empty() {
            out.push('\n');
            for (label, reason) in reasons {
                out.push_str(&format!(
                    "- `{}`: {}\n",
                    md_escape(&label),
                    md_escape(&reason)
                ));
            }
        }
        if !self.key.is_trivial() {
            out.push_str("\nKey:\n\n");
            for l in self.key.lines(usize::MAX / 2) {
                out.push_str(&format!("- {}\n", md_escape(&l)));
            }
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
            "objective: {goal} {}{}; {}% CI of the mean ({})",
            self.title_name(),
            self.display().suffix(),
            self.percent(),
            super::ci_method_words(self.rows.iter().map(|r| r.ci_method))
        );
        if let Some(b) = self.baseline_row() {
            s.push_str(&format!(
                "; speed-up vs the baseline, {} (bootstrap CI)",
                b.label
            ));
        }
        s
    }

    /// Column headers and cell texts, for Markdown and HTML: rank, group, configuration, n,
    /// the objective (in its display unit), best, worst, the CI, the speed-up (with a
    /// baseline) and the status (when a configuration was dropped or failed; the reason is
    /// in [`Table::reasons`]).
    pub fn grid(&self) -> (Vec<String>, Vec<Vec<String>>) {
        let d = self.display();
        let title = self.title_name();
        let mut headers: Vec<String> = ["rank", "group", "configuration", "n"]
            .map(String::from)
            .to_vec();
        headers.push(format!("{title}{} mean ± sd", d.suffix()));
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
                let mut cells = vec![
                    opt_usize(r.rank),
                    opt_usize(r.group),
                    self.marked_label(r),
                    r.n.to_string(),
                    self.mean_sd(r, " ± "),
                    self.figure(r.best),
                    self.figure(r.worst),
                    self.ci(r),
                ];
                if self.baseline.is_some() {
                    cells.push(speed_up_text(r));
                }
                if with_status {
                    cells.push(r.status.clone());
                }
                cells
            })
            .collect();
        (headers, rows)
    }

    /// True for the grid columns that hold numbers (right-aligned, never wrapped).
    pub(crate) fn is_numeric_column(&self, index: usize) -> bool {
        let last_figure = if self.baseline.is_some() { 8 } else { 7 };
        index < 2 || (3..=last_figure).contains(&index)
    }

    /// (label, "dropped: …" or "failed: …") for every row with a reason, in table order.
    pub fn reasons(&self) -> Vec<(String, String)> {
        self.rows
            .iter()
            .filter_map(|r| {
                let reason = r.reason.as_ref()?;
                Some((r.label.clone(), format!("{}: {reason}", r.status)))
            })
            .collect()
    }

    /// The label, with " (baseline)" after the baseline's.
    pub fn marked_label(&self, row: &TableRow) -> String {
        if row.baseline {
            format!("{} (baseline)", row.label)
        } else {
            row.label.clone()
        }
    }

    /// The terminal table's columns, before fitting.
    fn columns(&self) -> Vec<Column> {
        let d = self.display();
        let col = |header: &str, cells: Vec<String>, right: bool, priority: u8| Column {
            header: header.to_string(),
            cells,
            right,
            priority,
            group: String::new(),
        };
        let each = |f: &dyn Fn(&TableRow) -> String| self.rows.iter().map(f).collect::<Vec<_>>();
        let mut cols = vec![
            col("rank", each(&|r| opt_usize(r.rank)), true, 9),
            col("grp", each(&|r| opt_usize(r.group)), true, 5),
            col("configuration", each(&|r| self.marked_label(r)), false, 10),
            col(
                &format!("{}{}", self.title_name(), d.suffix()),
                self.aligned_mean_sd(),
                true,
                10,
            ),
            col("best", each(&|r| self.figure(r.best)), true, 3),
            col("worst", each(&|r| self.figure(r.worst)), true, 4),
            col(
                &format!("{}% CI", self.percent()),
                each(&|r| self.ci(r)),
                true,
                6,
            ),
        ];
        if self.baseline.is_some() {
            cols.push(col("speed-up", each(&speed_up_text), true, 8));
        }
        cols.push(col("n", each(&|r| r.n.to_string()), true, 7));
        if self.rows.iter().any(|r| r.status != "ok") {
            let status = each(&|r| {
                if r.status == "ok" {
                    String::new()
                } else {
                    r.status.clone()
                }
            });
            cols.push(col("status", status, false, 9));
        }
        cols
    }

    /// "mean ± sd" cells with the means and the sds each right-aligned, so the ± line up.
    fn aligned_mean_sd(&self) -> Vec<String> {
        let parts: Vec<(String, String)> = self
            .rows
            .iter()
            .map(|r| match r.mean {
                Some(_) => (self.figure(r.mean), self.figure(r.sd)),
                None => ("-".to_string(), String::new()),
            })
            .collect();
        align_pm(parts)
    }

    /// "mean ± sd" of one row in the display unit.
    fn mean_sd(&self, r: &TableRow, sep: &str) -> String {
        match r.mean {
            Some(_) => format!("{}{sep}{}", self.figure(r.mean), self.figure(r.sd)),
            None => "-".to_string(),
        }
    }

    /// One figure in the display unit with the table's decimals.
    fn figure(&self, x: Option<f64>) -> String {
        let d = self.display();
        fixed(x.map(|v| d.scale(v)), self.decimals())
    }

    fn ci(&self, r: &TableRow) -> String {
        match (r.ci_lower, r.ci_upper) {
            (Some(_), Some(_)) => {
                format!("[{}, {}]", self.figure(r.ci_lower), self.figure(r.ci_upper))
            }
            _ => "-".to_string(),
        }
    }

    fn baseline_row(&self) -> Option<&TableRow> {
        self.rows.iter().find(|r| r.baseline)
    }

    /// The confidence level as a percentage ("95").
    pub(crate) fn percent(&self) -> String {
        compact(self.level * 100.0)
    }
}

/// The columns that fit in `width`: the least needed ones dropped first (best, worst,
/// group), then the configuration column wrapped at spaces onto several lines, and only when
/// that would leave it narrower than [`COMFORTABLE_LABEL`] more columns dropped (CI, n,
/// speed-up, rank). A label is never cut while words fit, so labels stay whole and distinct.
pub(crate) fn fit(mut columns: Vec<Column>, width: usize) -> Vec<Column> {
    let total = |cols: &[Column]| -> usize {
        cols.iter().map(Column::width).sum::<usize>() + GAP.len() * cols.len().saturating_sub(1)
    };
    let label_room = |cols: &[Column]| -> Option<usize> {
        let label = cols.iter().find(|c| c.header == "configuration")?;
        Some(width.saturating_sub(total(cols) - label.width()))
    };
    let drop_one = |cols: &mut Vec<Column>, up_to: u8| -> bool {
        let lowest = cols
            .iter()
            .enumerate()
            .filter(|(_, c)| c.priority <= up_to)
            .min_by_key(|(_, c)| c.priority)
            .map(|(i, _)| i);
        lowest.map(|i| cols.remove(i)).is_some()
    };
    while total(&columns) > width && drop_one(&mut columns, FIRST_TO_GO) {}
    while total(&columns) > width
        && label_room(&columns).is_none_or(|r| r < COMFORTABLE_LABEL)
        && drop_one(&mut columns, 9)
    {}
    if total(&columns) > width {
        let room = label_room(&columns).unwrap_or(width).max(MIN_LABEL);
        if let Some(label) = columns.iter_mut().find(|c| c.header == "configuration") {
            for cell in &mut label.cells {
                *cell = wrap_cell(cell, room);
            }
        }
    }
    columns
}

/// `s` wrapped at spaces into lines of at most `width` characters, a word longer than that
/// cut with an ellipsis.
fn wrap_cell(s: &str, width: usize) -> String {
    wrap(s, width, "")
        .iter()
        .map(|l| cut(l, width))
        .collect::<Vec<_>>()
        .join("\n")
}

/// (mean, sd) texts as "mean ± sd" cells with the means and the sds each right-aligned, so the
/// ± line up down a column; a pair without sd shows the mean alone.
pub(crate) fn align_pm(parts: Vec<(String, String)>) -> Vec<String> {
    let mw = parts.iter().map(|p| p.0.chars().count()).max().unwrap_or(0);
    let sw = parts.iter().map(|p| p.1.chars().count()).max().unwrap_or(0);
    parts
        .into_iter()
        .map(|(m, s)| {
            if s.is_empty() {
                format!("{m:>mw$}")
            } else {
                format!("{m:>mw$} ± {s:>sw$}")
            }
        })
        .collect()
}

/// `s` cut to `max` characters, the last one an ellipsis when anything was cut.
pub(crate) fn cut(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let kept: String = s.chars().take(max.saturating_sub(1)).collect();
    format!("{kept}…")
}

pub(crate) fn pad(s: &str, width: usize, right: bool) -> String {
    let fill = " ".repeat(width.saturating_sub(s.chars().count()));
    if right {
        format!("{fill}{s}")
    } else {
        format!("{s}{fill}")
    }
}

/// Group 1 stands out, failed rows warn, dropped rows recede.
fn row_style(row: &TableRow) -> Style {
    match row.status.as_str() {
        "failed" => Style::Bad,
        "dropped" => Style::Dim,
        _ if row.group == Some(1) => Style::Good,
        _ => Style::Plain,
    }
}

fn opt_usize(x: Option<usize>) -> String {
    x.map_or_else(|| "-".to_string(), |v| v.to_string())
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

/// Escapes the characters that would break a Markdown table cell.
pub(crate) fn md_escape(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}
