#!/usr/bin/env bash
# Every benchmark of docs/BENCHMARKS.md, one after another, then the page's tables rendered from
# the JSON they wrote (benches/results/NAME.json; benches/render.py).
# Usage: sudo benches/all.sh
# About 45 minutes on a quiet 2-vCPU VM with the defaults, once the release build exists (the
# first build adds its own time):
#   lab_updown.sh 20                      lab build and teardown, 20 cycles each       ~1 min
#   emu.sh 5, ROUNDS=6                    the emulator against the kernel bridge        ~13 min
#   load.sh 10 5                          workloads against iperf3, sockperf, a C loop  ~6 min
#   http.sh 10 3                          tcplab http against wrk, built-in vs nginx    ~5 min
#   study.sh 3                            a racing sweep's own cost                     ~2 min
#   agent.sh 300                          the authenticated test open                   ~1 min
#   mesh.sh                               the n² mesh's cost, three meshes              ~2 min
#   trust.sh 10, DEMO_RUNS=3              the doctor's and the demo's verdicts          ~15 min
# Left out unless asked for, because of their length or what they need:
#   CORPUS=1                 doctor.sh: the doctor's labelled corpus, about 60 runs of a 24 s
#                            battery (45-60 minutes more)
#   OLD_TCPLAB=BIN           emu_ab.sh 12 and emu_delay_ab.sh '{}' '{}' 2 "idle paced unpaced":
#   OLD_COMMIT=SHA           this build side by side with another build of the emulator, for a
#                            change's before-and-after (about 10 minutes more)
# SCRIPTS="load http" runs only those scripts (by name, without .sh). RESULTS_DIR=DIR writes the
# results (and renders a copy of the page) there instead of benches/results. A script that
# fails is reported and the others still run; the tables are rendered from whatever results
# exist, and the exit status is 1 if any script failed or a lab namespace was left behind.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
[ -n "${RESULTS_DIR:-}" ] && mkdir -p "$RESULTS_DIR" && RESULTS_DIR=$(cd "$RESULTS_DIR" && pwd) && export RESULTS_DIR
cd "$root" || exit 1
# The scripts' own settings come from the list below, not from this shell's environment.
unset ONLY ROUNDS RR_SECS CONCURRENT DEMO_RUNS KEEP FLAGS BUDGET DEMO_BUDGET TCPLAB
b=benches
run_lab_updown() { "$b/lab_updown.sh" 20; }
run_emu() { ROUNDS=6 "$b/emu.sh" 5; }
run_load() { "$b/load.sh" 10 5; }
run_http() { "$b/http.sh" 10 3; }
run_study() { "$b/study.sh" 3; }
run_agent() { "$b/agent.sh" 300; }
run_mesh() { "$b/mesh.sh"; }
run_trust() { DEMO_RUNS=3 "$b/trust.sh" 10; }
run_doctor() { "$b/doctor.sh"; }
run_emu_ab() { "$b/emu_ab.sh" "$OLD_TCPLAB" 12; }
run_emu_delay_ab() { "$b/emu_delay_ab.sh" '{}' '{}' 2 "idle paced unpaced"; }
names=(lab_updown emu load http study agent mesh trust)
[ -n "${CORPUS:-}" ] && names+=(doctor)
[ -n "${OLD_TCPLAB:-}" ] && names+=(emu_ab emu_delay_ab)
want() { [ -z "${SCRIPTS:-}" ] || [[ " $SCRIPTS " == *" $1 "* ]]; }

netns_before=$(ip netns list 2>/dev/null | sort)
failed=()
start=$(date +%s)
echo "# $(date -u '+%F %H:%M') UTC, $(git rev-parse --short HEAD), $(nproc) CPUs, kernel $(uname -r), load average $(cut -d' ' -f1-3 /proc/loadavg)"
for name in "${names[@]}"; do
  want "$name" || continue
  t0=$(date +%s)
  echo "## $name: $(declare -f "run_$name" | sed -n 3p | sed 's/^ *//; s/;$//')"
  if "run_$name"; then
    echo "## $name: done in $(( ($(date +%s) - t0) / 60 )) min $(( ($(date +%s) - t0) % 60 )) s"
  else
    echo "## $name: FAILED (exit $?) after $(( $(date +%s) - t0 )) s" >&2
    failed+=("$name")
  fi
done

if [ -n "${RESULTS_DIR:-}" ]; then
  cp docs/BENCHMARKS.md "$RESULTS_DIR/BENCHMARKS.md"
  python3 "$b/render.py" --results "$RESULTS_DIR" --page "$RESULTS_DIR/BENCHMARKS.md" || failed+=(render)
else
  python3 "$b/render.py" || failed+=(render)
fi
echo "# all: $(( ($(date +%s) - start) / 60 )) min; load average $(cut -d' ' -f1-3 /proc/loadavg)"
if [ "$(ip netns list 2>/dev/null | sort)" != "$netns_before" ]; then
  echo "# network namespaces differ from before the run:" >&2
  diff <(echo "$netns_before") <(ip netns list 2>/dev/null | sort) >&2
  failed+=(netns)
fi
if [ ${#failed[@]} -gt 0 ]; then
  echo "# failed: ${failed[*]}" >&2
  exit 1
fi
