//! Markers and the legend of every x/y plot: a panel at the right when the labels are short,
//! two columns under the chart when they are long (a configuration label and its run), so a
//! label is shown whole rather than cut to look like its neighbour. Drawn by hand (not
//! plotters' overlay box) so it never hides data.

use super::{DrawResult, Mark, OrDraw, color, font_px};
use plotters::coord::Shift;
use plotters::coord::ranged1d::Ranged;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// Longest label the panel at the right holds; a longer one moves the legend under the chart.
const MAX_RIGHT_CHARS: usize = 30;
/// Longest label that shares a row with another under the chart (two columns).
const MAX_TWO_COLUMN_CHARS: usize = 50;
/// Longest label shown in full under the chart, alone on its row; longer ones are cut with an
/// ellipsis (they would be a sentence, not a name).
const MAX_BELOW_CHARS: usize = 100;
/// Vertical distance between legend entries, px.
const ROW: i32 = 24;

/// Where the legend goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Placement {
    /// A panel this many px wide at the right of the chart.
    Right(u32),
    /// Rows under the chart: (height in px, columns).
    Below(u32, usize),
}

impl Placement {
    /// The placement for these labels: at the right when they are all short.
    pub(crate) fn for_labels<'a>(labels: impl Iterator<Item = &'a str>) -> Placement {
        let labels: Vec<&str> = labels.filter(|l| !l.is_empty()).collect();
        let longest = labels.iter().map(|l| l.chars().count()).max().unwrap_or(0);
        if longest <= MAX_RIGHT_CHARS {
            return Placement::Right(if longest == 0 {
                24
            } else {
                (60 + longest as u32 * 17 / 2).clamp(120, 340)
            });
        }
        let columns = if longest <= MAX_TWO_COLUMN_CHARS {
            2
        } else {
            1
        };
        let rows = labels.len().div_ceil(columns) as u32;
        Placement::Below(rows * ROW as u32 + 20, columns)
    }

    /// Height the legend adds under the chart, px (none at the right).
    pub(crate) fn extra_height(self) -> u32 {
        match self {
            Placement::Right(_) => 0,
            Placement::Below(h, _) => h,
        }
    }

    /// `body` split into the chart's area and the legend's, and the legend's columns.
    pub(crate) fn split<'a>(
        self,
        body: &DrawingArea<SVGBackend<'a>, Shift>,
    ) -> (
        DrawingArea<SVGBackend<'a>, Shift>,
        DrawingArea<SVGBackend<'a>, Shift>,
        usize,
    ) {
        let (w, h) = body.dim_in_pixel();
        match self {
            Placement::Right(legend_w) => {
                let (a, l) = body.split_horizontally(w.saturating_sub(legend_w));
                (a, l, 1)
            }
            Placement::Below(legend_h, columns) => {
                let (a, l) = body.split_vertically(h.saturating_sub(legend_h));
                (a, l, columns)
            }
        }
    }

    /// The longest label this placement shows whole.
    pub(crate) fn max_chars(self) -> usize {
        match self {
            Placement::Right(_) => MAX_RIGHT_CHARS,
            Placement::Below(_, 2) => MAX_TWO_COLUMN_CHARS,
            Placement::Below(..) => MAX_BELOW_CHARS,
        }
    }
}

/// One legend entry.
pub(crate) struct Entry {
    index: usize,
    label: String,
    mark: Mark,
}

impl Entry {
    pub(crate) fn new(index: usize, label: &str, mark: Mark, max_chars: usize) -> Entry {
        let label = if label.chars().count() > max_chars {
            let cut: String = label.chars().take(max_chars - 1).collect();
            format!("{cut}…")
        } else {
            label.to_string()
        };
        Entry { index, label, mark }
    }

    /// The text drawn for this entry (cut to its placement's longest).
    pub(crate) fn text(&self) -> String {
        self.label.clone()
    }
}

/// Draws the entries top-down in `columns` columns; those that do not fit are summarised as
/// "… and N more".
pub(crate) fn draw(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    entries: &[Entry],
    columns: usize,
) -> DrawResult {
    let (w, h) = area.dim_in_pixel();
    let columns = columns.max(1);
    let column_w = (w as usize / columns) as i32;
    let fits = ((h as i32 - 16) / ROW).max(1) as usize * columns;
    let font = ("sans-serif", font_px(15.0))
        .into_font()
        .color(&BLACK)
        .pos(Pos::new(HPos::Left, VPos::Center));
    let rows = fits.div_ceil(columns);
    for (k, e) in entries.iter().enumerate() {
        let (col, row) = (k / rows, k % rows);
        let x = col as i32 * column_w;
        let y = 24 + row as i32 * ROW;
        if k + 1 == fits && entries.len() > fits {
            let rest = format!("… and {} more", entries.len() - k);
            area.draw(&Text::new(rest, (x + 8, y), font.clone())).d()?;
            break;
        }
        let c = color(e.index);
        let at = |dx: i32| (x + dx, y);
        match e.mark {
            Mark::Band => {
                let shade = super::WINDOW.mix(0.35).filled();
                area.draw(&Rectangle::new([at(6), (x + 38, y + 7)], shade))
                    .d()?;
            }
            Mark::Dashed => {
                for x0 in [6, 20, 34] {
                    area.draw(&PathElement::new(
                        vec![at(x0), at(x0 + 6)],
                        c.stroke_width(2),
                    ))
                    .d()?;
                }
            }
            Mark::Line | Mark::Points | Mark::Marked | Mark::LineAndPoints => {
                if !matches!(e.mark, Mark::Points | Mark::Marked) {
                    area.draw(&PathElement::new(vec![at(6), at(38)], c.stroke_width(2)))
                        .d()?;
                }
                if e.mark != Mark::Line {
                    draw_marker(area, e.index, 5, at(22))?;
                }
            }
        }
        area.draw(&Text::new(e.label.clone(), at(46), font.clone()))
            .d()?;
    }
    Ok(())
}

/// Draws series `index`'s marker at every point of a chart.
pub(crate) fn draw_markers<X, Y>(
    chart: &mut ChartContext<'_, SVGBackend<'_>, Cartesian2d<X, Y>>,
    index: usize,
    size: i32,
    points: &[(f64, f64)],
) -> DrawResult
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    let style = color(index).filled();
    let pts = points.iter().copied();
    match index % 4 {
        0 => chart
            .draw_series(pts.map(|p| Circle::new(p, size, style)))
            .map(|_| ()),
        1 => chart
            .draw_series(pts.map(|p| TriangleMarker::new(p, size + 1, style)))
            .map(|_| ()),
        2 => chart
            .draw_series(pts.map(|p| {
                EmptyElement::at(p) + Rectangle::new([(-size, -size), (size, size)], style)
            }))
            .map(|_| ()),
        _ => chart
            .draw_series(pts.map(|p| Cross::new(p, size, color(index).stroke_width(2))))
            .map(|_| ()),
    }
    .d()
}

/// The same marker at one pixel position (for the legend).
fn draw_marker(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    index: usize,
    size: i32,
    at: (i32, i32),
) -> DrawResult {
    let style = color(index).filled();
    match index % 4 {
        0 => area.draw(&Circle::new(at, size, style)),
        1 => area.draw(&TriangleMarker::new(at, size + 1, style)),
        2 => area.draw(&Rectangle::new(
            [(at.0 - size, at.1 - size), (at.0 + size, at.1 + size)],
            style,
        )),
        _ => area.draw(&Cross::new(at, size, color(index).stroke_width(2))),
    }
    .d()
}
