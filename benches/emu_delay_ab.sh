#!/usr/bin/env bash
# Delay accuracy under a bulk flow, two emulator I/O settings side by side (A, B, A, B, ...).
# Usage: sudo benches/emu_delay_ab.sh OPTS_A OPTS_B [ROUNDS] [idle|paced|unpaced|rows ...]
#   The fourth argument may list several loads ("idle paced unpaced"): ROUNDS rounds of each.
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
# missing. Writes every phase's figures to benches/results/emu_delay_ab.json (RESULTS_DIR=DIR to
# write elsewhere): per load, ping and rr median and p99 with B as tcplab's side and A as the
# peer's (OLD_COMMIT names A's build there when OLD_TCPLAB is set).
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 OPTS_A OPTS_B [ROUNDS] [idle|paced|unpaced|rows ...]" >&2; exit 2; }
A=$1 B=$2 rounds=${3:-2} loads=${4:-paced}
for load in $loads; do
  case $load in
    idle | paced | unpaced | rows) ;;
    *) echo "the fourth argument must list idle, paced, unpaced or rows, not '$load'" >&2; exit 2 ;;
  esac
done
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=benches/emu_lib.sh
source "$root/benches/emu_lib.sh"
echo "# $(date -u '+%F %H:%M') UTC, $(git -C "$root" rev-parse --short HEAD), bulk $loads, $rounds rounds"
PROBE=${PROBE-chrt -f 20}
echo "# probes: ${PROBE:-normal priority}"
A_T=${OLD_TCPLAB:-$T}
[ -n "${OLD_TCPLAB:-}" ] && [[ " $loads " == *" rows "* ]] && { echo "OLD_TCPLAB cannot be used with rows" >&2; exit 2; }
[ -n "${OLD_TCPLAB:-}" ] && echo "# A: $OLD_TCPLAB; B: $T"
res_begin emu_delay_ab "delay accuracy under a bulk flow, two emulator builds or settings alternating (A, B, A, B, ...)" "OLD_TCPLAB OLD_COMMIT PROBE RR_SECS" "$@"
res_param opts_a "$A"; res_param opts_b "$B"; res_param rounds "$rounds"; res_param loads "$loads"
res_param probes "${PROBE:-normal priority}"; res_param rr_seconds "${RR_SECS:-10}"
a_name="A: ${OLD_COMMIT:-${OLD_TCPLAB:-this build}} $A"; b_name="B: this build $B"
for load in $loads; do
  case $load in
    idle) bulk="" ;; paced) bulk="paced 1G" ;; unpaced) bulk=unpaced ;; rows) bulk=rows ;;
  esac
  if [ "$bulk" != rows ]; then
    for m in ping_median ping_p99 rr_median rr_p99; do
      res_goal "$load.$m" label="$load: ${m/_/ }" load="$load" unit=ms better=lower tcplab.name="$b_name" peer.name="$a_name"
    done
  fi
  for r in $(seq 1 "$rounds"); do
    if [ "$bulk" = rows ]; then
      RES_ROUND=$r delay_rows "A $A" TCPLAB_EMU_IO="$A"
      RES_ROUND=$r delay_rows "B $B" TCPLAB_EMU_IO="$B"
    else
      T=$A_T delay_phase "A $A" "$bulk" TCPLAB_EMU_IO="$A"
      res_round "$load.ping_median" peer "$P_MED"; res_round "$load.ping_p99" peer "$P_P99"
      res_round "$load.rr_median" peer "$R_MED"; res_round "$load.rr_p99" peer "$R_P99"
      delay_phase "B $B" "$bulk" TCPLAB_EMU_IO="$B"
      res_round "$load.ping_median" tcplab "$P_MED"; res_round "$load.ping_p99" tcplab "$P_P99"
      res_round "$load.rr_median" tcplab "$R_MED"; res_round "$load.rr_p99" tcplab "$R_P99"
    fi
  done
done
res_end
