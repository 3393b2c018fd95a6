//! Flushing the kernel's TCP metrics cache (`ip tcp_metrics flush all`) in the calling thread's
//! network namespace, over generic netlink.
//!
//! The cache keeps, per destination, the RTT, RTT variance, ssthresh and cwnd of closed
//! connections and seeds new connections with them; a lab that is reset between runs flushes
//! it so no run starts from what an earlier configuration's run left behind. A fresh namespace
//! starts empty, so this is what makes a reset lab equal to a fresh one here.
//!
//! Two requests: `CTRL_CMD_GETFAMILY` resolves the `tcp_metrics` family id, then
//! `TCP_METRICS_CMD_DEL` without address attributes deletes every entry (kernel
//! `net/ipv4/tcp_metrics.c`, `tcp_metrics_nl_cmd_del` → `tcp_metrics_flush_all`).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const GENL_ID_CTRL: u16 = 0x10;
const CTRL_CMD_GETFAMILY: u8 = 3;
const CTRL_ATTR_FAMILY_ID: u16 = 1;
const CTRL_ATTR_FAMILY_NAME: u16 = 2;
const TCP_METRICS_CMD_DEL: u8 = 2;
const TCP_METRICS_GENL_VERSION: u8 = 1;
const NLMSG_ERROR: u16 = 2;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_ACK: u16 = 4;
const NLMSG_HDRLEN: usize = 16;
const GENL_HDRLEN: usize = 4;

/// Deletes every entry of the TCP metrics cache of the current thread's namespace.
pub fn flush() -> io::Result<()> {
    Flusher::open()?.flush()
}

/// A netlink socket bound to one namespace's `tcp_metrics` family: opened once inside the
/// namespace (a netlink socket stays with the namespace it was created in), then usable from
/// any thread, so a reset needs no thread entered into each host.
#[derive(Debug)]
pub struct Flusher {
    sock: OwnedFd,
    family: u16,
}

impl Flusher {
    /// Opens the socket in the current thread's namespace and resolves the family.
    pub fn open() -> io::Result<Flusher> {
        let sock = open()?;
        let family = resolve_family(&sock, "tcp_metrics")?;
        Ok(Flusher { sock, family })
    }

    /// Deletes every entry of that namespace's TCP metrics cache.
    pub fn flush(&self) -> io::Result<()> {
        let msg = genl_message(
            self.family,
            TCP_METRICS_CMD_DEL,
            TCP_METRICS_GENL_VERSION,
            2,
            &[],
        );
        request(&self.sock, &msg).map(|_| ())
    }
}

fn open() -> io::Result<OwnedFd> {
    // Safety: socket(2) with constant arguments; the result is checked before use.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::NETLINK_GENERIC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // Safety: `fd` is a new descriptor that nothing else owns.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    let tv = libc::timeval {
        tv_sec: 2,
        tv_usec: 0,
    };
    // Safety: SO_RCVTIMEO takes a timeval; the pointer and size describe `tv`, which outlives
    // the call.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&raw const tv).cast(),
            size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(sock)
}

