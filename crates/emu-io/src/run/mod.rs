//! The running bridge: each direction's packet path ([`direction`]: RX ring → model → schedule →
//! egress), the worker threads that serve them ([`worker`]), the keep-awake spinners
//! ([`awake`]), the [`bridge::Bridge`] that starts, reconfigures and stops it all, and
//! [`emu`]: the bridge with `tcplab_emu`'s model in each direction.

pub(crate) mod awake;
pub(crate) mod bridge;
pub(crate) mod direction;
pub(crate) mod emu;
pub(crate) mod worker;
