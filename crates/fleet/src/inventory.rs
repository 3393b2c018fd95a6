//! The hosts file (docs/fleet.md, "The hosts file"): which hosts a fleet has, where each agent
//! listens and how it is started.
//!
//! ```toml
//! [defaults]                       # optional
//! port = 5301                      # agents' control port (ssh/srun may use 0 = any free port)
//! user = "root"                    # ssh user when `ssh = true`
//! [[host]]
//! name = "h1"                      # unique, [A-Za-z0-9_.-]
//! address = "198.18.1.1"           # where its agent listens and tests go
//! ssh = "root@198.18.1.1"          # or `ssh = true`, or `srun = true`, or neither (running)
//! port = 5301                      # optional, overrides defaults
//! server_key = "tcplab-x25519 ..." # pin for an agent already running
//! labels = ["rack1"]
//! ```
//!
//! The file is read as a TOML table and walked by hand rather than through serde's derive, so
//! that every message can name the file, the host (by name once it has one) and the field, and
//! suggest the field meant when one is misspelt. Parsing is pure; only [`Inventory::load`]
//! reads the disk.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::Path;

use tcplab_auth::PublicKey;
use tcplab_load::proto::DEFAULT_PORT;

/// Longest hosts file read (thousands of hosts fit; a wrong path to a log does not).
const MAX_FILE: u64 = 4 << 20;
/// Longest host name (names become parts of remote file names and report columns).
const MAX_NAME: usize = 64;
/// The fields of `[[host]]`, for did-you-mean.
const HOST_FIELDS: &[&str] = &[
    "name",
    "address",
    "ssh",
    "srun",
    "port",
    "server_key",
    "labels",
];
/// The fields of `[defaults]`.
const DEFAULT_FIELDS: &[&str] = &["port", "user"];
/// The top-level tables.
const TOP_FIELDS: &[&str] = &["defaults", "host"];

/// What is wrong with a hosts file; every message names the file, the host and the field, and
/// says what to write instead.
#[derive(Debug, thiserror::Error)]
pub enum InventoryError {
    /// The file could not be read.
    #[error("{path}: {source} (give the hosts file with --hosts FILE)")]
    Io {
        /// The file.
        path: String,
        /// The errno.
        source: std::io::Error,
    },
    /// The text is not TOML.
    #[error("{source_name}: not a TOML hosts file: {message}")]
    Syntax {
        /// Where the text came from.
        source_name: String,
        /// The TOML parser's message (with the line and column).
        message: String,
    },
    /// A field (or a top-level key) is wrong.
    #[error("{source_name}: {place}: `{field}` {problem}")]
    Field {
        /// Where the text came from.
        source_name: String,
        /// `host "h1"`, `host #3` (before it has a name), `[defaults]` or `the top level`.
        place: String,
        /// The field.
        field: String,
        /// What is wrong and the fix.
        problem: String,
    },
    /// Two hosts share a name or an address.
    #[error(
        "{source_name}: hosts {first:?} and {second:?} have the same {field} {value}; each host \
         needs its own (remove the duplicate or fix one of them)"
    )]
    Duplicate {
        /// Where the text came from.
        source_name: String,
        /// `name` or `address`.
        field: &'static str,
        /// The shared value.
        value: String,
        /// The first host with it.
        first: String,
        /// The second.
        second: String,
    },
    /// No `[[host]]` at all.
    #[error("{source_name}: no hosts; add a `[[host]]` table with `name` and `address` for each")]
    Empty {
        /// Where the text came from.
        source_name: String,
    },
}

/// How a host's agent is started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Launch {
    /// Over OpenSSH: `ssh DESTINATION` (`user@host`, a host, or an alias of the ssh config).
    Ssh {
        /// What is given to `ssh`.
        destination: String,
    },
    /// By Slurm's srun, inside an allocation.
    Srun,
    /// Not started: an agent already runs there (systemd unit, DaemonSet, by hand).
    None,
}

/// One host of the fleet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    /// Unique name, `[A-Za-z0-9_.-]`, used in reports and remote file names.
    pub name: String,
    /// Where its agent listens and where tests go.
    pub address: IpAddr,
    /// The agent's control port (0: any free port, for launched agents).
    pub port: u16,
    /// How its agent is started.
    pub launch: Launch,
    /// The agent's public key, pinned (needed for a running agent off loopback and lab).
    pub server_key: Option<PublicKey>,
    /// Free-form labels (racks, roles) a study may select hosts by.
    pub labels: Vec<String>,
}

