//! Stamps the binary with the commit it was built from and whether the work tree differed from
//! that commit, for `tcplab --version` and every result's facts: a figure read months later
//! names the code that produced it. Outside a git checkout (a source tarball, a vendored copy)
//! the stamp is the package version alone.
//!
//! The script reruns when the checkout moves (HEAD, its branch, the index) or a file under
//! `crates/` changes, so an edited tree is stamped "modified" on its next build. It runs for this
//! package only, the top of the house, which any change below rebuilds anyway.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let root = manifest.join("../..");
    let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
    let stamp = match git(&root, &["rev-parse", "--short=12", "HEAD"]) {
        Some(commit) => {
            let status = git(&root, &["status", "--porcelain", "--untracked-files=no"]);
            let modified = status.is_some_and(|s| !s.is_empty());
            format!(
                "{version} ({commit}{})",
                if modified { ", modified" } else { "" }
            )
        }
        None => version,
    };
    println!("cargo:rustc-env=TCPLAB_BUILD={stamp}");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed={}", root.join("crates").display());
    let dirs = [
        git(&root, &["rev-parse", "--absolute-git-dir"]),
        git(
            &root,
            &["rev-parse", "--path-format=absolute", "--git-common-dir"],
        ),
    ];
    let branch = git(&root, &["symbolic-ref", "-q", "HEAD"]);
    for dir in dirs.iter().flatten() {
        let dir = Path::new(dir);
        let mut watched = vec![dir.join("HEAD"), dir.join("index"), dir.join("packed-refs")];
        watched.extend(branch.as_ref().map(|b| dir.join(b)));
        for path in watched.into_iter().filter(|p| p.exists()) {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
}

/// One git command's trimmed output in `root`; `None` without git, outside a checkout, or on
/// any failure (the stamp is then the version alone).
fn git(root: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(args)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}
