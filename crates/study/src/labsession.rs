//! A lab kept between runs, with its tcplab server already listening in the server host.
//!
//! Starting the server per run (as `tcplab_front::lab::run_on` does) costs its accept loop's
//! stop poll on every run; here the server lives as long as the lab, each run's client connects
//! to it, and the lab is torn down (server first) only when the executor needs another one.
//!
//! With `reset = "reset"` the session also carries what a reset needs ([`LabSession::reset_to`]):
//! the value every touched sysctl had in the fresh lab, so keys a configuration does not set
//! go back to it, and the link's current impairments, so they are changed only when they differ.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;
use tcplab_lab::facts::Facts;

use tcplab_lab::{Lab, LabSpec, Role, SysctlSetting};

use crate::runner::RunError;
use crate::tcp_metrics::Flusher;
use crate::worker::HostWorker;

/// A lab, its server, and its reset state.
#[derive(Debug)]
pub struct LabSession {
    /// The configuration it was last set up for.
    pub config_id: usize,
    lab: Lab,
    client: String,
    server: String,
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    serving: Option<JoinHandle<tcplab_load::Result<()>>>,
    /// Fresh-lab value of every (host, key) a configuration has set.
    defaults: BTreeMap<(String, String), String>,
    /// What the last reset applied: (host, key) → value.
    applied: BTreeMap<(String, String), String>,
    link: Option<tcplab_emu::LinkConfig>,
    /// The lab's facts as read at the first run (see [`LabSession::facts`]).
    facts: Option<Facts>,
    /// Each host's TCP metrics flusher, opened inside it at the first reset.
    flushers: Vec<(String, Flusher)>,
    /// A thread kept in each host that needed one (sysctl writes, the client), by host name.
    workers: BTreeMap<String, HostWorker>,
    /// Per sysctl key: whether it is the namespace's own (written here through the workers)
    /// rather than the machine's (written by the lab, which journals it first).
    per_namespace: BTreeMap<String, bool>,
}

impl LabSession {
    /// Starts the server in the lab's last end host; the client runs in the first.
    pub fn start(lab: Lab, config_id: usize) -> Result<LabSession, RunError> {
        let ends: Vec<&str> = lab
            .hosts()
            .iter()
            .filter(|h| h.role() == Role::Host)
            .map(|h| h.name())
            .collect();
        let (client, server) = match ends.as_slice() {
            [first, .., last] => (first.to_string(), *last),
            _ => return Err(RunError::Rejected("the lab needs two end hosts".into())),
        };
        let shost = lab.host(server).map_err(failed)?;
        let ip: IpAddr = match (shost.ipv4(), shost.ipv6()) {
            (Some(v4), _) => v4.into(),
            (None, Some(v6)) => v6.into(),
            (None, None) => {
                return Err(RunError::Rejected(format!(
                    "lab host {server} has no address"
                )));
            }
        };
        let srv = shost
            .run(|| tcplab_agent::Server::bind(SocketAddr::new(ip, 0)))
            .map_err(failed)?
            .map_err(|e| RunError::Failed(e.to_string()))?;
        let addr = srv
            .local_addr()
            .map_err(|e| RunError::Failed(e.to_string()))?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let serving = shost
            .spawn("tcplab-serve", move || srv.serve(&flag, None))
            .map_err(failed)?;
        let link = lab.spec().emulation.as_ref().map(|e| e.link.clone());
        let server = server.to_string();
        Ok(LabSession {
            facts: None,
            flushers: Vec::new(),
            workers: BTreeMap::new(),
            per_namespace: BTreeMap::new(),
            config_id,
            link,
            lab,
            client,
            server,
            addr,
            stop,
            serving: Some(serving),
            defaults: BTreeMap::new(),
            applied: BTreeMap::new(),
        })
    }

    /// The lab.
    pub fn lab(&self) -> &Lab {
        &self.lab
    }

    /// The server's control address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The host the client runs in.
    pub fn client(&self) -> &str {
        &self.client
    }

    /// The host the server runs in (an http workload starts its web server there).
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The thread kept in the client host, started at the first call.
    pub fn client_worker(&mut self) -> Result<&HostWorker, RunError> {
        let client = self.client.clone();
        self.worker(&client)
    }

