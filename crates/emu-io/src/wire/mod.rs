//! What a frame is on the wire, pure: its flow ([`flow`]), the virtio-net header and the wire
//! packets a GSO super-packet stands for ([`gso`]), cutting a super-packet into its segments
//! ([`segment`]), completing partial checksums ([`csum`]) and its ECN codepoint ([`ecn`]). No
//! clock, no system call.

pub(crate) mod csum;
pub(crate) mod ecn;
pub(crate) mod flow;
pub(crate) mod gso;
pub(crate) mod segment;

#[cfg(test)]
mod fuzz_tests;
