//! Lab descriptions in TOML: a built-in topology with its options, or a custom list of hosts,
//! links and bridges. Unknown fields are rejected so typos do not silently build the wrong lab.
//!
//! ```toml
//! name = "wan"
//! topology = "path"            # pair | path | dumbbell | star | custom
//! hosts = 4                    # dumbbell: clients (and servers); star: hosts
//! mtu = 1500
//! [offloads]                   # all off unless set
//! gro = true
//! [sysctl.all]
//! "net.ipv4.tcp_congestion_control" = "cubic"
//! [sysctl.client]
//! "net.ipv4.tcp_rmem" = "4096 131072 8738000"
//!
//! # path and dumbbell: the middle link (the emulator runs when it impairs, or bridge = "emu")
//! [emulator]
//! bridge = "auto"              # auto | kernel | emu, as --bridge
//! [emulator.link]              # impairments, as the flags write them
//! delay = "20ms"
//! rate = "100mbit"
//! [emulator.tuning]            # the emulator's scheduling knobs (docs/lab.md), rarely needed
//! due_batch = 16
//!
//! # topology = "custom" only:
//! [[host]]
//! name = "a"
//! [[host]]
//! name = "r"
//! role = "middle"
//! [[link]]
//! a = { host = "a", ifname = "eth0", addrs = ["198.18.0.1/24", "fd00::1/64"] }
//! b = { host = "r", ifname = "a" }
//! [[bridge]]
//! host = "r"
//! name = "br0"
//! ports = ["a", "b"]
//! ```

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use crate::LabSpec;
use crate::error::{LabError, Result};
use tcplab_emu::ImpairmentFlags;
use tcplab_emu_io::Tuning;

use crate::spec::{
    BridgeMode, BridgeSpec, BuiltinOptions, DEFAULT_MTU, LinkSpec, NodeSpec, Offloads, Role,
    SysctlSetting, Topology,
};

/// The TOML document as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LabFile {
    name: Option<String>,
    topology: Topology,
    hosts: Option<usize>,
    mtu: Option<u32>,
    #[serde(default)]
    offloads: Offloads,
    #[serde(default)]
    allow_host_sysctl: bool,
    #[serde(default)]
    emulator: EmulatorTable,
    #[serde(default)]
    sysctl: BTreeMap<String, BTreeMap<String, toml::Value>>,
    #[serde(default)]
    host: Vec<CustomHost>,
    #[serde(default)]
    link: Vec<LinkSpec>,
    #[serde(default)]
    bridge: Vec<BridgeSpec>,
}

/// `[emulator]`: the middle link's impairments and the emulator's scheduling knobs.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct EmulatorTable {
    /// What forwards in the middle, as `--bridge` says it.
    #[serde(default)]
    bridge: BridgeMode,
    #[serde(default)]
    link: ImpairmentFlags,
    #[serde(default)]
    tuning: Tuning,
}

impl EmulatorTable {
    fn is_default(&self) -> bool {
        self.bridge == BridgeMode::Auto && self.link.is_empty() && self.tuning == Tuning::default()
    }

    /// The link the impairments describe, if any; a value the flag would refuse is refused here
    /// under its key (a lab file reads no trace files: its impairments are written inline).
    fn link(&self) -> Result<Option<tcplab_emu::LinkConfig>> {
        if self.link.is_empty() {
            return Ok(None);
        }
        let no_files = |path: &str| {
            Err(format!(
                "a lab file's [emulator.link] reads no files (`{path}`): write jitter_dist as \
                 uniform, normal, pareto or paretonormal, and a loss pattern inline as bits:0001"
            ))
        };
        if let Err((key, e)) = self.link.check_each(&no_files) {
            return Err(LabError::invalid(
                format!("emulator.link.{key}"),
                e.to_string(),
            ));
        }
        self.link
            .to_link_config_with(&no_files)
            .map(Some)
            .map_err(|e| LabError::invalid("emulator.link", e.to_string()))
    }
}

/// A host of a custom topology.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CustomHost {
    name: String,
    #[serde(default = "default_role")]
    role: Role,
}

fn default_role() -> Role {
    Role::Host
}

