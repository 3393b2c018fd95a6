//! The hosts file (docs/fleet.md).