    /// The client's thread with the lab beside it, so a run can read the emulator's counters
    /// between its workloads while the thread runs them.
    pub fn client_and_lab(&mut self) -> Result<(&HostWorker, &Lab), RunError> {
        let client = self.client.clone();
        self.worker(&client)?;
        let worker = self
            .workers
            .get(&client)
            .ok_or_else(|| RunError::Failed(format!("no thread in host {client}")))?;
        Ok((worker, &self.lab))
    }

    /// The thread kept in `host`, started at the first call.
    fn worker(&mut self, host: &str) -> Result<&HostWorker, RunError> {
        if !self.workers.contains_key(host) {
            let w = HostWorker::start(self.lab.host(host).map_err(lab_error)?)?;
            self.workers.insert(host.to_string(), w);
        }
        self.workers
            .get(host)
            .ok_or_else(|| RunError::Failed(format!("no thread in host {host}")))
    }

    /// What the last reset applied, (host, key) → value (for the run's facts).
    pub fn applied(&self) -> &BTreeMap<(String, String), String> {
        &self.applied
    }

    /// The facts that explain a run in this lab: read from the lab (kernel, machine, every
    /// host's interfaces and sysctls) at its first run, and kept, since nothing but a reset
    /// changes them here; every sysctl the last reset wrote (and the lab read back) replaces the
    /// value read before.
    pub fn facts(&mut self) -> Result<Facts, RunError> {
        let mut facts = match &self.facts {
            Some(f) => f.clone(),
            None => {
                let f = tcplab_lab::facts::collect(&self.lab)
                    .map_err(|e| RunError::Failed(format!("collecting the facts: {e}")))?;
                self.facts = Some(f.clone());
                f
            }
        };
        for ((host, key), value) in &self.applied {
            if let Some(h) = facts.hosts.get_mut(host) {
                h.sysctls.insert(key.clone(), value.clone());
            }
        }
        Ok(facts)
    }

    /// Whether a lab built from `spec` would have the same shape as this one: everything but the
    /// name, the sysctls and the link's impairments, which a reset changes.
    pub fn same_shape(&self, spec: &LabSpec) -> bool {
        shape(self.lab.spec()) == shape(spec)
    }

    /// Puts the lab in the state a fresh lab of `spec` would have: sysctls an earlier
    /// configuration set and `spec` does not go back to their fresh values, `spec`'s are
    /// applied (verified by the lab), the link gets `spec`'s impairments, and every host's TCP
    /// metrics cache is flushed. The lab must have been built without sysctls (the fresh value
    /// of a key is read before its first change); one built with them is refused.
    pub fn reset_to(&mut self, spec: &LabSpec, config_id: usize) -> Result<(), RunError> {
        let wanted = self.expand(&spec.sysctls);
        let built_with = self.expand(&self.lab.spec().sysctls);
        for key in wanted.keys() {
            if built_with.contains_key(key) && !self.defaults.contains_key(key) {
                return Err(RunError::Failed(format!(
                    "cannot reset lab {}: it was built with {} set, so its fresh value is unknown; build a lab to be reset without sysctls",
                    self.lab.name(),
                    key.1
                )));
            }
            if !self.defaults.contains_key(key) {
                let value = self.lab.read_sysctl(&key.0, &key.1).map_err(lab_error)?;
                self.defaults.insert(key.clone(), value);
            }
        }
        let mut target = BTreeMap::new();
        for (key, default) in &self.defaults {
            let value = wanted.get(key).unwrap_or(default);
            target.insert(key.clone(), value.clone());
        }
        let changes: Vec<SysctlSetting> = target
            .iter()
            .filter(|(k, v)| self.applied.get(*k) != Some(*v))
            .map(|((host, key), value)| SysctlSetting {
                host: host.clone(),
                key: key.clone(),
                value: value.clone(),
            })
            .collect();
        if !changes.is_empty() {
            // Until the writes succeed the lab's state is not known: the next reset rewrites all.
            self.applied.clear();
            let mut machine = Vec::new();
            let mut own = Vec::new();
            for c in changes {
                if self.is_per_namespace(&c.key)? {
                    own.push(c);
                } else {
                    machine.push(c);
                }
            }
            if !machine.is_empty() {
                self.lab
                    .set_sysctls(&machine, spec.allow_host_sysctl)
                    .map_err(lab_error)?;
            }
            self.write_in_hosts(own)?;
        }
        self.applied = target;
        let link = spec.emulation.as_ref().map(|e| e.link.clone());
        if link != self.link {
            if let Some(l) = &link {
                self.lab.set_link(l).map_err(lab_error)?;
            }
            self.link = link;
        }
        if self.flushers.is_empty() {
            for host in self.lab.hosts() {
                let f = host.run(Flusher::open).map_err(failed)?.map_err(|e| {
                    RunError::Failed(format!(
                        "opening the TCP metrics socket in host {}: {e}",
                        host.name()
                    ))
                })?;
                self.flushers.push((host.name().to_string(), f));
            }
        }
        for (host, f) in &self.flushers {
            f.flush().map_err(|e| {
                RunError::Failed(format!("flushing the TCP metrics of host {host}: {e}"))
            })?;
        }
        self.config_id = config_id;
        Ok(())
    }

