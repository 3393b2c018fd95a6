//! A lab's life: build (all or nothing), open (attach to an existing one), change sysctls, tear
//! down. A lab owned by this process is torn down when its [`Lab`] value is dropped — on normal
//! return, on `?` early exit and on panic — and by the signal handler in [`crate::lifecycle`].

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::build;
use crate::emulation::{self, Emulator, EmulatorStatus};
use crate::error::{LabError, Result};
use crate::host::Host;
use crate::lifecycle;
use crate::netns::{self, NetNs};
use crate::privileges::Privileges;
use crate::spec::{LabSpec, SysctlSetting};
use crate::state::{Companion, Phase, ProcessId, Record, StateDir, StateLock, unix_ms};
use crate::sysctl_apply;

/// Who a lab belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ownership {
    /// Lives until `tcplab lab down` (like `ip netns add`).
    Persistent,
    /// Belongs to this process: removed when the process ends, is interrupted or panics.
    Process,
}

/// A built (or opened) lab.
#[derive(Debug)]
pub struct Lab {
    spec: LabSpec,
    hosts: Vec<Host>,
    state: StateDir,
    owned: bool,
    removed: bool,
    /// The in-process emulator of a process-owned emulated lab.
    emulator: Option<Emulator>,
}

/// Tears a half-built lab down unless disarmed: building is all or nothing.
struct BuildGuard<'a> {
    state: &'a StateDir,
    lock: &'a StateLock,
    name: &'a str,
    armed: bool,
}

impl Drop for BuildGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            if let Err(e) = teardown_locked(self.state, self.lock, self.name) {
                eprintln!(
                    "tcplab: cleaning up the half-built lab '{}' failed: {e}",
                    self.name
                );
            }
        }
    }
}

/// Fails unless the process can create namespaces (with the privileges it decided).
pub fn require_root(action: &str) -> Result<()> {
    Privileges::decided().require(action)
}

impl Lab {
    /// Builds a lab in the default state directory.
    pub fn build(spec: LabSpec, ownership: Ownership) -> Result<Lab> {
        Lab::build_in(StateDir::from_env(), spec, ownership)
    }

    /// Builds a lab, registering it under `state`. Either the whole lab exists afterwards or
    /// nothing of it does.
    pub fn build_in(state: StateDir, spec: LabSpec, ownership: Ownership) -> Result<Lab> {
        Lab::build_as(Privileges::decided(), state, spec, ownership)
    }

    /// [`Lab::build_in`] with the privileges the caller decided: they say whether a lab can be
    /// built here, which sysctls a session must refuse up front, and what the emulator falls
    /// back to.
    pub fn build_as(
        privileges: &Privileges,
        state: StateDir,
        spec: LabSpec,
        ownership: Ownership,
    ) -> Result<Lab> {
        privileges.require("building a lab")?;
        spec.validate()?;
        if privileges.in_session {
            crate::rootless::refuse_unchangeable_sysctls(&spec.sysctls)?;
        }
        let lock = state.lock()?;
        check_name_free(&state, &spec)?;
        let me = ProcessId::current();
        // The record goes first, owned by this process even for persistent labs, so a crash at
        // any later step leaves something `gc` recognises and removes.
        let mut record = Record {
            spec: spec.clone(),
            owner: me,
            phase: Phase::Building,
            created_unix_ms: unix_ms(),
            namespaces: spec
                .nodes
                .iter()
                .map(|n| spec.netns_name(&n.name))
                .collect(),
            companions: Vec::new(),
        };
        state.write(&record)?;
        for ns in &record.namespaces {
            crate::state::claim(ns, &state)?;
        }
        let mut guard = BuildGuard {
            state: &state,
            lock: &lock,
            name: &spec.name,
            armed: true,
        };
        let mut nets: BTreeMap<String, Arc<NetNs>> = BTreeMap::new();
        build::create_namespaces(&spec, &mut nets)?;
        build::create_links(&spec, &nets)?;
        build::configure_hosts(&spec, &nets)?;
        let hosts = hosts_of(&spec, &nets);
        sysctl_apply::apply(
            &state,
            &lock,
            &spec.name,
            &hosts,
            &spec.sysctls,
            spec.allow_host_sysctl,
        )?;
        record.phase = Phase::Ready;
        state.write(&record)?;
        let emulator = match &spec.emulation {
            None => None,
            Some(emu) => {
                let host = hosts_by_name(&hosts, &emu.host)?;
                let (opts, notices) = privileges
                    .emulator_fallbacks(emulation::io_options(spec.offloads, emu.tuning)?);
                // A companion logs its own notices; the user is told here either way.
                crate::privileges::tell_once(&notices);
                match ownership {
                    Ownership::Process => Some(
                        Emulator::start(host, emu, &opts)?
                            .serve(emulation::control_path(&state, &spec.name))?,
                    ),
                    Ownership::Persistent => {
                        record
                            .companions
                            .push(start_companion(&state, &spec.name, &emu.host)?);
                        None
                    }
                }
            }
        };
        if ownership == Ownership::Persistent {
            record.owner = None;
        }
        state.write(&record)?;
        guard.armed = false;
        drop(guard);
        drop(lock);
        let owned = ownership == Ownership::Process;
        if owned {
            lifecycle::register(&state, &spec.name);
        }
        Ok(Lab {
            spec,
            hosts,
            state,
            owned,
            removed: false,
            emulator,
        })
    }

