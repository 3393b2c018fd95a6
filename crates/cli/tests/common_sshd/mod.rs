//! A real OpenSSH server inside a lab host, for the launcher tests: Debian's /usr/sbin/sshd
//! run in the host's namespace (`ip netns exec`), listening on the host's lab address only,
//! key-only, with a throwaway host key and a client key shared by every sshd of the test
//! process (so one set of ssh options reaches all of them). Dropping it kills sshd by its PID.

#![allow(dead_code)]
#![allow(clippy::unwrap_used, reason = "test fixture: fails loudly")]

use std::net::{IpAddr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The sshd every test starts.
pub const SSHD: &str = "/usr/sbin/sshd";
/// How long sshd may take to listen.
const START: Duration = Duration::from_secs(10);

/// The client key of this process and how many sshds use it (removed with the last one).
static CLIENT: Mutex<Option<(tempfile::TempDir, usize)>> = Mutex::new(None);

/// One running sshd.
#[derive(Debug)]
pub struct Sshd {
    child: Child,
    dir: tempfile::TempDir,
    /// The namespace it runs in.
    pub namespace: String,
    /// Where it listens (port 22 of the host's lab address).
    pub addr: SocketAddr,
    client_dir: PathBuf,
}

/// Fails loudly when sshd is not installed (.ci/run installs openssh-server).
pub fn require_sshd() {
    assert!(
        Path::new(SSHD).exists() && which("ssh") && which("ssh-keygen"),
        "the fleet tests need OpenSSH: apt-get install openssh-server openssh-client (.ci/run \
         does)"
    );
}

fn which(program: &str) -> bool {
    Command::new(program)
        .arg("-V")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
        || Command::new("sh")
            .args(["-c", &format!("command -v {program}")])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
}

fn keygen(path: &Path) {
    let out = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "tcplab-test", "-f"])
        .arg(path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ssh-keygen: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The directory with the process's client key, made on first use; counts one more user.
fn client_dir_acquire() -> PathBuf {
    let mut slot = CLIENT.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((dir, users)) = slot.as_mut() {
        *users += 1;
        return dir.path().to_path_buf();
    }
    let dir = tempfile::Builder::new()
        .prefix("tcplab-ssh-client-")
        .tempdir()
        .unwrap();
    keygen(&dir.path().join("id_ed25519"));
    let path = dir.path().to_path_buf();
    *slot = Some((dir, 1));
    path
}

fn client_dir_release() {
    let mut slot = CLIENT.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, users)) = slot.as_mut() {
        *users -= 1;
        if *users == 0 {
            *slot = None;
        }
    }
}

/// The ssh options that reach every running [`Sshd`] of this process as root: its client key,
/// no known-hosts file (the host keys are throwaway), no user or system ssh config.
pub fn ssh_client_options() -> Vec<String> {
    let slot = CLIENT.lock().unwrap_or_else(|p| p.into_inner());
    let (dir, _) = slot.as_ref().expect("start an Sshd first");
    options_for(dir.path())
}

fn options_for(dir: &Path) -> Vec<String> {
    let mut o = vec![
        "-F".to_string(),
        "/dev/null".into(),
        "-i".into(),
        dir.join("id_ed25519").display().to_string(),
    ];
    for opt in [
        "IdentitiesOnly=yes",
        "UserKnownHostsFile=/dev/null",
        "StrictHostKeyChecking=no",
        "LogLevel=ERROR",
    ] {
        o.push("-o".into());
        o.push(opt.into());
    }
    o
}

impl Sshd {
    /// Starts sshd in network namespace `namespace`, listening on `address` port 22 only, and
    /// returns once it accepts connections.
    pub fn start(namespace: &str, address: IpAddr) -> Sshd {
        require_sshd();
        assert!(
            tcplab_auth::is_lab_or_loopback(address),
            "sshd is started on lab addresses only, not {address}"
        );
        // Privilege separation directory; Debian creates it only when its service starts.
        std::fs::create_dir_all("/run/sshd").unwrap();
        let client_dir = client_dir_acquire();
        let dir = tempfile::Builder::new()
            .prefix("tcplab-sshd-")
            .tempdir()
            .unwrap();
        let d = dir.path();
        keygen(&d.join("host_ed25519"));
        std::fs::copy(client_dir.join("id_ed25519.pub"), d.join("authorized_keys")).unwrap();
        let addr = SocketAddr::new(address, 22);
        let config = format!(
            "ListenAddress {listen}\n\
             HostKey {d}/host_ed25519\n\
             PidFile {d}/sshd.pid\n\
             AuthorizedKeysFile {d}/authorized_keys\n\
             PubkeyAuthentication yes\n\
             PasswordAuthentication no\n\
             KbdInteractiveAuthentication no\n\
             PermitRootLogin prohibit-password\n\
             StrictModes no\n\
             UsePAM no\n\
             UseDNS no\n\
             MaxStartups 200:30:400\n\
             MaxSessions 64\n\
             LogLevel INFO\n",
            listen = match address {
                IpAddr::V4(_) => addr.to_string(),
                IpAddr::V6(v6) => format!("[{v6}]:22"),
            },
            d = d.display(),
        );
        std::fs::write(d.join("sshd_config"), config).unwrap();
        let log = std::fs::File::create(d.join("sshd.log")).unwrap();
        let child = Command::new("ip")
            .args(["netns", "exec", namespace, SSHD, "-D", "-e", "-f"])
            .arg(d.join("sshd_config"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let mut sshd = Sshd {
            child,
            dir,
            namespace: namespace.to_string(),
            addr,
            client_dir,
        };
        sshd.await_listening();
        sshd
    }

    /// Polls a connect to sshd from inside its namespace, at most [`START`].
    fn await_listening(&mut self) {
        let ns = tcplab_lab::netns::open(&self.namespace).unwrap();
        let addr = self.addr;
        let up = std::thread::spawn(move || {
            tcplab_lab::netns::enter(ns.fd()).unwrap();
            let deadline = Instant::now() + START;
            while Instant::now() < deadline {
                if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                    return true;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            false
        })
        .join()
        .unwrap();
        if !up || self.child.try_wait().unwrap().is_some() {
            panic!(
                "sshd in {} did not listen on {} within {START:?}; its log:\n{}",
                self.namespace,
                self.addr,
                self.log()
            );
        }
    }

    /// What sshd logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("sshd.log")).unwrap_or_default()
    }

    /// `root@ADDRESS`.
    pub fn destination(&self) -> String {
        format!("root@{}", self.addr.ip())
    }

    /// The ssh options that reach this sshd (and every other of this process).
    pub fn client_options(&self) -> Vec<String> {
        options_for(&self.client_dir)
    }

    /// sshd's PID (of the `ip netns exec` that became it).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        // `ip netns exec` execs sshd, so the child's PID is sshd's: SIGTERM it, then reap.
        if let Ok(pid) = i32::try_from(self.child.id()) {
            if let Some(pid) = rustix::process::Pid::from_raw(pid) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
            }
        }
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                client_dir_release();
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        client_dir_release();
    }
}
