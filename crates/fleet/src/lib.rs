//! tcplab-fleet: many hosts. A hosts file names them and says how each agent is reached
//! ([`inventory`]); launchers start agents with the engines a fleet already has (OpenSSH,
//! Slurm's srun) or find them running ([`launch`]); the mesh measures every ordered pair in
//! N−1 rounds and reports the N×N grid ([`mesh`]). docs/fleet.md has the user's side.

pub mod inventory;
pub mod launch;
pub mod mesh;
