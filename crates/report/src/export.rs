//! Machine-readable exports of the table rows: one JSON document, NDJSON, or CSV with one column per
//! factor (RFC 4180 quoting), for spreadsheets and other tools.

use crate::error::ReportError;
use crate::table::{Table, TableRow};

impl Table {
    /// The whole table (objective, level, method, rows) as one pretty-printed JSON document.
    pub fn to_json(&self) -> Result<String, ReportError> {
        Ok(serde_json::to_string_pretty(self)?)
    }

    /// NDJSON: one JSON object per row and line, in rank order (for `--ndjson` and `jq`).
    pub fn to_ndjson(&self) -> Result<String, ReportError> {
        let mut out = String::new();
        for row in &self.rows {
            out.push_str(&serde_json::to_string(row)?);
            out.push('\n');
        }
        Ok(out)
    }

    /// CSV: a header line, then one line per row. `label` is the short label of the terminal
    /// and HTML tables; the factor columns after it hold the full settings; the objective's
    /// figures are in its base unit, named in their headers (`mean_bps`, `sd_bps`); missing
    /// figures are empty cells; full precision (shortest round-trip form) for every number.
    pub fn to_csv(&self) -> String {
        let unit = tcplab_stats::units::Unit::parse(&self.objective.unit).name_suffix();
        let mut header: Vec<String> = vec!["rank".into(), "group".into(), "label".into()];
        header.extend(self.factor_names.iter().cloned());
        header.extend(["baseline", "n"].map(String::from));
        header.extend(
            [
                "mean", "sd", "best", "worst", "median", "p90", "ci_lower", "ci_upper",
            ]
            .map(|h| format!("{h}{unit}")),
        );
        header.extend(
            [
                "speed_up",
                "speed_up_lower",
                "speed_up_upper",
                "status",
                "reason",
            ]
            .map(String::from),
        );
        let mut out = csv_line(&header);
        for row in &self.rows {
            out.push_str(&csv_line(&self.csv_cells(row)));
        }
        out
    }

    fn csv_cells(&self, r: &TableRow) -> Vec<String> {
        let mut cells = vec![opt(r.rank), opt(r.group), r.label.clone()];
        cells.extend(
            self.factor_names
                .iter()
                .map(|f| r.factors.get(f).cloned().unwrap_or_default()),
        );
        cells.push(r.baseline.to_string());
        cells.push(r.n.to_string());
        for x in [
            r.mean,
            r.sd,
            r.best,
            r.worst,
            r.median,
            r.p90,
            r.ci_lower,
            r.ci_upper,
            r.speed_up,
            r.speed_up_lower,
            r.speed_up_upper,
        ] {
            cells.push(opt(x.filter(|v| v.is_finite())));
        }
        cells.push(r.status.clone());
        cells.push(r.reason.clone().unwrap_or_default());
        cells
    }
}

fn opt<T: ToString>(x: Option<T>) -> String {
    x.map(|v| v.to_string()).unwrap_or_default()
}

/// One CSV record, each field quoted when it holds a comma, quote or line break (RFC 4180).
fn csv_line(fields: &[String]) -> String {
    let quoted: Vec<String> = fields
        .iter()
        .map(|f| {
            if f.contains([',', '"', '\n', '\r']) {
                format!("\"{}\"", f.replace('"', "\"\""))
            } else {
                f.clone()
            }
        })
        .collect();
    format!("{}\n", quoted.join(","))
}

#[cfg(test)]
mod tests {
    use super::csv_line;

    #[test]
    fn csv_quotes_only_when_needed() {
        let line = csv_line(&["a".into(), "b,c".into(), "say \"hi\"".into()]);
        assert_eq!(line, "a,\"b,c\",\"say \"\"hi\"\"\"\n");
    }
}
