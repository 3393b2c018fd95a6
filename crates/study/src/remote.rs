//! An [`Executor`] for a path the study does not own: every run's workloads go to a host running
//! `tcplab serve` at a fixed address. What can be set per socket or per workload can vary there
//! (socket options travel to the server in the test's parameters). Sysctls of the server's host
//! (`[lab.sysctl.server]` and `[lab.sysctl.all]`) can vary only when the study was given
//! `--allow-host-sysctl` and the agent `--allow-sysctl`: each run holds them on the agent
//! (journaled there, restored after the run, and by the agent itself when the lease runs out
//! because this process vanished). Anything else a lab would apply (client sysctls, link
//! impairments, a topology) is rejected with the reason, so a study can never silently measure
//! the remote path with settings it did not apply; so is an http workload, whose web server a
//! lab starts ([`needs_lab_for`]).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tcplab_agent::remote::SysctlHold;
use tcplab_auth::ClientAuth;

use crate::executor::run_workloads;
use crate::plan::PlannedRun;
use crate::runner::{Executor, Fidelity, RunError, RunOutcome};
use crate::scenario::LabSection;
use tcplab_load::client::HTTP_NEEDS_LAB;
use tcplab_results::spec::WorkloadKind;

use crate::workload::Workload;

/// Runs every planned run against `tcplab serve` at one address.
#[derive(Debug, Clone)]
pub struct RemoteExecutor {
    target: SocketAddr,
    /// With `--allow-host-sysctl`: the credentials sysctl holds are taken with.
    sysctl_auth: Option<ClientAuth>,
}

/// How long the agent keeps a run's sysctls without hearing from this process: long enough
/// for a stalled coordinator, short enough that a vanished one leaves the host as it was soon.
pub const SYSCTL_LEASE: Duration = Duration::from_secs(10);

impl RemoteExecutor {
    /// Runs go to `target` (the address `tcplab serve` listens on).
    pub fn new(target: SocketAddr) -> RemoteExecutor {
        crate::executor::retain_freed_memory();
        RemoteExecutor {
            target,
            sysctl_auth: None,
        }
    }

    /// Lets runs change the server host's sysctls, held on its agent with `auth` for the run.
    pub fn with_host_sysctls(mut self, auth: ClientAuth) -> RemoteExecutor {
        self.sysctl_auth = Some(auth);
        self
    }
}

