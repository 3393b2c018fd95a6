//! Where things are in a scenario file: byte offsets to `line:column`, offsets to field paths
//! (`workload[1].size`) and back, and did-you-mean suggestions.
//!
//! serde tells *what* is wrong and toml tells *where* (a byte span); this module turns both
//! into what a person needs: the line, the dotted field and the nearest valid spelling. It
//! re-parses the text with [`toml::de::DeTable`], which keeps a span for every key and value.

use std::ops::Range;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

/// One step of a field path: a table key or an array index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seg {
    /// A key of a table.
    Key(String),
    /// An index into an array (an array of tables such as `[[workload]]`).
    Index(usize),
}

/// Renders a path as people write it: `workload[1].size`, `lab.sysctl.client."net.ipv4.tcp_rmem"`.
pub fn render(path: &[Seg]) -> String {
    let mut out = String::new();
    for seg in path {
        match seg {
            Seg::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                if k.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
                {
                    out.push_str(k);
                } else {
                    out.push('"');
                    out.push_str(k);
                    out.push('"');
                }
            }
            Seg::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// 1-based line and column of a byte offset (columns count characters, not bytes).
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before.get(line_start..).map_or(0, |s| s.chars().count()) + 1;
    (line, column)
}

/// The deepest field whose key or value span contains `offset`.
///
/// Every node is visited: tables opened by a `[header]` do not have a value span covering
/// their body, so containment alone cannot guide the descent.
pub fn path_at(text: &str, offset: usize) -> Vec<Seg> {
    let Ok(doc) = DeTable::parse(text) else {
        return Vec::new();
    };
    let mut best = Vec::new();
    let mut path = Vec::new();
    visit_table(doc.get_ref(), offset, &mut path, &mut best);
    best
}

fn visit_table(table: &DeTable<'_>, offset: usize, path: &mut Vec<Seg>, best: &mut Vec<Seg>) {
    for (key, value) in table.iter() {
        path.push(Seg::Key(key.get_ref().to_string()));
        let leaf = !matches!(value.get_ref(), DeValue::Table(_) | DeValue::Array(_));
        let hit = key.span().contains(&offset) || (leaf && value.span().contains(&offset));
        if hit && path.len() > best.len() {
            *best = path.clone();
        }
        visit_value(value, offset, path, best);
        path.pop();
    }
}

fn visit_value(
    value: &Spanned<DeValue<'_>>,
    offset: usize,
    path: &mut Vec<Seg>,
    best: &mut Vec<Seg>,
) {
    match value.get_ref() {
        DeValue::Table(t) => visit_table(t, offset, path, best),
        DeValue::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                path.push(Seg::Index(i));
                let leaf = !matches!(item.get_ref(), DeValue::Table(_) | DeValue::Array(_));
                if leaf && item.span().contains(&offset) && path.len() > best.len() {
                    *best = path.clone();
                }
                visit_value(item, offset, path, best);
                path.pop();
            }
        }
        _ => {}
    }
}

/// The span of the value at `path`, or of the closest ancestor that exists (so an error about
/// a missing field points at its table).
pub fn locate(text: &str, path: &[Seg]) -> Option<Range<usize>> {
    let doc = DeTable::parse(text).ok()?;
    let mut best: Option<Range<usize>> = None;
    let mut table: Option<&DeTable<'_>> = Some(doc.get_ref());
    let mut current: Option<&Spanned<DeValue<'_>>> = None;
    for seg in path {
        let next = match (seg, table, current.map(Spanned::get_ref)) {
            (Seg::Key(k), Some(t), _) => t.get(k.as_str()),
            (Seg::Index(i), _, Some(DeValue::Array(items))) => items.get(*i),
            _ => None,
        };
        let Some(next) = next else { break };
        best = Some(next.span());
        table = match next.get_ref() {
            DeValue::Table(t) => Some(t),
            _ => None,
        };
        current = Some(next);
    }
    best
}

