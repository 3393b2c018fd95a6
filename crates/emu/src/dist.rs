//! Jitter distributions as functions of one standard-normal latent draw, and netem's `.dist`
//! empirical tables.
//!
//! Every distribution maps a latent `g ~ N(0, 1)` to a variate `Z` through `u = Φ(g)` (a
//! Gaussian copula), so correlating successive `g` (see [`crate::jitter`]) correlates the
//! delays without changing their distribution. The variates follow netem's shipped tables,
//! so `delay 100ms 10ms distribution pareto` means the same here as there:
//!
//! | distribution | Z | mean of Z | sd of Z |
//! |---|---|---|---|
//! | uniform | `2u − 1` | 0 | 1/√3 |
//! | normal | `g` | 0 | 1 |
//! | pareto | `4/3 · ((1−u)^(−1/3) − 1.5)` (Pareto, α = 3, centred) | −0.0329 after the cap | 0.821 after the cap |
//! | paretonormal | `g/4 + 3/4 · pareto(u)` (netem's quantile mix) | ≈ 0 | |
//! | table | `table[⌊u·n⌋] / 8192` | as tabulated | as tabulated |
//!
//! Z is clamped to ±[`MAX_Z`] = 32767/8192, the range a netem table can hold; for pareto
//! this cap is what keeps one packet from being delayed by minutes.

use serde::{Deserialize, Serialize};

use crate::error::ValueError;

/// netem's table scale: a table value of 8192 means one `amount` of jitter.
pub const DIST_SCALE: f64 = 8192.0;
/// Largest |Z|: the largest value an `i16` table entry can hold.
pub const MAX_Z: f64 = i16::MAX as f64 / DIST_SCALE;
/// Most entries a table may have (netem's limit is 65536 too).
pub const MAX_TABLE_LEN: usize = 65_536;
/// Entries in a table built by [`DistTable::from_samples`] (netem's tables have 4096).
pub const FITTED_TABLE_LEN: usize = 4096;

/// Standard deviation of the pareto variate after the ±[`MAX_Z`] cap (`tests/jitter.rs`
/// derives it and checks draws against it).
pub const PARETO_Z_SD: f64 = 0.820_85;

/// Standard normal CDF `Φ(x)`, accurate to about 1e-7 relative (Numerical Recipes' erfc
/// Chebyshev fit), which is far below the resolution of any jitter that matters.
pub fn normal_cdf(x: f64) -> f64 {
    0.5 * erfc(-x / std::f64::consts::SQRT_2)
}

/// Complementary error function, fractional error below 1.2e-7 everywhere.
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let ans = t * (-z * z + poly).exp();
    if x >= 0.0 { ans } else { 2.0 - ans }
}

/// Mean and population standard deviation of `xs` (0, 0 when empty).
fn mean_sd(xs: &[f64]) -> (f64, f64) {
    if xs.is_empty() {
        return (0.0, 0.0);
    }
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
    (mean, var.sqrt())
}

/// netem's centred Pareto variate (α = 3) from the upper-tail probability `1 − u`, which is
/// passed separately so the tail keeps full precision when `u` is close to 1.
pub fn pareto_z(upper: f64) -> f64 {
    let upper = upper.max(f64::MIN_POSITIVE);
    4.0 / 3.0 * (upper.powf(-1.0 / 3.0) - 1.5)
}

/// An empirical jitter table in netem's `.dist` format: each entry is Z × 8192 as an `i16`,
/// and a draw picks an entry uniformly.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct DistTable {
    values: Vec<i16>,
}

/// A table fitted to measured delays, with the delay and jitter that reproduce them.
#[derive(Debug, Clone, PartialEq)]
pub struct FittedTable {
    /// The table (Z values of the standardised samples' quantiles).
    pub table: DistTable,
    /// Mean of the samples: use it as the delay.
    pub mean: f64,
    /// Standard deviation of the samples: use it as the jitter amount.
    pub sd: f64,
}

impl DistTable {
    /// A table from raw entries; it must have 1 to [`MAX_TABLE_LEN`] entries.
    pub fn new(values: Vec<i16>) -> Result<Self, ValueError> {
        let t = Self { values };
        t.validate()?;
        Ok(t)
    }

    /// The entries.
    pub fn values(&self) -> &[i16] {
        &self.values
    }

    /// Checks the length.
    pub fn validate(&self) -> Result<(), ValueError> {
        if self.values.is_empty() || self.values.len() > MAX_TABLE_LEN {
            return Err(ValueError::Invalid(format!(
                "a distribution table must have 1 to {MAX_TABLE_LEN} entries, this one has {}",
                self.values.len()
            )));
        }
        Ok(())
    }

