//! One module per command.

pub mod facts;
pub mod lab;
