//! Which addresses count as "this machine or a lab": where an agent without keys may serve,
//! and where a client may talk to a server whose key it has not pinned. Pure.

use std::net::IpAddr;

/// The ranges, as the messages name them.
pub const LAB_RANGES: &str = "127.0.0.0/8, ::1, 198.18.0.0/15, fd00::/8";

/// True for loopback (127.0.0.0/8, ::1) and lab addresses (198.18.0.0/15, the RFC 2544
/// benchmarking range tcplab's labs use, and fd00::/8), in either IPv6 form of an IPv4 address.
pub fn is_lab_or_loopback(ip: IpAddr) -> bool {
    match ip.to_canonical() {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            o[0] == 127 || (o[0] == 198 && (o[1] & 0xfe) == 18)
        }
        IpAddr::V6(v6) => v6.is_loopback() || v6.octets()[0] == 0xfd,
    }
}

/// True for the wildcard addresses (0.0.0.0, ::), which take connections to every address.
pub fn is_wildcard(ip: IpAddr) -> bool {
    ip.is_unspecified()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lab_and_loopback_ranges_and_nothing_else() {
        let yes = [
            "127.0.0.1",
            "127.9.9.9",
            "::1",
            "198.18.0.1",
            "198.19.255.254",
            "fd00::1",
            "fdff::2",
            "::ffff:127.0.0.1",
            "::ffff:198.18.3.4",
        ];
        let no = [
            "10.0.0.1",
            "192.168.1.1",
            "198.17.255.255",
            "198.20.0.0",
            "8.8.8.8",
            "fe80::1",
            "fc00::1",
            "2001:db8::1",
            "0.0.0.0",
            "::",
            "::ffff:10.0.0.1",
        ];
        for a in yes {
            assert!(is_lab_or_loopback(a.parse().expect("ip")), "{a}");
        }
        for a in no {
            assert!(!is_lab_or_loopback(a.parse().expect("ip")), "{a}");
        }
    }
}
