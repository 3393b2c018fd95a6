//! The mesh as one self-contained HTML page: MaDDash's grid (a row per sender, a column per
//! receiver, each cell coloured from best to worst among the pairs, its figures on hover), then
//! the worst pairs and the all-to-all stall estimate. No script, no external files.

use std::fmt::Write as _;

use tcplab_report::html::escape as esc;

use super::grid::{Cell, Grid, unit};
use super::outcome::{MeshFigure, WorkloadKind, num};

/// The page for `grid`, titled `title`.
pub fn page(grid: &Grid, title: &str) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>{t}</title><style>{STYLE}</style></head><body>\n<h1>{t}</h1>\n\
         <p>{fig}: row sends to column. Green is the best pair, red the worst; grey failed, \
         white not run; * cut short, ! the lab's emulator fell behind; hover a cell for its \
         figures.</p>\n",
        t = esc(title),
        fig = esc(grid.workload.figure())
    );
    table(&mut out, grid);
    let _ = writeln!(out, "<p>{}.</p>", esc(&grid.counts_line()));
    if let Some(line) = grid.untrustworthy_line() {
        let _ = writeln!(out, "<p>{}.</p>", esc(&line));
    }
    if !grid.worst.is_empty() {
        out.push_str("<h2>Worst pairs</h2>\n<ol>\n");
        for w in &grid.worst {
            let _ = writeln!(
                out,
                "<li>{} &rarr; {}: {}</li>",
                esc(&w.src),
                esc(&w.dst),
                esc(&w.why)
            );
        }
        out.push_str("</ol>\n");
    }
    if let Some(line) = grid.collective_line() {
        let _ = writeln!(out, "<h2>One all-to-all</h2>\n<p>{}.</p>", esc(&line));
    }
    out.push_str("</body></html>\n");
    out
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2em;color:#222}\
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.3em .5em;\
text-align:right;font-variant-numeric:tabular-nums}th{background:#f4f4f4}\
td.diag{background:#333}td.failed{background:#999;color:#fff}td.missing{background:#fff}";

fn table(out: &mut String, grid: &Grid) {
    let (lo, hi) = range(grid);
    out.push_str("<table>\n<tr><th>from \\ to</th>");
    for h in &grid.hosts {
        let _ = write!(out, "<th>{}</th>", esc(h));
    }
    out.push_str("</tr>\n");
    for (i, h) in grid.hosts.iter().enumerate() {
        let _ = write!(out, "<tr><th>{}</th>", esc(h));
        for (j, cell) in grid.cells[i].iter().enumerate() {
            let tip = format!("{} → {}", grid.hosts[i], grid.hosts[j]);
            match cell {
                Cell::Diagonal => out.push_str("<td class=\"diag\"></td>"),
                Cell::Missing => {
                    let _ = write!(
                        out,
                        "<td class=\"missing\" title=\"{}: not run\">.</td>",
                        esc(&tip)
                    );
                }
                Cell::Failed { reason } => {
                    let _ = write!(
                        out,
                        "<td class=\"failed\" title=\"{}: failed: {}\">&times;</td>",
                        esc(&tip),
                        esc(reason)
                    );
                }
                Cell::Done {
                    value,
                    complete,
                    trustworthy,
                    detail,
                } => {
                    let colour = value.map_or("#fff".to_string(), |v| {
                        colour(badness(grid.workload, v, lo, hi))
                    });
                    let _ = write!(
                        out,
                        "<td style=\"background:{colour}\" title=\"{}: {}{}\">{}{}</td>",
                        esc(&tip),
                        esc(detail),
                        if *complete { "" } else { " (cut short)" },
                        esc(&num(*value)),
                        match (*complete, *trustworthy) {
                            (true, true) => "",
                            (false, true) => "*",
                            (true, false) => "!",
                            (false, false) => "*!",
                        }
                    );
                }
            }
        }
        out.push_str("</tr>\n");
    }
    let _ = writeln!(
        out,
        "</table>\n<p>Figures in {}.</p>",
        esc(unit(grid.workload))
    );
}

/// The smallest and largest figure among the pairs that ran.
fn range(grid: &Grid) -> (f64, f64) {
    let values = grid.cells.iter().flatten().filter_map(|c| match c {
        Cell::Done { value, .. } => value.filter(|v| v.is_finite()),
        _ => None,
    });
    values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    })
}

/// 0 for the best pair, 1 for the worst. Stalls count on a log scale (one stall is already
/// bad; a thousand is not a thousand times worse); a mesh where all are equal is all best.
fn badness(w: WorkloadKind, v: f64, lo: f64, hi: f64) -> f64 {
    let scale = |x: f64| {
        if w == WorkloadKind::Msgs {
            x.ln_1p()
        } else {
            x
        }
    };
    let (v, lo, hi) = (scale(v), scale(lo), scale(hi));
    if hi - lo <= f64::EPSILON * hi.abs().max(1.0) {
        return 0.0;
    }
    let t = ((v - lo) / (hi - lo)).clamp(0.0, 1.0);
    if w.higher_is_worse() { t } else { 1.0 - t }
}

/// Green (0) through yellow to red (1).
fn colour(t: f64) -> String {
    let hue = 120.0 * (1.0 - t);
    format!("hsl({hue:.0},70%,70%)")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mesh::grid::grid;
    use crate::mesh::outcome::Figures;
    use crate::mesh::store::PairRow;

    fn row(src: &str, dst: &str, value: f64) -> PairRow {
        PairRow {
            src: src.into(),
            dst: dst.into(),
            round: 0,
            figures: Some(Figures {
                value: Some(value),
                stalls: None,
                workload_s: 1.0,
                complete: true,
                incomplete_reason: None,
                detail: "<detail>".into(),
            }),
            failure: None,
            started_unix_ms: 0,
            wall_s: 1.0,
            emulator: None,
        }
    }

    #[test]
    fn the_best_pair_is_green_the_worst_red_and_text_is_escaped() {
        let hosts: Vec<String> = vec!["a".into(), "<b>".into()];
        let g = grid(
            WorkloadKind::Stream,
            &hosts,
            &[row("a", "<b>", 900.0), row("<b>", "a", 100.0)],
        );
        let html = page(&g, "mesh & more");
        assert!(html.contains("mesh &amp; more"));
        assert!(html.contains("&lt;b&gt;") && !html.contains("<b>→"));
        assert!(html.contains("&lt;detail&gt;"));
        assert!(
            html.contains("hsl(120,70%,70%)"),
            "the faster pair is green"
        );
        assert!(html.contains("hsl(0,70%,70%)"), "the slower pair is red");
    }

    #[test]
    fn equal_figures_are_all_best() {
        assert_eq!(badness(WorkloadKind::Msgs, 0.0, 0.0, 0.0), 0.0);
        assert_eq!(badness(WorkloadKind::Stream, 5.0, 5.0, 5.0), 0.0);
    }
}
