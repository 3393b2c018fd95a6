//! Errors of the packet I/O layer. Each message names the interface, option or field at
//! fault and the fix.

use std::io;

/// Why the bridge could not start or change.
#[derive(Debug, thiserror::Error)]
pub enum IoError {
    /// The named interface is not in the caller's network namespace.
    #[error(
        "interface {iface} does not exist in this network namespace: check `ip link` (the bridge runs in the namespace of the thread that starts it)"
    )]
    NoSuchInterface {
        /// The name given.
        iface: String,
    },
    /// The named interface is administratively down.
    #[error("interface {iface} is down: run `ip link set {iface} up`")]
    InterfaceDown {
        /// The name given.
        iface: String,
    },
    /// Both ends are the same interface.
    #[error("--iface {iface} given twice: the bridge needs two different interfaces")]
    SameInterface {
        /// The name given twice.
        iface: String,
    },
    /// Packet sockets need CAP_NET_RAW.
    #[error("opening a packet socket on {iface} needs CAP_NET_RAW: run as root")]
    NotPermitted {
        /// The interface being opened.
        iface: String,
    },
    /// A socket option, mmap or bind failed.
    #[error("{what} on {iface} failed: {source}")]
    Setup {
        /// The interface being opened.
        iface: String,
        /// The step that failed (e.g. "PACKET_RX_RING").
        what: &'static str,
        /// The kernel's error.
        source: io::Error,
    },
    /// An [`crate::IoOptions`] field is out of range.
    #[error("IoOptions.{field} = {value}: {fix}")]
    BadOption {
        /// The field.
        field: &'static str,
        /// Its value.
        value: String,
        /// What is allowed.
        fix: &'static str,
    },
    /// The link configuration is invalid (the model's message names the field and the fix).
    #[error("link configuration: {0}")]
    Config(String),
    /// GSO mode sends super-packets out of `iface`; without TSO and TX checksum offload there
    /// the kernel refuses or re-segments them.
    #[error(
        "GSO mode needs TSO and TX checksum offload on {iface}: run `ethtool -K {iface} tso on gso on tx on`, or run without GSO mode and with offloads off"
    )]
    GsoOffloadsOff {
        /// The interface.
        iface: String,
    },
    /// The link model refused a new configuration (the old one stays in force).
    #[error("reconfigure {direction}: {reason}")]
    Reconfigure {
        /// "a->b" or "b->a".
        direction: &'static str,
        /// The model's message.
        reason: String,
    },
    /// The worker thread is gone (it failed or the bridge stopped).
    #[error("bridge worker for {direction} is not running: see Report::errors from stop()")]
    WorkerGone {
        /// "a->b" or "b->a".
        direction: &'static str,
    },
    /// A worker thread could not be set up as asked (CPU pinning, SCHED_FIFO).
    #[error("bridge worker set-up: {0}")]
    WorkerSetup(String),
    /// Spawning a worker thread or creating its wake-up fd failed.
    #[error("starting the bridge worker failed: {0}")]
    Spawn(io::Error),
}

impl IoError {
    /// Maps a setup step's error, turning EPERM/EACCES into [`IoError::NotPermitted`].
    pub(crate) fn setup(iface: &str, what: &'static str, source: io::Error) -> Self {
        match source.raw_os_error() {
            Some(libc::EPERM | libc::EACCES) => Self::NotPermitted {
                iface: iface.to_owned(),
            },
            _ => Self::Setup {
                iface: iface.to_owned(),
                what,
                source,
            },
        }
    }
}
