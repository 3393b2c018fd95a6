//! `tcplab http` in a lab (root): SPECweb96's mix against the built-in server and against
//! nginx (Debian's, installed by .ci/run), keep-alive and a connection per request, every body
//! checked byte for byte. With a connection per request the server closes first, so the
//! TIME_WAIT sockets are the server's, as in seed 003. The lab is process-owned: dropping it
//! (also on a failed assert) removes its namespaces and anything it started.

use tcplab_front::http::{LabServer, ServerKind, run_in_lab};
use tcplab_lab::{BuiltinOptions, Lab, LabSpec, Ownership, StateDir, Topology};
use tcplab_load::http::config::HttpConfig;
use tcplab_load::http::mix::Mix;
use tcplab_load::http::result::HttpResult;
use tcplab_load::report::Report;

fn pair(state: &tempfile::TempDir, tag: &str) -> Lab {
    assert!(
        tcplab_lab::require_root("lab tests").is_ok(),
        "the lab tests need root (namespaces, veth): run `sudo cargo test`"
    );
    let spec = LabSpec::builtin(&BuiltinOptions {
        name: format!("ht{tag}{}", std::process::id() % 100_000),
        topology: Topology::Pair,
        ..BuiltinOptions::default()
    })
    .expect("valid spec");
    Lab::build_in(StateDir::at(state.path()), spec, Ownership::Process).expect("lab builds")
}

fn run(lab: &Lab, kind: ServerKind, per_request: bool) -> HttpResult {
    let cfg = HttpConfig {
        connections: 8,
        requests_per_connection: per_request.then_some(1),
        count: Some(if per_request { 600 } else { 3_000 }),
        duration_ms: Some(30_000),
        mix: Mix::Specweb96 { dirs: 2 },
        check_content: true,
        ..HttpConfig::default()
    };
    let server = LabServer {
        kind,
        dirs: 2,
        workers: Some(2),
    };
    match run_in_lab(lab, "client", "server", &server, &cfg, 1000, None) {
        Ok(Report::Http(r)) => r,
        Ok(other) => panic!("not an http report: {other:?}"),
        Err(e) => panic!("{kind:?}: {e}"),
    }
}

fn check(r: &HttpResult, kind: &str, per_request: bool) {
    let what = format!("{kind}, per request {per_request}");
    assert!(r.meta.complete, "{what}: {:?}", r.meta.incomplete_reason);
    assert_eq!(r.server, kind);
    assert_eq!(r.summary.errors, 0, "{what}: {:?}", r.error_examples);
    let want = if per_request { 600 } else { 3_000 };
    assert_eq!(r.summary.requests, want, "{what}");
    assert_eq!(r.statuses.get(&200), Some(&want), "{what}");
    // SPECweb96's classes 0-2 at 35/50/14 %: each well represented in a few thousand draws.
    for class in 0..3 {
        assert!(
            r.classes.iter().any(|c| c.class == class && c.requests > 0),
            "{what}: class {class} missing"
        );
    }
    if per_request {
        assert_eq!(r.connections_opened, want, "{what}");
        let server_tw = r.server_time_wait.as_ref().map_or(0, |t| t.max);
        assert!(
            server_tw > r.time_wait.max,
            "{what}: the server closes first and keeps TIME_WAIT: server {server_tw}, client {}",
            r.time_wait.max
        );
    } else {
        assert_eq!(r.connections_opened, 8, "{what}");
    }
}

#[test]
fn the_built_in_server_serves_specweb96_kept_alive_and_per_request() {
    let state = tempfile::tempdir().expect("state dir");
    let lab = pair(&state, "b");
    for per_request in [false, true] {
        check(
            &run(&lab, ServerKind::Builtin, per_request),
            "builtin",
            per_request,
        );
    }
}

#[test]
fn nginx_serves_the_same_set_kept_alive_and_per_request() {
    let state = tempfile::tempdir().expect("state dir");
    let lab = pair(&state, "n");
    for per_request in [false, true] {
        check(
            &run(&lab, ServerKind::Nginx, per_request),
            "nginx",
            per_request,
        );
    }
    // Nothing of nginx outlives its run: the lab has no companion left.
    let record = StateDir::at(state.path())
        .read(lab.name())
        .expect("registry");
    assert!(
        record.is_none_or(|r| r.companions.is_empty()),
        "nginx still registered"
    );
}