/// The sysctls a run sets on the server's host (`server` and `all` tables), as text.
pub fn server_sysctls(lab: &LabSection) -> Vec<(String, String)> {
    let mut out: std::collections::BTreeMap<String, String> = Default::default();
    for host in ["all", "server"] {
        for (key, value) in lab.sysctl.get(host).into_iter().flatten() {
            let text = match value {
                toml::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            out.insert(key.clone(), text);
        }
    }
    out.into_iter().collect()
}

/// Why a configuration's lab section cannot be applied to a remote path, if it cannot;
/// `host_sysctl`: the server host's sysctls can be held on its agent.
pub fn needs_lab(lab: &LabSection, host_sysctl: bool) -> Option<String> {
    for (host, keys) in lab.sysctl.iter().filter(|(_, keys)| !keys.is_empty()) {
        let key = keys.keys().next().cloned().unwrap_or_default();
        if host == "client" {
            return Some(format!(
                "sysctl {key} on host 'client' needs a lab: a study against a remote host changes only the server host's sysctls ([lab.sysctl.server] or [lab.sysctl.all]), never the coordinator's own"
            ));
        }
        if !host_sysctl {
            return Some(format!(
                "sysctl {key} on host '{host}' needs a lab, or --hosts FILE with --allow-host-sysctl to hold it on the remote agent for each run"
            ));
        }
        if host != "server" && host != "all" {
            return Some(format!(
                "sysctl {key} on host '{host}': against a remote host only [lab.sysctl.server] and [lab.sysctl.all] apply"
            ));
        }
    }
    if !lab.link.is_empty() {
        return Some(
            "link impairments need the emulator inside a lab; a remote path is measured as it is"
                .into(),
        );
    }
    None
}

/// Why a configuration's workloads cannot run against a remote `tcplab serve`, if they cannot:
/// an http workload starts its web server in a lab's server host.
pub fn needs_lab_for(workloads: &[Workload]) -> Option<String> {
    workloads.iter().enumerate().find_map(|(i, w)| {
        (w.kind() == WorkloadKind::Http).then(|| format!("workload {i} (http): {HTTP_NEEDS_LAB}"))
    })
}

impl Executor for RemoteExecutor {
    fn run(&mut self, run: &PlannedRun) -> Result<RunOutcome, RunError> {
        if let Some(why) = needs_lab(&run.config.settings.lab, self.sysctl_auth.is_some())
            .or_else(|| needs_lab_for(&run.config.settings.workloads))
        {
            return Err(RunError::Rejected(why));
        }
        let start = Instant::now();
        let set = server_sysctls(&run.config.settings.lab);
        // Held for the run, released (restored) when it drops, whatever the run's outcome.
        let _hold = match (&self.sysctl_auth, set.is_empty()) {
            (Some(auth), false) => Some(
                SysctlHold::acquire(self.target, auth, set, SYSCTL_LEASE).map_err(|e| {
                    RunError::Rejected(format!("holding the server host's sysctls: {e}"))
                })?,
            ),
            _ => None,
        };
        let facts = Some(tcplab_lab::facts::machine());
        let target = self.target;
        let collected = run_workloads(&run.config.settings.workloads, |w| {
            tcplab_load::client::run(&w.spec, target, facts.clone())
        })?;
        Ok(RunOutcome {
            metrics: collected.metrics,
            samples: collected.samples,
            facts: crate::executor::record(&collected.facts.unwrap_or_default())?,
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
        assert_eq!(needs_lab(&lab(""), false), None);
    }

    #[test]
    fn sysctls_and_impairments_are_refused_with_the_reason() {
        let all = lab("[sysctl.all]\n\"net.ipv4.tcp_rmem\" = \"4096 1 2\"\n");
        let why = needs_lab(&all, false).unwrap();
        assert!(
            why.contains("net.ipv4.tcp_rmem") && why.contains("--allow-host-sysctl"),
            "{why}"
        );
        assert_eq!(needs_lab(&all, true), None);
        let client = lab("[sysctl.client]\n\"net.ipv4.tcp_tw_reuse\" = 2\n");
        let why = needs_lab(&client, true).unwrap();
        assert!(why.contains("coordinator"), "{why}");
        let why = needs_lab(&lab("[link]\ndelay = \"10ms\"\n"), true).unwrap();
        assert!(why.contains("impairments"), "{why}");
    }

    #[test]
    fn an_http_workload_is_refused_with_the_command_that_measures_a_remote_web_server() {
        let w = |text: &str| Workload::from_table(toml::from_str(text).unwrap()).unwrap();
        assert_eq!(needs_lab_for(&[w("kind = 'crr'\n")]), None);
        let why = needs_lab_for(&[w("kind = 'rr'\n"), w("kind = 'http'\n")]).unwrap();
        assert!(
            why.starts_with("workload 1 (http): ") && why.contains("tcplab http --to"),
            "{why}"
        );
    }

    #[test]
    fn the_server_host_gets_the_all_and_server_tables_server_last() {
        let l = lab(
            "[sysctl.all]\n\"net.core.somaxconn\" = 1024\n\"net.ipv4.tcp_rmem\" = \"1 2 3\"\n\
             [sysctl.server]\n\"net.ipv4.tcp_rmem\" = \"4 5 6\"\n",
        );
        assert_eq!(
            server_sysctls(&l),
            vec![
                ("net.core.somaxconn".to_string(), "1024".to_string()),
                ("net.ipv4.tcp_rmem".to_string(), "4 5 6".to_string()),
            ]
        );
    }
}
