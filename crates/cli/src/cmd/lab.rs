//! `tcplab lab ...`: build, list, enter, change and remove labs.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use clap::{Args, Subcommand};
use serde::Serialize;
use tcplab_lab::spec::DEFAULT_MTU;
use tcplab_lab::status::{self, LabStatus};
use tcplab_lab::{
    BuiltinOptions, Lab, LabError, LabSpec, Offloads, Ownership, StateDir, SysctlSetting, Topology,
};

use crate::output;
use tcplab::impair_args::ImpairArgs;

/// The lab subcommands.
#[derive(Debug, Subcommand)]
pub enum LabCommand {
    /// Build a lab. It persists until `tcplab lab down NAME`, unless --foreground.
    Up(UpArgs),
    /// Remove a lab: its namespaces, links, helper processes and host-sysctl changes.
    Down(DownArgs),
    /// List labs, their hosts, namespaces, interfaces and addresses.
    Status(StatusArgs),
    /// Run a command inside a lab host (like `ip netns exec`).
    Exec(ExecArgs),
    /// Set (HOST:KEY=VALUE) or read (HOST:KEY) sysctls on a running lab.
    Sysctl(SysctlArgs),
    /// Change the emulated link's impairments on a running lab; connections survive. The flags
    /// given are the whole new set (what is not given is removed).
    Set(SetArgs),
    /// Open a TCP connection between every pair of end hosts and report.
    Check(CheckArgs),
    /// Remove labs whose owner process died (--all: every lab) and restore host sysctls.
    Gc(GcArgs),
    /// The holder of an unprivileged user's rootless session (started by tcplab itself).
    #[command(hide = true)]
    HoldSession,
}

impl LabCommand {
    /// Runs the subcommand.
    pub fn run(self) -> ExitCode {
        match self {
            LabCommand::Up(a) => {
                let json = a.json;
                output::finish(json, a.run())
            }
            LabCommand::Down(a) => output::finish(a.json, a.run()),
            LabCommand::Status(a) => output::finish(a.json, a.run()),
            LabCommand::Exec(a) => output::finish(false, a.run()),
            LabCommand::Sysctl(a) => output::finish(false, a.run()),
            LabCommand::Set(a) => output::finish(false, a.run()),
            LabCommand::Check(a) => output::finish(a.json, a.run()),
            LabCommand::Gc(a) => output::finish(a.json, a.run()),
            LabCommand::HoldSession => match tcplab_lab::rootless::session::hold() {
                Err(e) => output::finish(false, Err(e.into())),
                Ok(never) => match never {},
            },
        }
    }
}

/// Arguments of `tcplab lab up`.
#[derive(Debug, Args)]
pub struct UpArgs {
    /// pair (client, server), path (client, middle, server), dumbbell (c1..cN, middle, s1..sN),
    /// star (h1..hN on a switch). Default: path when impairments are given, else pair.
    #[arg(long, short = 't', conflicts_with = "file")]
    topology: Option<String>,
    /// A TOML lab description instead of flags (see docs/lab.md).
    #[arg(long, short = 'f')]
    file: Option<PathBuf>,
    /// Lab name (lower-case letters, digits, _); namespaces are tcplab-NAME-HOST.
    /// Defaults to the topology's name.
    #[arg(long, short = 'n')]
    name: Option<String>,
    /// Clients (and servers) of a dumbbell, hosts of a star.
    #[arg(long, default_value_t = 2)]
    hosts: usize,
    /// MTU of every lab link.
    #[arg(long, default_value_t = DEFAULT_MTU)]
    mtu: u32,
    /// MTU of the end hosts' interfaces, when it differs from --mtu: an MTU mismatch (e.g.
    /// 9000 on the hosts, 1500 in the middle), whose larger frames the middle drops silently.
    #[arg(long, value_name = "MTU")]
    end_mtu: Option<u32>,
    /// Offloads on lab links: off (default), on, or e.g. tso=on,gso=on,gro=off.
    #[arg(long, default_value = "off")]
    offloads: String,
    /// HOST:KEY=VALUE (or all:KEY=VALUE); repeatable.
    #[arg(long = "sysctl", value_name = "HOST:KEY=VALUE")]
    sysctls: Vec<String>,
    /// Allow host-global sysctls (journaled, restored on teardown and by gc).
    #[arg(long)]
    allow_host_sysctl: bool,
    /// What forwards in the middle host: auto (the emulator when impairments are given, else the
    /// kernel bridge), kernel, or emu (the emulator even without impairments).
    #[arg(long, default_value = "auto")]
    bridge: String,
    /// Hold the lab until this process is interrupted (Ctrl-C, SIGTERM), then remove it.
    #[arg(long)]
    foreground: bool,
    /// One JSON document on stdout.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    impair: ImpairArgs,
}

