//! Agent keys: X25519 key pairs (the static keys of the Noise handshake in [`crate::noise`]),
//! their one-line text forms and the files that hold them.
//!
//! X25519 rather than ed25519 because the control channel is a Noise handshake, whose static
//! keys are Diffie-Hellman keys: the same key both proves who an end is and keys the channel,
//! so no separate signature key has to be kept in step with it.
//!
//! Formats (one line each, like OpenSSH's, so `grep`, `cut` and a config manager can handle them):
//! ```text
//! tcplab-x25519 <base64 of 32 bytes> [comment]           a public key (FILE.pub, --keys, --server-key)
//! tcplab-x25519-secret <base64 of 32 bytes> [comment]    a secret key (FILE, mode 0600)
//! ```
//! Lines starting with `#` and blank lines are ignored in every file. Parsing is pure; only
//! [`KeyPair::load`], [`KeyPair::write_new`] and [`KeyList::load`] touch the disk.

use std::fmt;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use zeroize::Zeroizing;

/// First word of a public key line.
pub const PUBLIC_TAG: &str = "tcplab-x25519";
/// First word of a secret key line.
pub const SECRET_TAG: &str = "tcplab-x25519-secret";
/// Longest key file read (a list of thousands of keys fits; a wrong path to a log does not).
const MAX_FILE: u64 = 4 << 20;

/// What is wrong with a key or key file; every message names the file (and line) and the fix.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The errno.
        source: std::io::Error,
    },
    /// A line is not a key of the expected kind.
    #[error("{path}: line {line}: {reason}")]
    Parse {
        /// The file (or where the text came from, e.g. `TCPLAB_KEY`).
        path: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong and what is expected.
        reason: String,
    },
    /// A secret key file that other users can read is refused, as ssh does.
    #[error("{path} can be read by other users (mode {mode:03o}); run `chmod 600 {path}`")]
    Exposed {
        /// The file.
        path: String,
        /// Its permission bits.
        mode: u32,
    },
    /// Writing a new key would overwrite one.
    #[error("{path} already exists; give --force to replace it, or another --out")]
    Exists {
        /// The file.
        path: String,
    },
    /// The system's random source failed (no key can be made without it).
    #[error("generating a key: {0}")]
    Random(String),
}

/// A public key: who an agent or a client is.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PublicKey([u8; 32]);

impl PublicKey {
    /// The key of these 32 bytes (any 32 bytes are a valid X25519 public key).
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    /// The key's bytes, as the Noise handshake carries them.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// Parses `tcplab-x25519 BASE64 [comment]`, or a bare `BASE64`; returns the key and the
    /// comment (empty when none).
    pub fn parse(text: &str) -> Result<(Self, String), String> {
        let mut words = text.split_whitespace();
        let first = words
            .next()
            .ok_or("empty; expected `tcplab-x25519 BASE64 [comment]`")?;
        let b64 = if first == PUBLIC_TAG {
            words
                .next()
                .ok_or("the key's base64 is missing after tcplab-x25519")?
        } else if first == SECRET_TAG {
            return Err("this is a secret key; give its public half (FILE.pub, or \
                        `tcplab key show FILE`)"
                .into());
        } else if words.clone().next().is_none() || first.len() == 44 {
            first
        } else {
            return Err(format!(
                "{first:?} is not a tcplab public key; expected `tcplab-x25519 BASE64 [comment]` \
                 (what `tcplab key gen` prints)"
            ));
        };
        let comment = words.collect::<Vec<_>>().join(" ");
        Ok((Self(decode32(b64)?), comment))
    }

    /// The key as one line: `tcplab-x25519 BASE64 comment`.
    pub fn to_line(&self, comment: &str) -> String {
        let mut line = format!("{PUBLIC_TAG} {}", B64.encode(self.0));
        if !comment.is_empty() {
            line.push(' ');
            line.push_str(comment);
        }
        line
    }
}

impl fmt::Display for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{PUBLIC_TAG} {}", B64.encode(self.0))
    }
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// A secret key with its public half and a comment; the secret is wiped when dropped and
/// never printed by `Debug`.
#[derive(Clone)]
pub struct KeyPair {
    secret: Zeroizing<[u8; 32]>,
    public: PublicKey,
    comment: String,
}

impl fmt::Debug for KeyPair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyPair")
            .field("public", &self.public)
            .field("comment", &self.comment)
            .finish_non_exhaustive()
    }
}

impl KeyPair {
    /// A fresh key pair from the operating system's random source.
    pub fn generate(comment: &str) -> Result<Self, KeyError> {
        let kp = snow::Builder::new(crate::noise::params())
            .generate_keypair()
            .map_err(|e| KeyError::Random(e.to_string()))?;
        let secret: [u8; 32] =
            kp.private.as_slice().try_into().map_err(|_| {
                KeyError::Random("the key generator gave a key of another size".into())
            })?;
        Ok(Self::from_secret(secret, comment))
    }

