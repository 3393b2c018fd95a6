//! Interface look-ups in the current network namespace: index, up/down, MTU, and the two
//! offloads GSO mode needs on its egress (TSO, TX checksum; legacy ethtool get commands).

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
    /// TCP segmentation offload on (`ETHTOOL_GTSO`); false if the query failed.
    pub tso: bool,
    /// TX checksum offload on (`ETHTOOL_GTXCSUM`); false if the query failed.
    pub tx_csum: bool,
    /// RX queues in use (`ETHTOOL_GCHANNELS`: rx + combined); 1 if the query failed. The
    /// AF_XDP route serves queue 0 only.
    pub rx_queues: u32,
}

/// `ETHTOOL_GTXCSUM` / `ETHTOOL_GTSO` from `linux/ethtool.h`.
const ETHTOOL_GTXCSUM: u32 = 0x16;
const ETHTOOL_GTSO: u32 = 0x1e;
/// `ETHTOOL_GCHANNELS`.
const ETHTOOL_GCHANNELS: u32 = 0x3c;

/// `struct ethtool_value`.
#[repr(C)]
struct EthtoolValue {
    cmd: u32,
    data: u32,
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
        tso: ethtool_get(fd, name, ETHTOOL_GTSO).is_ok_and(|v| v != 0),
        tx_csum: ethtool_get(fd, name, ETHTOOL_GTXCSUM).is_ok_and(|v| v != 0),
        rx_queues: rx_queues(fd, name).unwrap_or(1),
    }))
}

/// RX queues in use: `rx_count + combined_count` of `struct ethtool_channels`.
fn rx_queues(fd: i32, name: &str) -> io::Result<u32> {
    // cmd, max_rx, max_tx, max_other, max_combined, rx_count, tx_count, other_count,
    // combined_count
    let mut ch = [0_u32; 9];
    ch[0] = ETHTOOL_GCHANNELS;
    let mut ifr = named_ifreq(name);
    ifr.ifr_ifru.ifru_data = ch.as_mut_ptr().cast();
    // Safety: ifr names the interface and points at a live ethtool_channels the kernel fills.
    let rc = unsafe { libc::ioctl(fd, libc::SIOCETHTOOL as libc::Ioctl, &mut ifr) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((ch[5] + ch[8]).max(1))
}

fn named_ifreq(name: &str) -> libc::ifreq {
    // Safety: ifreq is plain data; all-zero is valid.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in ifr.ifr_name.iter_mut().zip(name.bytes()) {
        *dst = src as libc::c_char;
    }
    ifr
}

/// A legacy ethtool "get" command answering one `u32` (`SIOCETHTOOL`).
fn ethtool_get(fd: i32, name: &str, cmd: u32) -> io::Result<u32> {
    let mut value = EthtoolValue { cmd, data: 0 };
    let mut ifr = named_ifreq(name);
    ifr.ifr_ifru.ifru_data = (&mut value as *mut EthtoolValue).cast();
    // Safety: ifr names the interface and points at a live ethtool_value the kernel fills.
    let rc = unsafe { libc::ioctl(fd, libc::SIOCETHTOOL as libc::Ioctl, &mut ifr) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(value.data)
}

/// Runs an `ifreq` ioctl whose result is an int (flags or MTU share the union's first int).
fn ifreq_ioctl(fd: i32, name: &str, request: libc::Ioctl) -> io::Result<i32> {
    let mut ifr = named_ifreq(name);
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
        assert!(lo.tso && lo.tx_csum, "loopback offloads everything: {lo:?}");
        assert_eq!(lo.rx_queues, 1, "no channels on loopback: one queue");
        assert_eq!(lookup("tlx-nonexistent").unwrap(), None);
        assert_eq!(lookup("").unwrap(), None);
        assert_eq!(lookup("a-name-longer-than-ifnamsiz").unwrap(), None);
    }
}