/// What `lab up --json` prints.
#[derive(Debug, Serialize)]
struct UpReport {
    build_ms: f64,
    lab: LabStatus,
}

impl UpArgs {
    fn spec(&self) -> anyhow::Result<LabSpec> {
        let mut sysctls = Vec::new();
        for s in &self.sysctls {
            sysctls.push(SysctlSetting::parse("--sysctl", s)?);
        }
        let mut spec = match &self.file {
            Some(path) => {
                if self.impair.any() {
                    anyhow::bail!(
                        "--file: give impairments in the file's [emulator.link] table or with `tcplab lab set`, not as flags"
                    );
                }
                tcplab_lab::file::load(path, self.name.as_deref())?
            }
            None => {
                let topology: Topology = match &self.topology {
                    Some(t) => t.parse()?,
                    None if self.impair.any() => Topology::Path,
                    None => Topology::Pair,
                };
                LabSpec::builtin(&BuiltinOptions {
                    name: self.name.clone().unwrap_or_else(|| topology.to_string()),
                    topology,
                    hosts: self.hosts,
                    mtu: self.mtu,
                    end_mtu: self.end_mtu,
                    offloads: Offloads::parse(&self.offloads)?,
                    sysctls: Vec::new(),
                    allow_host_sysctl: self.allow_host_sysctl,
                    bridge: self.bridge.parse()?,
                    link: if self.impair.any() {
                        Some(self.impair.link()?)
                    } else {
                        None
                    },
                    tuning: Default::default(),
                })?
            }
        };
        spec.sysctls.extend(sysctls);
        spec.allow_host_sysctl |= self.allow_host_sysctl;
        spec.validate()?;
        Ok(spec)
    }

    fn run(self) -> anyhow::Result<ExitCode> {
        let spec = self.spec()?;
        let ownership = if self.foreground {
            Ownership::Process
        } else {
            Ownership::Persistent
        };
        if self.foreground {
            tcplab_lab::teardown_on_signals().context("installing the signal handler")?;
        }
        let start = Instant::now();
        let lab = Lab::build(spec, ownership)?;
        let build_ms = start.elapsed().as_secs_f64() * 1e3;
        let record = lab
            .state()
            .read(lab.name())?
            .ok_or_else(|| LabError::NoSuchLab(lab.name().to_string()))?;
        let status = status::of(&record, Some(&lab))?;
        if self.json {
            output::print_json(&UpReport {
                build_ms,
                lab: status,
            });
        } else {
            print_status(&status);
            outln!("built in {build_ms:.1} ms");
            if !self.foreground {
                outln!(
                    "enter a host:  tcplab lab exec --lab {} HOST -- CMD",
                    lab.name()
                );
                outln!("remove it:     tcplab lab down {}", lab.name());
            }
        }
        if self.foreground {
            eprintln!(
                "tcplab: holding lab '{}'; Ctrl-C or SIGTERM removes it",
                lab.name()
            );
            // The signal thread tears the lab down and exits; this thread only waits.
            loop {
                std::thread::park();
            }
        }
        Ok(ExitCode::SUCCESS)
    }
}

/// Arguments of `tcplab lab down`.
#[derive(Debug, Args)]
pub struct DownArgs {
    /// The lab to remove.
    name: String,
    /// One JSON document on stdout.
    #[arg(long)]
    json: bool,
}

