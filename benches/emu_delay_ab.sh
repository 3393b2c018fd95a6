#!/usr/bin/env bash
# Delay accuracy under a bulk flow, two emulator I/O settings side by side (A, B, A, B, ...).
# Usage: sudo benches/emu_delay_ab.sh OPTS_A OPTS_B [ROUNDS] [idle|paced|unpaced|rows]
#   OPTS_*: TCPLAB_EMU_IO JSON, e.g. '{}' (the defaults) and '{"tuning":{"flow_turns":false,"due_batch":64}}'.
#   OLD_TCPLAB=/path/to/tcplab runs A with that build (two builds side by side, e.g. '{}' '{}');
#   not with rows, whose base phase writes this build's option names.
# Each phase is benches/emu.sh's delay phase (`lab up --topology path --delay 10ms`, a bulk iperf3
# flow server -> client, paced with --fq-rate 1G or not, 300 pings at 10 ms and `tcplab rr` for
# RR_SECS=10 s) with the probes at SCHED_FIFO 20 (PROBE= runs them at normal priority, PROBE="nice
# -n -10" niced). Prints per phase the bulk rate, ping and rr median / p99 (ms) with the rr
# threads' CPU wait per transaction, and the emulator's lateness per direction. "rows" runs
# benches/emu.sh's whole row set instead (idle, unpaced, paced, each followed by its base phase
# on an unimpaired lab and the excess over 20 ms + that base). Installs iperf3 and ping if
# missing.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 OPTS_A OPTS_B [ROUNDS] [idle|paced|unpaced|rows]" >&2; exit 2; }
A=$1 B=$2 rounds=${3:-2}
case "${4:-paced}" in
  idle) bulk="" ;; paced) bulk="paced 1G" ;; unpaced) bulk=unpaced ;; rows) bulk=rows ;;
  *) echo "the fourth argument must be idle, paced, unpaced or rows, not '$4'" >&2; exit 2 ;;
esac
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=benches/emu_lib.sh
source "$root/benches/emu_lib.sh"
echo "# $(date -u '+%F %H:%M') UTC, $(git -C "$root" rev-parse --short HEAD), bulk ${4:-paced}, $rounds rounds"
PROBE=${PROBE-chrt -f 20}
echo "# probes: ${PROBE:-normal priority}"
A_T=${OLD_TCPLAB:-$T}
[ -n "${OLD_TCPLAB:-}" ] && [ "$bulk" = rows ] && { echo "OLD_TCPLAB cannot be used with rows" >&2; exit 2; }
[ -n "${OLD_TCPLAB:-}" ] && echo "# A: $OLD_TCPLAB; B: $T"
for _ in $(seq 1 "$rounds"); do
  if [ "$bulk" = rows ]; then
    delay_rows "A $A" TCPLAB_EMU_IO="$A"
    delay_rows "B $B" TCPLAB_EMU_IO="$B"
  else
    T=$A_T delay_phase "A $A" "$bulk" TCPLAB_EMU_IO="$A"
    delay_phase "B $B" "$bulk" TCPLAB_EMU_IO="$B"
  fi
done
