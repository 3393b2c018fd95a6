//! The comparison's plot: one band per configuration, top-down in the table's order, and in
//! it each study's mean as a dot with its CI as a whisker, studies one above the other in
//! their colour and marker, so a shift between studies reads at a glance and its size against
//! the whiskers says whether it matters.

use super::Comparison;
use crate::error::ReportError;
use crate::plot::boxplot::category_chart;
use crate::plot::legend::{self, Entry, Placement};
use crate::plot::{
    Axis, DrawResult, Mark, OrDraw, SIZE, color, finish, fit_range, no_data, tag_texts,
};
use plotters::prelude::*;

/// Longest configuration label drawn in full at the left.
const MAX_LABEL_CHARS: usize = 40;

/// One dot and whisker: (study, band from the top, mean, CI) in the display unit.
struct Dot {
    study: usize,
    band: usize,
    mean: f64,
    ci: Option<(f64, f64)>,
}

impl Comparison {
    /// The plot as SVG; see the module documentation. Legend entries are the study names,
    /// the value axis is labelled with the objective and its unit ("throughput (Mbit/s)").
    pub fn plot(&self) -> Result<String, ReportError> {
        let title = format!(
            "{} per configuration: mean and {}% CI per study",
            self.title_name(),
            self.percent()
        );
        let axis = Axis::linear(format!("{}{}", self.title_name(), self.display().suffix()));
        let placement = Placement::for_labels(self.studies.iter().map(|s| s.name.as_str()));
        let entries: Vec<Entry> = self
            .studies
            .iter()
            .enumerate()
            .map(|(i, s)| Entry::new(i, &s.name, Mark::Points, placement.max_chars()))
            .collect();
        let mut buf = String::new();
        self.draw(&mut buf, &title, &axis, (placement, &entries))
            .map_err(|message| ReportError::Draw {
                what: title.clone(),
                message,
            })?;
        let mut tags: Vec<(String, &str)> = entries.iter().map(|e| (e.text(), "legend")).collect();
        tags.push((axis.label.clone(), "axis-label"));
        Ok(tag_texts(&finish(buf, &title), &tags))
    }

    /// Every study's mean and CI per configuration, scaled to the display unit.
    fn dots(&self) -> Vec<Dot> {
        let d = self.display();
        let mut out = Vec::new();
        for (band, row) in self.rows.iter().enumerate() {
            for (study, cell) in row.cells.iter().enumerate() {
                let Some(c) = cell else { continue };
                let Some(mean) = c.mean.filter(|m| m.is_finite()) else {
                    continue;
                };
                let ci = c.ci_lower.zip(c.ci_upper);
                out.push(Dot {
                    study,
                    band,
                    mean: d.scale(mean),
                    ci: ci.map(|(lo, hi)| (d.scale(lo), d.scale(hi))),
                });
            }
        }
        out
    }

    fn draw(
        &self,
        buf: &mut String,
        title: &str,
        axis: &Axis,
        (placement, entries): (Placement, &[Entry]),
    ) -> DrawResult {
        let n = self.rows.len().max(1);
        let k = self.studies.len();
        let mut height = (140 + n * (18 + 14 * k)).max(SIZE.1 as usize / 2) as u32;
        height += placement.extra_height();
        let (root, body) = crate::plot::titled_root(buf, (SIZE.0, height), title)?;
        let (area, legend_area, columns) = placement.split(&body);
        let dots = self.dots();
        let values = dots
            .iter()
            .flat_map(|d| [Some(d.mean), d.ci.map(|c| c.0), d.ci.map(|c| c.1)])
            .flatten();
        let xr = fit_range(axis, values);
        let labels: Vec<String> = self.rows.iter().map(|r| short(&r.label)).collect();
        let mut chart = category_chart(&area, &axis.label, &labels, xr)?;
        for dot in &dots {
            let y = (n - 1 - dot.band) as f64 + offset(dot.study, k);
            if let Some((lo, hi)) = dot.ci {
                let c = color(dot.study).stroke_width(2);
                let cap = 0.06;
                let lines = [
                    vec![(lo, y), (hi, y)],
                    vec![(lo, y - cap), (lo, y + cap)],
                    vec![(hi, y - cap), (hi, y + cap)],
                ];
                chart
                    .draw_series(lines.into_iter().map(|p| PathElement::new(p, c)))
                    .d()?;
            }
            legend::draw_markers(&mut chart, dot.study, 5, &[(dot.mean, y)])?;
        }
        if dots.is_empty() {
            no_data(&area)?;
        }
        legend::draw(&legend_area, entries, columns)?;
        root.present().d()
    }
}

/// Vertical place of study `s` of `k` within its configuration's band: the first on top,
/// the others evenly below, within ±0.3 of the band's centre.
fn offset(s: usize, k: usize) -> f64 {
    if k <= 1 {
        return 0.0;
    }
    0.3 - 0.6 * s as f64 / (k - 1) as f64
}

fn short(label: &str) -> String {
    crate::table::cut(label, MAX_LABEL_CHARS)
}
