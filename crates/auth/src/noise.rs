//! The control channel's cryptography, sans-IO: the Noise XX handshake that authenticates both
//! ends, and the records that seal every control message after it. Bytes in, bytes out; the
//! sockets are in [`crate::channel`].
//!
//! ```text
//! client (initiator)                                      server (responder)
//!   frame 1: "TCPLAB" version(u32 BE) · e         ───►   checks the version, rate, slots
//!   frame 2: e, ee, s, es                         ◄───   (its static key, encrypted)
//!   checks the server's key against its pin
//!   frame 3: s, se  ·  sealed Hello               ───►   checks the client's key against --keys
//!   sealed frames both ways (ChaCha20-Poly1305, counter nonces)
//! ```
//!
//! Why Noise XX (`Noise_XX_25519_ChaChaPoly_BLAKE2s`, via the `snow` crate): both ends prove
//! their static key, and each handshake mixes fresh ephemeral keys from both sides, so a
//! recorded handshake replayed later fails at frame 3 (it does not decrypt under the server's
//! new ephemeral key): the ephemerals are the fresh nonces of a challenge-response. XX (not IK)
//! because a client without a pin (in a lab) must still be able to learn the server's key, and
//! because the client's identity travels encrypted to an authenticated server. No TLS stack,
//! no certificates: keys are pinned, which is all a fleet of agents needs.
//!
//! Frames are the control protocol's (4-byte big-endian length, then a body). After the
//! handshake each body is one Noise transport message (at most 65,535 bytes); a control
//! message longer than a record fits is split over several, each starting with a flag byte
//! (1: more follow, 0: last). The flag is inside the encryption, so an attacker can neither
//! cut a message short nor splice two; counter nonces make a dropped, repeated or reordered
//! record fail to decrypt.

use crate::keys::{KeyPair, PublicKey};

/// The Noise protocol name.
pub const PROTOCOL: &str = "Noise_XX_25519_ChaChaPoly_BLAKE2s";
/// Mixed into the handshake hash, so a peer of another protocol fails the handshake.
const PROLOGUE: &[u8] = b"tcplab control channel";
/// First bytes of frame 1.
pub const MAGIC: &[u8; 6] = b"TCPLAB";
/// Largest Noise message (and so record body).
pub const MAX_RECORD: usize = 65_535;
/// The AEAD tag every sealed record carries.
const TAG: usize = 16;
/// Message bytes per record: the rest is the flag byte and the tag.
const CHUNK: usize = MAX_RECORD - TAG - 1;
/// Flag byte: more records of this message follow.
const MORE: u8 = 1;
/// Flag byte: the last record of this message.
const LAST: u8 = 0;

/// Why a handshake or a record failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoiseError {
    /// A handshake message did not verify: a replayed or tampered handshake, or the wrong key.
    #[error(
        "handshake message {0} does not verify (a replayed or altered handshake); check that the \
         peer runs this tcplab version and that nothing on the path alters its traffic"
    )]
    Handshake(u8),
    /// A sealed record did not decrypt: altered, dropped, repeated or reordered on the way.
    #[error(
        "a sealed control message does not decrypt (altered or out of order on the way); check \
         that nothing on the path alters the connection's traffic"
    )]
    Record,
    /// A record decrypted but is not laid out as records are.
    #[error("a sealed control message is malformed; check that the peer runs this tcplab version")]
    Malformed,
    /// A message grew past what this end accepts.
    #[error(
        "a control message of more than {0} bytes; check that the peer runs this tcplab version"
    )]
    TooLong(usize),
    /// The crypto library failed in a way no peer can cause (e.g. no random source).
    #[error("noise: {0}")]
    Internal(String),
}

/// The Noise parameters, parsed from [`PROTOCOL`].
pub(crate) fn params() -> snow::params::NoiseParams {
    // A constant snow's own tests parse: failing here is a build bug, not a peer's doing.
    PROTOCOL.parse().expect("a valid Noise protocol name")
}

