//! The client's credentials ([`ClientAuth`]: its key, the server keys it accepts). The client's
//! side of the handshake, which speaks the control protocol, is `tcplab_load::session`'s.
//!
//! Credentials are process-wide: every workload opens its control connection through
//! `tcplab_load::session::Session::open`, from whatever thread a lab placement runs it on, so the
//! CLI installs them once ([`ClientAuth::install`]) and library users who install nothing get
//! [`ClientAuth::from_env`]: `TCPLAB_KEY` / `TCPLAB_SERVER_KEY`, or the default key file, or a
//! key made for this process (enough for servers on loopback and lab addresses). An agent that
//! runs a test toward another agent (`Ask::Run`) uses its own key on that thread only
//! ([`ClientAuth::scoped`]), leaving the process's credentials alone.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock, RwLock};

use crate::error::{AuthError, Result};
use crate::keys::{KeyError, KeyList, KeyPair, PublicKey, SECRET_TAG};
use crate::scope::{LAB_RANGES, is_lab_or_loopback};

/// The environment variable with the client's secret key: a file's path, or the key line itself.
pub const KEY_ENV: &str = "TCPLAB_KEY";
/// The environment variable with the server keys a client accepts: a key line, or a file of them.
pub const SERVER_KEY_ENV: &str = "TCPLAB_SERVER_KEY";

/// Who this client is and which servers it believes.
#[derive(Debug, Clone)]
pub struct ClientAuth {
    key: KeyPair,
    /// Where the key came from, for messages (`--key FILE`, `TCPLAB_KEY`, ...).
    key_source: String,
    pins: KeyList,
    pin_source: String,
    insecure: bool,
}

static INSTALLED: RwLock<Option<Arc<ClientAuth>>> = RwLock::new(None);

thread_local! {
    /// Credentials for this thread only ([`ClientAuth::scoped`]): an agent running a test
    /// toward another agent (`Ask::Run`) uses its own key without touching the process's.
    static SCOPED: std::cell::RefCell<Option<Arc<ClientAuth>>> =
        const { std::cell::RefCell::new(None) };
}

/// Puts the thread's previous scoped credentials back when dropped (even on a panic).
struct ScopeGuard(Option<Arc<ClientAuth>>);

impl Drop for ScopeGuard {
    fn drop(&mut self) {
        let prev = self.0.take();
        SCOPED.with(|s| *s.borrow_mut() = prev);
    }
}
static FROM_ENV: OnceLock<std::result::Result<Arc<ClientAuth>, String>> = OnceLock::new();

/// The default key file: `$XDG_CONFIG_HOME/tcplab/key`, else `~/.config/tcplab/key`.
pub fn default_key_path() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(base.join("tcplab").join("key"))
}

/// A key from `--key`/`TCPLAB_KEY`: the key line itself, or a file holding it.
pub fn load_secret(value: &str, source: &str) -> std::result::Result<KeyPair, KeyError> {
    if value.contains(SECRET_TAG) {
        KeyPair::parse_secret(value, source)
    } else {
        KeyPair::load(Path::new(value))
    }
}

/// Server keys from `--server-key`/`TCPLAB_SERVER_KEY`: a key line, or a file of them.
pub fn load_pins(value: &str, source: &str) -> std::result::Result<KeyList, KeyError> {
    let v = value.trim();
    if v.starts_with(crate::keys::PUBLIC_TAG) || (v.len() == 44 && !Path::new(v).exists()) {
        KeyList::parse(v, source)
    } else {
        KeyList::load(Path::new(v))
    }
}

impl ClientAuth {
    /// A client with `key` (from `key_source`), no pins, pinning enforced.
    pub fn new(key: KeyPair, key_source: impl Into<String>) -> Self {
        Self {
            key,
            key_source: key_source.into(),
            pins: KeyList::default(),
            pin_source: String::new(),
            insecure: false,
        }
    }

    /// A client with a key made for this process: servers with `--keys` refuse it, lab and
    /// loopback servers without keys take it.
    pub fn ephemeral() -> Result<Self> {
        let key = KeyPair::generate("ephemeral").map_err(|e| AuthError::Key {
            flag: "key",
            source: e,
        })?;
        Ok(Self::new(
            key,
            "a key made for this run (no --key or TCPLAB_KEY)",
        ))
    }

    /// Accepts servers whose key is in `pins` (from `source`, for messages).
    pub fn with_pins(mut self, pins: KeyList, source: impl Into<String>) -> Self {
        self.pins = pins;
        self.pin_source = source.into();
        self
    }

    /// Accepts any server key, anywhere (`--insecure`).
    pub fn with_insecure(mut self, insecure: bool) -> Self {
        self.insecure = insecure;
        self
    }

    /// This client's key.
    pub fn key(&self) -> &KeyPair {
        &self.key
    }

    /// Where this client's key came from (`--key FILE`, `TCPLAB_KEY`, ...), for messages.
    pub fn key_source(&self) -> &str {
        &self.key_source
    }

