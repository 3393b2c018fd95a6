//! What a result records about where it ran ([`RunFacts`], a result's `facts` object): the
//! machine and the lab's hosts, the emulator the run crossed, the workload threads' scheduling.
//! Typed end to end, so a reader never digs keys out of JSON, and read strictly: a `facts`
//! object that is there but does not parse is an error naming the field, never an empty one.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::emulator::{RunAccount, RunFidelity};
use crate::facts::Facts;

/// A result's `facts`. Its JSON keeps the shape results have always had: [`Facts`]' fields at
/// the top of the object (none when the run collected none, as a run `--to` a remote server),
/// beside `emulator` and `sched` when they apply.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "Map<String, Value>")]
pub struct RunFacts {
    /// The machine, its kernel and the lab's hosts; None when the run did not collect them.
    #[serde(flatten)]
    pub machine: Option<Facts>,
    /// The emulator the run crossed; None when it crossed none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub emulator: Option<EmulatorRecord>,
    /// How the workload threads were scheduled, when asked (`--rt-priority`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sched: Option<Sched>,
}

impl RunFacts {
    /// The facts of a run that collected `machine` (and crossed nothing yet).
    pub fn of(machine: Option<Facts>) -> Self {
        Self {
            machine,
            ..Self::default()
        }
    }
}

/// Reads `facts`: `emulator` and `sched` by their types, the rest as [`Facts`] unless it is
/// empty; each error names what did not parse.
impl TryFrom<Map<String, Value>> for RunFacts {
    type Error = String;

    fn try_from(mut map: Map<String, Value>) -> Result<Self, String> {
        fn part<T: serde::de::DeserializeOwned>(
            map: &mut Map<String, Value>,
            key: &str,
        ) -> Result<Option<T>, String> {
            match map.remove(key) {
                None | Some(Value::Null) => Ok(None),
                Some(v) => serde_json::from_value(v)
                    .map(Some)
                    .map_err(|e| format!("facts.{key}: {e}")),
            }
        }
        let emulator = part(&mut map, "emulator")?;
        let sched = part(&mut map, "sched")?;
        let machine = if map.is_empty() {
            None
        } else {
            Some(
                serde_json::from_value(Value::Object(map))
                    .map_err(|e| format!("facts (the machine's): {e}"))?,
            )
        };
        Ok(Self {
            machine,
            emulator,
            sched,
        })
    }
}

/// The emulator a run crossed: what replays its impairments, and whether its figures can be
/// trusted as the emulated network's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EmulatorRecord {
    /// Seed of every random stream of the link.
    pub seed: u64,
    /// The impairments in force.
    pub link: tcplab_emu::LinkConfig,
    /// Whether it kept its schedule as the run's figures need (a study run of several
    /// workloads: trustworthy when each one is).
    pub fidelity: RunFidelity,
    /// What the link model really gave the run's packets; None when its account could not be
    /// read, or over a run of several workloads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub realised: Option<RunAccount>,
    /// A run of several workloads (a study's): each one's own verdict, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub workloads: Vec<RunFidelity>,
}

/// How the workload threads were scheduled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sched {
    /// The policy; `fifo` is the only one tcplab sets.
    pub policy: SchedPolicy,
    /// Its real-time priority (1-99).
    pub priority: u8,
}

/// A scheduling policy tcplab runs workload threads at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SchedPolicy {
    /// SCHED_FIFO.
    Fifo,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::{CongestionControl, Cpu, Hz};

    fn machine() -> Facts {
        Facts {
            tcplab_version: "0.1.0".into(),
            kernel_release: "6.18.0".into(),
            kernel_version: "#1".into(),
            machine: "x86_64".into(),
            hz: Hz {
                hz: 250,
                tick_ns: 4_000_000,
                method: "test".into(),
                configured: None,
            },
            cpu: Cpu {
                count: 2,
                model: "test".into(),
            },
            congestion_control: CongestionControl {
                available: vec!["bbr".into()],
                default: "bbr".into(),
            },
            machine_sysctls: Default::default(),
            scheduling: Default::default(),
            hosts: Default::default(),
            rootless: Default::default(),
            emulator_override: None,
        }
    }

    #[test]
    fn the_shape_is_facts_at_the_top_beside_emulator_and_sched() {
        let f = RunFacts {
            machine: Some(machine()),
            emulator: None,
            sched: Some(Sched {
                policy: SchedPolicy::Fifo,
                priority: 20,
            }),
        };
        let json = serde_json::to_value(&f).expect("json");
        assert_eq!(json["kernel_release"], "6.18.0");
        assert_eq!(json["sched"]["policy"], "fifo");
        assert!(json.get("emulator").is_none());
        let back: RunFacts = serde_json::from_value(json).expect("read back");
        assert_eq!(back, f);
        let none: RunFacts = serde_json::from_str("{}").expect("empty");
        assert_eq!(none, RunFacts::default());
        assert_eq!(serde_json::to_string(&none).expect("json"), "{}");
    }

    #[test]
    fn facts_that_do_not_parse_are_an_error_naming_them() {
        let e = serde_json::from_str::<RunFacts>(r#"{"kernel_release": 5}"#).unwrap_err();
        assert!(e.to_string().contains("facts (the machine's)"), "{e}");
        let e = serde_json::from_str::<RunFacts>(r#"{"sched": {"policy": "rr"}}"#).unwrap_err();
        assert!(e.to_string().contains("facts.sched"), "{e}");
    }
}
