//! Markers and the legend panel at the right of every x/y plot. The legend is drawn by hand
//! (not plotters' overlay box) so it never hides data and long labels get their own room.

use super::{DrawResult, Mark, OrDraw, color, font_px};
use plotters::coord::Shift;
use plotters::coord::ranged1d::Ranged;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// Longest legend label shown in full; longer ones are cut with an ellipsis.
const MAX_LABEL_CHARS: usize = 34;
/// Vertical distance between legend entries, px.
const ROW: i32 = 24;

/// One legend entry.
pub(crate) struct Entry {
    index: usize,
    label: String,
    mark: Mark,
}

impl Entry {
    pub(crate) fn new(index: usize, label: &str, mark: Mark) -> Entry {
        let label = if label.chars().count() > MAX_LABEL_CHARS {
            let cut: String = label.chars().take(MAX_LABEL_CHARS - 1).collect();
            format!("{cut}…")
        } else {
            label.to_string()
        };
        Entry { index, label, mark }
    }
}

/// Width of the legend panel: room for the longest label at ~8.5 px a character, or a narrow
/// margin when there is nothing to list.
pub(crate) fn width(entries: &[Entry]) -> u32 {
    let chars = entries
        .iter()
        .map(|e| e.label.chars().count())
        .max()
        .unwrap_or(0);
    if chars == 0 {
        return 24;
    }
    (60 + chars as u32 * 17 / 2).clamp(120, 340)
}

/// Draws the entries top-down; those that do not fit are summarised as "… and N more".
pub(crate) fn draw(area: &DrawingArea<SVGBackend<'_>, Shift>, entries: &[Entry]) -> DrawResult {
    let (_, h) = area.dim_in_pixel();
    let fits = ((h as i32 - 40) / ROW).max(1) as usize;
    let font = ("sans-serif", font_px(15.0))
        .into_font()
        .color(&BLACK)
        .pos(Pos::new(HPos::Left, VPos::Center));
    for (row, e) in entries.iter().enumerate() {
        let y = 24 + row as i32 * ROW;
        if row + 1 == fits && entries.len() > fits {
            let rest = format!("… and {} more", entries.len() - row);
            area.draw(&Text::new(rest, (8, y), font.clone())).d()?;
            break;
        }
        let c = color(e.index);
        if e.mark != Mark::Points {
            area.draw(&PathElement::new(vec![(6, y), (38, y)], c.stroke_width(2)))
                .d()?;
        }
        if e.mark != Mark::Line {
            draw_marker(area, e.index, 5, (22, y))?;
        }
        area.draw(&Text::new(e.label.clone(), (46, y), font.clone()))
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
