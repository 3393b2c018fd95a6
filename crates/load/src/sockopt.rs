//! Socket options: what the user asks for ([`SockOpts`]), how it is applied (before connect or
//! listen, so buffer sizes shape the window scale), and what was really in force
//! ([`AppliedOpts`], read back with getsockopt: the kernel doubles SO_SNDBUF/SO_RCVBUF and may
//! clamp them, so the request alone is not evidence).

use std::io;
use std::os::fd::RawFd;

use crate::error::{LoadError, Result};
pub use tcplab_results::sockopt::{AppliedOpts, SockOpts};

/// `TCP_RTO_MIN_US` (Linux 6.15+); absent from older userspace headers.
pub const TCP_RTO_MIN_US: libc::c_int = 45;
/// `TCP_DELACK_MAX_US` (Linux 6.15+); absent from older userspace headers.
pub const TCP_DELACK_MAX_US: libc::c_int = 46;

pub fn set_int(
    fd: RawFd,
    level: libc::c_int,
    opt: libc::c_int,
    val: libc::c_int,
) -> io::Result<()> {
    // Safety: we pass a pointer to a live c_int and its exact size.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            opt,
            (&val as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Reads an integer socket option.
pub fn get_int(fd: RawFd, level: libc::c_int, opt: libc::c_int) -> io::Result<libc::c_int> {
    let mut val: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // Safety: `val` and `len` are live and writable; len tells the kernel the buffer size.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            level,
            opt,
            (&mut val as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc == 0 {
        Ok(val)
    } else {
        Err(io::Error::last_os_error())
    }
}

fn checked(
    flag: &'static str,
    option: &'static str,
    since: &'static str,
    r: io::Result<()>,
) -> Result<()> {
    r.map_err(|source| match source.raw_os_error() {
        Some(libc::ENOPROTOOPT) => LoadError::Unsupported {
            flag,
            option,
            since,
        },
        _ => LoadError::SockOpt {
            flag,
            option,
            source,
        },
    })
}

fn to_int(flag: &'static str, v: u32) -> Result<libc::c_int> {
    libc::c_int::try_from(v)
        .map_err(|_| LoadError::config(flag, format!("{v} is above {}", libc::c_int::MAX)))
}

/// Applying a request to a socket: the I/O half of [`SockOpts`] (its checks are pure, in
/// `tcplab_results`).
pub trait Apply {
    /// Applies every requested option to `fd`. Call before connect/listen so buffer sizes take
    /// effect on the window scale; calling again on a connected socket is harmless.
    fn apply(&self, fd: RawFd) -> Result<()>;
}

impl Apply for SockOpts {
    fn apply(&self, fd: RawFd) -> Result<()> {
        let tcp = libc::IPPROTO_TCP;
        if let Some(v) = self.sndbuf {
            checked(
                "sndbuf",
                "SO_SNDBUF",
                "always",
                set_int(fd, libc::SOL_SOCKET, libc::SO_SNDBUF, to_int("sndbuf", v)?),
            )?;
        }
        if let Some(v) = self.rcvbuf {
            checked(
                "rcvbuf",
                "SO_RCVBUF",
                "always",
                set_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, to_int("rcvbuf", v)?),
            )?;
        }
        if self.nodelay {
            checked(
                "nodelay",
                "TCP_NODELAY",
                "always",
                set_int(fd, tcp, libc::TCP_NODELAY, 1),
            )?;
        }
        if self.cork {
            checked(
                "cork",
                "TCP_CORK",
                "always",
                set_int(fd, tcp, libc::TCP_CORK, 1),
            )?;
        }
        if self.quickack {
            checked(
                "quickack",
                "TCP_QUICKACK",
                "always",
                set_int(fd, tcp, libc::TCP_QUICKACK, 1),
            )?;
        }
        if let Some(cc) = &self.congestion {
            checked("cc", "TCP_CONGESTION", "2.6.13", set_congestion(fd, cc))?;
        }
        if let Some(v) = self.notsent_lowat {
            let r = set_int(
                fd,
                tcp,
                libc::TCP_NOTSENT_LOWAT,
                to_int("notsent-lowat", v)?,
            );
            checked("notsent-lowat", "TCP_NOTSENT_LOWAT", "3.12", r)?;
        }
        if let Some(v) = self.rto_min_us {
            let r = set_int(fd, tcp, TCP_RTO_MIN_US, to_int("rto-min-us", v)?);
            checked("rto-min-us", "TCP_RTO_MIN_US", "6.15", r)?;
        }
        if let Some(v) = self.delack_max_us {
            let r = set_int(fd, tcp, TCP_DELACK_MAX_US, to_int("delack-max-us", v)?);
            checked("delack-max-us", "TCP_DELACK_MAX_US", "6.15", r)?;
        }
        Ok(())
    }
}

fn set_congestion(fd: RawFd, cc: &str) -> io::Result<()> {
    // Safety: the pointer and length describe the live bytes of `cc`.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            cc.as_ptr().cast(),
            cc.len() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The congestion control `fd` runs (`TCP_CONGESTION`); `None` when the kernel does not say.
pub(crate) fn congestion_of(fd: RawFd) -> Option<String> {
    Some(get_congestion(fd)).filter(|c| !c.is_empty())
}

fn get_congestion(fd: RawFd) -> String {
    let mut buf = [0u8; 32];
    let mut len = buf.len() as libc::socklen_t;
    // Safety: `buf` is writable for `len` bytes and `len` is live.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return String::new();
    }
    let bytes = &buf[..(len as usize).min(buf.len())];
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// Reads back the options in force on `fd`.
pub fn read_back(fd: RawFd, requested: &SockOpts) -> AppliedOpts {
    let tcp = libc::IPPROTO_TCP;
    let int = |level, opt| get_int(fd, level, opt).ok().map(|v| v.max(0) as u32);
    AppliedOpts {
        nodelay: int(tcp, libc::TCP_NODELAY).unwrap_or(0) != 0,
        cork: int(tcp, libc::TCP_CORK).unwrap_or(0) != 0,
        quickack_rearmed: requested.quickack,
        congestion: get_congestion(fd),
        sndbuf: int(libc::SOL_SOCKET, libc::SO_SNDBUF).unwrap_or(0),
        rcvbuf: int(libc::SOL_SOCKET, libc::SO_RCVBUF).unwrap_or(0),
        notsent_lowat: int(tcp, libc::TCP_NOTSENT_LOWAT).unwrap_or(0),
        rto_min_us: int(tcp, TCP_RTO_MIN_US),
        delack_max_us: int(tcp, TCP_DELACK_MAX_US),
        mss: int(tcp, libc::TCP_MAXSEG).unwrap_or(0),
    }
}

/// Re-arms TCP_QUICKACK after a read; errors are ignored because the read already succeeded
/// and the option is a hint.
#[inline]
pub(crate) fn rearm_quickack(fd: RawFd) {
    let _ = set_int(fd, libc::IPPROTO_TCP, libc::TCP_QUICKACK, 1);
}

/// Sets SO_RCVTIMEO and SO_SNDTIMEO so that no blocking call waits forever.
pub fn set_timeouts(fd: RawFd, timeout: std::time::Duration) -> io::Result<()> {
    let tv = libc::timeval {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_usec: timeout.subsec_micros() as libc::suseconds_t,
    };
    for opt in [libc::SO_RCVTIMEO, libc::SO_SNDTIMEO] {
        // Safety: pointer and size describe the live `tv`.
        let rc = unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                opt,
                (&tv as *const libc::timeval).cast(),
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn applies_and_reads_back() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let s = std::net::TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
        let opts = SockOpts {
            nodelay: true,
            congestion: Some("reno".into()),
            sndbuf: Some(100_000),
            notsent_lowat: Some(16_384),
            ..Default::default()
        };
        opts.apply(s.as_raw_fd()).expect("apply");
        let got = read_back(s.as_raw_fd(), &opts);
        assert!(got.nodelay);
        assert_eq!(got.congestion, "reno");
        assert_eq!(got.sndbuf, 200_000, "kernel doubles SO_SNDBUF");
        assert_eq!(got.notsent_lowat, 16_384);
    }

    #[test]
    fn unknown_congestion_control_names_the_flag() {
        let s = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let opts = SockOpts {
            congestion: Some("nosuchcc".into()),
            ..Default::default()
        };
        let err = opts.apply(s.as_raw_fd()).expect_err("must fail");
        assert!(err.to_string().starts_with("--cc:"), "{err}");
    }
}
