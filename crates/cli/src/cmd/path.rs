//! The path a doctor, tune or demo run works on: a lab built for the run from flags (the same
//! flags as `tcplab lab up`), an existing lab, or a remote host running `tcplab serve`.

use clap::Args;
use tcplab_lab::{BuiltinOptions, Lab, LabSpec, Ownership, SysctlSetting, Topology};

use super::impair::ImpairArgs;

/// Where to run.
#[derive(Debug, Args, Clone)]
pub struct PathArgs {
    /// A host running `tcplab serve`, ADDRESS[:PORT].
    #[arg(long, conflicts_with_all = ["lab", "topology"])]
    pub to: Option<String>,
    /// An existing lab.
    #[arg(long, conflicts_with = "topology")]
    pub lab: Option<String>,
    /// Build a lab of this topology for the run (removed afterwards): pair, path, dumbbell, star.
    #[arg(long)]
    pub topology: Option<String>,
    /// Clients/servers of a dumbbell, hosts of a star.
    #[arg(long, default_value_t = 2)]
    pub hosts: usize,
    /// HOST:KEY=VALUE sysctls for the built lab; repeatable.
    #[arg(long = "sysctl", value_name = "HOST:KEY=VALUE")]
    pub sysctls: Vec<String>,
    /// Client host (default: the lab's first end host).
    #[arg(long)]
    pub client: Option<String>,
    /// Server host (default: the lab's last end host).
    #[arg(long)]
    pub server: Option<String>,
    #[command(flatten)]
    pub impair: ImpairArgs,
}

impl PathArgs {
    /// The lab to build, when --topology (or impairments alone, meaning a path) is given.
    pub fn spec(&self, name: &str) -> anyhow::Result<Option<LabSpec>> {
        let topology = match (&self.topology, self.impair.any()) {
            (Some(t), _) => t.parse::<Topology>()?,
            (None, true) => Topology::Path,
            (None, false) => return Ok(None),
        };
        let mut sysctls = Vec::new();
        for s in &self.sysctls {
            sysctls.push(SysctlSetting::parse("--sysctl", s)?);
        }
        Ok(Some(LabSpec::builtin(&BuiltinOptions {
            name: name.to_string(),
            topology,
            hosts: self.hosts,
            sysctls,
            link: if self.impair.any() {
                Some(self.impair.link()?)
            } else {
                None
            },
            ..BuiltinOptions::default()
        })?))
    }

    /// The scenario `[lab]` section equivalent to these flags (for tune's generated studies).
    pub fn lab_toml(&self) -> anyhow::Result<String> {
        let topology = match &self.topology {
            Some(t) => t.parse::<Topology>()?,
            None if self.impair.any() => Topology::Path,
            None => Topology::Pair,
        };
        let mut text = format!("[lab]\ntopology = \"{topology}\"\nhosts = {}\n", self.hosts);
        let mut by_host: std::collections::BTreeMap<String, Vec<(String, String)>> =
            Default::default();
        for s in &self.sysctls {
            let s = SysctlSetting::parse("--sysctl", s)?;
            by_host.entry(s.host).or_default().push((s.key, s.value));
        }
        let pairs = self.impair.pairs();
        if !pairs.is_empty() {
            text.push_str("[lab.link]\n");
            for (k, v) in pairs {
                text.push_str(&format!("{k} = {}\n", toml_string(&v)));
            }
        }
        for (host, keys) in by_host {
            text.push_str(&format!("[lab.sysctl.{host}]\n"));
            for (k, v) in keys {
                text.push_str(&format!("{} = {}\n", toml_string(&k), toml_string(&v)));
            }
        }
        Ok(text)
    }

    /// Builds the run's own lab, or opens the named one.
    pub fn lab(&self, name: &str) -> anyhow::Result<Option<Lab>> {
        if let Some(existing) = &self.lab {
            return Ok(Some(Lab::open(existing)?));
        }
        match self.spec(name)? {
            Some(spec) => {
                tcplab_lab::teardown_on_signals()?;
                Ok(Some(Lab::build(spec, Ownership::Process)?))
            }
            None => Ok(None),
        }
    }

    /// The client and server hosts of a lab.
    pub fn hosts_of(&self, lab: &Lab) -> anyhow::Result<(String, String)> {
        let ends: Vec<&str> = lab
            .hosts()
            .iter()
            .filter(|h| h.role() == tcplab_lab::Role::Host)
            .map(|h| h.name())
            .collect();
        let client = self
            .client
            .clone()
            .or_else(|| ends.first().map(|s| s.to_string()));
        let server = self
            .server
            .clone()
            .or_else(|| ends.last().map(|s| s.to_string()));
        match (client, server) {
            (Some(c), Some(s)) if c != s => {
                Ok((lab.host(&c)?.name().into(), lab.host(&s)?.name().into()))
            }
            _ => anyhow::bail!("--client/--server: the lab needs two distinct end hosts"),
        }
    }
}

fn toml_string(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}
