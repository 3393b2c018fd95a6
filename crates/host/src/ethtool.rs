//! Offloads (TSO, GSO, GRO) through the classic SIOCETHTOOL ioctl. The legacy per-feature
//! commands are enough for veth and bridges and need no generic-netlink family lookup.

use std::io;
use std::os::fd::AsRawFd;

use tcplab_results::facts::Offloads;

const SIOCETHTOOL: libc::c_ulong = 0x8946;
const ETHTOOL_GTSO: u32 = 0x1e;
const ETHTOOL_STSO: u32 = 0x1f;
const ETHTOOL_GGSO: u32 = 0x23;
const ETHTOOL_SGSO: u32 = 0x24;
const ETHTOOL_GGRO: u32 = 0x2b;
const ETHTOOL_STXCSUM: u32 = 0x17;
const ETHTOOL_SGRO: u32 = 0x2c;

/// `struct ethtool_value`.
#[repr(C)]
struct EthtoolValue {
    cmd: u32,
    data: u32,
}

/// `struct ifreq` with the `ifr_data` member.
#[repr(C)]
struct IfReqData {
    name: [libc::c_char; libc::IFNAMSIZ],
    data: *mut libc::c_void,
    _pad: [u8; 16],
}

fn ethtool(ifname: &str, cmd: u32, data: u32) -> io::Result<u32> {
    if ifname.len() >= libc::IFNAMSIZ {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    // Any socket of the namespace is a handle for the ioctl; an unbound datagram socket is cheapest.
    let sock = rustix::net::socket(
        rustix::net::AddressFamily::INET,
        rustix::net::SocketType::DGRAM,
        None,
    )?;
    ioctl(sock.as_raw_fd(), ifname, cmd, data)
}

fn ioctl(fd: i32, ifname: &str, cmd: u32, data: u32) -> io::Result<u32> {
    let mut value = EthtoolValue { cmd, data };
    let mut req = IfReqData {
        name: [0; libc::IFNAMSIZ],
        data: (&mut value as *mut EthtoolValue).cast(),
        _pad: [0; 16],
    };
    for (dst, src) in req.name.iter_mut().zip(ifname.bytes()) {
        *dst = src as libc::c_char;
    }
    // Safety: `req` is a properly initialised ifreq whose data pointer refers to `value`, which
    // lives until after the call; SIOCETHTOOL reads/writes only that struct.
    let rc = unsafe { libc::ioctl(fd, SIOCETHTOOL as _, &mut req as *mut IfReqData) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(value.data)
    }
}

/// Sets TSO, GSO and GRO on an interface of the calling thread's namespace.
pub fn set_offloads(ifname: &str, offloads: Offloads) -> io::Result<()> {
    ethtool(ifname, ETHTOOL_STSO, u32::from(offloads.tso))?;
    ethtool(ifname, ETHTOOL_SGSO, u32::from(offloads.gso))?;
    ethtool(ifname, ETHTOOL_SGRO, u32::from(offloads.gro))?;
    Ok(())
}

/// Turns transmit checksum offload off, so frames carry complete checksums. Needed wherever a
/// frame is copied out through a packet socket without its virtio-net header and sent again (the
/// emulator on its AF_XDP or TX-ring routes): a veth frame with a deferred (CHECKSUM_PARTIAL)
/// checksum would arrive with a wrong one and be dropped.
pub fn disable_tx_checksum(ifname: &str) -> io::Result<()> {
    ethtool(ifname, ETHTOOL_STXCSUM, 0).map(|_| ())
}

/// Reads TSO, GSO and GRO of an interface of the calling thread's namespace.
pub fn get_offloads(ifname: &str) -> io::Result<Offloads> {
    Ok(Offloads {
        tso: ethtool(ifname, ETHTOOL_GTSO, 0)? != 0,
        gso: ethtool(ifname, ETHTOOL_GGSO, 0)? != 0,
        gro: ethtool(ifname, ETHTOOL_GGRO, 0)? != 0,
    })
}
