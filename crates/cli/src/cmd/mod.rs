//! One module per command.

pub mod corpus;
pub mod docs;
pub mod doctor;
pub mod emu;
pub mod facts;
pub mod fleet;
pub mod key;
pub mod lab;
pub mod mesh_lab;
pub mod monitor;
pub mod path;
pub mod remote;
pub mod study;
pub mod tune;
