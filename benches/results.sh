# shellcheck shell=bash
# The JSON results every benchmark script writes beside its text output (sourced, with "root"
# set): benches/results/NAME.json, or RESULTS_DIR/NAME.json. benches/results_lib.py describes
# the file; benches/render.py makes docs/BENCHMARKS.md's tables from it.
#   res_begin NAME WHAT "ENV NAMES" "$@"    at the start: date, commit, command line (with those
#                                           environment variables that are set), machine facts
#   res_param KEY VALUE                     a setting
#   res_goal ID KEY=VALUE ...               a goal's fields: label=, unit=, target=, better=,
#                                           tcplab.name=, peer.name=, tcplab.median= (summary only)
#   res_round ID SIDE VALUE ...             raw figures of one side (tcplab, peer) of a goal
#   res_goals FILE                          goals assembled in JSON by the script's own python
#   res_note TEXT
#   res_end                                 summaries and ratios, then the file is written
# Nothing is written unless res_end runs: a script that fails leaves the old results in place.
res_py() { python3 "$root/benches/results_lib.py" "$@"; }
res_begin() {
  local name=$1 what=$2 names=$3 v env=()
  shift 3
  RES_NAME=$name
  RES_LOG=$(mktemp /tmp/tcplab-results.XXXXXX)
  for v in $names; do
    [ -n "${!v+set}" ] && env+=("$v=${!v}")
  done
  res_py begin "$RES_LOG" "$name" "$what" "$root" "benches/$(basename "$0")" ${env[@]+"${env[@]}"} -- "$@"
}
res_param() { res_py param "$RES_LOG" "$@"; }
res_goal() { res_py goal "$RES_LOG" "$@"; }
res_round() { res_py round "$RES_LOG" "$@"; }
res_goals() { res_py goals "$RES_LOG" "$1"; }
res_note() { res_py note "$RES_LOG" "$*"; }
res_end() { res_py finish "$RES_LOG" "${RESULTS_DIR:-$root/benches/results}/$RES_NAME.json"; }
