//! Number formatting shared by tables, tick labels and the HTML page. Formatting only: every
//! figure itself comes from `tcplab_stats`.

/// `x` with exactly `decimals` decimals; "-" for a missing or non-finite value, so no table
/// ever shows "NaN".
pub(crate) fn fixed(x: Option<f64>, decimals: usize) -> String {
    match x {
        Some(v) if v.is_finite() => {
            let s = format!("{v:.decimals$}");
            // "-0.00" reads as a sign error; print the zero plainly.
            if s.starts_with('-') && s[1..].chars().all(|c| c == '0' || c == '.') {
                s[1..].to_string()
            } else {
                s
            }
        }
        _ => "-".to_string(),
    }
}

/// Decimals that give the smallest non-zero magnitude in `values` three significant digits,
/// clamped to 0..=6 (0.28 s → 3 decimals, 941 Mbit/s → 0).
pub(crate) fn auto_decimals(values: impl IntoIterator<Item = f64>) -> usize {
    let smallest = values
        .into_iter()
        .filter(|v| v.is_finite() && *v != 0.0)
        .map(f64::abs)
        .fold(f64::INFINITY, f64::min);
    if !smallest.is_finite() {
        return 2;
    }
    let magnitude = smallest.log10().floor() as i64;
    (2 - magnitude).clamp(0, 6) as usize
}

/// A tick label: up to four significant digits, trailing zeros dropped, no exponent for the
/// magnitudes a network lab produces ("0.25", "40", "8738000", "1.5e-7" only when tiny).
pub(crate) fn compact(x: f64) -> String {
    if !x.is_finite() {
        return String::new();
    }
    if x == 0.0 {
        return "0".to_string();
    }
    let magnitude = x.abs().log10().floor() as i32;
    if magnitude < -5 {
        return format!("{x:.2e}");
    }
    let decimals = (3 - magnitude).max(0) as usize;
    let s = format!("{x:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_handles_missing_and_negative_zero() {
        assert_eq!(fixed(Some(0.284), 2), "0.28");
        assert_eq!(fixed(Some(-0.001), 2), "0.00");
        assert_eq!(fixed(Some(f64::NAN), 2), "-");
        assert_eq!(fixed(None, 2), "-");
    }

    #[test]
    fn auto_decimals_give_three_significant_digits() {
        assert_eq!(auto_decimals([0.28, 0.79]), 3);
        assert_eq!(auto_decimals([941.2, 12.5]), 1);
        assert_eq!(auto_decimals([941.2]), 0);
        assert_eq!(auto_decimals([0.0]), 2);
        assert_eq!(auto_decimals([1e-9]), 6);
    }

    #[test]
    fn compact_ticks() {
        assert_eq!(compact(40.0), "40");
        assert_eq!(compact(0.25), "0.25");
        assert_eq!(compact(8_738_000.0), "8738000");
        assert_eq!(compact(1.0 / 3.0), "0.3333");
        assert_eq!(compact(0.0), "0");
    }
}
