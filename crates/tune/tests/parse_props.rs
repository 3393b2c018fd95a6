//! Property tests of tune's workload names: any text parses or fails with one line naming the
//! flag and the fix.

#![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]

#[path = "../../../tests/props.rs"]
mod props;

use props::check_error;
use proptest::prelude::*;
use tcplab_tune::candidates::{TUNABLE, WorkloadKind};

proptest! {
    #![proptest_config(props::config())]

    #[test]
    fn workload_kinds(name in prop_oneof![
        prop::sample::select(vec!["msgs", "rr", "stream", "crr", "rrul", "Rr", "http", ""]).prop_map(str::to_owned),
        any::<String>(),
    ]) {
        if let Err(e) = WorkloadKind::parse_among(&name, TUNABLE) {
            check_error(&e, &[])?;
        }
    }
}
