//! The path a doctor, tune or demo run works on: a lab built for the run from flags (the same
//! flags as `tcplab lab up`), an existing lab, or a remote host running `tcplab serve`.

use std::collections::BTreeMap;

use clap::Args;
use tcplab_emu::ImpairmentFlags;
use tcplab_lab::{BuiltinOptions, Lab, LabSpec, Offloads, Ownership, SysctlSetting, Topology};
use tcplab_study::scenario::LabSection;

use tcplab::impair_args::ImpairArgs;

/// Where to run.
#[derive(Debug, Args, Clone)]
pub struct PathArgs {
    /// A host running `tcplab serve`, ADDRESS[:PORT]; with --hosts FILE, a host's name in it.
    #[arg(long, conflicts_with_all = ["lab", "topology"])]
    pub to: Option<String>,
    /// An existing lab.
    #[arg(long, conflicts_with = "topology")]
    pub lab: Option<String>,
    /// Build a lab of this topology for the run (removed afterwards): pair, path, dumbbell, star.
    #[arg(long)]
    pub topology: Option<String>,
    /// Clients/servers of a dumbbell, hosts of a star; or a hosts file (docs/fleet.md) whose
    /// host --to names, its agent launched as the file says and stopped at the end.
    #[arg(long, value_name = "N|FILE", default_value = "2")]
    pub hosts: super::remote::HostsArg,
    /// An option for OpenSSH's client when --hosts FILE launches over ssh (repeatable).
    #[arg(long = "ssh-option", value_name = "OPT", allow_hyphen_values = true)]
    pub ssh_options: Vec<String>,
    /// HOST:KEY=VALUE sysctls for the built lab; repeatable.
    #[arg(long = "sysctl", value_name = "HOST:KEY=VALUE")]
    pub sysctls: Vec<String>,
    /// Offloads on the built lab's links, as `tcplab lab up --offloads`: on, off, or e.g.
    /// tso=on,gso=on,gro=off. Default: on for an emulated path (the emulator then carries
    /// TSO/GSO super-packets, which keeps its schedule at 1 Gbit/s), off for an unimpaired one.
    #[arg(long, value_name = "on|off|LIST", conflicts_with_all = ["to", "lab"])]
    pub offloads: Option<String>,
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
    /// The remote agent of `--to` (with `--hosts FILE`, launched), or None for a lab. A hosts
    /// file with --topology or --lab is refused: it names real hosts, not a lab's.
    pub fn remote(&self) -> anyhow::Result<Option<super::remote::Remote>> {
        if self.hosts.file().is_some() && (self.topology.is_some() || self.lab.is_some()) {
            anyhow::bail!(
                "--hosts FILE names real hosts: drop --topology/--lab, or give --hosts a count for the lab"
            );
        }
        super::remote::resolve(&super::remote::HostsChoice {
            hosts: self.hosts.file(),
            to: self.to.as_deref(),
            ssh_options: &self.ssh_options,
            allow_sysctl: false,
        })
    }

    /// With `--to`, the rate the path is sold as (`--rate`), bit/s: a figure the doctor
    /// compares its estimate with. Any other impairment flag with `--to` is refused: a real
    /// path's impairments are its own, and no lab is built to carry them.
    pub fn sold_rate(&self) -> anyhow::Result<Option<f64>> {
        if self.to.is_none() {
            return Ok(None);
        }
        let others: Vec<String> = self
            .impair
            .pairs()
            .into_iter()
            .filter(|(k, _)| *k != "rate")
            .map(|(k, _)| ImpairmentFlags::flag(k))
            .collect();
        if !others.is_empty() {
            anyhow::bail!(
                "{} with --to: a real path's impairments are its own and no lab is built to carry them; with --to only --rate (what the path is sold as) is read: drop {}, or build a lab with --topology path",
                others.join(", "),
                others.join(", ")
            );
        }
        self.impair
            .pairs()
            .into_iter()
            .find(|(k, _)| *k == "rate")
            .map(|(_, v)| {
                tcplab_emu::spec::parse_rate(&v)
                    .map(|r| r as f64)
                    .map_err(|e| anyhow::anyhow!("--rate {v}: {e}"))
            })
            .transpose()
    }

