//! Network namespaces the way `ip netns` keeps them: a bind mount of the namespace file under
//! `/run/netns/<name>`, so `ip netns exec` works on every lab host for debugging.
//!
//! Namespaces are entered per *thread* (setns(2) affects only the calling thread), which is what
//! lets one process run a client thread in one host and a server thread in another.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::PathBuf;

use rustix::mount::{MountPropagationFlags, UnmountFlags};
use rustix::thread::{LinkNameSpaceType, UnshareFlags};

use crate::error::{KernelContext, LabError, Result};

/// Where named namespaces live; fixed by iproute2 so `ip netns` sees ours.
pub const NETNS_DIR: &str = "/run/netns";

/// Where this process keeps namespace handles: [`NETNS_DIR`] for root; for anyone else
/// `<state>/netns`, where a rootless session's holder mounted a tmpfs only the session sees
/// (`crate::rootless`, `crate::privileges`).
pub fn dir() -> PathBuf {
    if let Some(session) = crate::privileges::session_netns_dir() {
        return session;
    }
    if crate::privileges::machine_root() {
        PathBuf::from(NETNS_DIR)
    } else {
        // An unprivileged user outside a session: where the session kept them (empty here).
        crate::privileges::user_state_dir().join("netns")
    }
}

/// A handle on a named network namespace. Holding it keeps the namespace alive even after its
/// name is removed, so threads can still be entered into it.
#[derive(Debug)]
pub struct NetNs {
    name: String,
    fd: OwnedFd,
}

impl NetNs {
    /// The namespace name (file name under [`dir`]).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The namespace file descriptor, for setns(2) or `IFLA_NET_NS_FD`.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Moves the *calling thread* into this namespace. Threads spawned afterwards inherit it.
    pub fn enter_current_thread(&self) -> Result<()> {
        enter(self.fd.as_fd()).kernel_context(|| format!("entering namespace {}", self.name))
    }

    /// A new owned handle on the same namespace (for moving into another thread).
    pub fn try_clone(&self) -> Result<NetNs> {
        Ok(NetNs {
            name: self.name.clone(),
            fd: self
                .fd
                .try_clone()
                .kernel_context(|| format!("duplicating the handle of namespace {}", self.name))?,
        })
    }
}

/// The path of a named namespace.
pub fn path_of(name: &str) -> PathBuf {
    dir().join(name)
}

/// setns(2) for network namespaces, on the calling thread.
pub fn enter(fd: BorrowedFd<'_>) -> io::Result<()> {
    rustix::thread::move_into_link_name_space(fd, Some(LinkNameSpaceType::Network))
        .map_err(io::Error::from)
}

/// Creates a named namespace. Fails with [`LabError::AlreadyExists`]-style errors if the name is
/// taken, so two labs can never share a host.
pub fn create(name: &str) -> Result<NetNs> {
    prepare_dir()?;
    let path = path_of(name);
    // The mount point is created exclusively: this is the atomic "name is mine" step.
    File::options()
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(|e| {
            if e.kind() == io::ErrorKind::AlreadyExists {
                LabError::invalid(
                    "namespace",
                    format!(
                        "{} already exists; remove it (`tcplab lab gc`) or pick another lab name",
                        path.display()
                    ),
                )
            } else {
                LabError::kernel(format!("creating {}", path.display()), e)
            }
        })?;
    let bind_path = path.clone();
    // unshare(CLONE_NEWNET) on a throw-away thread: the calling thread keeps its namespace.
    let made = std::thread::Builder::new()
        .name("netns-create".into())
        .spawn(move || -> io::Result<()> {
            // Safety: CLONE_NEWNET only changes this thread's network namespace; no file
            // descriptor table is unshared, so no fd is invalidated for other threads.
            unsafe { rustix::thread::unshare_unsafe(UnshareFlags::NEWNET) }?;
            rustix::mount::mount_bind("/proc/thread-self/ns/net", &bind_path)?;
            Ok(())
        })
        .kernel_context(|| "spawning a thread to create a namespace".to_string())?
        .join()
        .map_err(|_| {
            LabError::kernel("creating a namespace", io::Error::other("thread panicked"))
        })?;
    if let Err(e) = made {
        let _ = std::fs::remove_file(&path);
        return Err(LabError::kernel(format!("creating namespace {name}"), e));
    }
    open(name)
}

/// Opens an existing named namespace.
pub fn open(name: &str) -> Result<NetNs> {
    let path = path_of(name);
    let file =
        File::open(&path).kernel_context(|| format!("opening namespace {}", path.display()))?;
    Ok(NetNs {
        name: name.to_string(),
        fd: file.into(),
    })
}

/// Removes a named namespace: detaches the bind mount and deletes the file. The kernel frees the
/// namespace (and every veth end in it) once no process or handle holds it. Missing is not an
/// error, so teardown can be retried.
pub fn delete(name: &str) -> Result<()> {
    let path = path_of(name);
    // Outside a rootless session its handles are not visible, and umount(2) would refuse an
    // unprivileged caller before looking at the path.
    if std::fs::symlink_metadata(&path).is_err_and(|e| e.kind() == io::ErrorKind::NotFound) {
        return Ok(());
    }
    match rustix::mount::unmount(&path, UnmountFlags::DETACH) {
        Ok(()) => {}
        // Not mounted (half-built) or already gone: carry on to the unlink.
        Err(rustix::io::Errno::INVAL) | Err(rustix::io::Errno::NOENT) => {}
        Err(e) => {
            return Err(LabError::kernel(
                format!("unmounting {}", path.display()),
                e.into(),
            ));
        }
    }
    match std::fs::remove_file(&path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(LabError::kernel(format!("removing {}", path.display()), e)),
    }
}

/// Names of every namespace under [`dir`].
pub fn list() -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(dir()) else {
        return Vec::new();
    };
    let mut names: Vec<String> = dir
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    names.sort();
    names
}

/// Makes `/run/netns` exist and be a shared mount, as iproute2 does, so namespaces created here
/// are visible to `ip netns` in other mount namespaces too.
fn prepare_dir() -> Result<()> {
    if let Some(session) = crate::privileges::session_netns_dir() {
        // The holder's tmpfs, private to the session: nothing to share it with.
        return std::fs::create_dir_all(&session)
            .kernel_context(|| format!("creating {}", session.display()));
    }
    std::fs::create_dir_all(NETNS_DIR).kernel_context(|| format!("creating {NETNS_DIR}"))?;
    let shared = MountPropagationFlags::SHARED | MountPropagationFlags::REC;
    match rustix::mount::mount_change(NETNS_DIR, shared) {
        Ok(()) => Ok(()),
        Err(rustix::io::Errno::INVAL) => {
            // Not a mount point yet: bind it onto itself, then share it.
            rustix::mount::mount_bind_recursive(NETNS_DIR, NETNS_DIR)
                .and_then(|()| rustix::mount::mount_change(NETNS_DIR, shared))
                .map_err(io::Error::from)
                .kernel_context(|| format!("making {NETNS_DIR} a shared mount"))
        }
        Err(rustix::io::Errno::PERM) | Err(rustix::io::Errno::ACCESS) => Err(LabError::not_root(
            "creating network namespaces",
            crate::privileges::rootless_facts(),
        )),
        Err(e) => Err(LabError::kernel(format!("preparing {NETNS_DIR}"), e.into())),
    }
}