    /// Parses netem's `.dist` text: `#` starts a comment, entries are whitespace-separated
    /// integers in −32768..=32767, any number per line.
    pub fn parse(text: &str) -> Result<Self, ValueError> {
        let mut values = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let body = line.split('#').next().unwrap_or("");
            for word in body.split_whitespace() {
                let v = word.parse::<i16>().map_err(|_| ValueError::BadLine {
                    line: i + 1,
                    reason: format!(
                        "`{word}` is not an entry: write whole numbers between -32768 and 32767"
                    ),
                })?;
                values.push(v);
            }
        }
        Self::new(values)
    }

    /// Writes the table in netem's `.dist` text form, 8 entries a line.
    pub fn to_dist_text(&self) -> String {
        let mut out = String::from("# netem distribution table written by tcplab\n");
        for chunk in self.values.chunks(8) {
            let line: Vec<String> = chunk.iter().map(i16::to_string).collect();
            out.push_str(&line.join(" "));
            out.push('\n');
        }
        out
    }

    /// The standard deviation of the table's variates Z (values / [`DIST_SCALE`]): jitter
    /// drawn from it has `amount` times this spread.
    pub fn z_sd(&self) -> f64 {
        let z: Vec<f64> = self
            .values
            .iter()
            .map(|&v| f64::from(v) / DIST_SCALE)
            .collect();
        mean_sd(&z).1
    }

    /// Fits a table to measured one-way delays (any unit): the samples are standardised and
    /// [`FITTED_TABLE_LEN`] evenly spaced quantiles tabulated, as iproute2's `maketable` does.
    /// Needs at least two distinct samples.
    pub fn from_samples(samples: &[f64]) -> Result<FittedTable, ValueError> {
        if samples.len() < 2 || samples.iter().any(|x| !x.is_finite()) {
            return Err(ValueError::Invalid(
                "a fitted table needs at least 2 finite samples".into(),
            ));
        }
        let n = samples.len() as f64;
        let (mean, sd) = mean_sd(samples);
        if sd == 0.0 {
            return Err(ValueError::Invalid(
                "all samples are equal: use a fixed delay, not a table".into(),
            ));
        }
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        let values = (0..FITTED_TABLE_LEN)
            .map(|i| {
                let q = (i as f64 + 0.5) / FITTED_TABLE_LEN as f64;
                let idx = ((q * n) as usize).min(sorted.len() - 1);
                let z = (sorted[idx] - mean) / sd;
                (z * DIST_SCALE)
                    .round()
                    .clamp(f64::from(i16::MIN), f64::from(i16::MAX)) as i16
            })
            .collect();
        Ok(FittedTable {
            table: Self { values },
            mean,
            sd,
        })
    }

    /// The variate for probability `u` in `[0, 1)`.
    pub fn z(&self, u: f64) -> f64 {
        let n = self.values.len();
        let idx = ((u * n as f64) as usize).min(n - 1);
        f64::from(self.values[idx]) / DIST_SCALE
    }
}

impl crate::Distribution {
    /// The variate Z for the latent standard-normal draw `g`, clamped to ±[`MAX_Z`].
    pub fn z(&self, g: f64) -> f64 {
        let z = match self {
            Self::Normal => g,
            Self::Uniform => 2.0 * normal_cdf(g) - 1.0,
            Self::Pareto => pareto_z(normal_cdf(-g)),
            Self::Paretonormal => 0.25 * g + 0.75 * pareto_z(normal_cdf(-g)),
            Self::Table(t) => t.z(normal_cdf(g)),
        };
        z.clamp(-MAX_Z, MAX_Z)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Distribution;

    #[test]
    fn normal_cdf_matches_known_values() {
        assert!((normal_cdf(0.0) - 0.5).abs() < 1e-7);
        assert!((normal_cdf(1.0) - 0.841_344_746).abs() < 1e-7);
        assert!((normal_cdf(-1.959_963_985) - 0.025).abs() < 1e-7);
        assert!((normal_cdf(3.0) - 0.998_650_102).abs() < 1e-7);
    }

    #[test]
    fn pareto_quantiles_match_netem_formula() {
        // u = 0 is the minimum: X = 1, Z = 4/3 (1 - 1.5) = -2/3.
        assert!((pareto_z(1.0) + 2.0 / 3.0).abs() < 1e-12);
        // Median: X = 2^(1/3).
        let med = 4.0 / 3.0 * (2f64.powf(1.0 / 3.0) - 1.5);
        assert!((pareto_z(0.5) - med).abs() < 1e-12);
        // Far tail is capped by Distribution::z.
        assert_eq!(Distribution::Pareto.z(9.0), MAX_Z);
    }

    #[test]
    fn uniform_spans_minus_one_to_one() {
        assert!((Distribution::Uniform.z(0.0)).abs() < 1e-7);
        assert!(Distribution::Uniform.z(-8.0) < -0.999_999);
        assert!(Distribution::Uniform.z(8.0) > 0.999_999);
    }

    #[test]
    fn dist_text_round_trips() {
        let t = DistTable::new(vec![-32768, -8192, 0, 1, 2, 3, 4, 5, 8192, 32767]).unwrap();
        let back = DistTable::parse(&t.to_dist_text()).unwrap();
        assert_eq!(back, t);
    }

    #[test]
    fn dist_parse_accepts_netem_layout_and_rejects_garbage() {
        let t = DistTable::parse("# normal\n-100 -50 0\n  50 100 # tail\n\n").unwrap();
        assert_eq!(t.values(), &[-100, -50, 0, 50, 100]);
        let e = DistTable::parse("1 2\n3 x4\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 2: `x4` is not an entry: write whole numbers between -32768 and 32767"
        );
        assert!(DistTable::parse("40000").is_err());
        assert!(DistTable::parse("# only comments\n").is_err());
    }

    #[test]
    fn table_lookup_is_uniform_over_entries() {
        let t = DistTable::new(vec![-8192, 8192]).unwrap();
        assert_eq!(t.z(0.0), -1.0);
        assert_eq!(t.z(0.499), -1.0);
        assert_eq!(t.z(0.5), 1.0);
        assert_eq!(t.z(0.999_999), 1.0);
    }

    #[test]
    fn fitted_table_standardises_samples() {
        let samples: Vec<f64> = (0..1000).map(|i| 10.0 + f64::from(i % 2) * 2.0).collect();
        let fit = DistTable::from_samples(&samples).unwrap();
        assert!((fit.mean - 11.0).abs() < 1e-12);
        assert!((fit.sd - 1.0).abs() < 1e-12);
        assert_eq!(fit.table.values()[0], -8192);
        assert_eq!(fit.table.values()[FITTED_TABLE_LEN - 1], 8192);
        assert!(DistTable::from_samples(&[5.0, 5.0]).is_err());
        assert!(DistTable::from_samples(&[5.0]).is_err());
    }
}