/// The `[defaults]` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Defaults {
    /// Port of hosts that give none.
    pub port: u16,
    /// ssh user of hosts with `ssh = true`.
    pub user: Option<String>,
}

impl Default for Defaults {
    fn default() -> Self {
        Self {
            port: DEFAULT_PORT,
            user: None,
        }
    }
}

/// A parsed hosts file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inventory {
    /// Where it came from (a path, or what the caller named it), for messages.
    pub source: String,
    /// Its `[defaults]` (already applied to the hosts).
    pub defaults: Defaults,
    /// The hosts, in file order.
    pub hosts: Vec<Host>,
}

impl Inventory {
    /// Reads and parses the hosts file at `path`.
    pub fn load(path: &Path) -> Result<Self, InventoryError> {
        use std::io::Read;
        let shown = path.display().to_string();
        let io = |source| InventoryError::Io {
            path: shown.clone(),
            source,
        };
        let mut text = String::new();
        std::fs::File::open(path)
            .map_err(io)?
            .take(MAX_FILE)
            .read_to_string(&mut text)
            .map_err(io)?;
        Self::parse(&text, &shown)
    }

    /// Parses a hosts file's text; `source` names it in errors.
    pub fn parse(text: &str, source: &str) -> Result<Self, InventoryError> {
        let table: toml::Table = toml::from_str(text).map_err(|e| InventoryError::Syntax {
            source_name: source.to_string(),
            message: tcplab_emu::error::toml_message(text, e.message(), e.span()),
        })?;
        let p = Parser { source };
        for key in table.keys() {
            if !TOP_FIELDS.contains(&key.as_str()) {
                return Err(p.unknown("the top level", key, TOP_FIELDS));
            }
        }
        let defaults = match table.get("defaults") {
            None => Defaults::default(),
            Some(v) => p.defaults(v)?,
        };
        let hosts = match table.get("host") {
            None => Vec::new(),
            Some(toml::Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, v)| p.host(i, v, &defaults))
                .collect::<Result<Vec<_>, _>>()?,
            Some(_) => {
                return Err(p.field(
                    "the top level",
                    "host",
                    "must be an array of tables: write each host as `[[host]]`",
                ));
            }
        };
        Self::new(source, defaults, hosts)
    }

    /// An inventory of these hosts (from code, or `--to` lists), checked like a file's.
    pub fn new(source: &str, defaults: Defaults, hosts: Vec<Host>) -> Result<Self, InventoryError> {
        if hosts.is_empty() {
            return Err(InventoryError::Empty {
                source_name: source.to_string(),
            });
        }
        let mut names: BTreeMap<&str, &str> = BTreeMap::new();
        let mut addrs: BTreeMap<IpAddr, &str> = BTreeMap::new();
        for h in &hosts {
            if let Some(first) = names.insert(&h.name, &h.name) {
                return Err(duplicate(source, "name", h.name.clone(), first, &h.name));
            }
            if let Some(first) = addrs.insert(h.address, &h.name) {
                return Err(duplicate(
                    source,
                    "address",
                    h.address.to_string(),
                    first,
                    &h.name,
                ));
            }
        }
        Ok(Self {
            source: source.to_string(),
            defaults,
            hosts,
        })
    }

    /// The host named `name`.
    pub fn host(&self, name: &str) -> Option<&Host> {
        self.hosts.iter().find(|h| h.name == name)
    }
}

fn duplicate(source: &str, field: &'static str, value: String, a: &str, b: &str) -> InventoryError {
    InventoryError::Duplicate {
        source_name: source.to_string(),
        field,
        value,
        first: a.to_string(),
        second: b.to_string(),
    }
}

/// The walk over the parsed table, carrying the source name for messages.
struct Parser<'a> {
    source: &'a str,
}

