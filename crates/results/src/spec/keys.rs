//! The keys a `[[workload]]` table takes, read off the configuration types themselves (the
//! names serde matches), so that a parameter added to a configuration is a scenario key, a
//! factor and a line of docs/scenarios.md without being listed again anywhere.

use std::sync::OnceLock;

use serde::de::{self, DeserializeOwned, Deserializer, Visitor};

use super::WorkloadKind;
use super::http::HttpForm;
use crate::crr::CrrConfig;
use crate::msgs::MsgsConfig;
use crate::rr::RrConfig;
use crate::rrul::RrulConfig;
use crate::sockopt::SockOpts;
use crate::stream::StreamConfig;

/// The socket options' keys, which every workload table takes flat (`nodelay = true`) or
/// under `socket`.
pub fn socket_keys() -> &'static [&'static str] {
    fields_of::<SockOpts>()
}

/// Every key a workload of `kind` takes: `kind`, its parameters, `socket` and the socket
/// options' keys.
pub fn keys(kind: WorkloadKind) -> &'static [&'static str] {
    static KEYS: OnceLock<Vec<Vec<&'static str>>> = OnceLock::new();
    let all = KEYS.get_or_init(|| WorkloadKind::ALL.iter().map(|&k| keys_of(k)).collect());
    let i = WorkloadKind::ALL
        .iter()
        .position(|&k| k == kind)
        .unwrap_or(0);
    &all[i]
}

fn keys_of(kind: WorkloadKind) -> Vec<&'static str> {
    let params = match kind {
        WorkloadKind::Stream => fields_of::<StreamConfig>(),
        WorkloadKind::Msgs => fields_of::<MsgsConfig>(),
        WorkloadKind::Rr => fields_of::<RrConfig>(),
        WorkloadKind::Crr => fields_of::<CrrConfig>(),
        WorkloadKind::Rrul => fields_of::<RrulConfig>(),
        WorkloadKind::Http => fields_of::<HttpForm>(),
    };
    let mut keys = vec!["kind"];
    keys.extend(params);
    keys.extend(socket_keys());
    keys
}

/// The key of `kind`'s table that a [`crate::ConfigError`]'s flag names: the flag with `_`
/// for `-`, where the two differ the key (`--gap-us` is `pace`, `--cc` is `congestion`,
/// `--url` is `urls`).
pub fn key_of_flag(kind: WorkloadKind, flag: &str) -> String {
    const RENAMED: &[(&str, &str)] = &[
        ("gap_us", "pace"),
        ("cc", "congestion"),
        ("url", "urls"),
        ("dir", "direction"),
    ];
    let key = flag.replace('-', "_");
    if keys(kind).contains(&key.as_str()) {
        return key;
    }
    RENAMED
        .iter()
        .find(|(f, _)| *f == key)
        .map_or(key, |(_, k)| (*k).to_string())
}

/// The field names serde matches for struct `T` (what its derived `Deserialize` hands to
/// `deserialize_struct`).
pub(crate) fn fields_of<T: DeserializeOwned>() -> &'static [&'static str] {
    let mut fields = None;
    let _ = T::deserialize(FieldGrabber(&mut fields));
    fields.unwrap_or(&[])
}

/// A deserializer that only records the fields of the struct asked of it.
struct FieldGrabber<'a>(&'a mut Option<&'static [&'static str]>);

impl<'de> Deserializer<'de> for FieldGrabber<'_> {
    type Error = de::value::Error;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
        Err(de::Error::custom("not a struct"))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, Self::Error> {
        *self.0 = Some(fields);
        Err(de::Error::custom("fields read"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_keys_are_the_socket_options_fields() {
        assert!(socket_keys().contains(&"nodelay") && socket_keys().contains(&"rto_min_us"));
        assert_eq!(socket_keys().len(), 9);
    }

    #[test]
    fn every_kind_has_its_parameters_and_the_socket_options() {
        let _ = SockOpts::default();
        let stream = keys(WorkloadKind::Stream);
        for k in [
            "kind",
            "flows",
            "duration",
            "omit",
            "write_size",
            "read_rate",
            "nodelay",
        ] {
            assert!(stream.contains(&k), "{k} in {stream:?}");
        }
        assert!(keys(WorkloadKind::Rrul).contains(&"during"));
        assert!(keys(WorkloadKind::Http).contains(&"dirs"));
        assert!(!keys(WorkloadKind::Msgs).contains(&"flows"));
    }

    #[test]
    fn flags_name_their_keys() {
        assert_eq!(
            key_of_flag(WorkloadKind::Stream, "write-size"),
            "write_size"
        );
        assert_eq!(key_of_flag(WorkloadKind::Msgs, "gap-us"), "pace");
        assert_eq!(key_of_flag(WorkloadKind::Rr, "cc"), "congestion");
        assert!(keys(WorkloadKind::Msgs).contains(&"pace"));
    }
}
