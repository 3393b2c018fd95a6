//! A lab host as the workloads see it: a name, addresses, and ways to run code inside it — a
//! thread entered into its namespace (setns), a scoped thread, or a child process.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::Arc;
use std::sync::mpsc;
use std::thread::{self, JoinHandle, Scope, ScopedJoinHandle};

use crate::error::{LabError, Result};
use crate::netns::NetNs;
use crate::spec::{IfAddr, Role};

/// One host of a lab.
#[derive(Debug, Clone)]
pub struct Host {
    pub(crate) name: String,
    pub(crate) role: Role,
    pub(crate) netns: Arc<NetNs>,
    pub(crate) addrs: Vec<IfAddr>,
}

impl Host {
    /// The host's name in the lab (`client`, `s2`, ...).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What the host is for.
    pub fn role(&self) -> Role {
        self.role
    }

    /// The namespace name, usable with `ip netns exec`.
    pub fn netns_name(&self) -> &str {
        self.netns.name()
    }

    /// The namespace handle.
    pub fn netns(&self) -> &NetNs {
        &self.netns
    }

    /// Every address configured on the host's lab interfaces.
    pub fn addrs(&self) -> &[IfAddr] {
        &self.addrs
    }

    /// The host's first IPv4 lab address.
    pub fn ipv4(&self) -> Option<Ipv4Addr> {
        self.addrs.iter().find_map(|a| match a.addr {
            IpAddr::V4(v4) => Some(v4),
            IpAddr::V6(_) => None,
        })
    }

    /// The host's first IPv6 lab address.
    pub fn ipv6(&self) -> Option<Ipv6Addr> {
        self.addrs.iter().find_map(|a| match a.addr {
            IpAddr::V6(v6) => Some(v6),
            IpAddr::V4(_) => None,
        })
    }

    /// Spawns a named thread entered into this host. Returns only once the thread is inside the
    /// namespace, so a setns failure is reported here rather than inside the thread.
    pub fn spawn<F, T>(&self, thread_name: &str, f: F) -> Result<JoinHandle<T>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let netns = Arc::clone(&self.netns);
        let (ready_tx, ready_rx) = mpsc::sync_channel::<io::Result<()>>(1);
        let handle = thread::Builder::new()
            .name(thread_name.to_string())
            .spawn(move || {
                let entered = crate::netns::enter(netns.fd());
                let ok = entered.is_ok();
                let _ = ready_tx.send(entered);
                if !ok {
                    // The spawner reports the error; this thread's result is never used.
                    std::panic::resume_unwind(Box::new("setns failed"));
                }
                f()
            })
            .map_err(|e| LabError::kernel(format!("spawning a thread in host {}", self.name), e))?;
        self.await_entered(ready_rx)?;
        Ok(handle)
    }

    /// Like [`Host::spawn`] for scoped threads, so the closure may borrow from the caller.
    pub fn spawn_scoped<'scope, 'env, F, T>(
        &self,
        scope: &'scope Scope<'scope, 'env>,
        thread_name: &str,
        f: F,
    ) -> Result<ScopedJoinHandle<'scope, T>>
    where
        F: FnOnce() -> T + Send + 'scope,
        T: Send + 'scope,
    {
        let netns = Arc::clone(&self.netns);
        let (ready_tx, ready_rx) = mpsc::sync_channel::<io::Result<()>>(1);
        let handle = thread::Builder::new()
            .name(thread_name.to_string())
            .spawn_scoped(scope, move || {
                let entered = crate::netns::enter(netns.fd());
                let ok = entered.is_ok();
                let _ = ready_tx.send(entered);
                if !ok {
                    std::panic::resume_unwind(Box::new("setns failed"));
                }
                f()
            })
            .map_err(|e| LabError::kernel(format!("spawning a thread in host {}", self.name), e))?;
        self.await_entered(ready_rx)?;
        Ok(handle)
    }

    /// Runs a closure inside the host on a fresh thread and waits for it. A panic in the closure
    /// is propagated to the caller.
    pub fn run<F, T>(&self, f: F) -> Result<T>
    where
        F: FnOnce() -> T + Send,
        T: Send,
    {
        thread::scope(|s| {
            let handle = self.spawn_scoped(s, "tcplab-host-run", f)?;
            match handle.join() {
                Ok(v) => Ok(v),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        })
    }

    /// A command that will run inside this host (like `ip netns exec`): the child enters the
    /// namespace between fork and exec.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut cmd = Command::new(program);
        let netns = Arc::clone(&self.netns);
        // Safety: the closure runs in the forked child before exec and only calls setns(2), which
        // is async-signal-safe; the fd stays open in the child because `netns` is kept alive by
        // the closure itself.
        unsafe {
            cmd.pre_exec(move || {
                if libc::setns(netns.fd().as_raw_fd(), libc::CLONE_NEWNET) != 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        cmd
    }

    fn await_entered(&self, rx: mpsc::Receiver<io::Result<()>>) -> Result<()> {
        match rx.recv() {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(LabError::kernel(format!("entering host {}", self.name), e)),
            Err(_) => Err(LabError::kernel(
                format!("entering host {}", self.name),
                io::Error::other("the thread ended before entering the namespace"),
            )),
        }
    }
}