    /// The credentials the environment describes: the key in `TCPLAB_KEY` (else the default
    /// key file if it exists, else a key for this process) and the pins in `TCPLAB_SERVER_KEY`.
    pub fn from_env() -> Result<Self> {
        let key_err = |source| AuthError::Key {
            flag: "key",
            source,
        };
        let auth = match std::env::var(KEY_ENV) {
            Ok(v) if !v.trim().is_empty() => {
                Self::new(load_secret(&v, KEY_ENV).map_err(key_err)?, KEY_ENV)
            }
            _ => match default_key_path().filter(|p| p.exists()) {
                Some(p) => Self::new(KeyPair::load(&p).map_err(key_err)?, p.display().to_string()),
                None => Self::ephemeral()?,
            },
        };
        Ok(match std::env::var(SERVER_KEY_ENV) {
            Ok(v) if !v.trim().is_empty() => {
                let pins = load_pins(&v, SERVER_KEY_ENV).map_err(|source| AuthError::Key {
                    flag: "server-key",
                    source,
                })?;
                auth.with_pins(pins, SERVER_KEY_ENV)
            }
            _ => auth,
        })
    }

    /// Makes these the credentials of every control connection this process opens from now on.
    pub fn install(self) {
        let mut slot = INSTALLED.write().unwrap_or_else(|p| p.into_inner());
        *slot = Some(Arc::new(self));
    }

    /// Runs `f` with these credentials as [`ClientAuth::current`] on this thread only (the
    /// workloads open their control connection on the calling thread).
    pub fn scoped<T>(self: Arc<Self>, f: impl FnOnce() -> T) -> T {
        let prev = SCOPED.with(|s| s.borrow_mut().replace(self));
        let _guard = ScopeGuard(prev);
        f()
    }

    /// The credentials in force: this thread's [`ClientAuth::scoped`] ones, else those
    /// installed, else [`ClientAuth::from_env`] (read once).
    pub fn current() -> Result<Arc<Self>> {
        if let Some(a) = SCOPED.with(|s| s.borrow().clone()) {
            return Ok(a);
        }
        if let Some(a) = INSTALLED.read().unwrap_or_else(|p| p.into_inner()).as_ref() {
            return Ok(a.clone());
        }
        FROM_ENV
            .get_or_init(|| Self::from_env().map(Arc::new).map_err(|e| e.to_string()))
            .clone()
            .map_err(AuthError::Auth)
    }

    /// Whether to go on with a server at `target` that proved it holds `key`: a pinned key must
    /// match; without pins, only loopback and lab addresses (or `--insecure`) are believed.
    pub fn check_server(&self, target: SocketAddr, key: PublicKey) -> Result<()> {
        if !self.pins.is_empty() {
            return match self.pins.find(&key) {
                Some(_) => Ok(()),
                None => Err(AuthError::Auth(format!(
                    "the server at {target} holds key {key}, which is not the key given with \
                     {}: another server, or someone in the path; compare with the key the \
                     server printed at start and fix --server-key",
                    self.pin_source
                ))),
            };
        }
        if self.insecure || is_lab_or_loopback(target.ip()) {
            return Ok(());
        }
        Err(AuthError::Auth(format!(
            "the server at {target} is not pinned and is not a loopback or lab address \
             ({LAB_RANGES}): give --server-key with the key it printed at start ({key}, if this \
             is the right server), or --insecure to believe any key"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unpinned_servers_are_believed_only_on_lab_and_loopback_addresses() {
        let me = ClientAuth::ephemeral().expect("key");
        let server = KeyPair::generate("s").expect("s").public();
        let at = |s: &str| s.parse::<SocketAddr>().expect("addr");
        assert!(me.check_server(at("127.0.0.1:5301"), server).is_ok());
        assert!(me.check_server(at("[fd00::2]:5301"), server).is_ok());
        let e = me
            .check_server(at("10.1.2.3:5301"), server)
            .expect_err("not pinned");
        assert!(
            e.to_string().contains("--server-key") && matches!(e, AuthError::Auth(_)),
            "{e}"
        );
        let me = me.with_insecure(true);
        assert!(me.check_server(at("10.1.2.3:5301"), server).is_ok());
    }

    #[test]
    fn a_pinned_key_must_match_even_on_loopback() {
        let server = KeyPair::generate("s").expect("s").public();
        let other = KeyPair::generate("o").expect("o").public();
        let me = ClientAuth::ephemeral()
            .expect("key")
            .with_pins(KeyList::of([server]), "--server-key");
        let at: SocketAddr = "127.0.0.1:5301".parse().expect("addr");
        assert!(me.check_server(at, server).is_ok());
        let e = me
            .check_server(at, other)
            .expect_err("wrong key")
            .to_string();
        assert!(e.contains("not the key given with --server-key"), "{e}");
    }

    #[test]
    fn keys_come_as_lines_or_files() {
        let kp = KeyPair::generate("k").expect("k");
        let text = kp.secret_text();
        assert_eq!(
            load_secret(&text, "env").expect("line").public(),
            kp.public()
        );
        let pins = load_pins(&kp.public_line(), "env").expect("line");
        assert!(pins.find(&kp.public()).is_some());
        let e = load_secret("/nonexistent/key", "env").expect_err("missing");
        assert!(e.to_string().contains("/nonexistent/key"), "{e}");
    }
}
