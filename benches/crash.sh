#!/usr/bin/env bash
# Crash points and I/O faults at a larger scale than CI runs them: `tcplab lab up` SIGKILLed at
# KILLS random moments (default 1000; CI does 100), a sweep killed SWEEP_KILLS times (default
# 40; CI does 8) before it is resumed to its end, an emulator killed mid-run, and a study on a
# full and on a read-only file system. Each kill is followed by the checks the tests make (no
# namespace, process, root link, record or changed host sysctl left; every stored run intact,
# each planned run stored once). Prints the tests' own tallies and the seed that replays them.
# Usage: sudo benches/crash.sh [KILLS] [SWEEP_KILLS]
# Not a timing benchmark: it may run beside other work (kill moments are relative to a build's
# measured time).
set -euo pipefail
kills=${1:-1000}
sweep_kills=${2:-40}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
start=$(date +%s)
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
TCPLAB_CRASH_KILLS=$kills TCPLAB_SWEEP_KILLS=$sweep_kills \
  cargo test --release -q -p tcplab --test crash_points --test io_faults -- --nocapture \
  >"$log" 2>&1 || status=$?
grep -E "crash points:|Tally|sweep:|test result|panicked|FAILED|left|right" "$log" || true
echo "# up to $kills lab up kills and $sweep_kills sweep kills in $(( $(date +%s) - start )) s"
exit "$status"