/// A netlink header + genetlink header + attributes, with REQUEST|ACK.
fn genl_message(family: u16, cmd: u8, version: u8, seq: u32, attrs: &[u8]) -> Vec<u8> {
    let len = NLMSG_HDRLEN + GENL_HDRLEN + attrs.len();
    let mut m = Vec::with_capacity(len);
    m.extend_from_slice(&(len as u32).to_ne_bytes());
    m.extend_from_slice(&family.to_ne_bytes());
    m.extend_from_slice(&(NLM_F_REQUEST | NLM_F_ACK).to_ne_bytes());
    m.extend_from_slice(&seq.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.extend_from_slice(&[cmd, version, 0, 0]);
    m.extend_from_slice(attrs);
    m
}

/// One netlink attribute, padded to 4 bytes.
fn attr(kind: u16, payload: &[u8]) -> Vec<u8> {
    let len = 4 + payload.len();
    let mut a = Vec::with_capacity(len.next_multiple_of(4));
    a.extend_from_slice(&(len as u16).to_ne_bytes());
    a.extend_from_slice(&kind.to_ne_bytes());
    a.extend_from_slice(payload);
    a.resize(len.next_multiple_of(4), 0);
    a
}

fn resolve_family(sock: &OwnedFd, name: &str) -> io::Result<u16> {
    let mut cname = name.as_bytes().to_vec();
    cname.push(0);
    let msg = genl_message(
        GENL_ID_CTRL,
        CTRL_CMD_GETFAMILY,
        1,
        1,
        &attr(CTRL_ATTR_FAMILY_NAME, &cname),
    );
    let reply = request(sock, &msg)?;
    find_attr(&reply, CTRL_ATTR_FAMILY_ID)
        .and_then(|p| p.get(..2))
        .map(|b| u16::from_ne_bytes([b[0], b[1]]))
        .ok_or_else(|| io::Error::other(format!("no id for the generic netlink family {name}")))
}

/// Sends `msg` and reads until the kernel's ACK (or error); returns the last data message's
/// attributes (the bytes after its genetlink header).
fn request(sock: &OwnedFd, msg: &[u8]) -> io::Result<Vec<u8>> {
    // Safety: the pointer and length describe `msg`; a null address sends to the kernel.
    let sent = unsafe { libc::send(sock.as_raw_fd(), msg.as_ptr().cast(), msg.len(), 0) };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut data = Vec::new();
    let mut buf = vec![0u8; 16384];
    loop {
        // Safety: the pointer and length describe `buf`, which outlives the call.
        let n = unsafe { libc::recv(sock.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut rest = &buf[..n as usize];
        while rest.len() >= NLMSG_HDRLEN {
            let len = u32::from_ne_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
            let kind = u16::from_ne_bytes([rest[4], rest[5]]);
            if len < NLMSG_HDRLEN || len > rest.len() {
                return Err(io::Error::other("a malformed netlink reply"));
            }
            let body = &rest[NLMSG_HDRLEN..len];
            if kind == NLMSG_ERROR {
                let errno = body
                    .get(..4)
                    .map_or(0, |b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
                return if errno == 0 {
                    Ok(data)
                } else {
                    Err(io::Error::from_raw_os_error(-errno))
                };
            }
            data = body.get(GENL_HDRLEN..).unwrap_or_default().to_vec();
            rest = &rest[len.next_multiple_of(4).min(rest.len())..];
        }
    }
}

fn find_attr(mut attrs: &[u8], kind: u16) -> Option<&[u8]> {
    while attrs.len() >= 4 {
        let len = u16::from_ne_bytes([attrs[0], attrs[1]]) as usize;
        let k = u16::from_ne_bytes([attrs[2], attrs[3]]) & 0x3fff;
        if len < 4 || len > attrs.len() {
            return None;
        }
        if k == kind {
            return Some(&attrs[4..len]);
        }
        attrs = &attrs[len.next_multiple_of(4).min(attrs.len())..];
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_are_padded_and_found() {
        let a = attr(CTRL_ATTR_FAMILY_NAME, b"tcp_metrics\0");
        assert_eq!(a.len(), 16);
        let mut both = a.clone();
        both.extend(attr(CTRL_ATTR_FAMILY_ID, &0x1cu16.to_ne_bytes()));
        assert_eq!(
            find_attr(&both, CTRL_ATTR_FAMILY_ID),
            Some(&0x1cu16.to_ne_bytes()[..])
        );
        assert_eq!(find_attr(&both, 9), None);
        let m = genl_message(0x1c, TCP_METRICS_CMD_DEL, 1, 7, &[]);
        assert_eq!(m.len(), 20);
        assert_eq!(u32::from_ne_bytes([m[0], m[1], m[2], m[3]]), 20);
    }
}