/// Finds the span of a key named `key` inside `within` (used when serde reports an unknown
/// field but toml's span covers the whole table that holds it).
pub fn find_key(text: &str, within: Range<usize>, key: &str) -> Option<Range<usize>> {
    let doc = DeTable::parse(text).ok()?;
    let mut found = None;
    find_key_in_table(doc.get_ref(), &within, key, &mut found);
    found
}

fn find_key_in_table(
    table: &DeTable<'_>,
    within: &Range<usize>,
    key: &str,
    found: &mut Option<Range<usize>>,
) {
    for (k, v) in table.iter() {
        let ks = k.span();
        if found.is_none() && k.get_ref() == key && ks.start >= within.start && ks.end <= within.end
        {
            *found = Some(ks);
        }
        match v.get_ref() {
            DeValue::Table(t) => find_key_in_table(t, within, key, found),
            DeValue::Array(items) => {
                for item in items.iter() {
                    if let DeValue::Table(t) = item.get_ref() {
                        find_key_in_table(t, within, key, found);
                    }
                }
            }
            _ => {}
        }
    }
}

/// The closest candidate to `word`, if it is close enough to be a plausible typo
/// (Jaro-Winkler similarity ≥ 0.8, or one edit away).
pub fn did_you_mean<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| {
            (
                c,
                strsim::jaro_winkler(word, c),
                strsim::damerau_levenshtein(word, c),
            )
        })
        .filter(|(_, sim, dist)| *sim >= 0.8 || *dist <= 1)
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(c, _, _)| c)
}

/// Parts of serde's "unknown field/variant" message: the unknown word and the expected ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unknown {
    /// `field` or `variant`.
    pub what: String,
    /// The word as written.
    pub word: String,
    /// The words serde expected.
    pub expected: Vec<String>,
}

/// Recognises serde's `unknown field `x`, expected one of `a`, `b`` (and `unknown variant`).
pub fn parse_unknown(message: &str) -> Option<Unknown> {
    let start = message.find("unknown field `").map(|i| (i, "field"));
    let start = start.or_else(|| message.find("unknown variant `").map(|i| (i, "variant")))?;
    let rest = message.get(start.0..)?;
    let mut quoted = rest.split('`').skip(1).step_by(2);
    let word = quoted.next()?.to_string();
    let expected = quoted.map(str::to_string).collect();
    Some(Unknown {
        what: start.1.to_string(),
        word,
        expected,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = "name = \"x\"\n[lab]\nmtu = 1500\n[[workload]]\nkind = \"msgs\"\n[[workload]]\nkind = \"rr\"\nreq = 10\n";

    #[test]
    fn line_col_counts_from_one() {
        assert_eq!(line_col(DOC, 0), (1, 1));
        let mtu = DOC.find("mtu").unwrap();
        assert_eq!(line_col(DOC, mtu), (3, 1));
        assert_eq!(line_col(DOC, mtu + 6), (3, 7));
    }

    #[test]
    fn path_at_and_locate_agree() {
        let req = DOC.find("10").unwrap();
        let path = path_at(DOC, req);
        assert_eq!(render(&path), "workload[1].req");
        let span = locate(DOC, &path).unwrap();
        assert_eq!(&DOC[span], "10");
    }

    #[test]
    fn did_you_mean_finds_typos_only() {
        let c = ["count", "size", "pace", "pattern"];
        assert_eq!(did_you_mean("sizee", c), Some("size"));
        assert_eq!(did_you_mean("patern", c), Some("pattern"));
        assert_eq!(did_you_mean("zzz", c), None);
    }

    #[test]
    fn parses_serde_unknown_field() {
        let u = parse_unknown("unknown field `sizee`, expected one of `count`, `size`").unwrap();
        assert_eq!(u.word, "sizee");
        assert_eq!(u.expected, vec!["count", "size"]);
    }
}
