//! Damage to a stored JSON document, shared by the property tests of crates that keep JSON
//! (fleet's mesh results, tune's corpus records): every place in it named as a JSON pointer,
//! and one place replaced by another value or removed. Included with `#[path]` beside
//! `tests/props.rs` by crates that have serde_json (that file is included by some that do not).
#![allow(dead_code)]

use proptest::prelude::*;
use serde_json::Value;

/// JSON pointers of every value in `v`, `at` first (the whole document is `""`).
pub fn pointers(v: &Value, at: String, out: &mut Vec<String>) {
    out.push(at.clone());
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                pointers(
                    x,
                    format!("{at}/{}", k.replace('~', "~0").replace('/', "~1")),
                    out,
                );
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                pointers(x, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

/// `v` with the value at one of its places (`at` picks it) removed when `remove` and it is an
/// object's member, else replaced by `value`.
pub fn damage(v: &mut Value, at: prop::sample::Index, remove: bool, value: Value) {
    let mut all = Vec::new();
    pointers(v, String::new(), &mut all);
    let p = &all[at.index(all.len())];
    match p.rsplit_once('/') {
        Some((parent, key)) if remove => {
            if let Some(Value::Object(m)) = v.pointer_mut(parent) {
                m.remove(&key.replace("~1", "/").replace("~0", "~"));
            }
        }
        _ => {
            if let Some(slot) = v.pointer_mut(p) {
                *slot = value;
            }
        }
    }
}

/// A value of any JSON shape: numbers at their extremes, short text, and `domain` (values that
/// mean something to the document at hand, so a wrong place for a right word is tried too).
pub fn json_value(domain: Vec<Value>) -> impl Strategy<Value = Value> {
    let mut picks = vec![
        Value::Null,
        Value::Bool(true),
        serde_json::json!([]),
        serde_json::json!({}),
        serde_json::json!(0),
        serde_json::json!(1e308),
        serde_json::json!(-1e308),
        serde_json::json!([1, "a", null]),
    ];
    picks.extend(domain);
    prop_oneof![
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        ".{0,20}".prop_map(Value::from),
        prop::sample::select(picks),
    ]
}