    /// Attaches to an existing lab in the default state directory. Dropping the value leaves the
    /// lab in place.
    pub fn open(name: &str) -> Result<Lab> {
        Lab::open_in(StateDir::from_env(), name)
    }

    /// Attaches to an existing lab registered under `state`.
    pub fn open_in(state: StateDir, name: &str) -> Result<Lab> {
        let record = state
            .read(name)?
            .ok_or_else(|| LabError::NoSuchLab(name.to_string()))?;
        if record.phase != Phase::Ready {
            return Err(LabError::invalid(
                "lab",
                format!("lab '{name}' is still being built (or its builder died: `tcplab lab gc`)"),
            ));
        }
        let mut nets = BTreeMap::new();
        for node in &record.spec.nodes {
            let ns = netns::open(&record.spec.netns_name(&node.name))?;
            nets.insert(node.name.clone(), Arc::new(ns));
        }
        let hosts = hosts_of(&record.spec, &nets);
        Ok(Lab {
            spec: record.spec,
            hosts,
            state,
            owned: false,
            removed: false,
            emulator: None,
        })
    }

    /// The lab's name.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// The description it was built from.
    pub fn spec(&self) -> &LabSpec {
        &self.spec
    }

    /// Every host, in the spec's order.
    pub fn hosts(&self) -> &[Host] {
        &self.hosts
    }

    /// The state directory it is registered in.
    pub fn state(&self) -> &StateDir {
        &self.state
    }

    /// Whether this process owns (and will tear down) the lab.
    pub fn is_owned(&self) -> bool {
        self.owned
    }