    /// The lab to build, when --topology (or impairments alone, meaning a path) is given;
    /// none with `--to` (a real path).
    pub fn spec(&self, name: &str) -> anyhow::Result<Option<LabSpec>> {
        if self.to.is_some() {
            return Ok(None);
        }
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
            hosts: self.hosts.count(),
            offloads: self.offloads()?,
            sysctls,
            link: if self.impair.any() {
                Some(self.impair.link()?)
            } else {
                None
            },
            ..BuiltinOptions::default()
        })?))
    }

    /// The offloads of the lab these flags build: `--offloads` when given, else
    /// [`EMULATED_OFFLOADS`] on an emulated path (impairments given) and all off without one
    /// (the kernel bridge forwards whatever it gets).
    pub fn offloads(&self) -> anyhow::Result<Offloads> {
        let text = match (&self.offloads, self.impair.any()) {
            (Some(text), _) => text.as_str(),
            (None, true) => EMULATED_OFFLOADS,
            (None, false) => "off",
        };
        Ok(Offloads::parse(text)?)
    }

    /// The scenario `[lab]` section equivalent to these flags (tune's generated studies build
    /// their labs from it): the topology, host count, offloads, `--sysctl` values by host, and
    /// the impairment flags as `[lab.link]`.
    pub fn lab_section(&self) -> anyhow::Result<LabSection> {
        let topology = match &self.topology {
            Some(t) => t.parse::<Topology>()?,
            None if self.impair.any() => Topology::Path,
            None => Topology::Pair,
        };
        let mut sysctl: BTreeMap<String, BTreeMap<String, toml::Value>> = BTreeMap::new();
        for s in &self.sysctls {
            let s = SysctlSetting::parse("--sysctl", s)?;
            sysctl
                .entry(s.host)
                .or_default()
                .insert(s.key, toml::Value::String(s.value));
        }
        Ok(LabSection {
            topology: Some(topology),
            hosts: Some(self.hosts.count()),
            offloads: self.offloads()?,
            sysctl,
            link: self.impair.flags(),
            ..LabSection::default()
        })
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

/// The offloads of an emulated path that `doctor`, `tune` and `demo` build without
/// `--offloads`: all on, so the emulator runs in its GSO mode (docs/lab.md). On the doctor's
/// 1 Gbit/s, 10 ms lab on two vCPUs, 10 runs each: the stream kept its need in 10 against 8
/// with one wire packet per frame, the message-size sweep in 8 against 0, at 0.20-0.30 against
/// 1.56-1.71 s of server CPU per GB; loss and the other per-packet elements still act on each
/// wire segment (measured in docs/notebook/emu-io-bench.md and `benches/trust.sh`).
pub const EMULATED_OFFLOADS: &str = "on";

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        path: PathArgs,
    }

    fn path(args: &[&str]) -> PathArgs {
        Cli::try_parse_from(std::iter::once("tcplab").chain(args.iter().copied()))
            .expect("flags parse")
            .path
    }

    #[test]
    fn an_emulated_path_has_offloads_on_unless_told_and_an_unimpaired_one_off() {
        let emulated = ["--topology", "path", "--delay", "5ms", "--rate", "1gbit"];
        assert_eq!(path(&emulated).offloads().unwrap(), Offloads::ALL_ON);
        let off = path(&[&emulated[..], &["--offloads", "off"]].concat());
        assert_eq!(off.offloads().unwrap(), Offloads::default());
        let tso = path(&[&emulated[..], &["--offloads", "tso=on"]].concat());
        assert!(tso.offloads().unwrap().tso && !tso.offloads().unwrap().gro);
        assert_eq!(
            path(&["--topology", "pair"]).offloads().unwrap(),
            Offloads::default()
        );
        let spec = path(&emulated).spec("t").unwrap().expect("a lab");
        assert!(spec.emulation.is_some());
        assert!(
            Cli::try_parse_from(["tcplab", "--lab", "x", "--offloads", "on"]).is_err(),
            "an existing lab keeps its offloads"
        );
        let e = path(&[&emulated[..], &["--offloads", "fast"]].concat())
            .offloads()
            .unwrap_err()
            .to_string();
        assert!(e.contains("--offloads"), "{e}");
    }

    #[test]
    fn tunes_studies_build_their_labs_with_the_same_offloads() {
        let emulated = ["--topology", "path", "--delay", "5ms", "--rate", "1gbit"];
        let lab = path(&emulated).lab_section().unwrap();
        assert_eq!(lab.offloads, Offloads::ALL_ON);
        assert_eq!(lab.topology, Some(Topology::Path));
        assert_eq!(
            lab.link.pairs(),
            [("delay", "5ms"), ("rate", "1gbit")],
            "the flags are the link"
        );
        let off = path(&[&emulated[..], &["--offloads", "off"]].concat());
        assert_eq!(
            off.lab_section().unwrap().offloads,
            Offloads::default(),
            "all off is the scenario's default"
        );
        let with_sysctl = path(&[&emulated[..], &["--sysctl", "all:net.core.rmem_max=1"]].concat());
        let lab = with_sysctl.lab_section().unwrap();
        assert_eq!(
            lab.sysctl["all"]["net.core.rmem_max"].as_str(),
            Some("1"),
            "{lab:?}"
        );
        let text = toml::to_string(&lab).expect("serialises");
        assert_eq!(toml::from_str::<LabSection>(&text).expect(&text), lab);
    }
}