    /// The pair whose secret is `secret` (its public half is derived, so the two cannot disagree).
    pub fn from_secret(secret: [u8; 32], comment: &str) -> Self {
        let public = curve25519_dalek::MontgomeryPoint::mul_base_clamped(secret).to_bytes();
        Self {
            secret: Zeroizing::new(secret),
            public: PublicKey(public),
            comment: comment.to_string(),
        }
    }

    /// The public half.
    pub fn public(&self) -> PublicKey {
        self.public
    }

    /// The comment given at generation (e.g. `user@host`).
    pub fn comment(&self) -> &str {
        &self.comment
    }

    /// The secret, for the handshake only.
    pub(crate) fn secret(&self) -> &[u8; 32] {
        &self.secret
    }

    /// The public key line (what goes into a server's `--keys` file or a client's `--server-key`).
    pub fn public_line(&self) -> String {
        self.public.to_line(&self.comment)
    }

    /// The secret key file's text.
    pub fn secret_text(&self) -> Zeroizing<String> {
        let mut s = String::from(
            "# tcplab secret key: keep it private (mode 0600). Its public half: `tcplab key show FILE`.\n",
        );
        s.push_str(SECRET_TAG);
        s.push(' ');
        s.push_str(&B64.encode(*self.secret));
        if !self.comment.is_empty() {
            s.push(' ');
            s.push_str(&self.comment);
        }
        s.push('\n');
        Zeroizing::new(s)
    }

    /// Parses a secret key file's text (`source` names it in errors).
    pub fn parse_secret(text: &str, source: &str) -> Result<Self, KeyError> {
        let bad = |line: usize, reason: String| KeyError::Parse {
            path: source.to_string(),
            line,
            reason,
        };
        let mut found = None;
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let mut words = line.split_whitespace();
            match words.next() {
                Some(SECRET_TAG) => {}
                Some(PUBLIC_TAG) => {
                    return Err(bad(
                        i + 1,
                        "this is a public key; give the secret key file (the one without .pub)"
                            .into(),
                    ));
                }
                _ => {
                    return Err(bad(
                        i + 1,
                        "not a tcplab secret key; expected `tcplab-x25519-secret BASE64` \
                         (make one with `tcplab key gen`)"
                            .into(),
                    ));
                }
            }
            if found.is_some() {
                return Err(bad(i + 1, "a second key; a key file holds one".into()));
            }
            let b64 = words
                .next()
                .ok_or_else(|| bad(i + 1, "the base64 is missing".into()))?;
            let secret = Zeroizing::new(decode32(b64).map_err(|r| bad(i + 1, r))?);
            let comment = words.collect::<Vec<_>>().join(" ");
            found = Some(Self::from_secret(*secret, &comment));
        }
        found.ok_or_else(|| bad(1, "no key in it; make one with `tcplab key gen`".into()))
    }

    /// Reads a secret key file, refusing one other users can read.
    pub fn load(path: &Path) -> Result<Self, KeyError> {
        let shown = path.display().to_string();
        let meta = std::fs::metadata(path).map_err(|source| KeyError::Io {
            path: shown.clone(),
            source,
        })?;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(KeyError::Exposed { path: shown, mode });
        }
        let text = Zeroizing::new(read_small(path)?);
        Self::parse_secret(&text, &shown)
    }

    /// Writes the secret to `path` (mode 0600, created; an existing file only with `force`) and
    /// the public line to `path.pub`.
    pub fn write_new(&self, path: &Path, force: bool) -> Result<PathBuf, KeyError> {
        let shown = path.display().to_string();
        let io = |source| KeyError::Io {
            path: shown.clone(),
            source,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        if path.exists() && !force {
            return Err(KeyError::Exists { path: shown });
        }
        // Write a fresh file and rename it into place, so a crash never leaves half a key
        // and the secret is never, even briefly, in a file other users can read.
        let tmp = path.with_extension("tmp-new");
        let _ = std::fs::remove_file(&tmp);
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(io)?;
        f.write_all(self.secret_text().as_bytes()).map_err(io)?;
        f.sync_all().map_err(io)?;
        drop(f);
        std::fs::rename(&tmp, path).map_err(io)?;
        let mut pub_path = path.as_os_str().to_owned();
        pub_path.push(".pub");
        let pub_path = PathBuf::from(pub_path);
        std::fs::write(&pub_path, format!("{}\n", self.public_line())).map_err(|source| {
            KeyError::Io {
                path: pub_path.display().to_string(),
                source,
            }
        })?;
        Ok(pub_path)
    }
}

/// A list of public keys with their comments: a server's authorized clients (`--keys`), or the
/// keys a client accepts from a server (`--server-key FILE`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyList {
    keys: Vec<(PublicKey, String)>,
}

impl KeyList {
    /// A list of these keys.
    pub fn of(keys: impl IntoIterator<Item = PublicKey>) -> Self {
        Self {
            keys: keys.into_iter().map(|k| (k, String::new())).collect(),
        }
    }