fn internal(e: snow::Error) -> NoiseError {
    NoiseError::Internal(e.to_string())
}

/// What the first frame a server reads says about its sender.
#[derive(Debug, PartialEq, Eq)]
pub enum Intro<'a> {
    /// A client of this protocol: the Noise message that follows.
    Current(&'a [u8]),
    /// A client of another protocol version that starts the same way.
    Version(u32),
    /// A JSON frame: a client of protocol version 2 or older (which sent `Hello` in clear).
    Json,
    /// Anything else.
    Foreign,
}

/// Frame 1's body: the magic, the version, then the Noise message.
pub fn intro(version: u32, msg1: &[u8]) -> Vec<u8> {
    let mut body = Vec::with_capacity(MAGIC.len() + 4 + msg1.len());
    body.extend_from_slice(MAGIC);
    body.extend_from_slice(&version.to_be_bytes());
    body.extend_from_slice(msg1);
    body
}

/// Classifies frame 1's body; `version` is the version this end speaks.
pub fn parse_intro(body: &[u8], version: u32) -> Intro<'_> {
    if body.first() == Some(&b'{') {
        return Intro::Json;
    }
    let Some(rest) = body.strip_prefix(MAGIC) else {
        return Intro::Foreign;
    };
    let Some((v, msg)) = rest.split_first_chunk::<4>() else {
        return Intro::Foreign;
    };
    match u32::from_be_bytes(*v) {
        v if v == version => Intro::Current(msg),
        v => Intro::Version(v),
    }
}

fn builder(me: &KeyPair) -> Result<snow::Builder<'_>, NoiseError> {
    snow::Builder::new(params())
        .local_private_key(me.secret())
        .and_then(|b| b.prologue(PROLOGUE))
        .map_err(internal)
}

fn remote_static(hs: &snow::HandshakeState) -> Result<PublicKey, NoiseError> {
    let key = hs.get_remote_static().ok_or(NoiseError::Malformed)?;
    let key: [u8; 32] = key.try_into().map_err(|_| NoiseError::Malformed)?;
    Ok(PublicKey::from_bytes(key))
}

/// The client's side of the handshake, waiting for frame 2.
#[derive(Debug)]
pub struct Initiator {
    hs: snow::HandshakeState,
}

impl Initiator {
    /// Starts a handshake as `me`; returns it and frame 1's body.
    pub fn start(me: &KeyPair, version: u32) -> Result<(Self, Vec<u8>), NoiseError> {
        let mut hs = builder(me)?.build_initiator().map_err(internal)?;
        let mut msg = [0u8; 64];
        let n = hs.write_message(&[], &mut msg).map_err(internal)?;
        Ok((Self { hs }, intro(version, &msg[..n])))
    }

    /// Reads frame 2: the server's ephemeral and static keys. The caller checks the server's
    /// key ([`ServerSeen::server_key`]) before it says anything more.
    pub fn on_reply(mut self, body: &[u8]) -> Result<ServerSeen, NoiseError> {
        if body.len() > 1024 {
            return Err(NoiseError::TooLong(1024));
        }
        let mut payload = [0u8; 1024];
        self.hs
            .read_message(body, &mut payload)
            .map_err(|_| NoiseError::Handshake(2))?;
        let server = remote_static(&self.hs)?;
        Ok(ServerSeen {
            hs: self.hs,
            server,
        })
    }
}

/// The client's side after frame 2: the server's key is known but not yet accepted.
#[derive(Debug)]
pub struct ServerSeen {
    hs: snow::HandshakeState,
    server: PublicKey,
}

impl ServerSeen {
    /// The key the server proved it holds.
    pub fn server_key(&self) -> PublicKey {
        self.server
    }

