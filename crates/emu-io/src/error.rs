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
    /// The AF_XDP route could not be set up on `iface` (socket, UMEM, rings, bind, or the
    /// XDP program: `log` holds the verifier's output when the program was refused).
    #[error(
        "AF_XDP on {iface}: {what} failed: {source}{}: the AF_XDP route (IoOptions rx_ring Xdp / tx Xsk, --rx xdp / --tx xsk) needs native XDP on {iface} (veth or a driver with XDP), no other XDP program or AF_XDP socket (another emulator) on it, and one RX queue; use the default rings (rx_ring V2, tx Sendmmsg) otherwise",
        if log.is_empty() { String::new() } else { format!(" (verifier: {log})") }
    )]
    Xdp {
        /// The interface.
        iface: String,
        /// The step that failed.
        what: &'static str,
        /// The kernel's error.
        source: io::Error,
        /// The verifier log, if the program was refused.
        log: String,
    },
    /// The AF_XDP route serves RX queue 0 only; frames on other queues would bypass it.
    #[error(
        "AF_XDP on {iface}: {queues} RX queues in use, the AF_XDP route serves one: run `ethtool -L {iface} rx 1 tx 1` (and on its peer), or use the default rings (rx_ring V2)"
    )]
    XdpQueues {
        /// The interface.
        iface: String,
        /// RX queues in use.
        queues: u32,
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
    /// A worker thread could not be set up as asked (CPU pinning, SCHED_FIFO, poll
    /// descriptors).
    #[error("bridge worker set-up: {0}")]
    WorkerSetup(WorkerError),
    /// Spawning a worker thread or creating its wake-up fd failed.
    #[error("starting the bridge worker failed: {0}")]
    Spawn(io::Error),
}

/// Why a worker thread stopped or could not start: its set-up (pinning, scheduling class, poll
/// descriptors) or a system call of its loop. Each message names the step and the fix; the
/// kernel's error is the source.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// `sched_setaffinity` refused the CPU.
    #[error(
        "pinning the worker to CPU {cpu} failed: {source}: name CPUs this process may run on in IoOptions::cpus (`taskset -p` shows them)"
    )]
    Pin {
        /// The CPU asked for.
        cpu: usize,
        /// The kernel's error.
        source: io::Error,
    },
    /// The worker could not become SCHED_FIFO at start.
    #[error(
        "SCHED_FIFO priority {priority}: {source}: run as root (CAP_SYS_NICE) or set IoOptions::rt_priority to None"
    )]
    Fifo {
        /// The priority asked for.
        priority: u8,
        /// The kernel's error.
        source: io::Error,
    },
    /// A light worker could not get SCHED_FIFO back: its delay line would be timed by an
    /// ordinary task, so the worker stops instead.
    #[error(
        "restoring SCHED_FIFO priority {priority} after a light stretch failed: {source}: keep the worker SCHED_FIFO throughout with Tuning::light_other_after_ns 0"
    )]
    RestoreFifo {
        /// The priority asked for.
        priority: u8,
        /// The kernel's error.
        source: io::Error,
    },
    /// A light worker could not switch to SCHED_OTHER.
    #[error(
        "switching a light worker to SCHED_OTHER failed: {source}: keep the worker SCHED_FIFO throughout with Tuning::light_other_after_ns 0"
    )]
    Other {
        /// The kernel's error.
        source: io::Error,
    },
    /// Duplicating an RX socket's descriptor (to sleep on it without the direction's lock)
    /// failed.
    #[error(
        "duplicating an RX socket to poll on failed: {source}: raise the open-file limit (`ulimit -n`)"
    )]
    PollFd {
        /// The kernel's error.
        source: io::Error,
    },
    /// `ppoll` on the RX sockets failed (not an interruption: those are retried).
    #[error(
        "waiting on the RX sockets (ppoll) failed: {source}: the bridge stopped forwarding; start it again, and check the interfaces with `ip link`"
    )]
    Poll {
        /// The kernel's error.
        source: io::Error,
    },
    /// The worker thread did not report its set-up in time (or died before it could).
    #[error(
        "the worker did not report its set-up within 2 s: the machine may be overloaded, or the thread panicked (its message is above)"
    )]
    NotStarted,
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
