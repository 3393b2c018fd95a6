//! `[[workload]]` entries: a [`WorkloadSpec`] as a scenario file writes it, one flat table of
//! `kind`, the kind's parameters and the socket options (`nodelay = true`; a `socket = {..}`
//! table is read too).
//!
//! serde cannot both flatten the socket options into each kind and reject unknown fields, so
//! [`Workload`] reads the table itself: it rejects any key that is neither a parameter of the
//! kind nor a socket option (with serde's usual message, so the did-you-mean logic sees every
//! valid name), moves the socket keys under `socket`, then lets the spec's derived code do the
//! rest, and checks the values as the workload would, naming the key.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use tcplab_results::spec::{WorkloadKind, WorkloadSpec, key_of_flag, keys, socket_keys};

/// One `[[workload]]` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    /// The workload and its parameters.
    pub spec: WorkloadSpec,
}

impl Workload {
    /// Its kind.
    pub fn kind(&self) -> WorkloadKind {
        self.spec.kind()
    }

    /// The workload as one flat TOML table (how it is written in the file).
    pub fn to_table(&self) -> Result<toml::Table, String> {
        let mut table = match toml::Value::try_from(&self.spec).map_err(|e| e.to_string())? {
            toml::Value::Table(t) => t,
            other => return Err(format!("workload serialised as {}", other.type_str())),
        };
        if let Some(toml::Value::Table(sock)) = table.remove("socket") {
            table.extend(sock);
        }
        Ok(table)
    }

    /// Reads a flat table, with the checks described in the module documentation.
    pub fn from_table(mut table: toml::Table) -> Result<Workload, String> {
        let kinds = WorkloadKind::NAMES;
        let name = match table.get("kind") {
            Some(toml::Value::String(s)) => s.clone(),
            Some(other) => {
                return Err(format!(
                    "invalid type: {}, expected one of {} for `kind`",
                    other.type_str(),
                    quoted(kinds)
                ));
            }
            None => return Err(format!("missing field `kind` ({})", kinds.join(", "))),
        };
        let Ok(kind) = WorkloadKind::parse_among(&name, &WorkloadKind::ALL) else {
            return Err(
                <toml::de::Error as serde::de::Error>::unknown_variant(&name, kinds).to_string(),
            );
        };
        let allowed = keys(kind);
        if let Some(bad) = table.keys().find(|k| !allowed.contains(&k.as_str())) {
            return Err(
                <toml::de::Error as serde::de::Error>::unknown_field(bad, allowed).to_string(),
            );
        }
        let mut sock = match table.remove("socket") {
            Some(toml::Value::Table(t)) => t,
            Some(other) => {
                return Err(format!(
                    "`socket` is a {}: write a table, e.g. socket = {{ nodelay = true }}, or the options as keys of the workload",
                    other.type_str()
                ));
            }
            None => toml::Table::new(),
        };
        for key in socket_keys() {
            if let Some(v) = table.remove(*key)
                && sock.insert((*key).to_string(), v).is_some()
            {
                return Err(format!(
                    "`{key}` is given twice, as a key of the workload and in `socket`: keep one"
                ));
            }
        }
        let written = |key: &str| table.get(key).or_else(|| sock.get(key)).cloned();
        let checked = |spec: &WorkloadSpec| {
            spec.validate().map_err(|e| {
                let key = key_of_flag(kind, e.flag);
                bad_value(kind, &key, written(&key).as_ref(), &e.reason)
            })
        };
        let mut whole = table.clone();
        whole.insert("socket".into(), toml::Value::Table(sock.clone()));
        let spec: WorkloadSpec = toml::Value::Table(whole)
            .try_into()
            .map_err(|e: toml::de::Error| e.message().to_string())?;
        let spec = spec.settled();
        checked(&spec)?;
        Ok(Workload { spec })
    }

    /// The value checks [`Self::from_table`] gives a written table, for a workload built as a
    /// value (tune's): each value as the workload would check it, naming the key.
    pub fn check(&self) -> Result<(), String> {
        self.spec.validate().map_err(|e| {
            let kind = self.kind();
            let key = key_of_flag(kind, e.flag);
            let written = self.to_table().ok().and_then(|t| t.get(&key).cloned());
            bad_value(kind, &key, written.as_ref(), &e.reason)
        })
    }

