#!/usr/bin/env bash
# How often the doctor is right: runs the labelled corpus (benches/doctor/corpus.toml: each
# pathology at several points over 10 Mbit/s - 1 Gbit/s and 1 - 100 ms, and healthy paths) on
# labs built for it, and prints the confusion matrix: per run, whether the top finding is the true
# cause; per finding, precision and recall; the false-alarm rate on healthy paths.
# Usage: sudo benches/doctor.sh [OUT_DIR] [--only CASE ...]
#   OUT_DIR keeps every run's battery (default: a new directory under /tmp); re-score it with a
#   later build, without labs: target/release/tcplab corpus score OUT_DIR [--verbose]
# About 60 runs of a 24 s battery: 45-60 minutes. Exits 1 when a goal is missed (top finding the
# cause in >= 90% of pathological runs, precision >= 0.9 per finding, <= 5% healthy false alarms).
# Needs a quiet machine: the emulator and the workloads share the CPUs with anything else.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$(mktemp -d /tmp/tcplab-corpus.XXXXXX)}
shift || true
cargo build --release --locked -q -p tcplab --manifest-path "$root/Cargo.toml"
T="$root/target/release/tcplab"
state=$(mktemp -d)
export TCPLAB_STATE_DIR="$state"
trap '"$T" lab gc --all >/dev/null 2>&1 || true; rm -rf "$state"' EXIT
echo "# $(date -u +%FT%TZ) $(uname -r), $(nproc) CPUs, $(git -C "$root" rev-parse --short HEAD)"
echo "# load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# batteries kept in $out"
status=0
"$T" corpus run "$root/benches/doctor/corpus.toml" --out "$out" "$@" || status=$?
echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
exit $status
