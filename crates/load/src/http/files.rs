//! SPECweb96's file set on disk, for a web server that serves files (nginx in a lab): every
//! file at its URL path under a root directory (`ROOT/dir00000/class0_1` …), its content from
//! [`FileId::fill`], so a client checks an nginx response exactly as it checks tcplab's own.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::Path;

use super::fileset::{FileId, FileSet};
use crate::error::LoadError;

/// Bytes generated and written per write(2).
const CHUNK: usize = 64 * 1024;

/// The file's path under `root`.
fn file_path(root: &Path, id: &FileId) -> std::path::PathBuf {
    root.join(id.path().trim_start_matches('/'))
}

/// An I/O error with the path it concerns (LoadError::Io's context is static, so the path
/// goes in the error's message) and the fix.
fn err(context: &'static str, path: &Path, e: &io::Error, fix: &str) -> LoadError {
    LoadError::io(
        context,
        io::Error::new(e.kind(), format!("{}: {e}; {fix}", path.display())),
    )
}

/// Writes every file of `set` under `root` (created if missing; files already there are
/// overwritten), in 64 KiB chunks; returns the bytes written. Directories are made with the
/// process's umask, so a web server's worker (often another user) can read them with the
/// usual 022.
pub fn write_set(set: &FileSet, root: &Path) -> Result<u64, LoadError> {
    const FIX: &str = "give a writable directory with room for the set";
    let mut buf = vec![0u8; CHUNK];
    let mut total = 0u64;
    for d in 0..set.dirs() {
        let dir = root.join(format!("dir{d:05}"));
        fs::create_dir_all(&dir)
            .map_err(|e| err("creating the file set's directories", &dir, &e, FIX))?;
    }
    for id in set.files() {
        let path = file_path(root, &id);
        let mut write = || -> io::Result<u64> {
            let mut f = File::create(&path)?;
            let size = id.size();
            let mut at = 0u64;
            while at < size {
                let n = (size - at).min(CHUNK as u64) as usize;
                id.fill(at, &mut buf[..n]);
                f.write_all(&buf[..n])?;
                at += n as u64;
            }
            Ok(size)
        };
        total += write().map_err(|e| err("writing SPECweb96's file set", &path, &e, FIX))?;
    }
    Ok(total)
}

/// Checks that every file of `set` is under `root` with its size (not its content: that is
/// what a client's body check is for).
pub fn check_written(set: &FileSet, root: &Path) -> Result<(), LoadError> {
    const FIX: &str = "write the set again (http::files::write_set)";
    for id in set.files() {
        let path = file_path(root, &id);
        let meta = fs::metadata(&path)
            .map_err(|e| err("checking SPECweb96's file set", &path, &e, FIX))?;
        if !meta.is_file() || meta.len() != id.size() {
            let e = io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{} bytes where the set has {}", meta.len(), id.size()),
            );
            return Err(err("checking SPECweb96's file set", &path, &e, FIX));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_every_file_and_checks_sizes() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let set = FileSet::new(2).expect("set");
        let n = write_set(&set, tmp.path()).expect("write");
        assert_eq!(n, set.total_bytes());
        check_written(&set, tmp.path()).expect("check");
        let id = FileId::new(1, 3, 9).expect("id");
        let body = fs::read(tmp.path().join("dir00001/class3_9")).expect("read");
        assert_eq!(body.len() as u64, id.size());
        assert!(id.matches(0, &body));
        // A file cut short is found and named.
        let short = tmp.path().join("dir00000/class2_4");
        fs::write(&short, b"x").expect("truncate");
        let e = check_written(&set, tmp.path()).expect_err("short file");
        assert!(e.to_string().contains("dir00000/class2_4: 1 bytes"), "{e}");
        // An unwritable root names the path and the OS error.
        let file = tmp.path().join("plain");
        fs::write(&file, b"").expect("file");
        let e = write_set(&set, &file).expect_err("not a directory");
        let msg = e.to_string();
        assert!(
            msg.contains("plain/dir00000") && msg.contains("os error"),
            "{msg}"
        );
    }
}
