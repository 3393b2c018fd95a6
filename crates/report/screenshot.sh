#!/usr/bin/env bash
# Renders the sample report (examples/sample_report.rs) to /tmp/report.html and screenshots it
# with headless Chromium to /tmp/report.png, so a person (or a session's image viewer) can look
# at the page as a browser draws it. Needs Debian's chromium: apt-get install -y chromium.
# Usage: crates/report/screenshot.sh [OUT_DIR]   (default /tmp)
#        crates/report/screenshot.sh --studies [OUT_DIR]
# --studies instead runs the browser test (crates/study/tests/report_browser.rs), which builds a
# tune-like and a BalticGrid-like study with the mock executor, renders both reports, checks them
# in Chromium at 1280 and 900 px and keeps OUT_DIR/{demo,sweep}.{html,png} (for the docs).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/../.."
if [ "${1:-}" = "--studies" ]; then
    out="$(realpath -m "${2:-/tmp}")"
    mkdir -p "$out"
    # The pages and screenshots are kept even when a check fails (the test says which).
    status=0
    TCPLAB_SCREENSHOT_DIR="$out" cargo test -q -p tcplab-study --test report_browser -- \
        --nocapture || status=$?
    echo "screenshots: $out/demo.png $out/sweep.png"
    exit "$status"
fi
out="${1:-/tmp}"
cargo run -q -p tcplab-report --example sample_report -- "$out/report.html"
browser="$(command -v chromium || command -v chromium-browser || true)"
if [ -z "$browser" ]; then
    echo "screenshot.sh: chromium not found; install it with: apt-get install -y chromium" >&2
    exit 2
fi
# A fresh profile directory, removed on exit, keeps the run independent of any user profile.
profile="$(mktemp -d)"
trap 'rm -rf "$profile"' EXIT
timeout 120 "$browser" --headless --no-sandbox --disable-gpu --disable-background-networking \
    --no-first-run --user-data-dir="$profile" --hide-scrollbars \
    --screenshot="$out/report.png" --window-size=1200,2400 "file://$out/report.html" 2>/dev/null
echo "screenshot: $out/report.png"