    /// Accepts the server: returns frame 3's body and the sealed channel.
    pub fn finish(mut self) -> Result<(Vec<u8>, Transport), NoiseError> {
        let mut msg = [0u8; 128];
        let n = self.hs.write_message(&[], &mut msg).map_err(internal)?;
        let transport = Transport::new(self.hs, self.server)?;
        Ok((msg[..n].to_vec(), transport))
    }
}

/// The server's side of the handshake, waiting for frame 3.
#[derive(Debug)]
pub struct Responder {
    hs: snow::HandshakeState,
}

impl Responder {
    /// Reads frame 1's Noise message (after [`parse_intro`]); returns frame 2's body.
    pub fn start(me: &KeyPair, msg1: &[u8]) -> Result<(Self, Vec<u8>), NoiseError> {
        let mut hs = builder(me)?.build_responder().map_err(internal)?;
        let mut payload = [0u8; 1024];
        if msg1.len() > payload.len() {
            return Err(NoiseError::TooLong(payload.len()));
        }
        hs.read_message(msg1, &mut payload)
            .map_err(|_| NoiseError::Handshake(1))?;
        let mut msg = [0u8; 256];
        let n = hs.write_message(&[], &mut msg).map_err(internal)?;
        Ok((Self { hs }, msg[..n].to_vec()))
    }

    /// Reads frame 3: the client's static key, proven. The caller checks it against the
    /// authorized keys before it reads any sealed message.
    pub fn finish(mut self, msg3: &[u8]) -> Result<Transport, NoiseError> {
        let mut payload = [0u8; 1024];
        if msg3.len() > payload.len() {
            return Err(NoiseError::TooLong(payload.len()));
        }
        self.hs
            .read_message(msg3, &mut payload)
            .map_err(|_| NoiseError::Handshake(3))?;
        let client = remote_static(&self.hs)?;
        Transport::new(self.hs, client)
    }
}

/// The sealed channel after the handshake. Sending and receiving keep their own nonce
/// counters, so one thread may wait for a message while another sends.
#[derive(Debug)]
pub struct Transport {
    state: snow::StatelessTransportState,
    peer: PublicKey,
    send_nonce: u64,
    recv_nonce: u64,
}

impl Transport {
    fn new(hs: snow::HandshakeState, peer: PublicKey) -> Result<Self, NoiseError> {
        Ok(Self {
            state: hs.into_stateless_transport_mode().map_err(internal)?,
            peer,
            send_nonce: 0,
            recv_nonce: 0,
        })
    }

    /// The peer's proven static key.
    pub fn peer(&self) -> PublicKey {
        self.peer
    }

    /// Splits into the sending and the receiving half.
    pub fn split(self) -> (Sealer, Opener) {
        let state = std::sync::Arc::new(self.state);
        (
            Sealer {
                state: state.clone(),
                nonce: self.send_nonce,
            },
            Opener {
                state,
                nonce: self.recv_nonce,
            },
        )
    }
}

/// The sending half: seals messages into frames.
#[derive(Debug)]
pub struct Sealer {
    state: std::sync::Arc<snow::StatelessTransportState>,
    nonce: u64,
}

impl Sealer {
    /// Appends `msg` to `out` as one or more frames (length, then a sealed record).
    pub fn seal(&mut self, msg: &[u8], out: &mut Vec<u8>) -> Result<(), NoiseError> {
        let mut chunks = msg.chunks(CHUNK).peekable();
        let mut plain = Vec::with_capacity(CHUNK.min(msg.len()) + 1);
        loop {
            let chunk = chunks.next().unwrap_or(&[]);
            let last = chunks.peek().is_none();
            plain.clear();
            plain.push(if last { LAST } else { MORE });
            plain.extend_from_slice(chunk);
            let at = out.len();
            out.extend_from_slice(&[0; 4]);
            out.resize(at + 4 + plain.len() + TAG, 0);
            let n = self
                .state
                .write_message(self.nonce, &plain, &mut out[at + 4..])
                .map_err(internal)?;
            self.nonce += 1;
            out.truncate(at + 4 + n);
            out[at..at + 4].copy_from_slice(&(n as u32).to_be_bytes());
            if last {
                return Ok(());
            }
        }
    }
}

