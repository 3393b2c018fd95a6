use super::*;

fn round_trip(spec: &WorkloadSpec) -> WorkloadSpec {
    let text = serde_json::to_string(spec).expect("serialises");
    serde_json::from_str::<WorkloadSpec>(&text)
        .unwrap_or_else(|e| panic!("{text}: {e}"))
        .settled()
}

#[test]
fn every_kinds_defaults_round_trip() {
    for kind in WorkloadKind::ALL {
        let spec = WorkloadSpec::default_of(kind);
        assert_eq!(spec.kind(), kind);
        assert_eq!(round_trip(&spec), spec, "{kind}");
        spec.validate().unwrap_or_else(|e| panic!("{kind}: {e}"));
    }
}

#[test]
fn a_table_reads_units_and_names_bad_keys() {
    let spec: WorkloadSpec = serde_json::from_str(
        r#"{"kind": "stream", "flows": 4, "duration": "3s", "write_size": "64KiB",
            "read_rate": "20M", "omit": 1, "socket": {"nodelay": true}}"#,
    )
    .unwrap();
    let WorkloadSpec::Stream(c) = &spec else {
        panic!("kind")
    };
    assert_eq!(
        (
            c.flows,
            c.duration_ms,
            c.write_size,
            c.read_rate_bps,
            c.omit_ms
        ),
        (4, Some(3_000), 65_536, Some(20_000_000), 1_000)
    );
    assert!(c.opts.nodelay);
    assert_eq!(round_trip(&spec), spec);
    let e = serde_json::from_str::<WorkloadSpec>(r#"{"kind": "msgs", "flows": 2}"#).unwrap_err();
    assert!(e.to_string().contains("unknown field `flows`"), "{e}");
}

#[test]
fn an_unbounded_run_gets_the_default_duration_and_a_counted_one_none() {
    let read = |text: &str| {
        serde_json::from_str::<WorkloadSpec>(text)
            .unwrap()
            .settled()
    };
    let WorkloadSpec::Crr(c) = read(r#"{"kind": "crr"}"#) else {
        panic!("kind")
    };
    assert_eq!(c.duration_ms, CrrConfig::default().duration_ms);
    let WorkloadSpec::Crr(c) = read(r#"{"kind": "crr", "count": 500}"#) else {
        panic!("kind")
    };
    assert_eq!((c.count, c.duration_ms), (Some(500), None));
    let WorkloadSpec::Stream(c) = read(r#"{"kind": "stream", "bytes": "1GiB"}"#) else {
        panic!("kind")
    };
    assert_eq!((c.bytes, c.duration_ms), (Some(1 << 30), None));
}

#[test]
fn http_reads_its_flat_table() {
    let spec: WorkloadSpec = serde_json::from_str(
        r#"{"kind": "http", "connections": 8, "close": true, "server": "nginx", "dirs": 2}"#,
    )
    .unwrap();
    let WorkloadSpec::Http(h) = &spec else {
        panic!("kind")
    };
    assert_eq!(h.config.requests_per_connection, Some(1));
    assert_eq!(h.config.mix, Mix::Specweb96 { dirs: 2 });
    assert_eq!((h.server.kind, h.server.dirs), (ServerKind::Nginx, 2));
    assert_eq!(round_trip(&spec), spec.clone().settled());
    let e = serde_json::from_str::<WorkloadSpec>(
        r#"{"kind": "http", "close": true, "requests_per_connection": 3}"#,
    )
    .unwrap_err();
    assert!(e.to_string().contains("keep one of them"), "{e}");
}

#[test]
fn quick_runs_keep_floors() {
    let spec = WorkloadSpec::default_of(WorkloadKind::Stream);
    let WorkloadSpec::Stream(c) = spec.scaled(0.001) else {
        panic!("kind")
    };
    assert_eq!(c.duration_ms, Some(200));
    let WorkloadSpec::Rrul(c) = WorkloadSpec::default_of(WorkloadKind::Rrul).scaled(0.01) else {
        panic!("kind")
    };
    assert_eq!(c.during_ms, c.interval_ms);
    WorkloadSpec::Rrul(c).validate().unwrap();
}

#[test]
fn kinds_parse_among_what_the_caller_runs() {
    let mesh = [WorkloadKind::Msgs, WorkloadKind::Rr];
    assert_eq!(WorkloadKind::parse_among("rr", &mesh), Ok(WorkloadKind::Rr));
    let e = WorkloadKind::parse_among("http", &mesh).unwrap_err();
    assert!(e.contains("msgs, rr"), "{e}");
}

use crate::http::config::ServerKind;
use crate::http::mix::Mix;

#[test]
fn names_are_serdes_names() {
    for kind in WorkloadKind::ALL {
        let json = serde_json::to_string(&kind).unwrap();
        assert_eq!(json, format!("\"{}\"", kind.name()));
        let spec = serde_json::to_value(WorkloadSpec::default_of(kind)).unwrap();
        assert_eq!(spec["kind"], kind.name());
    }
}
