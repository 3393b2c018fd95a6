#!/usr/bin/env bash
# The parsers' property tests (every `parse_props` suite, the study store's damaged files, the
# wire parsers and the emulator's control protocol, and the CLI's bad input) with many more cases than
# `cargo test` runs: the same generators, PROPTEST_CASES of them per property, in release.
# Prints each suite's cases, time and result; a suite running past FUZZ_TIMEOUT seconds
# (default 1800) is stopped and counted as failed, so the whole run is bounded.
# Usage: sudo benches/fuzz.sh [CASES]   (default 100000; root for the CLI suite, whose cases
# are an eighth of the others since each starts the binary). FUZZ_SUITES="emu study" limits it.
set -uo pipefail
cases=${1:-100000}
limit=${FUZZ_TIMEOUT:-1800}
root=$(cd "$(dirname "$0")/.." && pwd)
export PROPTEST_CASES=$cases
# `cargo test` draws fixed cases (.cargo/config.toml); this run draws new ones. Printed so a
# failure can be replayed: PROPTEST_RNG_SEED=N benches/fuzz.sh CASES.
export PROPTEST_RNG_SEED=${PROPTEST_RNG_SEED:-$(od -An -N6 -tu8 /dev/urandom | tr -d ' ')}
echo "# seed $PROPTEST_RNG_SEED, $cases cases per property"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target}

# name | package | cargo test selector | test-name filter
suites=(
  "emu|tcplab-emu|--test parse_props|"
  "emu-io-wire|tcplab-emu-io|--lib|wire::fuzz_tests"
  "lab|tcplab-lab|--test parse_props|"
  "lab-control|tcplab-lab|--lib|emulation::tests"
  "results|tcplab-results|--test parse_props|"
  "load|tcplab-load|--test parse_props|"
  "agent|tcplab-agent|--test parse_props|"
  "stats|tcplab-stats|--test parse_props|"
  "study|tcplab-study|--test parse_props|"
  "study-store|tcplab-study|--test store_props|"
  "fleet|tcplab-fleet|--test parse_props|"
  "battery|tcplab-battery|--test parse_props|"
  "tune|tcplab-tune|--test parse_props|"
  "cli|tcplab|--test parse_cli|"
)

selected() {
  [ -z "${FUZZ_SUITES:-}" ] && return 0
  for s in $FUZZ_SUITES; do [ "$s" = "$1" ] && return 0; done
  return 1
}

printf '%-14s %10s %9s  %s\n' suite cases seconds result
failed=0
for s in "${suites[@]}"; do
  IFS='|' read -r name pkg sel filter <<<"$s"
  selected "$name" || continue
  log=$(mktemp)
  # Built on its own first, with the same selection as the run (features resolve per
  # selection), so the seconds are the cases' and not the compiler's.
  # shellcheck disable=SC2086
  cargo test --release -q --manifest-path "$root/Cargo.toml" -p "$pkg" $sel --no-run >"$log" 2>&1 ||
    { echo "$name: build failed (log: $log)"; failed=1; continue; }
  start=$(date +%s.%N)
  # shellcheck disable=SC2086 # the selector is two words on purpose
  timeout "$limit" cargo test --release -q --manifest-path "$root/Cargo.toml" -p "$pkg" $sel \
    -- $filter >"$log" 2>&1
  rc=$?
  secs=$(echo "$(date +%s.%N) - $start" | bc)
  case $rc in
    0) result="ok ($(grep -Eo '[0-9]+ passed' "$log" | awk '{n+=$1} END {print n}') tests)" ;;
    124) result="TIMEOUT after ${limit}s"; failed=1 ;;
    *) result="FAILED (log: $log)"; failed=1 ;;
  esac
  suite_cases=$cases
  [ "$name" = cli ] && suite_cases=$(( cases / 8 > 16 ? cases / 8 : 16 ))
  printf '%-14s %10s %9.1f  %s\n' "$name" "$suite_cases" "$secs" "$result"
  if [ "$rc" -ne 0 ]; then
    grep -E 'Test failed|minimal failing|panicked' "$log" | head -5 | sed 's/^/    /'
  else
    rm -f "$log"
  fi
done
exit $failed
