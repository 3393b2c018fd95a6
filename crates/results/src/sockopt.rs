//! Socket options: what the user asks for ([`SockOpts`], checked here without a socket) and
//! what was really in force ([`AppliedOpts`], read back with getsockopt by
//! `tcplab_load::sockopt`: the kernel doubles SO_SNDBUF/SO_RCVBUF and may clamp them, so the
//! request alone is not evidence).

use serde::{Deserialize, Serialize};

use crate::error::{ConfigError, config};

/// The socket options a workload may set; `None`/`false` leaves the kernel default.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SockOpts {
    /// Set TCP_NODELAY (disable Nagle's algorithm).
    pub nodelay: bool,
    /// Set TCP_CORK on sending sockets.
    pub cork: bool,
    /// Set TCP_QUICKACK, re-armed after every read (the kernel clears it by itself).
    pub quickack: bool,
    /// TCP_CONGESTION: congestion control algorithm (e.g. cubic, reno, bbr).
    pub congestion: Option<String>,
    /// SO_SNDBUF in bytes (the kernel doubles it).
    pub sndbuf: Option<u32>,
    /// SO_RCVBUF in bytes (the kernel doubles it).
    pub rcvbuf: Option<u32>,
    /// TCP_NOTSENT_LOWAT in bytes.
    pub notsent_lowat: Option<u32>,
    /// TCP_RTO_MIN_US: minimum retransmission timeout in µs (Linux 6.15+).
    pub rto_min_us: Option<u32>,
    /// TCP_DELACK_MAX_US: maximum delayed-ACK timeout in µs (Linux 6.15+).
    pub delack_max_us: Option<u32>,
}

/// The options in force on a socket, read back from the kernel.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppliedOpts {
    /// TCP_NODELAY as read back.
    pub nodelay: bool,
    /// TCP_CORK as read back.
    pub cork: bool,
    /// Whether TCP_QUICKACK is re-armed after each read (the kernel's flag is transient).
    pub quickack_rearmed: bool,
    /// TCP_CONGESTION as read back.
    pub congestion: String,
    /// SO_SNDBUF as read back (bytes, doubled by the kernel).
    pub sndbuf: u32,
    /// SO_RCVBUF as read back (bytes, doubled by the kernel).
    pub rcvbuf: u32,
    /// TCP_NOTSENT_LOWAT as read back (0 = unlimited / sysctl default).
    pub notsent_lowat: u32,
    /// TCP_RTO_MIN_US as read back; null where the kernel lacks it.
    pub rto_min_us: Option<u32>,
    /// TCP_DELACK_MAX_US as read back; null where the kernel lacks it.
    pub delack_max_us: Option<u32>,
    /// TCP_MAXSEG as read back.
    pub mss: u32,
}

impl SockOpts {
    /// Checks values that can be judged without a socket.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if let Some(cc) = &self.congestion
            && (cc.is_empty()
                || cc.len() >= 16
                || !cc.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
        {
            return Err(config(
                "cc",
                format!("{cc:?} is not a congestion control name (e.g. cubic, reno, bbr)"),
            ));
        }
        for (flag, v) in [
            ("sndbuf", self.sndbuf),
            ("rcvbuf", self.rcvbuf),
            ("notsent-lowat", self.notsent_lowat),
            ("rto-min-us", self.rto_min_us),
            ("delack-max-us", self.delack_max_us),
        ] {
            if let Some(v) = v {
                if i32::try_from(v).is_err() {
                    return Err(config(flag, format!("{v} is above {}", i32::MAX)));
                }
            }
        }
        if self.sndbuf == Some(0) || self.rcvbuf == Some(0) {
            return Err(config(
                "sndbuf/--rcvbuf",
                "0 is not a buffer size; give bytes, e.g. 262144",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_values_are_rejected_before_any_socket() {
        let opts = SockOpts {
            sndbuf: Some(u32::MAX),
            ..Default::default()
        };
        assert!(
            opts.validate()
                .expect_err("too big")
                .to_string()
                .contains("--sndbuf")
        );
        let opts = SockOpts {
            congestion: Some("a b".into()),
            ..Default::default()
        };
        assert!(opts.validate().is_err());
    }
}
