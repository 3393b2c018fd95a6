//! Durations, sizes and rates as people write them, one parser each (`tcplab_emu::spec`), for
//! command-line flags, scenario files, tune's candidates and the JSON a run records alike.
//!
//! | type | written | stored |
//! |---|---|---|
//! | [`Dur`] | `10s`, `250ms`, `40us`, or a bare number of seconds (`10`, `2.5`) | ns |
//! | [`Bytes`] | `64`, `128k`, `64KiB`, `1.5MiB` (powers of 1024) | bytes |
//! | [`Rate`] | `1gbit`, `100mbit`, `100M` (bits per second, powers of 1000) | bit/s |
//!
//! Each is `FromStr` (clap's value parser) and serde: a duration and a rate are written back
//! as text, exactly, in the largest unit they reach, a size as an integer (what a scenario file held before
//! sizes took suffixes). The configurations keep their fields in base units (`duration_ms`,
//! `write_size`); the `serde_*` modules here give those fields the written form.

use std::fmt;
use std::str::FromStr;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use tcplab_emu::describe::{format_duration, format_rate};
use tcplab_emu::spec::{parse_rate, parse_size, parse_workload_duration};

/// A duration, ns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Dur(u64);

impl Dur {
    /// From nanoseconds.
    pub const fn from_ns(ns: u64) -> Dur {
        Dur(ns)
    }

    /// From milliseconds (saturating).
    pub const fn from_ms(ms: u64) -> Dur {
        Dur(ms.saturating_mul(1_000_000))
    }

    /// From microseconds (saturating).
    pub const fn from_us(us: u64) -> Dur {
        Dur(us.saturating_mul(1_000))
    }

    /// Nanoseconds.
    pub const fn ns(self) -> u64 {
        self.0
    }

    /// Whole microseconds (rounded to nearest).
    pub const fn us(self) -> u64 {
        (self.0 + 500) / 1_000
    }

    /// Whole milliseconds (rounded to nearest).
    pub const fn ms(self) -> u64 {
        (self.0 + 500_000) / 1_000_000
    }

    /// Seconds.
    pub fn secs(self) -> f64 {
        self.0 as f64 / 1e9
    }
}

impl FromStr for Dur {
    type Err = String;
    fn from_str(s: &str) -> Result<Dur, String> {
        parse_workload_duration(s)
            .map(Dur)
            .map_err(|e| e.to_string())
    }
}

impl fmt::Display for Dur {
    /// Exact, in the largest unit it reaches: `10s`, `250ms`, `2.5s`, `0`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_duration(self.0))
    }
}

/// A byte count.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Bytes(pub u64);

impl FromStr for Bytes {
    type Err = String;
    fn from_str(s: &str) -> Result<Bytes, String> {
        parse_size(s).map(Bytes).map_err(|e| e.to_string())
    }
}

impl fmt::Display for Bytes {
    /// The largest power-of-1024 unit that keeps the value exact: `64`, `128KiB`, `1GiB`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        for (shift, unit) in [(30, "GiB"), (20, "MiB"), (10, "KiB")] {
            if b != 0 && b % (1 << shift) == 0 {
                return write!(f, "{}{unit}", b >> shift);
            }
        }
        write!(f, "{b}")
    }
}

/// A rate, bit/s.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Rate(pub u64);

impl FromStr for Rate {
    type Err = String;
    fn from_str(s: &str) -> Result<Rate, String> {
        parse_rate(s).map(Rate).map_err(|e| e.to_string())
    }
}

impl fmt::Display for Rate {
    /// Exact, in the largest unit it reaches: `1gbit`, `2.5mbit`, `800bit`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_rate(self.0))
    }
}

impl Serialize for Dur {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl Serialize for Rate {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl Serialize for Bytes {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(self.0)
    }
}

/// Reads a value written as text (parsed by `T::from_str`) or as a bare number (read as the
/// text of that number: seconds for a duration, bytes for a size, bit/s refused by a rate's
/// parser for want of a unit).
struct TextOrNumber<T>(std::marker::PhantomData<T>);

impl<T: FromStr<Err = String>> Visitor<'_> for TextOrNumber<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a number or a string with a unit")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
        v.parse().map_err(E::custom)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<T, E> {
        self.visit_str(&v.to_string())
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<T, E> {
        self.visit_str(&v.to_string())
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<T, E> {
        self.visit_str(&v.to_string())
    }
}

macro_rules! deserialize_text_or_number {
    ($t:ty) => {
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                d.deserialize_any(TextOrNumber::<$t>(std::marker::PhantomData))
            }
        }
    };
}

deserialize_text_or_number!(Dur);
deserialize_text_or_number!(Bytes);
deserialize_text_or_number!(Rate);

/// A `u64` of milliseconds written as a [`Dur`].
pub mod serde_ms {
    use super::*;

    /// Writes `ms` as a duration.
    pub fn serialize<S: Serializer>(ms: &u64, s: S) -> Result<S::Ok, S::Error> {
        Dur::from_ms(*ms).serialize(s)
    }

    /// Reads a duration into whole milliseconds.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        Dur::deserialize(d).map(Dur::ms)
    }
}

/// An `Option<u64>` of milliseconds written as a [`Dur`].
pub mod serde_ms_opt {
    use super::*;

