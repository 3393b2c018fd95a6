//! Short, distinct labels for configurations: only the factors that vary, each named by the
//! last meaningful part of its path (`sysctl.all."net.ipv4.tcp_rmem"` → `rmem`) and valued in
//! as few characters as keep the values apart (`4096 87380 7561216` → `7.6M` when only the
//! maximum varies). A reader sees `rmem=7.6M wmem=7.6M cc=bbr` in the terminal, the HTML table,
//! every legend and the CSV; the [`Key`] maps it back to the full settings.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use tcplab_stats::units::significant;

/// Path parts that never tell two factors apart on their own ("net", "ipv4", "sysctl").
const GENERIC_PARTS: [&str; 9] = [
    "sysctl", "all", "net", "ipv4", "ipv6", "core", "socket", "link", "lab",
];

/// Common spellings shortened further: the congestion control is `cc` everywhere in the field.
fn alias(part: &str) -> &str {
    match part {
        "congestion" | "congestion_control" | "tcp_congestion_control" => "cc",
        other => other,
    }
}

/// One varying factor in the key: its short name, full name, and each abbreviated value with
/// the full value it stands for (only values whose short form differs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyFactor {
    /// Name used in labels ("rmem").
    pub short: String,
    /// The factor's full name (`sysctl.all."net.ipv4.tcp_rmem"`).
    pub full: String,
    /// (short value, full value) for every value that was abbreviated.
    pub values: Vec<(String, String)>,
}

/// Everything needed to read the short labels back.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Key {
    /// The varying factors, in label order.
    pub factors: Vec<KeyFactor>,
    /// Factors with one value in every configuration: (full name, value).
    pub common: Vec<(String, String)>,
}

impl Key {
    /// True when the labels need no key: every name and value is shown in full.
    pub fn is_trivial(&self) -> bool {
        self.factors
            .iter()
            .all(|f| f.short == f.full && f.values.is_empty())
    }

    /// The key as text lines of at most `width` columns: `rmem = sysctl.all."net.ipv4.tcp_rmem":
    /// 170k = 4096 87380 174760, 7.6M = 4096 87380 7561216`, then the common settings.
    pub fn lines(&self, width: usize) -> Vec<String> {
        let mut out = Vec::new();
        for f in &self.factors {
            if f.short == f.full && f.values.is_empty() {
                continue;
            }
            let mut s = if f.short == f.full {
                f.short.clone()
            } else {
                format!("{} = {}", f.short, f.full)
            };
            if !f.values.is_empty() {
                let values: Vec<String> = f
                    .values
                    .iter()
                    .map(|(short, full)| format!("{short} = {full}"))
                    .collect();
                s.push_str(&format!(": {}", values.join(", ")));
            }
            out.extend(crate::text::wrap(&s, width, "    "));
        }
        if !self.common.is_empty() {
            let common: Vec<String> = self
                .common
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            let s = format!("same in every configuration: {}", common.join(", "));
            out.extend(crate::text::wrap(&s, width, "    "));
        }
        out
    }
}

/// The labels of `configs` (each a factor → value map; all share the factor names in
/// `order` first, then any others sorted) and their key. Labels are distinct whenever the
/// factor maps are; identical maps get `#2`, `#3` appended.
pub fn short_labels(configs: &[&BTreeMap<String, String>], order: &[String]) -> (Vec<String>, Key) {
    let names = factor_order(configs, order);
    let mut values: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for name in &names {
        let mut seen = BTreeSet::new();
        let list = values.entry(name.as_str()).or_default();
        for c in configs {
            let v = c.get(name).map_or("-", String::as_str);
            if seen.insert(v) {
                list.push(v);
            }
        }
    }
    let varying: Vec<&String> = names
        .iter()
        .filter(|n| values[n.as_str()].len() > 1)
        .collect();
    let shorts = short_names(&varying);
    let mut key = Key::default();
    let mut value_maps = Vec::new();
    for (name, short) in varying.iter().zip(&shorts) {
        let map = short_values(&values[name.as_str()]);
        key.factors.push(KeyFactor {
            short: short.clone(),
            full: (*name).clone(),
            values: values[name.as_str()]
                .iter()
                .filter(|v| map[**v] != **v)
                .map(|v| (map[*v].clone(), (*v).to_string()))
                .collect(),
        });
        value_maps.push(map);
    }
    key.common = names
        .iter()
        .filter(|n| values[n.as_str()].len() == 1)
        .map(|n| (n.clone(), values[n.as_str()][0].to_string()))
        .collect();
    let labels = configs
        .iter()
        .map(|c| {
            let parts: Vec<String> = varying
                .iter()
                .zip(&shorts)
                .zip(&value_maps)
                .map(|((name, short), map)| {
                    let v = c.get(*name).map_or("-", String::as_str);
                    format!("{short}={}", map[v])
                })
                .collect();
            if parts.is_empty() {
                single_label(c)
            } else {
                parts.join(" ")
            }
        })
        .collect();
    (disambiguate(labels), key)
}

