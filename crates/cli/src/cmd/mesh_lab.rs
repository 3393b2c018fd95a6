//! `tcplab mesh` on a lab's hosts: the lab's emulator read before and after each step, its
//! verdict over the step put on the step's pairs. The lab is `--lab NAME`, or found: the
//! emulated lab whose end hosts hold every address of the hosts file.

use std::net::IpAddr;

use anyhow::Context as _;
use tcplab_fleet::mesh::outcome::WorkloadKind;
use tcplab_fleet::mesh::run::StepWatch;
use tcplab_fleet::mesh::store::EmulatorVerdict;
use tcplab_lab::emulation::{EmulatorStatus, Need, RunFidelity, judge_for, throughput_over};
use tcplab_lab::spec::LabSpec;

/// The watch for a mesh among `addresses`: `--lab NAME`'s emulator (an error if it has none),
/// else the emulated lab holding every address, else none.
pub fn watch(
    lab: Option<&str>,
    addresses: &[IpAddr],
    workload: WorkloadKind,
) -> anyhow::Result<Option<LabWatch>> {
    let state = tcplab_lab::StateDir::from_env();
    let name = match lab {
        Some(name) => {
            tcplab_lab::emulation::query_status(&state, name).with_context(|| {
                format!(
                    "--lab {name}: its emulator cannot be asked (a lab whose hosts a kernel \
                     bridge joins has none, and needs no verdict: drop --lab)"
                )
            })?;
            name.to_string()
        }
        None => {
            let specs: Vec<LabSpec> = state
                .list()
                .map(|records| records.into_iter().map(|r| r.spec).collect())
                .unwrap_or_default();
            let Some(name) = emulated_lab_of(&specs, addresses) else {
                return Ok(None);
            };
            if tcplab_lab::emulation::query_status(&state, &name).is_err() {
                return Ok(None);
            }
            eprintln!(
                "tcplab mesh: the hosts are lab {name}'s: each step is judged by its emulator"
            );
            name
        }
    };
    Ok(Some(LabWatch {
        state,
        lab: name,
        workload,
    }))
}

/// The emulated lab whose end hosts hold every one of `addresses` (pure).
pub fn emulated_lab_of(specs: &[LabSpec], addresses: &[IpAddr]) -> Option<String> {
    specs
        .iter()
        .filter(|s| s.emulation.is_some())
        .find(|s| {
            let held: Vec<IpAddr> = s
                .links
                .iter()
                .flat_map(|l| [&l.a, &l.b])
                .filter(|e| s.end_hosts().any(|n| n.name == e.host))
                .flat_map(|e| e.addrs.iter().map(|a| a.addr))
                .collect();
            !addresses.is_empty() && addresses.iter().all(|a| held.contains(a))
        })
        .map(|s| s.name.clone())
}

/// A lab's emulator, read before and after each step of the mesh.
#[derive(Debug)]
pub struct LabWatch {
    state: tcplab_lab::StateDir,
    lab: String,
    workload: WorkloadKind,
}

impl StepWatch for LabWatch {
    fn before(&self) -> Option<serde_json::Value> {
        tcplab_lab::emulation::query_status(&self.state, &self.lab)
            .ok()
            .and_then(|s| serde_json::to_value(s).ok())
    }

    fn verdict(&self, before: Option<serde_json::Value>) -> EmulatorVerdict {
        let after = tcplab_lab::emulation::query_status(&self.state, &self.lab);
        let before: Option<EmulatorStatus> = before.and_then(|b| serde_json::from_value(b).ok());
        let fidelity = match (before, after) {
            (Some(b), Ok(a)) => {
                let need = if self.workload == WorkloadKind::Stream {
                    throughput_over(&a.link)
                } else {
                    Need::Latency
                };
                judge_for(&b.counters, &a.counters, a.running, need)
            }
            (_, Err(e)) => RunFidelity {
                trustworthy: false,
                reasons: vec![format!(
                    "the emulator could not be asked after the step: {e}"
                )],
                need: None,
            },
            (None, _) => RunFidelity {
                trustworthy: false,
                reasons: vec!["the emulator could not be asked before the step".into()],
                need: None,
            },
        };
        EmulatorVerdict {
            trustworthy: fidelity.trustworthy,
            reasons: fidelity.reasons,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcplab_lab::spec::{BuiltinOptions, Topology};

    fn spec(name: &str, topology: Topology, emulated: bool) -> LabSpec {
        LabSpec::builtin(&BuiltinOptions {
            name: name.into(),
            topology,
            hosts: 2,
            link: emulated.then(tcplab_emu::LinkConfig::default),
            bridge: if emulated {
                tcplab_lab::spec::BridgeMode::Emu
            } else {
                tcplab_lab::spec::BridgeMode::Kernel
            },
            ..BuiltinOptions::default()
        })
        .unwrap()
    }

    #[test]
    fn the_emulated_lab_holding_every_address_is_found() {
        let specs = [
            spec("bare", Topology::Dumbbell, false),
            spec("emu", Topology::Dumbbell, true),
        ];
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let both = [ip("198.18.0.1"), ip("198.18.0.101")];
        assert_eq!(emulated_lab_of(&specs, &both), Some("emu".into()));
        assert_eq!(
            emulated_lab_of(&specs, &[ip("198.18.0.1"), ip("10.0.0.1")]),
            None
        );
        assert_eq!(emulated_lab_of(&specs[..1], &both), None);
        assert_eq!(emulated_lab_of(&specs, &[]), None);
    }
}