    /// A rough duration of one run of this workload, for `--dry-run` estimates.
    pub fn estimated_secs(&self) -> f64 {
        self.spec.estimated_secs()
    }

    /// The same workload at a reduced size (`--quick`).
    pub fn scaled(&self, factor: f64) -> Workload {
        Workload {
            spec: self.spec.scaled(factor),
        }
    }
}

/// The message of a value the workload refuses: the key, the value as written, why, and the
/// kind's default as the example to write.
fn bad_value(kind: WorkloadKind, key: &str, value: Option<&toml::Value>, reason: &str) -> String {
    let given = value.map_or_else(String::new, |v| format!(" = {v}"));
    let default = Workload {
        spec: WorkloadSpec::default_of(kind),
    }
    .to_table()
    .ok()
    .and_then(|t| t.get(key).cloned());
    let fix = match default {
        Some(v) => format!("; write e.g. {key} = {v} (the default)"),
        None => String::new(),
    };
    format!("`{key}`{given}: {reason}{fix}")
}

fn quoted(names: &[&str]) -> String {
    let q: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
    q.join(", ")
}

impl Serialize for Workload {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_table()
            .map_err(serde::ser::Error::custom)?
            .serialize(s)
    }
}

impl<'de> Deserialize<'de> for Workload {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let table = toml::Table::deserialize(d)?;
        Workload::from_table(table).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests fail loudly on unexpected errors")]
mod keys_doc;

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Workload, String> {
        Workload::from_table(toml::from_str(text).map_err(|e: toml::de::Error| e.to_string())?)
    }

    #[test]
    fn flat_socket_options_are_accepted() {
        let w = parse("kind = 'msgs'\ncount = 10\nnodelay = true\n").unwrap();
        assert!(w.spec.socket().nodelay);
        let WorkloadSpec::Msgs(p) = &w.spec else {
            panic!("kind")
        };
        assert_eq!((p.count, p.size), (10, 1));
        let back = Workload::from_table(w.to_table().unwrap()).unwrap();
        assert_eq!(back, w);
        let nested = parse("kind = 'msgs'\ncount = 10\nsocket = { nodelay = true }\n").unwrap();
        assert_eq!(nested, w);
        let e = parse("kind = 'msgs'\nnodelay = true\nsocket = { nodelay = false }\n").unwrap_err();
        assert!(e.contains("given twice"), "{e}");
    }

    #[test]
    fn unknown_key_lists_parameters_and_socket_options() {
        let e = parse("kind = 'msgs'\nsizee = 3\n").unwrap_err();
        assert!(e.contains("unknown field `sizee`"), "{e}");
        assert!(e.contains("`size`") && e.contains("`nodelay`"), "{e}");
        let e = parse("kind = 'rrull'\n").unwrap_err();
        assert!(e.contains("`rrul`"), "{e}");
    }

    #[test]
    fn values_are_checked_when_read_naming_the_key() {
        let e = parse("kind = 'stream'\nflows = 0\n").unwrap_err();
        assert!(e.starts_with("`flows`"), "{e}");
        let e = parse("kind = 'stream'\nwrite_size = 0\n").unwrap_err();
        assert!(e.starts_with("`write_size`"), "{e}");
        let e = parse("kind = 'stream'\ninterval = '1ms'\n").unwrap_err();
        assert!(e.starts_with("`interval`"), "{e}");
        let e = parse("kind = 'msgs'\ninterval = '100ms'\n").unwrap_err();
        assert!(e.contains("unknown field `interval`"), "stream only: {e}");
    }

    #[test]
    fn an_unset_interval_leaves_the_table_as_it_was() {
        let w = parse("kind = 'stream'\nduration = '3s'\ninterval = '50ms'\n").unwrap();
        assert_eq!(w.to_table().unwrap()["interval"].as_str(), Some("50ms"));
        assert_eq!(Workload::from_table(w.to_table().unwrap()).unwrap(), w);
    }

    #[test]
    fn rrul_is_a_kind() {
        let w = parse("kind = 'rrul'\nflows = 2\nduring = '4s'\ncongestion = 'reno'\n").unwrap();
        let WorkloadSpec::Rrul(c) = &w.spec else {
            panic!("kind")
        };
        assert_eq!((c.flows, c.during_ms), (2, 4_000));
        assert_eq!(c.opts.congestion.as_deref(), Some("reno"));
    }
}
