//! The running bridge: each direction's packet path ([`direction`]: receive port → model →
//! schedule → send port, generic over its [`ports`]; the packet sockets' are in
//! [`ring_ports`]), the turn every worker takes ([`turn`], which the scheduling harness runs
//! too), the worker threads that take it and carry its decisions out ([`worker`]), the
//! keep-awake spinners ([`awake`]), the [`bridge::Bridge`] that starts, reconfigures and stops
//! it all, and [`emu`]: the bridge with `tcplab_emu`'s model in each direction.

pub(crate) mod awake;
pub(crate) mod bridge;
pub(crate) mod direction;
pub(crate) mod emu;
pub(crate) mod ports;
pub(crate) mod ring_ports;
pub(crate) mod turn;
pub(crate) mod worker;
