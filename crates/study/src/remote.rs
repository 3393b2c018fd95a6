//! An [`Executor`] for a path the study does not own: every run's workloads go to a host running
//! `tcplab serve` at a fixed address. Only what can be set per socket or per workload can vary
//! there (socket options travel to the server in the test's parameters); a configuration that
//! needs a lab (sysctls, link impairments, a topology) is rejected with the reason, so a study
//! can never silently measure the remote path with settings it did not apply.

use std::net::SocketAddr;
use std::time::Instant;

use crate::executor::{run_workload, run_workloads};
use crate::plan::PlannedRun;
use crate::runner::{Executor, Fidelity, RunError, RunOutcome};
use crate::scenario::LabSection;

/// Runs every planned run against `tcplab serve` at one address.
#[derive(Debug, Clone)]
pub struct RemoteExecutor {
    target: SocketAddr,
}

impl RemoteExecutor {
    /// Runs go to `target` (the address `tcplab serve` listens on).
    pub fn new(target: SocketAddr) -> RemoteExecutor {
        crate::executor::retain_freed_memory();
        RemoteExecutor { target }
    }
}

/// Why a configuration's lab section cannot be applied to a remote path, if it cannot.
pub fn needs_lab(lab: &LabSection) -> Option<String> {
    if let Some((host, keys)) = lab.sysctl.iter().find(|(_, keys)| !keys.is_empty()) {
        let key = keys.keys().next().cloned().unwrap_or_default();
        return Some(format!(
            "sysctl {key} on host '{host}' needs a lab; against a remote host only socket options and workload parameters can vary"
        ));
    }
    if !lab.link.is_empty() {
        return Some(
            "link impairments need the emulator inside a lab; a remote path is measured as it is"
                .into(),
        );
    }
    None
}

impl Executor for RemoteExecutor {
    fn run(&mut self, run: &PlannedRun) -> Result<RunOutcome, RunError> {
        if let Some(why) = needs_lab(&run.config.settings.lab) {
            return Err(RunError::Rejected(why));
        }
        let start = Instant::now();
        let facts = serde_json::to_value(tcplab_lab::Facts::machine()).unwrap_or_default();
        let target = self.target;
        let collected = run_workloads(&run.config.settings.workloads, |w| {
            run_workload(w, target, facts.clone())
        })?;
        Ok(RunOutcome {
            metrics: collected.metrics,
            samples: collected.samples,
            facts: collected.facts,
            // No emulator on a real path: the run's own checks (complete, sample counts) stand.
            fidelity: Fidelity {
                trustworthy: true,
                reasons: Vec::new(),
            },
            wall: start.elapsed(),
            timing: crate::runner::RunTiming {
                workload_s: collected.workload_s,
                lab_s: 0.0,
                encode_s: collected.encode.as_secs_f64(),
                ..collected.harness
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lab(text: &str) -> LabSection {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn socket_only_configurations_need_no_lab() {
        assert_eq!(needs_lab(&lab("")), None);
    }

    #[test]
    fn sysctls_and_impairments_are_refused_with_the_reason() {
        let why = needs_lab(&lab("[sysctl.all]\n\"net.ipv4.tcp_rmem\" = \"4096 1 2\"\n")).unwrap();
        assert!(
            why.contains("net.ipv4.tcp_rmem") && why.contains("needs a lab"),
            "{why}"
        );
        let why = needs_lab(&lab("[link]\ndelay = \"10ms\"\n")).unwrap();
        assert!(why.contains("impairments"), "{why}");
    }
}
