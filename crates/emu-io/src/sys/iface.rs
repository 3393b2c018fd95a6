//! Interface look-ups in the current network namespace: index, up/down, MTU.

use std::ffi::CString;
use std::io;

/// What the bridge needs to know about one interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IfaceInfo {
    /// The name as given.
    pub name: String,
    /// Kernel interface index.
    pub index: i32,
    /// Administratively up (`IFF_UP`).
    pub up: bool,
    /// MTU in bytes (L3).
    pub mtu: u32,
}

/// Looks `name` up; `Ok(None)` if no such interface exists in this namespace.
pub fn lookup(name: &str) -> io::Result<Option<IfaceInfo>> {
    if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains('\0') {
        return Ok(None);
    }
    let cname = CString::new(name).map_err(io::Error::other)?;
    // Safety: cname is a valid NUL-terminated string.
    let index = unsafe { libc::if_nametoindex(cname.as_ptr()) };
    if index == 0 {
        return Ok(None);
    }
    // Safety: plain socket(2) used only for the two ioctls below, closed by OwnedFd.
    let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // Safety: raw is a fresh valid fd.
    let sock = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(raw) };
    let fd = std::os::fd::AsRawFd::as_raw_fd(&sock);
    let flags = ifreq_ioctl(fd, name, libc::SIOCGIFFLAGS)?;
    let mtu = ifreq_ioctl(fd, name, libc::SIOCGIFMTU)?;
    Ok(Some(IfaceInfo {
        name: name.to_owned(),
        index: index as i32,
        up: flags & libc::IFF_UP != 0,
        mtu: mtu.max(0) as u32,
    }))
}

/// Runs an `ifreq` ioctl whose result is an int (flags or MTU share the union's first int).
fn ifreq_ioctl(fd: i32, name: &str, request: libc::Ioctl) -> io::Result<i32> {
    // Safety: ifreq is plain data; all-zero is valid.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in ifr.ifr_name.iter_mut().zip(name.bytes()) {
        *dst = src as libc::c_char;
    }
    // Safety: ifr is a valid ifreq with a NUL-terminated name (len < IFNAMSIZ, rest zero).
    let rc = unsafe { libc::ioctl(fd, request, &mut ifr) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    // Safety: both SIOCGIFFLAGS (short) and SIOCGIFMTU (int) fill the union's first bytes;
    // reading it as ifru_mtu (int) and masking flags to 16 bits is how C code reads them too.
    let value = unsafe { ifr.ifr_ifru.ifru_mtu };
    Ok(if request == libc::SIOCGIFFLAGS {
        value & 0xffff
    } else {
        value
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_found_and_missing_is_none() {
        let lo = lookup("lo").unwrap().expect("lo exists in every namespace");
        assert_eq!(lo.index, 1);
        assert!(lo.up);
        assert_eq!(lo.mtu, 65536);
        assert_eq!(lookup("tlx-nonexistent").unwrap(), None);
        assert_eq!(lookup("").unwrap(), None);
        assert_eq!(lookup("a-name-longer-than-ifnamsiz").unwrap(), None);
    }
}
