//! What a packaged tool carries besides itself: shell completions and manual pages, both
//! generated from the clap definitions that parse the command line, so they cannot drift from it.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use clap_complete::Shell;

use crate::output;

/// `tcplab completions SHELL`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    shell: Shell,
}

impl CompletionsArgs {
    /// Prints the completion script on stdout (`tcplab completions bash >
    /// /etc/bash_completion.d/tcplab`). Generated into memory first: the generator panics on
    /// a closed stdout, and `| head` must end quietly.
    pub fn run(self, mut command: clap::Command) -> ExitCode {
        let name = command.get_name().to_string();
        let mut script = Vec::new();
        clap_complete::generate(self.shell, &mut command, name, &mut script);
        out!("{}", String::from_utf8_lossy(&script));
        ExitCode::SUCCESS
    }
}

/// `tcplab man --out DIR`.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// Directory for the pages, created if missing: tcplab.1 and one page per command
    /// (tcplab-doctor.1, tcplab-lab-up.1, ...), for `man -l` or a package's man1 directory.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
}

impl ManArgs {
    /// Writes every page and says how many on stderr.
    pub fn run(self, command: clap::Command) -> ExitCode {
        output::finish(false, self.write(command))
    }

    fn write(&self, command: clap::Command) -> anyhow::Result<ExitCode> {
        let dir = self.out.display();
        std::fs::create_dir_all(&self.out).with_context(|| {
            format!("--out {dir}: cannot create the directory; give a writable path")
        })?;
        clap_mangen::generate_to(command, &self.out).with_context(|| {
            format!("--out {dir}: cannot write the pages; give a writable path")
        })?;
        let pages = std::fs::read_dir(&self.out)
            .with_context(|| format!("--out {dir}: cannot list the pages written"))?
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().ends_with(".1"))
            .count();
        eprintln!("tcplab man: {pages} pages in {dir}");
        Ok(ExitCode::SUCCESS)
    }
}
