//! Output paths checked before a command starts its work: a study that ran for an hour, or a
//! workload that ran for ten minutes, must not end in "cannot write the report".

use std::path::Path;

/// Fails if a file cannot be written at `path` (given by `flag`): its directory must exist and
/// take a new file.
pub fn file(flag: &str, path: &Path) -> anyhow::Result<()> {
    if path.is_dir() {
        anyhow::bail!(
            "{flag} {}: is a directory; give a file path",
            path.display()
        );
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    probe_dir(dir).map_err(|e| {
        anyhow::anyhow!(
            "{flag} {}: cannot write there ({e}); give a path in an existing, writable directory",
            path.display()
        )
    })
}

/// [`file`] for a directory that a command fills (created if missing).
pub fn dir(flag: &str, dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)
        .and_then(|()| probe_dir(dir))
        .map_err(|e| {
            anyhow::anyhow!(
                "{flag} {}: cannot write there ({e}); give a directory on a writable file system",
                dir.display()
            )
        })
}

/// Creates and removes a file in `dir`: the one test of writability that also sees read-only
/// mounts, full inode tables and permissions as they apply to this process.
fn probe_dir(dir: &Path) -> std::io::Result<()> {
    let probe = dir.join(format!(".tcplab-write-check-{}", std::process::id()));
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)?;
    std::fs::remove_file(&probe)
}
