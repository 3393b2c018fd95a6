//! The control channel's I/O: frames on a TCP stream, read within a deadline, and [`Channel`],
//! the sealed control connection both ends hold after the handshake. The cryptography is in
//! [`crate::noise`]; this file only moves its bytes. What the messages say is the control
//! protocol's (`tcplab_load::proto`), which runs over a [`Channel`].

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::error::ChannelError;
use crate::keys::PublicKey;
use crate::noise::{MAX_RECORD, Opener, Sealer, Transport};

/// Appends one frame (4-byte big-endian length, then `body`) to `buf`: the framing of the
/// handshake's messages, of the sealed records after it, and of the control protocol's clear
/// frames.
pub fn push_frame(buf: &mut Vec<u8>, body: &[u8]) {
    buf.extend_from_slice(&(body.len() as u32).to_be_bytes());
    buf.extend_from_slice(body);
}

/// Reads exactly `buf.len()` bytes. With a deadline, every read waits only for what is left
/// of it, so a peer that trickles bytes (slowloris) cannot stretch the wait; without one, the
/// socket's own read timeout bounds each read.
fn read_exact_by(
    stream: &mut TcpStream,
    buf: &mut [u8],
    deadline: Option<Instant>,
) -> io::Result<()> {
    let mut got = 0;
    while got < buf.len() {
        if let Some(d) = deadline {
            let left = d.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::Error::from(io::ErrorKind::TimedOut));
            }
            stream.set_read_timeout(Some(left.max(Duration::from_millis(1))))?;
        }
        match stream.read(&mut buf[got..]) {
            Ok(0) => return Err(io::Error::from(io::ErrorKind::UnexpectedEof)),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            // The read timed out: the deadline check above says whether time is up.
            Err(e) if e.kind() == io::ErrorKind::WouldBlock && deadline.is_some() => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Reads one frame's body of at most `limit` bytes. A longer length is refused before anything
/// is allocated for it.
pub fn read_body(
    stream: &mut TcpStream,
    limit: usize,
    deadline: Option<Instant>,
) -> io::Result<Vec<u8>> {
    let mut len = [0u8; 4];
    read_exact_by(stream, &mut len, deadline)?;
    let len = u32::from_be_bytes(len) as usize;
    if len > limit {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("a frame of {len} bytes, over the {limit}-byte limit"),
        ));
    }
    let mut body = vec![0u8; len];
    read_exact_by(stream, &mut body, deadline)?;
    Ok(body)
}

/// A sealed control connection. Clones share the stream and the ciphers (sending and
/// receiving each under their own lock, so a thread waiting for a message never blocks one
/// that sends).
#[derive(Debug)]
pub struct Channel {
    stream: TcpStream,
    sealer: Arc<Mutex<Sealer>>,
    opener: Arc<Mutex<Opener>>,
    peer: PublicKey,
    limit: usize,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock leaves the nonce where it was; the next use fails to
    // decrypt and says so, which is the right outcome for a broken connection.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Channel {
    /// A channel on `stream` after a finished handshake; messages longer than `limit` bytes
    /// are refused (a server accepts little from clients; a client takes large reports).
    pub fn new(stream: TcpStream, transport: Transport, limit: usize) -> Self {
        let peer = transport.peer();
        let (sealer, opener) = transport.split();
        Self {
            stream,
            sealer: Arc::new(Mutex::new(sealer)),
            opener: Arc::new(Mutex::new(opener)),
            peer,
            limit,
        }
    }

    /// The peer's proven key.
    pub fn peer_key(&self) -> PublicKey {
        self.peer
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.stream.peer_addr()
    }

    /// This end's address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.stream.local_addr()
    }

    /// The underlying socket (for socket options; never write to it directly).
    pub fn socket(&self) -> &TcpStream {
        &self.stream
    }

    /// Sets how long a read may wait (None: forever).
    pub fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        self.stream.set_read_timeout(t)
    }

    /// Sets how long a write may wait (None: forever).
    pub fn set_write_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        self.stream.set_write_timeout(t)
    }

    /// Shuts the connection down (wakes a thread blocked on it).
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.stream.shutdown(how)
    }

    /// Another handle on the same channel.
    pub fn try_clone(&self) -> io::Result<Self> {
        Ok(Self {
            stream: self.stream.try_clone()?,
            sealer: self.sealer.clone(),
            opener: self.opener.clone(),
            peer: self.peer,
            limit: self.limit,
        })
    }

    /// Seals `msgs` and sends them in one write (a report and its stamps leave together).
    pub fn send(&mut self, msgs: &[&[u8]]) -> Result<(), ChannelError> {
        self.send_after(&[], msgs)
    }

    /// Sends `prefix` (clear bytes: the handshake's last frame) and then `msgs` sealed, in one
    /// write, so the client's last handshake frame and its Hello leave in one segment.
    pub fn send_after(&mut self, prefix: &[u8], msgs: &[&[u8]]) -> Result<(), ChannelError> {
        let mut sealer = lock(&self.sealer);
        let mut buf =
            Vec::with_capacity(prefix.len() + msgs.iter().map(|m| m.len() + 64).sum::<usize>());
        buf.extend_from_slice(prefix);
        for m in msgs {
            sealer.seal(m, &mut buf).map_err(ChannelError::Noise)?;
        }
        self.stream.write_all(&buf).map_err(ChannelError::Write)
    }

    /// Receives one message, honouring the socket's read timeout for each record.
    pub fn recv(&mut self) -> Result<Vec<u8>, ChannelError> {
        self.recv_by(None)
    }

    /// Receives one message; with a deadline, all of it must have arrived by then.
    pub fn recv_by(&mut self, deadline: Option<Instant>) -> Result<Vec<u8>, ChannelError> {
        let mut opener = lock(&self.opener);
        let mut msg = Vec::new();
        loop {
            let record =
                read_body(&mut self.stream, MAX_RECORD, deadline).map_err(ChannelError::Read)?;
            if opener
                .open(&record, &mut msg, self.limit)
                .map_err(ChannelError::Noise)?
            {
                return Ok(msg);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn a_trickling_peer_cannot_stretch_a_deadline() {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let mut c = TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
        let (mut s, _) = l.accept().expect("accept");
        let writer = std::thread::spawn(move || {
            // One byte every 50 ms of a 100-byte frame: 5 s if the reader let it.
            let _ = c.write_all(&100u32.to_be_bytes());
            for _ in 0..40 {
                if c.write_all(b"x").is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        let start = Instant::now();
        let e =
            read_body(&mut s, 1000, Some(start + Duration::from_millis(300))).expect_err("late");
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert!(
            start.elapsed() < Duration::from_millis(600),
            "{:?}",
            start.elapsed()
        );
        drop(s);
        let _ = writer.join();
    }

    #[test]
    fn an_oversized_length_is_refused_before_allocating() {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let mut c = TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
        let (mut s, _) = l.accept().expect("accept");
        c.write_all(&u32::MAX.to_be_bytes()).expect("write");
        let e = read_body(&mut s, 1 << 16, None).expect_err("too long");
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert!(e.to_string().contains("4294967295"), "{e}");
    }
}