    /// Whether `key` belongs to each namespace: writable from inside the lab's first host, as
    /// the lab decides it (`tcplab_lab::Lab::set_sysctls`); asked once per key.
    fn is_per_namespace(&mut self, key: &str) -> Result<bool, RunError> {
        if let Some(&own) = self.per_namespace.get(key) {
            return Ok(own);
        }
        tcplab_host::sysctl::validate_key(key).map_err(lab_error)?;
        let Some(first) = self.lab.hosts().first().map(|h| h.name().to_string()) else {
            return Ok(false);
        };
        let k = key.to_string();
        let own = self
            .worker(&first)?
            .run(move || tcplab_host::sysctl::writable_here(&k))?
            == Some(true);
        self.per_namespace.insert(key.to_string(), own);
        Ok(own)
    }

    /// Writes namespace keys in their hosts (each write read back, as the lab does), every
    /// host's at once on its kept thread.
    fn write_in_hosts(&mut self, settings: Vec<SysctlSetting>) -> Result<(), RunError> {
        let mut pending = Vec::new();
        for s in settings {
            let worker = self.worker(&s.host)?;
            let p = worker
                .submit(move || tcplab_host::sysctl::write_verified(&s.host, &s.key, &s.value))?;
            pending.push(p);
        }
        let mut first_error = None;
        for p in pending {
            match p.recv() {
                Ok(Ok(Ok(_))) => {}
                Ok(Ok(Err(e))) => {
                    first_error.get_or_insert(lab_error(e));
                }
                Ok(Err(panic)) => std::panic::resume_unwind(panic),
                Err(_) => {
                    first_error.get_or_insert(RunError::Failed(
                        "a host's thread stopped during a sysctl write".into(),
                    ));
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// `all` → every host, in order; later settings of a key win.
    fn expand(&self, settings: &[SysctlSetting]) -> BTreeMap<(String, String), String> {
        let mut out = BTreeMap::new();
        for s in settings {
            for h in self.lab.hosts() {
                if s.host == "all" || s.host == h.name() {
                    out.insert(
                        (h.name().to_string(), s.key.clone()),
                        tcplab_host::sysctl::normalize(&s.value),
                    );
                }
            }
        }
        out
    }

    /// Stops the server and tears the lab down.
    pub fn close(mut self) {
        self.stop_server();
    }

    fn stop_server(&mut self) {
        // The kept threads leave their hosts before the lab goes.
        self.workers.clear();
        self.stop.store(true, Ordering::Relaxed);
        // The accept loop looks at the flag between accepts: a connection wakes it now rather
        // than at its next poll (the connection is dropped at once; the server shrugs it off).
        let addr = self.addr;
        if let Ok(h) = self.lab.host(&self.client) {
            let _ = h.run(move || TcpStream::connect_timeout(&addr, Duration::from_millis(200)));
        }
        if let Some(t) = self.serving.take() {
            let _ = t.join();
        }
    }
}

impl Drop for LabSession {
    fn drop(&mut self) {
        if self.serving.is_some() {
            self.stop_server();
        }
    }
}

/// A spec without what a reset may change.
fn shape(spec: &LabSpec) -> LabSpec {
    let mut s = spec.clone();
    s.name.clear();
    s.sysctls.clear();
    if let Some(e) = s.emulation.as_mut() {
        e.link = tcplab_emu::LinkConfig::default();
    }
    s
}

fn failed(e: tcplab_lab::LabError) -> RunError {
    RunError::Failed(e.to_string())
}

fn lab_error(e: impl Into<tcplab_lab::LabError>) -> RunError {
    crate::executor::lab_error(e.into())
}
