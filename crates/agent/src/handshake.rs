//! The server's side of the handshake, within one deadline (`--handshake-timeout`) from
//! accept to the test's Hello: frame 1 (version, or a refusal in clear naming both versions),
//! frame 2, frame 3 (the client's key, checked against `--keys`), then the sealed Hello.
//! Whatever a peer sends, the worst outcome is a [`Rejected`] and a closed connection.

use std::io::Write;
use std::net::TcpStream;
use std::time::Instant;
use tcplab_results::spec::WorkloadSpec;

use tcplab_auth::keys::{KeyList, KeyPair, PublicKey};
use tcplab_auth::noise::{Intro, Responder, parse_intro};
use tcplab_auth::{Channel, push_frame, read_body};
use tcplab_load::LoadError;
use tcplab_load::proto::{self, Ask, Cause, Ctrl};

/// Largest frame 1 (a version-2 client's Hello in clear fits, to be answered by name).
const MAX_INTRO: usize = 16 << 10;
/// Largest frame 3.
const MAX_FRAME3: usize = 1024;
/// Largest message a server takes from a client (a Hello is a few hundred bytes).
pub const MAX_FROM_CLIENT: usize = 64 << 10;

/// Why a connection did not become a test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejected {
    /// The peer went away, or did not finish in time (slowloris, a port scan, a client that
    /// refused the server's key).
    Silent(String),
    /// The peer spoke something else, or another protocol version (answered in clear).
    Protocol(String),
    /// A handshake message did not verify (a replay, or tampering).
    Forged(String),
    /// The client's key is not in `--keys` (answered, sealed).
    Unauthorized(PublicKey),
}

impl Rejected {
    /// The counter this rejection is counted under.
    pub fn counter(&self) -> &'static str {
        match self {
            Self::Silent(_) => "handshake",
            Self::Protocol(_) => "protocol",
            Self::Forged(_) => "forged",
            Self::Unauthorized(_) => "keys",
        }
    }
}

impl std::fmt::Display for Rejected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Silent(why) | Self::Protocol(why) | Self::Forged(why) => f.write_str(why),
            Self::Unauthorized(key) => write!(f, "key {key} is not in --keys"),
        }
    }
}

/// Sends `msg` in clear and gives up on the connection (best effort: the peer may be gone).
pub fn answer_clear(stream: &mut TcpStream, msg: &Ctrl) {
    if let Ok(body) = proto::encode(msg) {
        let mut buf = Vec::new();
        push_frame(&mut buf, &body);
        let _ = stream.write_all(&buf);
    }
}

/// Who may connect: the server's key, and the clients' keys (None: any key).
#[derive(Debug, Clone, Copy)]
pub struct Keys<'a> {
    /// The server's own key pair.
    pub me: &'a KeyPair,
    /// The authorized clients; None when the agent runs without `--keys`.
    pub authorized: Option<&'a KeyList>,
}

/// What an authenticated client asked for in its first sealed frame.
#[derive(Debug, Clone)]
pub enum Request {
    /// `Hello`: run the server side of this test.
    Test(WorkloadSpec),
    /// `Ask`: something else (facts, clock, run from here, sysctl); see [`crate::ask`].
    Ask(Ask),
}