/// The receiving half: opens records and reassembles messages.
#[derive(Debug)]
pub struct Opener {
    state: std::sync::Arc<snow::StatelessTransportState>,
    nonce: u64,
}

impl Opener {
    /// Opens one record (a frame's body) and appends its bytes to `msg`; true when it was the
    /// message's last. `limit` bounds the whole message.
    pub fn open(
        &mut self,
        record: &[u8],
        msg: &mut Vec<u8>,
        limit: usize,
    ) -> Result<bool, NoiseError> {
        if record.len() < TAG + 1 || record.len() > MAX_RECORD {
            return Err(NoiseError::Malformed);
        }
        let mut plain = vec![0u8; record.len()];
        let n = self
            .state
            .read_message(self.nonce, record, &mut plain)
            .map_err(|_| NoiseError::Record)?;
        self.nonce += 1;
        let (flag, bytes) = plain[..n].split_first().ok_or(NoiseError::Malformed)?;
        if msg.len() + bytes.len() > limit {
            return Err(NoiseError::TooLong(limit));
        }
        msg.extend_from_slice(bytes);
        match *flag {
            LAST => Ok(true),
            MORE => Ok(false),
            _ => Err(NoiseError::Malformed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Splits `frames` (as [`Sealer::seal`] writes them) into bodies.
    fn bodies(mut frames: &[u8]) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        while let Some((len, rest)) = frames.split_first_chunk::<4>() {
            let n = u32::from_be_bytes(*len) as usize;
            out.push(rest[..n].to_vec());
            frames = &rest[n..];
        }
        out
    }

    struct Pair {
        client: Transport,
        server: Transport,
        frames: [Vec<u8>; 3],
    }

    fn handshake(c: &KeyPair, s: &KeyPair) -> Pair {
        let (init, f1) = Initiator::start(c, 3).expect("start");
        let Intro::Current(msg1) = parse_intro(&f1, 3) else {
            panic!("intro")
        };
        let (resp, f2) = Responder::start(s, msg1).expect("msg1");
        let seen = init.on_reply(&f2).expect("msg2");
        assert_eq!(seen.server_key(), s.public());
        let (f3, client) = seen.finish().expect("finish");
        let server = resp.finish(&f3).expect("msg3");
        assert_eq!(server.peer(), c.public());
        Pair {
            client,
            server,
            frames: [f1, f2, f3],
        }
    }

    #[test]
    fn both_ends_learn_each_others_key_and_messages_cross_sealed() {
        let (c, s) = (
            KeyPair::generate("c").expect("c"),
            KeyPair::generate("s").expect("s"),
        );
        let p = handshake(&c, &s);
        let (mut tx, _) = p.client.split();
        let (_, mut rx) = p.server.split();
        for msg in [&b"hello"[..], &[], &vec![7u8; 3 * CHUNK + 5]] {
            let mut wire = Vec::new();
            tx.seal(msg, &mut wire).expect("seal");
            assert!(
                !wire.windows(5).any(|w| w == b"hello"),
                "plaintext on the wire"
            );
            let mut got = Vec::new();
            let recs = bodies(&wire);
            for (i, r) in recs.iter().enumerate() {
                let last = rx.open(r, &mut got, 1 << 20).expect("open");
                assert_eq!(last, i + 1 == recs.len());
            }
            assert_eq!(got, msg);
        }
    }

    #[test]
    fn a_replayed_handshake_fails_at_frame_3() {
        let (c, s) = (
            KeyPair::generate("c").expect("c"),
            KeyPair::generate("s").expect("s"),
        );
        let old = handshake(&c, &s);
        // An attacker replays frames 1 and 3 of the recorded handshake to a fresh server state.
        let Intro::Current(msg1) = parse_intro(&old.frames[0], 3) else {
            panic!("intro")
        };
        let (resp, _fresh_f2) = Responder::start(&s, msg1).expect("frame 1 replays fine");
        assert_eq!(
            resp.finish(&old.frames[2]).expect_err("replay"),
            NoiseError::Handshake(3)
        );
    }

    #[test]
    fn altered_dropped_or_reordered_records_are_refused() {
        let (c, s) = (
            KeyPair::generate("c").expect("c"),
            KeyPair::generate("s").expect("s"),
        );
        let p = handshake(&c, &s);
        let (mut tx, _) = p.client.split();
        let (_, mut rx) = p.server.split();
        let (mut a, mut b) = (Vec::new(), Vec::new());
        tx.seal(b"first", &mut a).expect("seal");
        tx.seal(b"second", &mut b).expect("seal");
        let (a, b) = (bodies(&a).remove(0), bodies(&b).remove(0));
        let mut flipped = a.clone();
        flipped[3] ^= 1;
        let mut sink = Vec::new();
        assert_eq!(rx.open(&flipped, &mut sink, 64), Err(NoiseError::Record));
        assert_eq!(
            rx.open(&b, &mut sink, 64),
            Err(NoiseError::Record),
            "reordered"
        );
        assert_eq!(rx.open(&a, &mut sink, 64), Ok(true));
        assert_eq!(
            rx.open(&a, &mut sink, 64),
            Err(NoiseError::Record),
            "repeated"
        );
        assert_eq!(rx.open(&[0; 3], &mut sink, 64), Err(NoiseError::Malformed));
    }

    #[test]
    fn a_message_past_the_limit_stops_at_the_record_that_crosses_it() {
        let (c, s) = (
            KeyPair::generate("c").expect("c"),
            KeyPair::generate("s").expect("s"),
        );
        let p = handshake(&c, &s);
        let (mut tx, _) = p.client.split();
        let (_, mut rx) = p.server.split();
        let mut wire = Vec::new();
        tx.seal(&vec![1u8; 2 * CHUNK], &mut wire).expect("seal");
        let recs = bodies(&wire);
        let mut got = Vec::new();
        assert_eq!(rx.open(&recs[0], &mut got, CHUNK + 10), Ok(false));
        assert_eq!(
            rx.open(&recs[1], &mut got, CHUNK + 10),
            Err(NoiseError::TooLong(CHUNK + 10))
        );
    }

    #[test]
    fn intros_are_told_apart() {
        assert_eq!(parse_intro(b"{\"type\":\"hello\"}", 3), Intro::Json);
        assert_eq!(parse_intro(&intro(4, b"x"), 3), Intro::Version(4));
        assert_eq!(parse_intro(&intro(3, b"xy"), 3), Intro::Current(b"xy"));
        assert_eq!(parse_intro(b"GET / HTTP/1.1", 3), Intro::Foreign);
        assert_eq!(parse_intro(b"TCPLAB\0", 3), Intro::Foreign);
        assert_eq!(parse_intro(b"", 3), Intro::Foreign);
    }

    #[test]
    fn a_client_talking_to_the_wrong_server_key_sees_it_before_saying_anything() {
        let (c, s, mallory) = (
            KeyPair::generate("c").expect("c"),
            KeyPair::generate("s").expect("s"),
            KeyPair::generate("m").expect("m"),
        );
        let (init, f1) = Initiator::start(&c, 3).expect("start");
        let Intro::Current(msg1) = parse_intro(&f1, 3) else {
            panic!("intro")
        };
        let (_, f2) = Responder::start(&mallory, msg1).expect("msg1");
        let seen = init.on_reply(&f2).expect("msg2");
        assert_ne!(seen.server_key(), s.public());
        assert_eq!(seen.server_key(), mallory.public());
    }
}