impl DownArgs {
    fn run(self) -> anyhow::Result<ExitCode> {
        let state = StateDir::from_env();
        if state.read(&self.name)?.is_none() {
            return Err(LabError::NoSuchLab(self.name).into());
        }
        let start = Instant::now();
        tcplab_lab::teardown(&state, &self.name)?;
        let ms = start.elapsed().as_secs_f64() * 1e3;
        if self.json {
            output::print_json(&serde_json::json!({ "removed": self.name, "teardown_ms": ms }));
        } else {
            outln!("lab '{}' removed in {ms:.1} ms", self.name);
        }
        Ok(ExitCode::SUCCESS)
    }
}

/// Arguments of `tcplab lab status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// One lab (default: all).
    name: Option<String>,
    /// One JSON document on stdout, with the machine facts.
    #[arg(long)]
    json: bool,
}

impl StatusArgs {
    fn run(self) -> anyhow::Result<ExitCode> {
        let state = StateDir::from_env();
        let records = match &self.name {
            Some(n) => vec![
                state
                    .read(n)?
                    .ok_or_else(|| LabError::NoSuchLab(n.clone()))?,
            ],
            None => state.list()?,
        };
        let mut labs = Vec::new();
        let mut host_facts = serde_json::Map::new();
        let mut emulators = serde_json::Map::new();
        let mut emulator_lines = std::collections::HashMap::new();
        for record in &records {
            let lab = Lab::open_in(state.clone(), &record.spec.name).ok();
            labs.push(status::of(record, lab.as_ref())?);
            if let (Some(lab), Some(_)) = (lab.as_ref(), record.spec.emulation.as_ref()) {
                let name = record.spec.name.clone();
                let value = match lab.emulator_status() {
                    Ok(s) => {
                        emulator_lines.insert(name.clone(), emulator_summary(&s));
                        serde_json::to_value(s)?
                    }
                    Err(e) => {
                        let why = format!("  emulator  NOT RUNNING: {e}");
                        emulator_lines.insert(name.clone(), vec![why]);
                        serde_json::json!({ "running": false, "error": e.to_string() })
                    }
                };
                emulators.insert(name, value);
            }
            if let (true, Some(lab)) = (self.json, lab.as_ref()) {
                let facts = tcplab_lab::facts::collect(lab)?;
                host_facts.insert(lab.name().to_string(), serde_json::to_value(facts.hosts)?);
            }
        }
        if self.json {
            let doc = serde_json::json!({
                "labs": labs,
                "facts": tcplab_lab::facts::machine(),
                "host_facts": host_facts,
                "emulators": emulators,
            });
            return Ok(output::print_json(&doc));
        }
        if labs.is_empty() {
            outln!("no labs (build one with `tcplab lab up --topology path`)");
        }
        for lab in &labs {
            print_status(lab);
            for line in emulator_lines.get(&lab.name).into_iter().flatten() {
                outln!("{line}");
            }
        }
        Ok(ExitCode::SUCCESS)
    }
}

/// The human form of a running emulator: its state and seed, the impairments in force, and
/// each direction's counters (`--json` has all of them).
fn emulator_summary(s: &tcplab_lab::emulation::EmulatorStatus) -> Vec<String> {
    let counters = serde_json::from_value::<tcplab_emu_io::Snapshot>(s.counters.clone()).ok();
    let state = if s.running {
        "running"
    } else {
        "STOPPED (a worker failed)"
    };
    let mut lines = vec![format!("  emulator  {state}, seed {}", s.seed)];
    if let Some(c) = &counters {
        lines[0].push_str(&format!(
            ", up {}",
            tcplab_emu_io::summary::format_ns(c.elapsed_ns)
        ));
    }
    for (i, line) in s.link.described_lines().into_iter().enumerate() {
        let label = if i == 0 { "link" } else { "" };
        lines.push(format!("    {label:<14} {line}"));
    }
    if let Some(c) = counters {
        for (name, d) in [("client→server", &c.forward), ("server→client", &c.reverse)] {
            lines.push(format!("    {name}  {d}"));
            let realised = tcplab_emu_io::summary::realised_lines(&d.realised);
            lines.extend(realised.iter().map(|l| format!("{:19}{l}", "")));
        }
    }
    lines
}