/// Runs the handshake on an accepted `stream`; returns the sealed channel and the request.
pub fn accept(
    mut stream: TcpStream,
    keys: Keys<'_>,
    deadline: Instant,
) -> Result<(Channel, Request), Rejected> {
    let d = Some(deadline);
    let silent =
        |what: &str, e: std::io::Error| Rejected::Silent(tcplab_load::net::reason(what, &e));
    let f1 = match read_body(&mut stream, MAX_INTRO, d) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
            let why = format!(
                "not a tcplab client: {e}; use a tcplab client of protocol {}",
                proto::VERSION
            );
            answer_clear(&mut stream, &Ctrl::refusal(Cause::Protocol, why.clone()));
            return Err(Rejected::Protocol(why));
        }
        Err(e) => return Err(silent("waiting for the handshake", e)),
    };
    let msg1 = match parse_intro(&f1, proto::VERSION) {
        Intro::Current(m) => m,
        Intro::Version(v) => return Err(refuse_version(&mut stream, v)),
        Intro::Json => {
            // A client of version 2 or older: name both versions, in the frame it can read.
            let why = match proto::decode(&f1) {
                Ok(Ctrl::Hello { version, .. }) => {
                    return Err(refuse_version(&mut stream, version));
                }
                Ok(other) => format!(
                    "expected Hello, got {}; a client must send Hello (or Ask) first",
                    other.kind()
                ),
                Err(e) => e.to_string(),
            };
            answer_clear(&mut stream, &Ctrl::refusal(Cause::Protocol, why.clone()));
            return Err(Rejected::Protocol(why));
        }
        Intro::Foreign => {
            let why = format!(
                "not a tcplab client (a tcplab control connection of protocol {} starts with \
                 TCPLAB); use a tcplab client of that protocol",
                proto::VERSION
            );
            answer_clear(&mut stream, &Ctrl::refusal(Cause::Protocol, why.clone()));
            return Err(Rejected::Protocol(why));
        }
    };
    let (responder, f2) =
        Responder::start(keys.me, msg1).map_err(|e| Rejected::Forged(e.to_string()))?;
    let mut buf = Vec::new();
    push_frame(&mut buf, &f2);
    stream
        .write_all(&buf)
        .map_err(|e| silent("sending the handshake", e))?;
    let f3 = read_body(&mut stream, MAX_FRAME3, d).map_err(|e| silent("waiting for frame 3", e))?;
    let transport = responder
        .finish(&f3)
        .map_err(|e| Rejected::Forged(e.to_string()))?;
    let client = transport.peer();
    let mut channel = Channel::new(stream, transport, MAX_FROM_CLIENT);
    if let Some(list) = keys.authorized
        && list.find(&client).is_none()
    {
        let message = format!(
            "this server does not accept the client's key {client}: add the key's line (`tcplab \
             key show FILE` prints it) to the server's --keys file, or use a --key that is in it"
        );
        let _ = proto::write_frame(&mut channel, &Ctrl::refusal(Cause::Auth, message));
        return Err(Rejected::Unauthorized(client));
    }
    let hello = channel
        .recv_by(d)
        .map_err(|e| Rejected::Silent(format!("waiting for Hello: {}", LoadError::from(e))))?;
    let request = match proto::decode(&hello) {
        Ok(Ctrl::Hello { version, test }) if version == proto::VERSION => Request::Test(*test),
        Ok(Ctrl::Ask { version, ask }) if version == proto::VERSION => Request::Ask(*ask),
        Ok(Ctrl::Hello { version, .. } | Ctrl::Ask { version, .. }) => {
            let why = version_message(version);
            let _ = proto::write_frame(&mut channel, &Ctrl::refusal(Cause::Protocol, why.clone()));
            return Err(Rejected::Protocol(why));
        }
        other => {
            let why = match other {
                Ok(m) => format!(
                    "expected Hello or Ask, got {}; a client must send Hello (or Ask) first",
                    m.kind()
                ),
                Err(e) => e.to_string(),
            };
            let _ = proto::write_frame(&mut channel, &Ctrl::refusal(Cause::Protocol, why.clone()));
            return Err(Rejected::Protocol(why));
        }
    };
    Ok((channel, request))
}

/// The refusal of a client of another version, as every version words it.
fn version_message(version: u32) -> String {
    format!(
        "protocol version {version} not supported (server speaks {}); run the same tcplab \
         version on both ends",
        proto::VERSION
    )
}

fn refuse_version(stream: &mut TcpStream, version: u32) -> Rejected {
    let message = version_message(version);
    answer_clear(stream, &Ctrl::refusal(Cause::Protocol, message.clone()));
    Rejected::Protocol(message)
}
