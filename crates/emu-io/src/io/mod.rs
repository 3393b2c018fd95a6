//! The kernel side: system calls ([`sys`], one module per kernel object, the only place with
//! `unsafe` system calls), the ring layouts parsed over shared memory ([`ring`]) and the
//! opening of each interface end as packet-socket ports ([`port`]) or AF_XDP ports
//! ([`xsk_port`]).

pub(crate) mod port;
pub(crate) mod ring;
pub mod sys;
pub(crate) mod xsk_port;
