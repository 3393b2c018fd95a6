#!/usr/bin/env bash
# Renders the sample report (examples/sample_report.rs) to /tmp/report.html and screenshots it
# with headless Chromium to /tmp/report.png, so a person (or a session's image viewer) can look
# at the page as a browser draws it. Needs Debian's chromium: apt-get install -y chromium.
# Usage: crates/report/screenshot.sh [OUT_DIR]   (default /tmp)
#        crates/report/screenshot.sh --studies [OUT_DIR]
#        crates/report/screenshot.sh --page REPORT.html OUT.png [HEIGHT]
# --page screenshots any report as a reader's 1280 px wide window shows it: the top HEIGHT px
# (default: the whole page), e.g. the docs' screenshots of the demo's and a sweep's reports.
# --studies instead runs the browser test (crates/study/tests/report_browser.rs), which builds a
# tune-like and a BalticGrid-like study with the mock executor, renders both reports, checks them
# in Chromium at 1280 and 900 px and keeps OUT_DIR/{demo,sweep}.{html,png} (for the docs).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# Paths given on the command line are the caller's, read before moving to the workspace.
from="$PWD"
cd "$here/../.."
if [ "${1:-}" = "--studies" ]; then
    out="$(cd "$from" && realpath -m "${2:-/tmp}")"
    mkdir -p "$out"
    # The pages and screenshots are kept even when a check fails (the test says which).
    status=0
    TCPLAB_SCREENSHOT_DIR="$out" cargo test -q -p tcplab-study --test report_browser -- \
        --nocapture || status=$?
    echo "screenshots: $out/demo.png $out/sweep.png"
    exit "$status"
fi
browser="$(command -v chromium || command -v chromium-browser || true)"
if [ -z "$browser" ]; then
    echo "screenshot.sh: chromium not found; install it with: apt-get install -y chromium" >&2
    exit 2
fi
if [ "${1:-}" = "--page" ]; then
    page="$(cd "$from" && realpath "${2:?--page REPORT.html OUT.png [HEIGHT]}")"
    png="$(cd "$from" && realpath -m "${3:?--page REPORT.html OUT.png [HEIGHT]}")"
    work="$(mktemp -d)"
    trap 'rm -rf "$work"' EXIT
    height="${4:-}"
    if [ -z "$height" ]; then
        # The page's own height at this width, read back from a copy that writes it down.
        sed 's#</body>#<script>document.body.setAttribute("data-height",document.documentElement.scrollHeight)</script></body>#'             "$page" > "$work/measure.html"
        height="$(timeout 120 "$browser" --headless --no-sandbox --disable-gpu --no-first-run             --user-data-dir="$work/profile" --window-size=1280,900 --virtual-time-budget=5000             --dump-dom "file://$work/measure.html" 2>/dev/null | grep -o 'data-height="[0-9]*"' | grep -o '[0-9]*')"
    fi
    timeout 120 "$browser" --headless --no-sandbox --disable-gpu --no-first-run         --user-data-dir="$work/profile" --hide-scrollbars --window-size="1280,${height:-2400}"         --screenshot="$png" "file://$page" 2>/dev/null
    echo "screenshot: $png (1280x${height:-2400})"
    exit 0
fi
out="$(cd "$from" && realpath -m "${1:-/tmp}")"
cargo run -q -p tcplab-report --example sample_report -- "$out/report.html"
# A fresh profile directory, removed on exit, keeps the run independent of any user profile.
profile="$(mktemp -d)"
trap 'rm -rf "$profile"' EXIT
timeout 120 "$browser" --headless --no-sandbox --disable-gpu --disable-background-networking \
    --no-first-run --user-data-dir="$profile" --hide-scrollbars \
    --screenshot="$out/report.png" --window-size=1200,2400 "file://$out/report.html" 2>/dev/null
echo "screenshot: $out/report.png"
