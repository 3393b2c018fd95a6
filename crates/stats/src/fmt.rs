//! Number formatting for the reason sentences this crate writes, and for the lines its users
//! print beside them (tune's verification), so both show a figure the same way.

/// `x` with four significant digits, trailing zeros dropped ("0.0002831", "41", "12.5").
pub fn sig4(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let magnitude = x.abs().log10().floor() as i32;
    let decimals = (3 - magnitude).max(0) as usize;
    let s = format!("{x:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// A p-value: four decimals, or scientific notation when tiny.
pub(crate) fn p_value(p: f64) -> String {
    if p < 1e-4 {
        format!("{p:.1e}")
    } else {
        format!("{p:.4}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn four_significant_digits() {
        assert_eq!(sig4(0.000283149), "0.0002831");
        assert_eq!(sig4(41.0), "41");
        assert_eq!(sig4(1230.0), "1230");
        assert_eq!(sig4(12.5), "12.5");
        assert_eq!(sig4(-0.5), "-0.5");
        // Large means lose only their decimals (tune's verification line).
        assert_eq!(sig4(725_395_988.392_6), "725395988");
        assert_eq!(sig4(23_037_989.874_6), "23037990");
        assert_eq!(sig4(1234.4), "1234");
        assert_eq!(sig4(12.34567), "12.35");
        assert_eq!(sig4(0.0012345), "0.001234");
        assert_eq!(sig4(-4.5), "-4.5");
        assert_eq!(sig4(0.0), "0");
        assert_eq!(p_value(0.00001234), "1.2e-5");
        assert_eq!(p_value(0.0312), "0.0312");
    }
}