/// The label of a configuration when nothing varies: its own settings, or "default".
fn single_label(c: &BTreeMap<String, String>) -> String {
    if c.is_empty() {
        return "default".to_string();
    }
    let names: Vec<&String> = c.keys().collect();
    let shorts = short_names(&names);
    names
        .iter()
        .zip(shorts)
        .map(|(n, s)| format!("{s}={}", c[*n]))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Appends `#2`, `#3`, … to repeated labels so every label is unique.
fn disambiguate(labels: Vec<String>) -> Vec<String> {
    let mut count: BTreeMap<String, usize> = BTreeMap::new();
    labels
        .into_iter()
        .map(|l| {
            let n = count.entry(l.clone()).or_insert(0);
            *n += 1;
            if *n == 1 { l } else { format!("{l} #{n}") }
        })
        .collect()
}

/// Factor names in `order` first (those present), then the rest sorted.
fn factor_order(configs: &[&BTreeMap<String, String>], order: &[String]) -> Vec<String> {
    let present: BTreeSet<&String> = configs.iter().flat_map(|c| c.keys()).collect();
    let mut names: Vec<String> = order
        .iter()
        .filter(|n| present.contains(n))
        .cloned()
        .collect();
    for n in present {
        if !names.contains(n) {
            names.push(n.clone());
        }
    }
    names
}

/// The parts of a factor path, quoted segments split too: `sysctl.all."net.ipv4.tcp_rmem"` →
/// sysctl, all, net, ipv4, tcp_rmem.
fn path_parts(name: &str) -> Vec<String> {
    name.split('"')
        .flat_map(|seg| seg.split('.'))
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect()
}

/// The meaningful tail of `name` with `depth` parts, the last one tidied (`tcp_` dropped,
/// aliases applied).
fn short_name(name: &str, depth: usize) -> String {
    let parts = path_parts(name);
    let meaningful: Vec<&String> = parts
        .iter()
        .filter(|p| !GENERIC_PARTS.contains(&p.as_str()))
        .collect();
    let pool: Vec<&String> = if meaningful.is_empty() {
        parts.iter().collect()
    } else {
        meaningful
    };
    let Some((last, before)) = pool.split_last() else {
        return name.to_string();
    };
    let tidy = last
        .strip_prefix("tcp_")
        .filter(|r| !r.is_empty())
        .unwrap_or(last);
    let mut out: Vec<String> = before
        .iter()
        .rev()
        .take(depth.saturating_sub(1))
        .rev()
        .map(|s| s.to_string())
        .collect();
    out.push(alias(tidy).to_string());
    out.join(".")
}

/// The short name of one factor on its own ("rmem" for `sysctl.all."net.ipv4.tcp_rmem"`).
pub fn short_factor_name(name: &str) -> String {
    short_name(name, 1)
}

/// Short names for `names`, each as short as keeps it apart from the others (full names
/// when no tail does).
fn short_names(names: &[&String]) -> Vec<String> {
    let mut depth = vec![1usize; names.len()];
    for _ in 0..8 {
        let shorts: Vec<String> = names
            .iter()
            .zip(&depth)
            .map(|(n, d)| short_name(n, *d))
            .collect();
        let mut clash = false;
        for i in 0..names.len() {
            if shorts.iter().filter(|s| **s == shorts[i]).count() > 1 {
                depth[i] += 1;
                clash = true;
            }
        }
        if !clash {
            return shorts;
        }
    }
    names.iter().map(|n| (*n).clone()).collect()
}

/// Each value's short form: number lists shown by the positions that vary, large numbers with
/// SI prefixes, as few significant digits as keep the values apart.
fn short_values(values: &[&str]) -> BTreeMap<String, String> {
    let lists: Option<Vec<Vec<f64>>> = values.iter().map(|v| number_list(v)).collect();
    let positions: Option<Vec<usize>> = lists.as_ref().and_then(|l| varying_positions(l));
    for digits in 2..=7 {
        let shorts: Vec<String> = match (&lists, &positions) {
            (Some(lists), Some(pos)) => lists
                .iter()
                .map(|l| {
                    pos.iter()
                        .map(|&i| si(l[i], digits))
                        .collect::<Vec<_>>()
                        .join("/")
                })
                .collect(),
            _ => values.iter().map(|v| (*v).to_string()).collect(),
        };
        let distinct: BTreeSet<&String> = shorts.iter().collect();
        if distinct.len() == values.len() {
            return values
                .iter()
                .zip(shorts)
                .map(|(v, s)| ((*v).to_string(), s))
                .collect();
        }
    }
    values
        .iter()
        .map(|v| ((*v).to_string(), (*v).to_string()))
        .collect()
}

/// `"4096 87380 6291456"` → [4096, 87380, 6291456]; `None` unless every word is a number.
fn number_list(v: &str) -> Option<Vec<f64>> {
    let words: Vec<&str> = v.split_whitespace().collect();
    if words.is_empty() {
        return None;
    }
    words
        .iter()
        .map(|w| w.parse::<f64>().ok().filter(|x| x.is_finite()))
        .collect()
}

/// Positions at which the lists differ; `None` when the lists differ in length. All positions
/// when none differ (the caller then shows them all).
fn varying_positions(lists: &[Vec<f64>]) -> Option<Vec<usize>> {
    let len = lists.first()?.len();
    if lists.iter().any(|l| l.len() != len) {
        return None;
    }
    let pos: Vec<usize> = (0..len)
        .filter(|&i| lists.iter().any(|l| l[i] != lists[0][i]))
        .collect();
    Some(if pos.is_empty() {
        (0..len).collect()
    } else {
        pos
    })
}

/// `x` with `digits` significant digits and an SI prefix (k, M, G, T) from 10,000 up:
/// 7561216 → "7.6M", 174760 → "170k", 4096 → "4096", 0.5 → "0.5".
pub fn si(x: f64, digits: usize) -> String {
    let (scaled, prefix) = match x.abs() {
        a if a >= 1e12 => (x / 1e12, "T"),
        a if a >= 1e9 => (x / 1e9, "G"),
        a if a >= 1e6 => (x / 1e6, "M"),
        a if a >= 1e4 => (x / 1e3, "k"),
        _ if x.fract() == 0.0 => return format!("{x}"),
        _ => (x, ""),
    };
    format!("{}{prefix}", significant(scaled, digits))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    const RMEM: &str = "sysctl.all.\"net.ipv4.tcp_rmem\"";
    const WMEM: &str = "sysctl.all.\"net.ipv4.tcp_wmem\"";

    #[test]
    fn tune_style_paths_become_short_names_and_values() {
        let a = map(&[
            (RMEM, "4096 87380 174760"),
            (WMEM, "4096 16384 131072"),
            ("socket.congestion", "cubic"),
        ]);
        let b = map(&[
            (RMEM, "4096 87380 7561216"),
            (WMEM, "4096 16384 131072"),
            ("socket.congestion", "bbr"),
        ]);
        let order = [
            RMEM.to_string(),
            WMEM.to_string(),
            "socket.congestion".to_string(),
        ];
        let (labels, key) = short_labels(&[&a, &b], &order);
        assert_eq!(labels, ["rmem=170k cc=cubic", "rmem=7.6M cc=bbr"]);
        assert_eq!(key.factors[0].full, RMEM);
        assert_eq!(
            key.factors[0].values,
            [
                ("170k".to_string(), "4096 87380 174760".to_string()),
                ("7.6M".to_string(), "4096 87380 7561216".to_string())
            ]
        );
        assert_eq!(
            key.common,
            [(WMEM.to_string(), "4096 16384 131072".to_string())]
        );
    }

    #[test]
    fn values_get_the_digits_that_keep_them_apart() {
        let a = map(&[("buf", "7561216")]);
        let b = map(&[("buf", "7603872")]);
        let (labels, _) = short_labels(&[&a, &b], &[]);
        assert_eq!(labels, ["buf=7.56M", "buf=7.6M"]);
    }

    #[test]
    fn clashing_tails_take_one_more_part() {
        let a = map(&[
            ("sysctl.client.\"net.ipv4.tcp_rmem\"", "1"),
            ("sysctl.server.\"net.ipv4.tcp_rmem\"", "1"),
        ]);
        let b = map(&[
            ("sysctl.client.\"net.ipv4.tcp_rmem\"", "2"),
            ("sysctl.server.\"net.ipv4.tcp_rmem\"", "3"),
        ]);
        let (labels, _) = short_labels(&[&a, &b], &[]);
        assert_eq!(
            labels,
            ["client.rmem=1 server.rmem=1", "client.rmem=2 server.rmem=3"]
        );
    }

    #[test]
    fn identical_settings_still_get_distinct_labels() {
        let a = map(&[("cc", "bbr")]);
        let (labels, key) = short_labels(&[&a, &a], &[]);
        assert_eq!(labels, ["cc=bbr", "cc=bbr #2"]);
        assert!(key.factors.is_empty());
        let empty = BTreeMap::new();
        assert_eq!(short_labels(&[&empty], &[]).0, ["default"]);
    }

    #[test]
    fn si_prefixes() {
        assert_eq!(si(7_561_216.0, 2), "7.6M");
        assert_eq!(si(174_760.0, 2), "170k");
        assert_eq!(si(4096.0, 2), "4096");
        assert_eq!(si(0.5, 2), "0.5");
        assert_eq!(si(2.5e9, 3), "2.5G");
    }
}
