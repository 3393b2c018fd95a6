#!/usr/bin/env bash
# CI: the Debian package installs, works from where it installs, and goes away cleanly.
# Builds the package from BINARY (default: the test build, target/debug/tcplab), installs it with
# dpkg, checks what it put in place (binary, man pages, completions, the agent's user and unit,
# left disabled), runs `tcplab lab check` on a lab and a short doctor from /usr/bin/tcplab, then
# removes and purges it and checks that none of it is left. Runs as root, on a machine without a
# tcplab package (it will not replace one).
# Usage: sudo deploy/deb/check.sh [BINARY]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${1:-$root/target/debug/tcplab}
[ "$(id -u)" = 0 ] || { echo "deploy/deb/check.sh: run as root (dpkg -i)" >&2; exit 2; }
if dpkg -s tcplab >/dev/null 2>&1; then
  echo "deploy/deb/check.sh: a tcplab package is installed already; remove it first (dpkg -P tcplab)" >&2
  exit 2
fi
work=$(mktemp -d)
export TCPLAB_STATE_DIR="$work/state"
cleanup() {
  if [ -x /usr/bin/tcplab ]; then
    /usr/bin/tcplab lab down debcheck >/dev/null 2>&1 || true
    /usr/bin/tcplab lab gc --all >/dev/null 2>&1 || true
  fi
  dpkg -P tcplab >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "deploy/deb/check.sh: $*" >&2; exit 1; }

deb=$("$root/deploy/deb/build.sh" "$bin" "$work")
echo "# $(basename "$deb"): $(du -h "$deb" | cut -f1)"
dpkg -i "$deb" >/dev/null

echo "# installed"
[ "$(command -v tcplab)" = /usr/bin/tcplab ] || fail "tcplab is not /usr/bin/tcplab on PATH"
/usr/bin/tcplab --version
man -w tcplab-doctor >/dev/null || fail "man tcplab-doctor: no page"
MANWIDTH=100 man -P cat tcplab-doctor 2>/dev/null | grep -q -- '--budget' || fail "man tcplab-doctor: no --budget"
[ -s /usr/share/bash-completion/completions/tcplab ] || fail "no bash completion"
grep -q 'complete -F _tcplab' /usr/share/bash-completion/completions/tcplab || fail "bash completion is not tcplab's"
[ -s /usr/share/zsh/vendor-completions/_tcplab ] || fail "no zsh completion"
[ -s /usr/share/fish/vendor_completions.d/tcplab.fish ] || fail "no fish completion"
getent passwd tcplab >/dev/null || fail "no tcplab user"
unit=/lib/systemd/system/tcplab-agent.service
grep -q '^User=tcplab$' "$unit" || fail "$unit does not run as tcplab"
grep -q '^ExecStart=/usr/bin/tcplab serve' "$unit" || fail "$unit does not start /usr/bin/tcplab"
[ ! -e /etc/systemd/system/multi-user.target.wants/tcplab-agent.service ] || fail "the agent's unit was enabled"
monitor_unit=/lib/systemd/system/tcplab-monitor.service
grep -q '^User=tcplab$' "$monitor_unit" || fail "$monitor_unit does not run as tcplab"
grep -q '^ExecStart=/usr/bin/tcplab monitor' "$monitor_unit" || fail "$monitor_unit does not start /usr/bin/tcplab"
grep -q '^ConditionPathExists=/etc/tcplab/hosts.toml$' "$monitor_unit" || fail "$monitor_unit starts without a hosts file"
[ ! -e /etc/systemd/system/multi-user.target.wants/tcplab-monitor.service ] || fail "the monitor's unit was enabled"

echo "# run from the package"
/usr/bin/tcplab lab up --name debcheck --topology path >/dev/null
/usr/bin/tcplab lab check debcheck
/usr/bin/tcplab lab down debcheck >/dev/null
# The doctor exits 1 when it reports a finding: what matters here is that it ran to the end.
status=0
/usr/bin/tcplab doctor --budget 10s --topology path --json >"$work/doctor.json" || status=$?
[ "$status" -le 1 ] || fail "doctor exited $status"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert "findings" in d, d' "$work/doctor.json" ||
  fail "doctor --json gave no findings"

echo "# removed"
dpkg -r tcplab >/dev/null
[ ! -e /usr/bin/tcplab ] || fail "dpkg -r left /usr/bin/tcplab"
[ ! -e "$unit" ] || fail "dpkg -r left $unit"
[ ! -e "$monitor_unit" ] || fail "dpkg -r left $monitor_unit"
dpkg -P tcplab >/dev/null
! getent passwd tcplab >/dev/null || fail "purge left the tcplab user"
! dpkg -s tcplab >/dev/null 2>&1 || fail "the package is still known to dpkg"
leftover=$(find /usr /lib /etc -name '*tcplab*' -newer "$deb" 2>/dev/null | grep -v '^/etc/tcplab$' || true)
[ -z "$leftover" ] || fail "left behind: $leftover"
echo "deploy/deb/check.sh: the package installed, ran and went away cleanly"
