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
# Scores the batteries again as if against a real host (`corpus score --blind`), and writes both
# scores, run by run, to benches/results/doctor.json (RESULTS_DIR=DIR to write elsewhere).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=benches/results.sh
source "$root/benches/results.sh"
argv=("$@")
out=${1:-$(mktemp -d /tmp/tcplab-corpus.XXXXXX)}
shift || true
cargo build --release --locked -q -p tcplab --manifest-path "$root/Cargo.toml"
T="${CARGO_TARGET_DIR:-$root/target}/release/tcplab"
state=$(mktemp -d)
export TCPLAB_STATE_DIR="$state"
trap '"$T" lab gc --all >/dev/null 2>&1 || true; rm -rf "$state"' EXIT
echo "# $(date -u +%FT%TZ) $(uname -r), $(nproc) CPUs, $(git -C "$root" rev-parse --short HEAD)"
echo "# load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# batteries kept in $out"
res_begin doctor "how often the doctor is right on a labelled corpus of emulated pathologies" "" ${argv[@]+"${argv[@]}"}
res_param corpus benches/doctor/corpus.toml; res_param selection "${*:-all cases}"
status=0
"$T" corpus run "$root/benches/doctor/corpus.toml" --out "$out" "$@" || status=$?
echo "# as if against a real host (--blind):"
"$T" corpus score "$out" --blind || true
echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
# The scorecards' text (the per-run marks and the summary lines) is what both scores share.
python3 - "$out/scorecard.txt" "$out/scorecard-blind.txt" "$state/goals.json" <<'PY'
import json, re, sys
def card(path):
    try:
        text = open(path).read()
    except OSError:
        return None
    # per run: (healthy, top_correct), in corpus order, as `Outcome::top_correct` judges it
    runs = []
    for o in json.load(open(path[:-4] + ".json"))["scorecard"]["outcomes"]:
        said = [f["id"] for f in o["findings"] if f["severity"] != "info"]
        healthy = o["label"]["cause"] == "healthy"
        ok = o.get("error") is None and (not said if healthy else said[:1] == [o["label"]["cause"]])
        runs.append((healthy, ok))
    share = lambda what: re.search(what + r": (\d+) of (\d+)", text)
    top, alarms = share("top finding is the true cause"), share("healthy runs with a finding of warning or above")
    low = re.search(r"lowest precision: ([\d.]+) \((\S+)\)", text)
    return {"runs": runs, "top": top, "alarms": alarms, "low": low}
emulated, blind = card(sys.argv[1]), card(sys.argv[2])
def side(c, name, pick):
    if c is None:
        return None
    return {"name": name, **pick(c)}
def share(m):
    return {"count": int(m[1]), "of": int(m[2])} if m else {}
def marks(c, healthy):
    return [int(ok) for h, ok in c["runs"] if h == healthy]
goals = [
    {"id": "top_correct", "kind": "count", "label": "top-ranked finding is the true cause, pathological runs",
     "target": "at least 90 %",
     "tcplab": side(emulated, "the doctor on the emulated corpus", lambda c: {"rounds": marks(c, False), **share(c["top"])}),
     "blind": side(blind, "as if against a real host (--blind)", lambda c: share(c["top"]))},
    {"id": "precision", "label": "lowest precision over the findings reported", "target": "at least 0.9 for every finding",
     "tcplab": side(emulated, "the doctor on the emulated corpus",
                    lambda c: {"min": float(c["low"][1]), "finding": c["low"][2]} if c["low"] else {}),
     "blind": side(blind, "as if against a real host (--blind)",
                   lambda c: {"min": float(c["low"][1]), "finding": c["low"][2]} if c["low"] else {})},
    {"id": "false_alarms", "kind": "count", "label": "healthy runs with a finding of warning or above",
     "target": "at most 5 %",
     "tcplab": side(emulated, "the doctor on the emulated corpus",
                    lambda c: {"rounds": [1 - x for x in marks(c, True)], **share(c["alarms"])}),
     "blind": side(blind, "as if against a real host (--blind)", lambda c: share(c["alarms"]))},
]
json.dump(goals, open(sys.argv[3], "w"))
PY
res_goals "$state/goals.json"
res_param batteries "$out"
res_end
exit $status
