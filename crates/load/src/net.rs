//! Socket creation with options applied *before* connect/listen (so SO_RCVBUF shapes the
//! window scale), connects with a timeout, and errno classification. std's TcpStream::connect
//! cannot do the former, so sockets are made with libc here and handed to std at once.

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

use crate::sockopt::Apply;
use crate::sockopt::SockOpts;

/// Errors from [`connect`]: the socket could not be configured, or the connect itself failed
/// (the io::Error keeps the errno, which crr classifies).
#[derive(Debug)]
pub enum ConnectError {
    /// A requested option could not be applied.
    Option(crate::error::LoadError),
    /// socket()/connect() failed.
    Io(io::Error),
}

fn sockaddr(addr: &SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // Safety: sockaddr_storage is plain old data; all-zero is a valid value.
    let mut ss: libc::sockaddr_storage = unsafe { zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // Safety: sockaddr_storage is larger than and suitably aligned for sockaddr_in.
            unsafe { std::ptr::write((&mut ss as *mut libc::sockaddr_storage).cast(), sin) };
            size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // Safety: sockaddr_storage is larger than and suitably aligned for sockaddr_in6.
            unsafe { std::ptr::write((&mut ss as *mut libc::sockaddr_storage).cast(), sin6) };
            size_of::<libc::sockaddr_in6>()
        }
    };
    (ss, len as libc::socklen_t)
}

fn new_socket(addr: &SocketAddr) -> io::Result<OwnedFd> {
    let family = if addr.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    // Safety: plain socket(2) call; the result is checked before use.
    let fd = unsafe { libc::socket(family, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // Safety: `fd` is a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Applies `opts` to a fresh, unconnected socket of `addr`'s family and closes it: a workload
/// that opens its connections late (rrul's load, after the idle phase) learns at once that the
/// kernel refuses an option, instead of after the time it would have spent waiting.
pub fn check_opts(addr: &SocketAddr, opts: &SockOpts) -> Result<(), crate::error::LoadError> {
    let fd = new_socket(addr)
        .map_err(|e| crate::error::LoadError::io("opening a socket to check options", e))?;
    opts.apply(fd.as_raw_fd())
}

fn set_nonblocking(fd: RawFd, on: bool) -> io::Result<()> {
    // Safety: fcntl on a descriptor we own.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    let flags = if on {
        flags | libc::O_NONBLOCK
    } else {
        flags & !libc::O_NONBLOCK
    };
    // Safety: as above.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, flags) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Connects to `addr` with `opts` applied first, waiting at most `timeout`.
pub fn connect(
    addr: SocketAddr,
    opts: &SockOpts,
    timeout: Duration,
) -> Result<TcpStream, ConnectError> {
    let fd = new_socket(&addr).map_err(ConnectError::Io)?;
    opts.apply(fd.as_raw_fd()).map_err(ConnectError::Option)?;
    set_nonblocking(fd.as_raw_fd(), true).map_err(ConnectError::Io)?;
    let (ss, len) = sockaddr(&addr);
    // Safety: `ss` holds a valid sockaddr of `len` bytes.
    let rc = unsafe {
        libc::connect(
            fd.as_raw_fd(),
            (&ss as *const libc::sockaddr_storage).cast(),
            len,
        )
    };
    if rc != 0 {
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EINPROGRESS) {
            return Err(ConnectError::Io(err));
        }
        wait_connected(fd.as_raw_fd(), timeout).map_err(ConnectError::Io)?;
    }
    set_nonblocking(fd.as_raw_fd(), false).map_err(ConnectError::Io)?;
    Ok(TcpStream::from(fd))
}

fn wait_connected(fd: RawFd, timeout: Duration) -> io::Result<()> {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLOUT,
        revents: 0,
    };
    let ms = timeout.as_millis().min(i32::MAX as u128) as libc::c_int;
    loop {
        // Safety: one live pollfd.
        let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if rc == 0 {
            return Err(io::Error::from_raw_os_error(libc::ETIMEDOUT));
        }
        break;
    }
    let err = crate::sockopt::get_int(fd, libc::SOL_SOCKET, libc::SO_ERROR)?;
    if err != 0 {
        Err(io::Error::from_raw_os_error(err))
    } else {
        Ok(())
    }
}

/// Binds and listens on `addr` with `opts` applied to the listener (accepted sockets inherit
/// them) and SO_REUSEADDR so a restarted server does not trip over its own TIME_WAITs.
#[cfg(test)]
pub fn listen(
    addr: SocketAddr,
    opts: &SockOpts,
    backlog: i32,
) -> Result<TcpListener, ConnectError> {
    listen_with(addr, opts, backlog, |_| Ok(()))
}

/// [`listen`], with `prepare` run on the socket before it binds: a socket filter attached there
/// applies from the first SYN, with no window in which another peer could connect.
pub fn listen_with(
    addr: SocketAddr,
    opts: &SockOpts,
    backlog: i32,
    prepare: impl FnOnce(RawFd) -> io::Result<()>,
) -> Result<TcpListener, ConnectError> {
    let fd = new_socket(&addr).map_err(ConnectError::Io)?;
    prepare(fd.as_raw_fd()).map_err(ConnectError::Io)?;
    let one: libc::c_int = 1;
    // Safety: setsockopt on our own fd with a live c_int and its size.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_REUSEADDR,
            (&one as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(ConnectError::Io(io::Error::last_os_error()));
    }
    opts.apply(fd.as_raw_fd()).map_err(ConnectError::Option)?;
    let (ss, len) = sockaddr(&addr);
    // Safety: `ss` holds a valid sockaddr of `len` bytes.
    if unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&ss as *const libc::sockaddr_storage).cast(),
            len,
        )
    } != 0
    {
        return Err(ConnectError::Io(io::Error::last_os_error()));
    }
    // Safety: listen on our own bound fd.
    if unsafe { libc::listen(fd.as_raw_fd(), backlog) } != 0 {
        return Err(ConnectError::Io(io::Error::last_os_error()));
    }
    Ok(TcpListener::from(fd))
}

