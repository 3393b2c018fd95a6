//! Counting sockets by TCP state with a sock_diag netlink dump (what `ss state time-wait`
//! does): the kernel filters by state, so sampling tens of thousands of TIME_WAIT sockets costs
//! a few syscalls instead of formatting and parsing /proc/net/tcp. The dump covers the network
//! namespace the calling thread is in.

use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// `SOCK_DIAG_BY_FAMILY` netlink message type.
const SOCK_DIAG_BY_FAMILY: u16 = 20;
/// TCP_TIME_WAIT in the kernel's state numbering.
pub const TCP_TIME_WAIT: u32 = 6;

/// `struct inet_diag_sockid` (include/uapi/linux/inet_diag.h).
#[repr(C)]
#[derive(Default, Clone, Copy)]
struct InetDiagSockId {
    sport: u16,
    dport: u16,
    src: [u32; 4],
    dst: [u32; 4],
    ifindex: u32,
    cookie: [u32; 2],
}

/// `struct inet_diag_req_v2`.
#[repr(C)]
#[derive(Default, Clone, Copy)]
struct InetDiagReqV2 {
    family: u8,
    protocol: u8,
    ext: u8,
    pad: u8,
    states: u32,
    id: InetDiagSockId,
}

/// The request as sent: netlink header then the sock_diag request.
#[repr(C)]
struct Request {
    hdr: libc::nlmsghdr,
    req: InetDiagReqV2,
}

/// Counts TCP sockets in `state` (IPv4 and IPv6) in the calling thread's namespace.
pub fn count_tcp_state(state: u32) -> io::Result<u64> {
    let fd = open()?;
    let mut total = 0;
    for family in [libc::AF_INET, libc::AF_INET6] {
        total += dump(&fd, family as u8, 1 << state)?;
    }
    Ok(total)
}

fn open() -> io::Result<OwnedFd> {
    // Safety: plain socket(2); the result is checked before use.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            libc::NETLINK_SOCK_DIAG,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // Safety: `fd` is a fresh descriptor nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    crate::sockopt::set_timeouts(fd.as_raw_fd(), std::time::Duration::from_secs(1))?;
    Ok(fd)
}

fn dump(fd: &OwnedFd, family: u8, states: u32) -> io::Result<u64> {
    let req = Request {
        hdr: libc::nlmsghdr {
            nlmsg_len: size_of::<Request>() as u32,
            nlmsg_type: SOCK_DIAG_BY_FAMILY,
            nlmsg_flags: (libc::NLM_F_REQUEST | libc::NLM_F_DUMP) as u16,
            nlmsg_seq: 1,
            nlmsg_pid: 0,
        },
        req: InetDiagReqV2 {
            family,
            protocol: libc::IPPROTO_TCP as u8,
            states,
            ..InetDiagReqV2::default()
        },
    };
    // Safety: `req` is a live repr(C) value of exactly the length passed.
    let sent = unsafe {
        libc::send(
            fd.as_raw_fd(),
            (&req as *const Request).cast(),
            size_of::<Request>(),
            0,
        )
    };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut buf = vec![0u8; 64 << 10];
    let mut count = 0u64;
    loop {
        // Safety: `buf` is writable for its whole length.
        let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        match count_messages(&buf[..n as usize])? {
            (k, true) => return Ok(count + k),
            (k, false) => count += k,
        }
    }
}

/// Counts the socket records in one datagram of a dump; true once NLMSG_DONE was seen.
fn count_messages(mut data: &[u8]) -> io::Result<(u64, bool)> {
    let mut count = 0;
    while data.len() >= size_of::<libc::nlmsghdr>() {
        let len = u32::from_ne_bytes([data[0], data[1], data[2], data[3]]) as usize;
        let kind = u16::from_ne_bytes([data[4], data[5]]);
        if len < size_of::<libc::nlmsghdr>() || len > data.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "truncated netlink message",
            ));
        }
        match i32::from(kind) {
            libc::NLMSG_DONE => return Ok((count, true)),
            libc::NLMSG_ERROR => {
                let errno = data
                    .get(16..20)
                    .map_or(0, |b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
                return Err(io::Error::from_raw_os_error(-errno));
            }
            _ if kind == SOCK_DIAG_BY_FAMILY => count += 1,
            _ => {}
        }
        data = data.get(len.next_multiple_of(4)..).unwrap_or(&[]);
    }
    Ok((count, false))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_a_time_wait_socket_we_made() {
        // The side that closes first keeps TIME_WAIT; make one and find it.
        let before = count_tcp_state(TCP_TIME_WAIT).expect("dump");
        assert!(before < u64::from(u32::MAX));
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let c = std::net::TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
        let (s, _) = l.accept().expect("accept");
        drop(c);
        let mut b = [0u8; 1];
        let _ = std::io::Read::read(&mut &s, &mut b);
        drop(s);
        std::thread::sleep(std::time::Duration::from_millis(20));
        let after = count_tcp_state(TCP_TIME_WAIT).expect("dump");
        assert!(
            after > before || after >= 1,
            "before {before}, after {after}"
        );
        let listening = count_tcp_state(10).expect("dump LISTEN");
        assert!(listening >= 1, "our listener is in LISTEN");
    }

    #[test]
    fn parses_done_and_error() {
        let mut msg = vec![0u8; 16];
        msg[0..4].copy_from_slice(&16u32.to_ne_bytes());
        msg[4..6].copy_from_slice(&(libc::NLMSG_DONE as u16).to_ne_bytes());
        let mut rec = vec![0u8; 20];
        rec[0..4].copy_from_slice(&20u32.to_ne_bytes());
        rec[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
        let both = [rec.clone(), rec, msg].concat();
        assert_eq!(count_messages(&both).expect("parse"), (2, true));
        let mut err = vec![0u8; 20];
        err[0..4].copy_from_slice(&20u32.to_ne_bytes());
        err[4..6].copy_from_slice(&(libc::NLMSG_ERROR as u16).to_ne_bytes());
        err[16..20].copy_from_slice(&(-libc::EPERM).to_ne_bytes());
        assert_eq!(
            count_messages(&err).expect_err("error").raw_os_error(),
            Some(libc::EPERM)
        );
    }
}
