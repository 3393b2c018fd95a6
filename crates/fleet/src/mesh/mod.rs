//! The n² mesh.