    /// Writes `ms` as a duration (none: nothing).
    pub fn serialize<S: Serializer>(ms: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
        ms.map(Dur::from_ms).serialize(s)
    }

    /// Reads a duration into whole milliseconds.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
        Option::<Dur>::deserialize(d).map(|v| v.map(Dur::ms))
    }
}

/// A `u64` of microseconds written as a [`Dur`].
pub mod serde_us {
    use super::*;

    /// Writes `us` as a duration.
    pub fn serialize<S: Serializer>(us: &u64, s: S) -> Result<S::Ok, S::Error> {
        Dur::from_us(*us).serialize(s)
    }

    /// Reads a duration into whole microseconds.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        Dur::deserialize(d).map(Dur::us)
    }
}

/// An `Option<u64>` of bit/s written as a [`Rate`].
pub mod serde_rate_opt {
    use super::*;

    /// Writes `bps` as a rate (none: nothing).
    pub fn serialize<S: Serializer>(bps: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
        bps.map(Rate).serialize(s)
    }

    /// Reads a rate into bit/s.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
        Option::<Rate>::deserialize(d).map(|v| v.map(|r| r.0))
    }
}

/// A `u32` byte count that may be written with a unit (`128k`).
pub mod serde_size_u32 {
    use super::*;

    /// Writes the count as an integer.
    pub fn serialize<S: Serializer>(b: &u32, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u32(*b)
    }

    /// Reads a size that fits 32 bits.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
        let b = Bytes::deserialize(d)?;
        u32::try_from(b.0)
            .map_err(|_| de::Error::custom(format!("{} bytes is above {} (4 GiB)", b.0, u32::MAX)))
    }
}

/// An `Option<u64>` byte count that may be written with a unit (`1GiB`).
pub mod serde_size_opt {
    use super::*;

    /// Writes the count as an integer (none: nothing).
    pub fn serialize<S: Serializer>(b: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
        b.map(Bytes).serialize(s)
    }

    /// Reads a size.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
        Option::<Bytes>::deserialize(d).map(|v| v.map(|b| b.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_units_and_bare_seconds() {
        for (text, ns) in [
            ("10", 10_000_000_000),
            ("2.5", 2_500_000_000),
            ("250ms", 250_000_000),
            ("40us", 40_000),
            ("1.5s", 1_500_000_000),
            ("0", 0),
        ] {
            assert_eq!(text.parse::<Dur>(), Ok(Dur::from_ns(ns)), "{text}");
        }
        assert!("10 parsecs".parse::<Dur>().unwrap_err().contains("unit"));
        assert!("-1s".parse::<Dur>().unwrap_err().contains("negative"));
    }

    #[test]
    fn every_value_is_written_back_exactly() {
        for ns in [0, 7, 40_000, 250_000_000, 10_000_000_000, 1_500_000_000] {
            let d = Dur::from_ns(ns);
            assert_eq!(d.to_string().parse::<Dur>(), Ok(d), "{d}");
        }
        for b in [0, 1, 64, 1500, 128 << 10, 1 << 30, 3 << 20] {
            assert_eq!(Bytes(b).to_string().parse::<Bytes>(), Ok(Bytes(b)));
        }
        for r in [1, 1_000, 20_000_000, 1_000_000_000, 1_500_000_000] {
            assert_eq!(Rate(r).to_string().parse::<Rate>(), Ok(Rate(r)));
        }
        assert_eq!(Dur::from_ms(250).to_string(), "250ms");
        assert_eq!(Bytes(128 << 10).to_string(), "128KiB");
        assert_eq!(Rate(100_000_000).to_string(), "100mbit");
    }

    #[test]
    fn sizes_and_rates_take_iperfs_suffixes() {
        assert_eq!("128K".parse::<Bytes>(), Ok(Bytes(131_072)));
        assert_eq!("64KiB".parse::<Bytes>(), Ok(Bytes(65_536)));
        assert_eq!("1.5m".parse::<Bytes>(), Ok(Bytes(1_572_864)));
        assert_eq!("100M".parse::<Rate>(), Ok(Rate(100_000_000)));
        assert_eq!("1gbit".parse::<Rate>(), Ok(Rate(1_000_000_000)));
        assert!("100".parse::<Rate>().unwrap_err().contains("unit"));
    }

    #[test]
    fn serde_reads_text_or_numbers() {
        #[derive(Deserialize, Serialize, PartialEq, Debug)]
        struct T {
            #[serde(with = "serde_ms")]
            d: u64,
            #[serde(with = "serde_size_u32")]
            b: u32,
            r: Rate,
        }
        let t: T = serde_json::from_str(r#"{"d": 2, "b": "128k", "r": "20M"}"#).unwrap();
        assert_eq!(
            t,
            T {
                d: 2_000,
                b: 131_072,
                r: Rate(20_000_000)
            }
        );
        let back = serde_json::to_string(&t).unwrap();
        assert_eq!(back, r#"{"d":"2s","b":131072,"r":"20mbit"}"#);
        let e = serde_json::from_str::<T>(r#"{"d": "2 weeks", "b": 1, "r": "1M"}"#).unwrap_err();
        assert!(e.to_string().contains("unit"), "{e}");
    }
}
