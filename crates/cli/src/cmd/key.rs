//! `tcplab key gen|show`: the agent keys of the fleet (docs/fleet.md). A client's public key
//! goes into a server's `--keys` file; a server's into its clients' `--server-key`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use tcplab_auth::KeyPair;
use tcplab_auth::client::default_key_path;

use crate::output;

/// `tcplab key ...`.
#[derive(Debug, Subcommand)]
pub enum KeyCommand {
    /// Make a key pair: the secret in FILE (mode 0600), the public line in FILE.pub and on stdout.
    Gen(GenArgs),
    /// Print the public key line of a secret key file.
    Show(ShowArgs),
}

/// Arguments of `tcplab key gen`.
#[derive(Debug, Args)]
pub struct GenArgs {
    /// Where to write the secret key (default: ~/.config/tcplab/key, which clients use when
    /// given no --key).
    #[arg(long, short = 'o', value_name = "FILE")]
    out: Option<PathBuf>,
    /// The comment after the public key (default: user@host).
    #[arg(long, short = 'C', value_name = "TEXT")]
    comment: Option<String>,
    /// Replace an existing key file.
    #[arg(long)]
    force: bool,
}

/// Arguments of `tcplab key show`.
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The secret key file (default: ~/.config/tcplab/key).
    #[arg(value_name = "FILE")]
    file: Option<PathBuf>,
}

impl KeyCommand {
    /// Runs the subcommand; errors are one line with exit code 2.
    pub fn run(self) -> ExitCode {
        output::finish(
            false,
            match self {
                Self::Gen(a) => a.run(),
                Self::Show(a) => a.run(),
            },
        )
    }
}

fn path_or_default(p: Option<PathBuf>, flag: &str) -> anyhow::Result<PathBuf> {
    p.or_else(default_key_path)
        .with_context(|| format!("no HOME to put the key under: give {flag} FILE"))
}

impl GenArgs {
    fn run(self) -> anyhow::Result<ExitCode> {
        let path = path_or_default(self.out, "--out")?;
        let comment = self.comment.unwrap_or_else(default_comment);
        let key = KeyPair::generate(&comment)?;
        let pub_path = key.write_new(&path, self.force)?;
        eprintln!(
            "tcplab key: wrote {} (secret, mode 0600) and {}",
            path.display(),
            pub_path.display()
        );
        outln!("{}", key.public_line());
        Ok(ExitCode::SUCCESS)
    }
}

impl ShowArgs {
    fn run(self) -> anyhow::Result<ExitCode> {
        let path = path_or_default(self.file, "FILE")?;
        let key = KeyPair::load(&path)?;
        outln!("{}", key.public_line());
        Ok(ExitCode::SUCCESS)
    }
}

/// `user@host`, as ssh-keygen comments its keys.
fn default_comment() -> String {
    let user = std::env::var("USER").unwrap_or_else(|_| "tcplab".into());
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "localhost".into());
    format!("{user}@{host}")
}
