//! One module per command.

pub mod emu;
pub mod facts;
pub mod impair;
pub mod lab;
pub mod study;