impl Parser<'_> {
    fn field(&self, place: &str, field: &str, problem: impl Into<String>) -> InventoryError {
        InventoryError::Field {
            source_name: self.source.to_string(),
            place: place.to_string(),
            field: field.to_string(),
            problem: problem.into(),
        }
    }

    fn unknown(&self, place: &str, field: &str, known: &[&str]) -> InventoryError {
        let hint = match did_you_mean(field, known) {
            Some(m) => format!("did you mean `{m}`? "),
            None => String::new(),
        };
        self.field(
            place,
            field,
            format!(
                "is not a field here; {hint}use one of: {}",
                known.join(", ")
            ),
        )
    }

    fn port(&self, place: &str, v: &toml::Value) -> Result<u16, InventoryError> {
        v.as_integer()
            .and_then(|p| u16::try_from(p).ok())
            .ok_or_else(|| self.field(place, "port", "must be a whole number 0..=65535"))
    }

    fn defaults(&self, v: &toml::Value) -> Result<Defaults, InventoryError> {
        let place = "[defaults]";
        let t = v.as_table().ok_or_else(|| {
            self.field(
                "the top level",
                "defaults",
                "must be a table: write `[defaults]`",
            )
        })?;
        let mut d = Defaults::default();
        for (k, v) in t {
            match k.as_str() {
                "port" => d.port = self.port(place, v)?,
                "user" => {
                    let u = v.as_str().filter(|u| is_ssh_user(u)).ok_or_else(|| {
                        self.field(
                            place,
                            "user",
                            "must be a user name (letters, digits, `_.-`), e.g. \"root\"",
                        )
                    })?;
                    d.user = Some(u.to_string());
                }
                other => return Err(self.unknown(place, other, DEFAULT_FIELDS)),
            }
        }
        Ok(d)
    }

    fn host(&self, index: usize, v: &toml::Value, d: &Defaults) -> Result<Host, InventoryError> {
        let numbered = format!("host #{}", index + 1);
        let t = v.as_table().ok_or_else(|| {
            self.field(
                &numbered,
                "host",
                "must be a table: write each host as `[[host]]`",
            )
        })?;
        // The name first, so that every later message can say which host.
        let name = match t.get("name") {
            None => {
                return Err(self.field(&numbered, "name", "is missing; give each host a name"));
            }
            Some(v) => {
                let n = v.as_str().unwrap_or_default();
                if !is_host_name(n) {
                    return Err(self.field(
                        &numbered,
                        "name",
                        format!(
                            "must be a string of 1..={MAX_NAME} letters, digits, `_`, `.` or `-` \
                             (got {v})"
                        ),
                    ));
                }
                n.to_string()
            }
        };
        let place = format!("host {name:?}");
        for k in t.keys() {
            if !HOST_FIELDS.contains(&k.as_str()) {
                return Err(self.unknown(&place, k, HOST_FIELDS));
            }
        }
        let address = match t.get("address") {
            None => {
                return Err(self.field(
                    &place,
                    "address",
                    "is missing; give the IP address its agent listens on, e.g. \"198.18.0.1\"",
                ));
            }
            Some(v) => v
                .as_str()
                .and_then(|s| s.trim().parse::<IpAddr>().ok())
                .ok_or_else(|| {
                    self.field(
                        &place,
                        "address",
                        format!(
                            "must be an IP address such as \"198.18.0.1\" or \"fd00::1\" (got \
                             {v}); write a name's address, not the name"
                        ),
                    )
                })?,
        };
        let port = match t.get("port") {
            Some(v) => self.port(&place, v)?,
            None => d.port,
        };
        let srun = match t.get("srun") {
            None => false,
            Some(v) => v
                .as_bool()
                .ok_or_else(|| self.field(&place, "srun", "must be true or false"))?,
        };
        let ssh = match t.get("ssh") {
            None | Some(toml::Value::Boolean(false)) => None,
            Some(toml::Value::Boolean(true)) => Some(match &d.user {
                Some(u) => format!("{u}@{address}"),
                None => address.to_string(),
            }),
            Some(toml::Value::String(s)) if is_ssh_destination(s) => Some(s.trim().to_string()),
            Some(v) => {
                return Err(self.field(
                    &place,
                    "ssh",
                    format!(
                        "must be a destination such as \"root@198.18.0.1\" (no spaces, not \
                         starting with `-`), or true for `[defaults] user`@address (got {v})"
                    ),
                ));
            }
        };
        let launch = match (ssh, srun) {
            (Some(_), true) => {
                return Err(self.field(
                    &place,
                    "srun",
                    "and `ssh` are both given; a host is started one way: keep one",
                ));
            }
            (Some(destination), false) => Launch::Ssh { destination },
            (None, true) => Launch::Srun,
            (None, false) => Launch::None,
        };
        if launch == Launch::None && port == 0 {
            return Err(self.field(
                &place,
                "port",
                "is 0, but this host's agent is already running (no `ssh` or `srun`): give the \
                 port it listens on",
            ));
        }
        let server_key = match t.get("server_key") {
            None => None,
            Some(v) => Some(
                v.as_str()
                    .ok_or_else(|| self.field(&place, "server_key", "must be a string"))
                    .and_then(|s| {
                        PublicKey::parse(s).map(|(k, _)| k).map_err(|e| {
                            self.field(
                                &place,
                                "server_key",
                                format!("{e}; copy the line the agent printed at start"),
                            )
                        })
                    })?,
            ),
        };
        let labels = match t.get("labels") {
            None => Vec::new(),
            Some(v) => v
                .as_array()
                .and_then(|a| {
                    a.iter()
                        .map(|l| {
                            l.as_str()
                                .filter(|s| !s.trim().is_empty())
                                .map(String::from)
                        })
                        .collect::<Option<Vec<_>>>()
                })
                .ok_or_else(|| {
                    self.field(
                        &place,
                        "labels",
                        "must be an array of non-empty strings, e.g. [\"rack1\"]",
                    )
                })?,
        };
        Ok(Host {
            name,
            address,
            port,
            launch,
            server_key,
            labels,
        })
    }
}