/// Reads and validates a lab description. `name_override` (the `--name` flag) wins over the file.
pub fn load(path: &Path, name_override: Option<&str>) -> Result<LabSpec> {
    let text = std::fs::read_to_string(path).map_err(|e| LabError::File {
        path: path.into(),
        message: if e.kind() == std::io::ErrorKind::InvalidData {
            "not text (not UTF-8): give --file a lab description in TOML".to_owned()
        } else {
            format!("cannot read: {e}; check the path given to --file")
        },
    })?;
    parse(&text, name_override).map_err(|e| match e {
        LabError::File { message, .. } => LabError::File {
            path: path.into(),
            message,
        },
        LabError::Invalid { field, problem } => LabError::File {
            path: path.into(),
            message: format!("{field}: {problem}"),
        },
        other => other,
    })
}

/// Parses a lab description from text (see the module docs for the format).
pub fn parse(text: &str, name_override: Option<&str>) -> Result<LabSpec> {
    let file: LabFile = toml::from_str(text).map_err(|e| LabError::File {
        path: "<lab description>".into(),
        message: toml_message(text, &e),
    })?;
    let name = name_override
        .map(str::to_string)
        .or(file.name.clone())
        .unwrap_or_else(|| "lab".to_string());
    let sysctls = sysctls_of(&file.sysctl)?;
    let mtu = file.mtu.unwrap_or(DEFAULT_MTU);
    if file.topology != Topology::Custom {
        if !file.host.is_empty() || !file.link.is_empty() || !file.bridge.is_empty() {
            return Err(LabError::invalid(
                "host/link/bridge",
                format!(
                    "[[host]], [[link]] and [[bridge]] need topology = \"custom\" (this file says \"{}\"): set it, or remove them",
                    file.topology
                ),
            ));
        }
        return LabSpec::builtin(&BuiltinOptions {
            name,
            topology: file.topology,
            hosts: file.hosts.unwrap_or(2),
            mtu,
            offloads: file.offloads,
            sysctls,
            allow_host_sysctl: file.allow_host_sysctl,
            bridge: file.emulator.bridge,
            link: file.emulator.link()?,
            tuning: file.emulator.tuning,
            ..BuiltinOptions::default()
        });
    }
    if !file.emulator.is_default() {
        return Err(LabError::invalid(
            "emulator",
            "a custom topology's middle is its own [[bridge]]: [emulator] needs a built-in \
             path or dumbbell topology",
        ));
    }
    if file.host.is_empty() {
        return Err(LabError::invalid(
            "host",
            "a custom topology needs at least one [[host]]",
        ));
    }
    let spec = LabSpec {
        name,
        topology: Topology::Custom,
        nodes: file
            .host
            .into_iter()
            .map(|h| NodeSpec {
                name: h.name,
                role: h.role,
            })
            .collect(),
        links: file.link,
        bridges: file.bridge,
        mtu,
        end_mtu: None,
        offloads: file.offloads,
        sysctls,
        allow_host_sysctl: file.allow_host_sysctl,
        emulation: None,
    };
    spec.validate()?;
    Ok(spec)
}

/// A TOML error on one line: where (line and column), toml's message, and what to do
/// (toml's own text quotes the source under a caret, over several lines); as
/// [`tcplab_emu::error::toml_message`] says every file's.
pub fn toml_message(text: &str, e: &toml::de::Error) -> String {
    tcplab_emu::error::toml_message(text, e.message(), e.span())
}

pub use tcplab_emu::error::toml_fix;

/// Flattens `[sysctl.HOST] KEY = VALUE` tables; numbers are accepted as well as strings.
fn sysctls_of(
    table: &BTreeMap<String, BTreeMap<String, toml::Value>>,
) -> Result<Vec<SysctlSetting>> {
    let mut out = Vec::new();
    // `all` first, so per-host values override it.
    let ordered = table
        .iter()
        .filter(|(h, _)| h.as_str() == "all")
        .chain(table.iter().filter(|(h, _)| h.as_str() != "all"));
    for (host, keys) in ordered {
        for (key, value) in keys {
            let value = match value {
                toml::Value::String(s) => s.clone(),
                toml::Value::Integer(i) => i.to_string(),
                toml::Value::Boolean(b) => u8::from(*b).to_string(),
                other => {
                    return Err(LabError::invalid(
                        format!("sysctl.{host}.{key}"),
                        format!("'{other}' is not a sysctl value: use a string or an integer"),
                    ));
                }
            };
            out.push(SysctlSetting {
                host: host.clone(),
                key: key.clone(),
                value,
            });
        }
    }
    Ok(out)
}