/// The human form of a lab's status.
fn print_status(lab: &LabStatus) {
    let owner = match (lab.owner, lab.owner_alive) {
        (Some(o), Some(true)) => format!("owned by pid {}", o.pid),
        (Some(o), _) => format!("owner pid {} is gone: `tcplab lab gc` removes it", o.pid),
        (None, _) => "persistent".to_string(),
    };
    outln!(
        "lab {} ({}, MTU {}, {:?}, {owner})",
        lab.name,
        lab.topology,
        lab.mtu,
        lab.phase
    );
    for host in &lab.hosts {
        let ifaces: Vec<String> = host
            .interfaces
            .iter()
            .map(|i| {
                let addrs: Vec<String> = i
                    .addrs
                    .iter()
                    .filter(|a| tcplab_lab::spec::in_lab_range(a.addr))
                    .map(|a| a.to_string())
                    .collect();
                let mut text = i.name.clone();
                if let Some(b) = &i.bridge {
                    text.push_str(&format!("@{b}"));
                }
                if !addrs.is_empty() {
                    text.push_str(&format!(" {}", addrs.join(" ")));
                }
                if !i.up || !i.carrier {
                    text.push_str(" (down)");
                }
                text
            })
            .collect();
        outln!(
            "  {:<8} {:<24} {}",
            host.name,
            host.netns,
            ifaces.join(", ")
        );
    }
}

/// Arguments of `tcplab lab exec`.
#[derive(Debug, Args)]
pub struct ExecArgs {
    /// The lab (default: the only lab, if there is exactly one).
    #[arg(long)]
    lab: Option<String>,
    /// The host to run in.
    host: String,
    /// The command and its arguments (after --).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
    command: Vec<OsString>,
}

impl ExecArgs {
    fn run(self) -> anyhow::Result<ExitCode> {
        tcplab_lab::require_root("entering a lab host")?;
        let lab = open_lab(self.lab.as_deref())?;
        let host = lab.host(&self.host)?;
        let (program, args) = self
            .command
            .split_first()
            .ok_or_else(|| LabError::invalid("COMMAND", "give a command after --"))?;
        // Like `ip netns exec`: this process becomes the command (same PID, so signals reach it
        // and nothing is left behind when the caller ends it). exec only returns on error.
        use std::os::unix::process::CommandExt;
        let err = host.command(program).args(args).exec();
        Err(LabError::invalid("COMMAND", format!("cannot run {program:?}: {err}")).into())
    }
}

