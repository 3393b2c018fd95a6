//! Drives Debian's headless Chromium for the report tests: injects `check.js` into a copy of a
//! page, loads it with `--dump-dom` at a given window width and reads back the findings the
//! script wrote into `<pre id="tcplab-check">`; takes full-page screenshots; and turns the
//! findings into specific failure messages (`findings.rs`). No DevTools protocol: one
//! short-lived `chromium` process per page load, under a timeout, killed by its own PID if it
//! hangs. `studies.rs` builds the reports to check.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

mod findings;
pub mod studies;
pub use findings::{failures, notes};

/// The checker, run in the page on `load`.
pub const CHECK_JS: &str = include_str!("check.js");

/// The longest one Chromium run may take (a page load takes about a second here).
const TIMEOUT: Duration = Duration::from_secs(120);

/// Tallest screenshot taken, px.
pub const MAX_SHOT_HEIGHT: u64 = 16_000;

/// The Chromium binary; fails (never skips) when there is none.
pub fn chromium() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    for name in ["chromium", "chromium-browser"] {
        for dir in std::env::split_paths(&path) {
            let p = dir.join(name);
            if p.is_file() {
                return p;
            }
        }
    }
    panic!(
        "chromium not found on PATH: the report's browser test needs it (apt-get install chromium)"
    )
}

/// `html` with the checker's `<script>` before its last `</body>`.
pub fn inject(html: &str) -> String {
    let at = html.rfind("</body>").unwrap_or(html.len());
    format!(
        "{}<script>\n{CHECK_JS}</script>\n{}",
        &html[..at],
        &html[at..]
    )
}

/// Runs Chromium headless on `page` with `extra` flags, in a fresh profile under `work`, and
/// returns its stdout. Errors name the flags, the exit status and the end of stderr.
pub fn run(browser: &Path, work: &Path, page: &Path, extra: &[String]) -> Result<String, String> {
    let run_dir = tempfile::tempdir_in(work).map_err(|e| format!("temp dir: {e}"))?;
    let out_path = run_dir.path().join("stdout");
    let err_path = run_dir.path().join("stderr");
    let file = |p: &Path| File::create(p).map_err(|e| format!("{}: {e}", p.display()));
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--no-first-run",
            "--virtual-time-budget=10000",
        ])
        .arg(format!(
            "--user-data-dir={}",
            run_dir.path().join("profile").display()
        ))
        .args(extra)
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .stdout(file(&out_path)?)
        .stderr(file(&err_path)?)
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", browser.display()))?;
    let started = Instant::now();
    let status = loop {
        match child
            .try_wait()
            .map_err(|e| format!("waiting for chromium: {e}"))?
        {
            Some(status) => break Some(status),
            None if started.elapsed() > TIMEOUT => {
                // Only the child this call started, by its PID.
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            None => std::thread::sleep(Duration::from_millis(50)),
        }
    };
    let stdout = std::fs::read_to_string(&out_path).unwrap_or_default();
    let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
    let tail = |s: &str| s.lines().rev().take(8).collect::<Vec<_>>().join("\n  ");
    match status {
        Some(s) if s.success() => Ok(stdout),
        Some(s) => Err(format!(
            "chromium {extra:?} exited with {s}; stderr ends:\n  {}",
            tail(&stderr)
        )),
        None => Err(format!(
            "chromium {extra:?} did not finish within {TIMEOUT:?} (killed); stderr ends:\n  {}",
            tail(&stderr)
        )),
    }
}

/// Loads `checked` (a page with [`CHECK_JS`] injected) in a `width` × 900 window and returns the
/// checker's findings.
pub fn measure(browser: &Path, work: &Path, checked: &Path, width: u32) -> Result<Value, String> {
    let dom = run(
        browser,
        work,
        checked,
        &[
            format!("--window-size={width},900"),
            "--dump-dom".to_string(),
        ],
    )?;
    let start = dom
        .rfind("<pre id=\"tcplab-check\"")
        .and_then(|i| dom[i..].find('>').map(|j| i + j + 1))
        .ok_or_else(|| format!("no <pre id=\"tcplab-check\"> in the DOM at {width} px: the checker did not run ({} bytes of DOM)", dom.len()))?;
    let end = dom[start..]
        .find("</pre>")
        .map(|j| start + j)
        .ok_or("unterminated <pre id=\"tcplab-check\">")?;
    let json = unescape(&dom[start..end]);
    let v: Value = serde_json::from_str(&json).map_err(|e| {
        let start: String = json.chars().take(300).collect();
        format!("checker JSON at {width} px: {e}: {start}")
    })?;
    match v.get("error") {
        Some(e) => Err(format!("the checker threw at {width} px: {e}")),
        None => Ok(v),
    }
}

/// A full-page PNG of `page` at 1280 px wide and `height` px (capped at [`MAX_SHOT_HEIGHT`]).
pub fn screenshot(
    browser: &Path,
    work: &Path,
    page: &Path,
    height: u64,
    png: &Path,
) -> Result<(), String> {
    let h = height.clamp(1, MAX_SHOT_HEIGHT);
    run(
        browser,
        work,
        page,
        &[
            format!("--window-size=1280,{h}"),
            "--hide-scrollbars".to_string(),
            format!("--screenshot={}", png.display()),
        ],
    )?;
    match std::fs::metadata(png) {
        Ok(m) if m.len() > 0 => Ok(()),
        _ => Err(format!("chromium wrote no screenshot to {}", png.display())),
    }
}

/// Text of an HTML text node as `--dump-dom` serialises it.
fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&nbsp;", "\u{a0}")
        .replace("&amp;", "&")
}

/// What one page showed at each width it was loaded at.
#[derive(Debug, Default)]
pub struct Checked {
    /// Every distinct failure, in the order found.
    pub failures: Vec<String>,
    /// What the checks do not fail on, and the page's size at each width.
    pub notes: Vec<String>,
    /// The page's height (scrollHeight) at each width, px.
    pub heights: Vec<(u32, u64)>,
}

/// Loads `html`, with the checker injected, at each of `widths` (px) and gathers the findings;
/// `name` names the page in every message. Errors are Chromium's or the checker's own.
pub fn check(
    browser: &Path,
    work: &Path,
    name: &str,
    html: &str,
    widths: &[u32],
) -> Result<Checked, String> {
    let page = work.join(format!("{name}.checked.html"));
    std::fs::write(&page, inject(html)).map_err(|e| format!("{}: {e}", page.display()))?;
    let mut out = Checked::default();
    for &width in widths {
        let found = measure(browser, work, &page, width)?;
        out.notes.extend(notes(name, width, &found));
        for f in failures(name, width, &found) {
            if !out.failures.contains(&f) {
                out.failures.push(f);
            }
        }
        out.heights
            .push((width, found["scroll_height"].as_u64().unwrap_or(900)));
    }
    Ok(out)
}