/// True when an I/O error means "the peer went away" rather than a local fault.
pub fn is_peer_gone(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionReset
            | io::ErrorKind::BrokenPipe
            | io::ErrorKind::UnexpectedEof
            | io::ErrorKind::ConnectionAborted
    )
}

/// A short reason for a partial result, from the error that cut the run.
pub fn reason(what: &str, e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
            format!("{what}: timed out waiting for the peer")
        }
        _ if is_peer_gone(e) => format!("{what}: peer closed the connection ({e})"),
        _ => format!("{what}: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_applies_options_before_connecting() {
        let l = listen(
            "127.0.0.1:0".parse().expect("addr"),
            &SockOpts::default(),
            16,
        )
        .expect("listen");
        let opts = SockOpts {
            rcvbuf: Some(65_536),
            nodelay: true,
            ..Default::default()
        };
        let s =
            connect(l.local_addr().expect("addr"), &opts, Duration::from_secs(2)).expect("connect");
        let got = crate::sockopt::read_back(s.as_raw_fd(), &opts);
        assert_eq!(got.rcvbuf, 131_072);
        assert!(got.nodelay);
    }

    #[test]
    fn refused_connect_keeps_errno() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().expect("addr");
        drop(l);
        match connect(addr, &SockOpts::default(), Duration::from_secs(2)) {
            Err(ConnectError::Io(e)) => assert_eq!(e.raw_os_error(), Some(libc::ECONNREFUSED)),
            other => panic!("expected ECONNREFUSED, got {other:?}"),
        }
    }

    #[test]
    fn busy_port_is_addr_in_use() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().expect("addr");
        match listen(addr, &SockOpts::default(), 16) {
            Err(ConnectError::Io(e)) => assert_eq!(e.raw_os_error(), Some(libc::EADDRINUSE)),
            other => panic!("expected EADDRINUSE, got {other:?}"),
        }
    }
}