/// Opens the named lab, or the only one when no name is given.
fn open_lab(name: Option<&str>) -> anyhow::Result<Lab> {
    let state = StateDir::from_env();
    let name = match name {
        Some(n) => n.to_string(),
        None => {
            let labs = state.list()?;
            match labs.as_slice() {
                [one] => one.spec.name.clone(),
                [] => anyhow::bail!("--lab: there is no lab; build one with `tcplab lab up`"),
                _ => anyhow::bail!(
                    "--lab: there are {} labs ({}); say which with --lab NAME",
                    labs.len(),
                    labs.iter()
                        .map(|r| r.spec.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            }
        }
    };
    Ok(Lab::open_in(state, &name)?)
}

/// Arguments of `tcplab lab sysctl`.
#[derive(Debug, Args)]
pub struct SysctlArgs {
    /// The lab.
    name: String,
    /// HOST:KEY=VALUE to set (verified by reading back), HOST:KEY to read; HOST may be `all`.
    #[arg(required = true, value_name = "HOST:KEY[=VALUE]")]
    settings: Vec<String>,
    /// Allow host-global sysctls (journaled, restored when the lab goes).
    #[arg(long)]
    allow_host_sysctl: bool,
}

impl SysctlArgs {
    fn run(self) -> anyhow::Result<ExitCode> {
        tcplab_lab::require_root("changing lab sysctls")?;
        let lab = Lab::open(&self.name)?;
        for text in &self.settings {
            if text.contains('=') {
                let setting = SysctlSetting::parse("HOST:KEY=VALUE", text)?;
                lab.set_sysctls(std::slice::from_ref(&setting), self.allow_host_sysctl)?;
                for host in targets(&lab, &setting.host) {
                    outln!(
                        "{host}: {} = {}",
                        setting.key,
                        lab.read_sysctl(&host, &setting.key)?
                    );
                }
            } else {
                let (host, key) = text.split_once(':').ok_or_else(|| {
                    LabError::invalid(
                        "HOST:KEY",
                        format!("'{text}': use HOST:KEY to read, HOST:KEY=VALUE to set"),
                    )
                })?;
                for host in targets(&lab, host) {
                    outln!("{host}: {key} = {}", lab.read_sysctl(&host, key)?);
                }
            }
        }
        Ok(ExitCode::SUCCESS)
    }
}

fn targets(lab: &Lab, host: &str) -> Vec<String> {
    if host == "all" {
        lab.hosts().iter().map(|h| h.name().to_string()).collect()
    } else {
        vec![host.to_string()]
    }
}

/// Arguments of `tcplab lab set`.
#[derive(Debug, Args)]
pub struct SetArgs {
    /// The lab.
    name: String,
    #[command(flatten)]
    impair: ImpairArgs,
}

impl SetArgs {
    fn run(self) -> anyhow::Result<ExitCode> {
        let lab = Lab::open(&self.name)?;
        if lab.spec().emulation.is_none() {
            anyhow::bail!(
                "lab '{}' forwards with the kernel bridge, which cannot change impairments; rebuild it with impairments or --bridge emu",
                self.name
            );
        }
        let link = self.impair.link()?;
        if link.seed.is_some() {
            // The running models keep their random streams; a new seed would change nothing.
            anyhow::bail!(
                "--seed: a running emulator keeps the seed it started with (`tcplab lab status {0}` shows it); give --seed to `tcplab lab up`",
                self.name
            );
        }
        lab.set_link(&link)?;
        let status = lab.emulator_status()?;
        outln!("lab '{}': impairments now", self.name);
        for line in status.link.described_lines() {
            outln!("  {line}");
        }
        Ok(ExitCode::SUCCESS)
    }
}

/// Arguments of `tcplab lab check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The lab (default: the only lab).
    name: Option<String>,
    /// One JSON document on stdout.
    #[arg(long)]
    json: bool,
}

impl CheckArgs {
    fn run(self) -> anyhow::Result<ExitCode> {
        tcplab_lab::require_root("checking a lab")?;
        let lab = open_lab(self.name.as_deref())?;
        let checks = lab.check_connectivity()?;
        let failed = checks.iter().filter(|c| !c.ok).count();
        if self.json {
            output::print_json(
                &serde_json::json!({ "lab": lab.name(), "failed": failed, "checks": checks }),
            );
        } else {
            for c in &checks {
                match (&c.micros, &c.error) {
                    (Some(us), _) => {
                        outln!("ok    {:>8} -> {:<8} {:<16} {us} us", c.from, c.to, c.addr)
                    }
                    (None, e) => outln!(
                        "FAIL  {:>8} -> {:<8} {:<16} {}",
                        c.from,
                        c.to,
                        c.addr,
                        e.as_deref().unwrap_or("")
                    ),
                }
            }
            outln!(
                "{} of {} TCP exchanges passed",
                checks.len() - failed,
                checks.len()
            );
        }
        Ok(if failed == 0 {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        })
    }
}

/// Arguments of `tcplab lab gc`.
#[derive(Debug, Args)]
pub struct GcArgs {
    /// Remove every lab and every tcplab-* namespace, owned or not.
    #[arg(long)]
    all: bool,
    /// One JSON document on stdout.
    #[arg(long)]
    json: bool,
}

impl GcArgs {
    fn run(self) -> anyhow::Result<ExitCode> {
        let report = tcplab_lab::gc(&StateDir::from_env(), self.all)?;
        if self.json {
            return Ok(output::print_json(&report));
        }
        for lab in &report.labs {
            outln!("removed lab {lab}");
        }
        for ns in &report.orphan_namespaces {
            outln!("removed orphan namespace {ns}");
        }
        for key in &report.restored_sysctls {
            outln!("restored host sysctl {key}");
        }
        if report.labs.is_empty()
            && report.orphan_namespaces.is_empty()
            && report.restored_sysctls.is_empty()
        {
            outln!("nothing to remove");
        }
        Ok(ExitCode::SUCCESS)
    }
}
