//! The client's credentials ([`ClientAuth`]: its key, the server keys it accepts) and its side of
//! the handshake.
//!
//! Credentials are process-wide: every workload opens its control connection through
//! [`crate::session::Session::open`], from whatever thread a lab placement runs it on, so the
//! CLI installs them once ([`ClientAuth::install`]) and library users who install nothing get
//! [`ClientAuth::from_env`]: `TCPLAB_KEY` / `TCPLAB_SERVER_KEY`, or the default key file, or a
//! key made for this process (enough for servers on loopback and lab addresses). An agent that
//! runs a test toward another agent (`Ask::Run`) uses its own key on that thread only
//! ([`ClientAuth::scoped`]), leaving the process's credentials alone.

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock, RwLock};
use std::time::{Duration, Instant};

use super::channel::{Channel, push_frame, read_body};
use super::keys::{KeyError, KeyList, KeyPair, PublicKey, SECRET_TAG};
use super::noise::{Initiator, NoiseError};
use super::scope::{LAB_RANGES, is_lab_or_loopback};
use crate::error::{LoadError, Result};
use crate::proto::{self, Ctrl};

/// The environment variable with the client's secret key: a file's path, or the key line itself.
pub const KEY_ENV: &str = "TCPLAB_KEY";
/// The environment variable with the server keys a client accepts: a key line, or a file of them.
pub const SERVER_KEY_ENV: &str = "TCPLAB_SERVER_KEY";
/// Largest message a client takes from a server (a report with 10 million stamps).
pub const MAX_FROM_SERVER: usize = 256 << 20;

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
    if v.starts_with(super::keys::PUBLIC_TAG) || (v.len() == 44 && !Path::new(v).exists()) {
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
        let key = KeyPair::generate("ephemeral").map_err(|e| LoadError::Key {
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
        let key_err = |source| LoadError::Key {
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
                let pins = load_pins(&v, SERVER_KEY_ENV).map_err(|source| LoadError::Key {
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
            .map_err(LoadError::Auth)
    }

    /// Whether to go on with a server at `target` that proved it holds `key`: a pinned key must
    /// match; without pins, only loopback and lab addresses (or `--insecure`) are believed.
    pub fn check_server(&self, target: SocketAddr, key: PublicKey) -> Result<()> {
        if !self.pins.is_empty() {
            return match self.pins.find(&key) {
                Some(_) => Ok(()),
                None => Err(LoadError::Auth(format!(
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
        Err(LoadError::Auth(format!(
            "the server at {target} is not pinned and is not a loopback or lab address \
             ({LAB_RANGES}): give --server-key with the key it printed at start ({key}, if this \
             is the right server), or --insecure to believe any key"
        )))
    }
}

/// Runs the client's side of the handshake on a connected `stream` within `timeout`, then
/// sends `first` (the test's Hello) sealed in the same write as the last handshake frame.
pub(crate) fn handshake(
    mut stream: TcpStream,
    auth: &ClientAuth,
    target: SocketAddr,
    first: &[u8],
    timeout: Duration,
) -> Result<Channel> {
    let deadline = Some(Instant::now() + timeout);
    let noise = |e: NoiseError| LoadError::Protocol(format!("handshake with {target}: {e}"));
    let (init, f1) = Initiator::start(&auth.key, proto::VERSION).map_err(noise)?;
    let mut buf = Vec::new();
    push_frame(&mut buf, &f1);
    stream
        .write_all(&buf)
        .map_err(|e| LoadError::io("writing to the control connection", e))?;
    let f2 = read_body(&mut stream, 64 << 10, deadline).map_err(|e| handshake_read(target, &e))?;
    if let Some(refusal) = clear_refusal(&f2) {
        return Err(refusal);
    }
    let seen = init.on_reply(&f2).map_err(noise)?;
    auth.check_server(target, seen.server_key())?;
    let (f3, transport) = seen.finish().map_err(noise)?;
    let mut prefix = Vec::new();
    push_frame(&mut prefix, &f3);
    let mut channel = Channel::new(stream, transport, MAX_FROM_SERVER);
    channel.send_after(&prefix, &[first])?;
    Ok(channel)
}

/// A refusal the server sent in clear instead of frame 2 (a limit, or a server of another
/// protocol version), or `None` for a Noise reply. Frame 2 begins with the server's ephemeral
/// key, 32 random bytes whose first is `{` once in 256 handshakes: only a frame that parses as a
/// refusal is one.
fn clear_refusal(f2: &[u8]) -> Option<LoadError> {
    if f2.first() != Some(&b'{') {
        return None;
    }
    match serde_json::from_slice::<Ctrl>(f2).ok()? {
        Ctrl::Error { message, cause } => Some(LoadError::refused(cause, &message)),
        _ => None,
    }
}

/// An error reading frame 2, with the likely cause.
fn handshake_read(target: SocketAddr, e: &std::io::Error) -> LoadError {
    if e.kind() == std::io::ErrorKind::UnexpectedEof {
        LoadError::Protocol(format!(
            "the server at {target} closed the connection during the handshake without a \
             reason; a tcplab older than protocol version 3 (the first with this handshake) \
             does that (install this version there), servers since say why they refuse"
        ))
    } else if e.kind() == std::io::ErrorKind::InvalidData {
        LoadError::Protocol(format!(
            "the peer at {target} is not a tcplab server of protocol version {} ({e}); check \
             --to",
            proto::VERSION
        ))
    } else {
        LoadError::Protocol(format!(
            "{}; check --to and that `tcplab serve` runs there",
            crate::net::reason("waiting for the server's handshake", e)
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_noise_reply_that_begins_with_a_brace_is_not_taken_for_a_refusal() {
        let server = KeyPair::generate("s").expect("s");
        let client = ClientAuth::ephemeral().expect("key");
        // One reply in 256 begins with `{`; 5,000 tries miss it with odds of about 1e-8.
        let found = (0..5_000).find_map(|_| {
            let (init, f1) = Initiator::start(&client.key, proto::VERSION).expect("start");
            let super::super::noise::Intro::Current(msg1) =
                super::super::noise::parse_intro(&f1, proto::VERSION)
            else {
                panic!("frame 1 is not this version's");
            };
            let (_, f2) = super::super::noise::Responder::start(&server, msg1).expect("reply");
            (f2.first() == Some(&b'{')).then_some((init, f2))
        });
        let (init, f2) = found.expect("a reply beginning with a brace");
        assert!(clear_refusal(&f2).is_none());
        assert!(init.on_reply(&f2).is_ok());
    }

    #[test]
    fn a_refusal_in_clear_is_read_as_one() {
        let refusal = serde_json::to_vec(&Ctrl::refusal(
            crate::proto::Cause::Busy,
            "too many sessions",
        ))
        .expect("json");
        let e = clear_refusal(&refusal).expect("a refusal");
        assert!(e.to_string().contains("too many sessions"), "{e}");
    }

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
            e.to_string().contains("--server-key") && e.is_usage(),
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
