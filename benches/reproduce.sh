#!/usr/bin/env bash
# Runs every seed's scenario at full size and writes each study's database, HTML report and table
# to OUT (default ./out/reproductions). docs/reproductions.md quotes these runs.
# Usage: sudo benches/reproduce.sh [OUT]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/out/reproductions}
mkdir -p "$out"
cargo build --release -q -p tcplab --manifest-path "$root/Cargo.toml"
T="${CARGO_TARGET_DIR:-$root/target}/release/tcplab"
echo "# $(date -u +%F) $(uname -r), $(nproc) CPUs"
for s in sfperf permessage stall41 timewait balticgrid; do
  extra=()
  [ "$s" = sfperf ] && extra=(--race)
  rm -f "$out/$s.db"
  start=$(date +%s)
  "$T" sweep "$root/scenarios/$s.toml" --db "$out/$s.db" "${extra[@]}" > "$out/$s.txt"
  echo "== $s ($(( $(date +%s) - start )) s): $out/$s.txt, $out/$s.html"
  tail -4 "$out/$s.txt"
done
# Seed 004 as doctor finds it: the write-write-read trap on a pair, with its period and delay.
"$T" doctor --topology pair --provoke-stalls 400 --budget 20s > "$out/doctor-stall41.txt" || true
echo "== doctor --provoke-stalls: $out/doctor-stall41.txt"
grep -E '^\[' "$out/doctor-stall41.txt" || true