fn is_host_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= MAX_NAME
        && n.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

fn is_ssh_user(u: &str) -> bool {
    !u.is_empty()
        && !u.starts_with('-')
        && u.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// An ssh destination that cannot be read as an option or split by a shell.
fn is_ssh_destination(s: &str) -> bool {
    let s = s.trim();
    !s.is_empty()
        && !s.starts_with('-')
        && s.bytes()
            .all(|b| b.is_ascii_graphic() && !b"'\"\\`$;&|<>(){}".contains(&b))
}

/// The known word closest to `word` when it is a plausible typo of it.
fn did_you_mean<'a>(word: &str, known: &[&'a str]) -> Option<&'a str> {
    known
        .iter()
        .map(|k| (edit_distance(word, k), *k))
        .filter(|(d, k)| *d <= (k.len() / 3).max(2))
        .min()
        .map(|(_, k)| k)
}

/// Levenshtein distance (the words are field names: short, so quadratic is fine).
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "tcplab-x25519 AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA= pinned";

    fn err(text: &str) -> String {
        Inventory::parse(text, "hosts.toml")
            .expect_err("must be refused")
            .to_string()
    }

    #[test]
    fn a_full_example_parses_with_defaults_applied() {
        let text = format!(
            r#"
[defaults]
port = 6000
user = "lab"

[[host]]
name = "h1"
address = "198.18.1.1"
ssh = "root@198.18.1.1"
port = 5301
labels = ["rack1", "edge"]

[[host]]
name = "h2"
address = "198.18.1.2"
ssh = true

[[host]]
name = "n-3.cluster"
address = "fd00::3"
srun = true

[[host]]
name = "h4"
address = "10.0.0.4"
server_key = "{KEY}"
"#
        );
        let inv = Inventory::parse(&text, "hosts.toml").expect("parses");
        assert_eq!(inv.hosts.len(), 4);
        let h1 = inv.host("h1").expect("h1");
        assert_eq!(h1.port, 5301);
        assert_eq!(
            h1.launch,
            Launch::Ssh {
                destination: "root@198.18.1.1".into()
            }
        );
        assert_eq!(h1.labels, ["rack1", "edge"]);
        let h2 = inv.host("h2").expect("h2");
        assert_eq!(h2.port, 6000);
        assert_eq!(
            h2.launch,
            Launch::Ssh {
                destination: "lab@198.18.1.2".into()
            }
        );
        assert_eq!(inv.hosts[2].launch, Launch::Srun);
        assert_eq!(
            inv.hosts[2].address,
            "fd00::3".parse::<IpAddr>().expect("ip")
        );
        let h4 = inv.host("h4").expect("h4");
        assert_eq!(h4.launch, Launch::None);
        assert!(h4.server_key.is_some());
        assert_eq!(inv.defaults.user.as_deref(), Some("lab"));
    }

    #[test]
    fn ssh_true_without_a_default_user_is_the_address() {
        let inv = Inventory::parse(
            "[[host]]\nname = \"a\"\naddress = \"198.18.0.1\"\nssh = true\n",
            "x",
        )
        .expect("parses");
        assert_eq!(
            inv.hosts[0].launch,
            Launch::Ssh {
                destination: "198.18.0.1".into()
            }
        );
        assert_eq!(inv.hosts[0].port, DEFAULT_PORT);
    }

    #[test]
    fn a_misspelt_field_names_the_host_and_the_field_meant() {
        let e = err("[[host]]\nname = \"h1\"\nadress = \"198.18.0.1\"\n");
        assert!(e.contains("hosts.toml") && e.contains("host \"h1\""), "{e}");
        assert!(
            e.contains("`adress`") && e.contains("did you mean `address`"),
            "{e}"
        );
        let e = err("[[hosts]]\nname = \"h1\"\n");
        assert!(e.contains("did you mean `host`"), "{e}");
        let e = err("[defaults]\nprot = 1\n[[host]]\nname = \"h\"\naddress = \"198.18.0.1\"\n");
        assert!(
            e.contains("[defaults]") && e.contains("did you mean `port`"),
            "{e}"
        );
    }

    #[test]
    fn missing_and_malformed_fields_say_the_fix() {
        let e = err("[[host]]\naddress = \"198.18.0.1\"\n");
        assert!(
            e.contains("host #1") && e.contains("`name` is missing"),
            "{e}"
        );
        let e = err("[[host]]\nname = \"h 1\"\naddress = \"198.18.0.1\"\n");
        assert!(e.contains("`name`") && e.contains("letters, digits"), "{e}");
        let e = err("[[host]]\nname = \"h1\"\n");
        assert!(e.contains("`address` is missing"), "{e}");
        let e = err("[[host]]\nname = \"h1\"\naddress = \"server.example\"\n");
        assert!(e.contains("`address`") && e.contains("IP address"), "{e}");
        let e = err("[[host]]\nname = \"h1\"\naddress = \"198.18.0.1\"\nport = 70000\n");
        assert!(e.contains("`port`") && e.contains("0..=65535"), "{e}");
        let e = err("[[host]]\nname = \"h1\"\naddress = \"198.18.0.1\"\nport = 0\n");
        assert!(e.contains("already running"), "{e}");
        let e =
            err("[[host]]\nname = \"h1\"\naddress = \"198.18.0.1\"\nssh = \"-oProxyCommand=x\"\n");
        assert!(e.contains("`ssh`") && e.contains("destination"), "{e}");
        let e = err("[[host]]\nname = \"h1\"\naddress = \"198.18.0.1\"\nssh = true\nsrun = true\n");
        assert!(e.contains("keep one"), "{e}");
        let e = err(
            "[[host]]\nname = \"h1\"\naddress = \"198.18.0.1\"\nserver_key = \"nonsense key\"\n",
        );
        assert!(
            e.contains("`server_key`") && e.contains("the agent printed"),
            "{e}"
        );
        let e = err("[[host]]\nname = \"h1\"\naddress = \"198.18.0.1\"\nlabels = \"rack\"\n");
        assert!(e.contains("`labels`") && e.contains("array"), "{e}");
        let e =
            err("[defaults]\nuser = \"a b\"\n[[host]]\nname = \"h\"\naddress = \"198.18.0.1\"\n");
        assert!(e.contains("[defaults]") && e.contains("`user`"), "{e}");
        let e = err("host = 3\n");
        assert!(e.contains("`[[host]]`"), "{e}");
    }

    #[test]
    fn duplicate_names_and_addresses_are_refused() {
        let e = err("[[host]]\nname = \"a\"\naddress = \"198.18.0.1\"\n\
             [[host]]\nname = \"a\"\naddress = \"198.18.0.2\"\n");
        assert!(e.contains("same name a"), "{e}");
        let e = err("[[host]]\nname = \"a\"\naddress = \"198.18.0.1\"\n\
             [[host]]\nname = \"b\"\naddress = \"198.18.0.1\"\n");
        assert!(
            e.contains("same address 198.18.0.1") && e.contains("\"b\""),
            "{e}"
        );
    }

    #[test]
    fn syntax_errors_and_empty_files_name_the_file() {
        let e = err("[[host]\n");
        assert!(e.starts_with("hosts.toml: not a TOML"), "{e}");
        let e = err("# nothing\n");
        assert!(e.contains("no hosts"), "{e}");
        let e = Inventory::load(Path::new("/nonexistent/hosts.toml"))
            .expect_err("missing")
            .to_string();
        assert!(e.contains("/nonexistent/hosts.toml"), "{e}");
    }

    #[test]
    fn loading_a_file_gives_the_same_as_parsing_it() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("hosts.toml");
        let text = "[[host]]\nname = \"a\"\naddress = \"127.0.0.1\"\n";
        std::fs::write(&path, text).expect("write");
        let inv = Inventory::load(&path).expect("loads");
        assert_eq!(
            inv.hosts,
            Inventory::parse(text, "x").expect("parses").hosts
        );
    }

    #[test]
    fn typos_are_matched_to_the_nearest_field_only_when_close() {
        assert_eq!(did_you_mean("adress", HOST_FIELDS), Some("address"));
        assert_eq!(did_you_mean("serverkey", HOST_FIELDS), Some("server_key"));
        assert_eq!(did_you_mean("label", HOST_FIELDS), Some("labels"));
        assert_eq!(did_you_mean("colour", HOST_FIELDS), None);
    }
}
