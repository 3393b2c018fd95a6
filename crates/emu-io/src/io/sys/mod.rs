//! Kernel objects, one module each: the mapped ring memory ([`mmap`]), the `AF_PACKET` socket
//! ([`socket`]), interface look-ups ([`iface`]) and clocks/sleeps ([`clock`]); the AF_XDP route's socket
//! ([`xsk`]) and XDP program ([`bpf`]).
//!
//! Everything that issues a system call lives here so the rest of the crate (ring parsing,
//! schedule, counters, verdict) can be tested without root on synthetic memory.

pub mod batch;
pub mod bpf;
pub mod clock;
pub mod iface;
pub mod mmap;
pub mod socket;
pub mod spinner;
pub mod wake;
pub mod xsk;