    /// One host by name; the error lists the hosts that exist.
    pub fn host(&self, name: &str) -> Result<&Host> {
        self.hosts
            .iter()
            .find(|h| h.name == name)
            .ok_or_else(|| LabError::NoSuchHost {
                lab: self.spec.name.clone(),
                host: name.to_string(),
                known: self
                    .hosts
                    .iter()
                    .map(|h| h.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }

    /// Sets sysctls on a running lab (`tcplab lab sysctl`), verified by reading back.
    pub fn set_sysctls(&self, settings: &[SysctlSetting], allow_host_sysctl: bool) -> Result<()> {
        let names: Vec<&str> = self.hosts.iter().map(|h| h.name.as_str()).collect();
        for (i, s) in settings.iter().enumerate() {
            if s.host != "all" && !names.contains(&s.host.as_str()) {
                return Err(LabError::invalid(
                    format!("sysctl[{i}]"),
                    format!(
                        "no host '{}' in lab '{}'; use one of: all, {}",
                        s.host,
                        self.name(),
                        names.join(", ")
                    ),
                ));
            }
            tcplab_host::sysctl::validate_key(&s.key)?;
        }
        let lock = self.state.lock()?;
        sysctl_apply::apply(
            &self.state,
            &lock,
            &self.spec.name,
            &self.hosts,
            settings,
            allow_host_sysctl,
        )
    }

    /// Reads one sysctl on one host.
    pub fn read_sysctl(&self, host: &str, key: &str) -> Result<String> {
        let key = key.to_string();
        Ok(self
            .host(host)?
            .run(move || tcplab_host::sysctl::read(&key))??)
    }

    /// Tears the lab down now, whoever owns it.
    pub fn down(mut self) -> Result<()> {
        self.removed = true;
        drop(self.emulator.take());
        teardown(&self.state, &self.spec.name)
    }

    /// The emulator running in this process, if this process owns an emulated lab.
    pub fn emulator(&self) -> Option<&Emulator> {
        self.emulator.as_ref()
    }

    /// Stops this process's emulator and returns its final report (counters, CPU, errors).
    pub fn stop_emulator(&mut self) -> Option<tcplab_emu_io::Report> {
        self.emulator.take().map(Emulator::stop)
    }

    /// The emulator's status, wherever it runs (this process or a companion).
    pub fn emulator_status(&self) -> Result<EmulatorStatus> {
        match &self.emulator {
            Some(e) => Ok(e.status()),
            None => emulation::query_status(&self.state, &self.spec.name),
        }
    }

    /// Changes the impairments of the emulated link without dropping connections.
    pub fn set_link(&self, link: &tcplab_emu::LinkConfig) -> Result<()> {
        match &self.emulator {
            Some(e) => e.set_link(link),
            None => emulation::set_link(&self.state, &self.spec.name, link),
        }
    }

    /// Hands a process-owned lab over to persistence: it will outlive this process.
    pub fn persist(&mut self) -> Result<()> {
        let _lock = self.state.lock()?;
        if let Some(mut record) = self.state.read(&self.spec.name)? {
            record.owner = None;
            self.state.write(&record)?;
        }
        lifecycle::unregister(&self.spec.name);
        self.owned = false;
        Ok(())
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        // The emulator's sockets hold the middle namespace: stop it before the namespaces go.
        drop(self.emulator.take());
        if self.owned && !self.removed {
            if let Err(e) = teardown(&self.state, &self.spec.name) {
                eprintln!("tcplab: tearing down lab '{}' failed: {e}", self.spec.name);
            }
        }
    }
}

fn hosts_by_name<'a>(hosts: &'a [Host], name: &str) -> Result<&'a Host> {
    hosts
        .iter()
        .find(|h| h.name == name)
        .ok_or_else(|| LabError::invalid("emulation.host", format!("no host '{name}'")))
}

/// Starts `tcplab emu --lab NAME` as a detached process for a persistent lab, waits until its
/// control socket answers, and returns its registry entry.
fn start_companion(state: &StateDir, lab: &str, host: &str) -> Result<Companion> {
    use std::os::unix::process::CommandExt;
    let program = emulation::companion_program().ok_or_else(|| {
        LabError::invalid(
            "--bridge",
            "a persistent emulated lab needs the tcplab binary to run its emulator;              build the lab with Ownership::Process from a library",
        )
    })?;
    let dir = state.root().join("emu");
    std::fs::create_dir_all(&dir)
        .map_err(|e| LabError::kernel(format!("creating {}", dir.display()), e))?;
    let log_path = dir.join(format!("{lab}.log"));
    let log = std::fs::File::create(&log_path)
        .map_err(|e| LabError::kernel(format!("creating {}", log_path.display()), e))?;
    let log2 = log
        .try_clone()
        .map_err(|e| LabError::kernel("duplicating the log handle", e))?;
    let mut child = std::process::Command::new(program)
        .args(["emu", "--lab", lab])
        .env("TCPLAB_STATE_DIR", state.root())
        .stdin(std::process::Stdio::null())
        .stdout(log)
        .stderr(log2)
        .process_group(0)
        .spawn()
        .map_err(|e| {
            LabError::kernel(format!("starting the emulator ({})", program.display()), e)
        })?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        if emulation::query_status(state, lab).is_ok_and(|s| s.running) {
            break;
        }
        let exited = child.try_wait().ok().flatten();
        if exited.is_some() || std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            let log = std::fs::read_to_string(&log_path).unwrap_or_default();
            return Err(LabError::invalid(
                "emulator",
                format!(
                    "the emulator did not start: {}",
                    log.trim().replace('\n', "; ")
                ),
            ));
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let process = ProcessId::of(child.id())
        .ok_or_else(|| LabError::invalid("emulator", "the emulator exited right after starting"))?;
    Ok(Companion {
        role: "emulator".into(),
        host: host.into(),
        process,
    })
}

fn hosts_of(spec: &LabSpec, nets: &BTreeMap<String, Arc<NetNs>>) -> Vec<Host> {
    spec.nodes
        .iter()
        .map(|node| Host {
            name: node.name.clone(),
            role: node.role,
            netns: Arc::clone(&nets[&node.name]),
            addrs: spec
                .links
                .iter()
                .flat_map(|l| [&l.a, &l.b])
                .filter(|e| e.host == node.name)
                .flat_map(|e| e.addrs.iter().copied())
                .collect(),
        })
        .collect()
}

/// Refuses a name already registered or whose namespaces exist.
fn check_name_free(state: &StateDir, spec: &LabSpec) -> Result<()> {
    if state.read(&spec.name)?.is_some() {
        return Err(LabError::AlreadyExists(spec.name.clone()));
    }
    let existing = netns::list();
    if spec
        .nodes
        .iter()
        .any(|n| existing.contains(&spec.netns_name(&n.name)))
    {
        return Err(LabError::AlreadyExists(spec.name.clone()));
    }
    Ok(())
}

/// Removes a lab by name: its companion processes, namespaces, host-sysctl changes and record.
/// Safe to repeat; missing parts are skipped.
pub fn teardown(state: &StateDir, name: &str) -> Result<()> {
    let lock = state.lock()?;
    teardown_locked(state, &lock, name)
}

pub(crate) fn teardown_locked(state: &StateDir, lock: &StateLock, name: &str) -> Result<()> {
    let Some(record) = state.read(name)? else {
        lifecycle::unregister(name);
        return Ok(());
    };
    for companion in &record.companions {
        lifecycle::end_process(&companion.process);
    }
    let mut first_error = None;
    let mut names = record.namespaces.clone();
    names.extend(
        record
            .spec
            .nodes
            .iter()
            .map(|n| record.spec.netns_name(&n.name)),
    );
    names.sort();
    names.dedup();
    for ns in &names {
        match netns::delete(ns) {
            Ok(()) => crate::state::unclaim(ns),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    if let Err(e) = sysctl_apply::release_host(state, lock, name) {
        first_error.get_or_insert(e);
    }
    if let Some(e) = first_error {
        return Err(e);
    }
    state.remove(name)?;
    lifecycle::unregister(name);
    Ok(())
}
