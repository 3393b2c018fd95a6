//! One workload against a `tcplab serve` address, whatever its kind: the single dispatch from a
//! [`WorkloadSpec`] to its client that a study's runs, a fleet agent's Run ask, a mesh and the
//! doctor's battery all call, so a kind added to the spec is run by all of them or refused by
//! the compiler.

use std::net::SocketAddr;
use tcplab_results::facts::Facts;

use tcplab_results::spec::{WorkloadKind, WorkloadSpec};

use crate::error::{LoadError, Result};
use crate::report::Report;
use crate::{crr, msgs, rr, rrul, stream};

/// The kinds a `tcplab serve` address can run: all but http, whose server is a web server.
pub const SERVED_KINDS: &[WorkloadKind] = &[
    WorkloadKind::Stream,
    WorkloadKind::Msgs,
    WorkloadKind::Rr,
    WorkloadKind::Crr,
    WorkloadKind::Rrul,
];

/// Why an http workload cannot run against a `tcplab serve` address: the web server is
/// started in the lab's server host for each run, and `tcplab serve` serves tcplab's own
/// protocol, not HTTP.
pub const HTTP_NEEDS_LAB: &str = "an http workload runs in a lab, which starts the web server in its server host for each run; a study against `tcplab serve` cannot run it (drop --to/--hosts), and a remote web server is measured with `tcplab http --to ADDR[:PORT]`";

/// Runs `spec`'s client against the `tcplab serve` at `target`, its result carrying `facts`.
/// An http spec is refused ([`HTTP_NEEDS_LAB`]), naming `--to`.
pub fn run(spec: &WorkloadSpec, target: SocketAddr, facts: Option<Facts>) -> Result<Report> {
    match spec {
        WorkloadSpec::Stream(c) => stream::run_client(c, target, facts, None).map(Report::Stream),
        WorkloadSpec::Msgs(c) => msgs::run_client(c, target, facts).map(Report::Msgs),
        WorkloadSpec::Rr(c) => rr::run_client(c, target, facts).map(Report::Rr),
        WorkloadSpec::Crr(c) => crr::run_client(c, target, facts).map(Report::Crr),
        WorkloadSpec::Rrul(c) => rrul::run_client(c, target, facts).map(Report::Rrul),
        WorkloadSpec::Http(_) => Err(LoadError::Config {
            flag: "to",
            reason: HTTP_NEEDS_LAB.into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_but_http_is_served_and_http_is_refused_naming_the_flag() {
        for kind in WorkloadKind::ALL {
            assert_eq!(
                SERVED_KINDS.contains(&kind),
                kind != WorkloadKind::Http,
                "{kind:?}"
            );
        }
        let addr: SocketAddr = "127.0.0.1:9".parse().expect("addr");
        let e = run(&WorkloadSpec::default_of(WorkloadKind::Http), addr, None)
            .expect_err("http needs a lab");
        let text = e.to_string();
        assert!(text.starts_with("invalid --to:"), "{text}");
        assert!(text.contains("tcplab http --to"), "{text}");
    }
}