    /// Parses one public key per line (comments and blank lines skipped); `source` names the
    /// text in errors.
    pub fn parse(text: &str, source: &str) -> Result<Self, KeyError> {
        let mut keys = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (key, comment) = PublicKey::parse(line).map_err(|reason| KeyError::Parse {
                path: source.to_string(),
                line: i + 1,
                reason,
            })?;
            keys.push((key, comment));
        }
        Ok(Self { keys })
    }

    /// Reads a key list file.
    pub fn load(path: &Path) -> Result<Self, KeyError> {
        Self::parse(&read_small(path)?, &path.display().to_string())
    }

    /// The comment of `key` when it is in the list.
    pub fn find(&self, key: &PublicKey) -> Option<&str> {
        self.keys
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, c)| c.as_str())
    }

    /// How many keys.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

/// Reads a file of at most [`MAX_FILE`] bytes as text.
fn read_small(path: &Path) -> Result<String, KeyError> {
    use std::io::Read;
    let shown = path.display().to_string();
    let io = |source| KeyError::Io {
        path: shown.clone(),
        source,
    };
    let mut text = String::new();
    std::fs::File::open(path)
        .map_err(io)?
        .take(MAX_FILE)
        .read_to_string(&mut text)
        .map_err(io)?;
    Ok(text)
}

/// Decodes base64 that must hold exactly 32 bytes.
fn decode32(b64: &str) -> Result<[u8; 32], String> {
    let bytes = B64
        .decode(b64)
        .map_err(|e| format!("the key is not valid base64 ({e})"))?;
    <[u8; 32]>::try_from(bytes.as_slice())
        .map_err(|_| format!("the key holds {} bytes, not 32", bytes.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pair_round_trips_through_its_text_forms() {
        let kp = KeyPair::generate("alice@lab").expect("keygen");
        let back = KeyPair::parse_secret(&kp.secret_text(), "mem").expect("parse");
        assert_eq!(back.public(), kp.public());
        assert_eq!(back.comment(), "alice@lab");
        let (public, comment) = PublicKey::parse(&kp.public_line()).expect("public");
        assert_eq!((public, comment.as_str()), (kp.public(), "alice@lab"));
        // A bare base64 key is accepted too.
        let bare = kp.public().to_line("");
        let b64 = bare.split_whitespace().nth(1).expect("b64");
        assert_eq!(PublicKey::parse(b64).expect("bare").0, kp.public());
        assert!(!format!("{kp:?}").contains(&B64.encode(kp.secret())));
    }

    #[test]
    fn the_public_half_is_derived_as_x25519_does() {
        // RFC 7748 section 6.1: Alice's private and public keys.
        let hex = |s: &str| -> [u8; 32] {
            let v: Vec<u8> = (0..64)
                .step_by(2)
                .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
                .collect();
            v.try_into().expect("32")
        };
        let kp = KeyPair::from_secret(
            hex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a"),
            "",
        );
        assert_eq!(
            kp.public().as_bytes(),
            &hex("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a")
        );
    }

    #[test]
    fn lists_skip_comments_and_name_the_bad_line() {
        let a = KeyPair::generate("a").expect("keygen");
        let b = KeyPair::generate("b").expect("keygen");
        let text = format!(
            "# clients\n\n{}\n  {}  \n",
            a.public_line(),
            b.public_line()
        );
        let list = KeyList::parse(&text, "clients").expect("list");
        assert_eq!(list.len(), 2);
        assert_eq!(list.find(&b.public()), Some("b"));
        let bad = format!("{}\nssh-ed25519 AAAA user\n", a.public_line());
        let e = KeyList::parse(&bad, "clients")
            .expect_err("ssh key")
            .to_string();
        assert!(
            e.starts_with("clients: line 2:") && e.contains("tcplab-x25519"),
            "{e}"
        );
        let secret = KeyList::parse(&a.secret_text(), "clients").expect_err("secret");
        assert!(secret.to_string().contains("secret key"), "{secret}");
        let short = KeyList::parse("tcplab-x25519 AAAA", "c").expect_err("short");
        assert!(short.to_string().contains("not 32"), "{short}");
    }

    #[test]
    fn a_secret_file_is_written_private_and_refused_when_exposed() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("sub/key");
        let kp = KeyPair::generate("x").expect("keygen");
        let pub_path = kp.write_new(&path, false).expect("write");
        let mode = std::fs::metadata(&path).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(KeyPair::load(&path).expect("load").public(), kp.public());
        let list = KeyList::load(&pub_path).expect("pub");
        assert!(list.find(&kp.public()).is_some());
        let again = kp.write_new(&path, false).expect_err("exists").to_string();
        assert!(again.contains("--force"), "{again}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let e = KeyPair::load(&path).expect_err("exposed").to_string();
        assert!(e.contains("chmod 600"), "{e}");
    }
}
