//! An interface address with its prefix, restricted to the ranges a lab may use, so nothing a
//! lab sends can leave the machine. Parsed from what users write (`198.18.0.1/24`), read back
//! from the kernel ([`crate::rtnl`]).

use std::fmt;
use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use crate::error::{HostError, Result};

/// An interface address with its prefix, restricted to the lab ranges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IfAddr {
    /// The address.
    pub addr: IpAddr,
    /// The prefix length.
    pub prefix: u8,
}

impl IfAddr {
    /// Parses `ADDR/PREFIX` and checks it lies in 198.18.0.0/15 or fd00::/8, the only ranges a lab
    /// may use (nothing a lab sends may ever leave the machine).
    pub fn parse(field: &str, text: &str) -> Result<Self> {
        let (addr, prefix) = text.split_once('/').ok_or_else(|| {
            HostError::invalid(
                field,
                format!("'{text}' needs a prefix length, e.g. 198.18.0.1/24"),
            )
        })?;
        let addr: IpAddr = addr.parse().map_err(|_| {
            HostError::invalid(
                field,
                format!("'{addr}' is not an IP address: write e.g. 198.18.0.1/24 or fd00::1/64"),
            )
        })?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix: u8 = prefix.parse().ok().filter(|p| *p <= max).ok_or_else(|| {
            HostError::invalid(field, format!("prefix '/{prefix}' must be 0..={max}"))
        })?;
        if !in_lab_range(addr) {
            return Err(HostError::invalid(
                field,
                format!("{addr} is outside the lab ranges; use 198.18.0.0/15 or fd00::/8"),
            ));
        }
        Ok(IfAddr { addr, prefix })
    }
}

/// True for addresses in 198.18.0.0/15 (RFC 2544) or fd00::/8 (ULA).
pub fn in_lab_range(addr: IpAddr) -> bool {
    match addr {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            o[0] == 198 && (o[1] == 18 || o[1] == 19)
        }
        IpAddr::V6(v6) => v6.octets()[0] == 0xfd,
    }
}

impl fmt::Display for IfAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

impl Serialize for IfAddr {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for IfAddr {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        IfAddr::parse("address", &text).map_err(serde::de::Error::custom)
    }
}
