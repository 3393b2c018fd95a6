#!/usr/bin/env bash
# Builds tcplab's Debian package from a built binary: the binary, a manual page per command,
# completions for bash, zsh and fish, and the agent's systemd unit, installed disabled (it starts
# only once the operator has put its keys in /etc/tcplab and enabled it), run as the package's
# `tcplab` system user. Everything but the package's own metadata comes from the binary itself
# (`tcplab man`, `tcplab completions`, `tcplab --version`) or from deploy/tcplab-agent.service,
# so the package cannot drift from what it installs.
# Usage: deploy/deb/build.sh [BINARY] [OUT_DIR]
#   BINARY   default target/release/tcplab (cargo build --release --locked -p tcplab)
#   OUT_DIR  default target/deb
# Prints the package's path. Needs dpkg-deb (every Debian system has it).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${1:-$root/target/release/tcplab}
out=${2:-$root/target/deb}
if [ ! -x "$bin" ]; then
  echo "deploy/deb/build.sh: $bin is not a built tcplab; build it: cargo build --release --locked -p tcplab" >&2
  exit 2
fi
command -v dpkg-deb >/dev/null || { echo "deploy/deb/build.sh: dpkg-deb not found; run it on Debian or Ubuntu" >&2; exit 2; }

# `tcplab 0.1.0 (1e274bd0c3a2, modified)` → 0.1.0+git1e274bd0c3a2 (+modified): the commit in the
# package's version, so `dpkg -l` says which code is installed, as `tcplab --version` does.
stamp=$("$bin" --version)
version=$(sed -E 's/^tcplab ([^ ]+).*/\1/' <<<"$stamp")
commit=$(sed -nE 's/^[^(]*\(([0-9a-f]+).*/\1/p' <<<"$stamp")
debversion=$version${commit:++git$commit}
[[ $stamp == *modified* ]] && debversion+=+modified
arch=$(dpkg --print-architecture)

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
install -D -m 755 "$bin" "$stage/usr/bin/tcplab"
# Debug information stays with the build tree; the package carries the code.
command -v strip >/dev/null && strip --strip-debug "$stage/usr/bin/tcplab"

"$bin" man --out "$stage/usr/share/man/man1" 2>/dev/null
gzip -9n "$stage"/usr/share/man/man1/*.1
install -d "$stage/usr/share/bash-completion/completions" \
  "$stage/usr/share/zsh/vendor-completions" "$stage/usr/share/fish/vendor_completions.d"
"$bin" completions bash >"$stage/usr/share/bash-completion/completions/tcplab"
"$bin" completions zsh >"$stage/usr/share/zsh/vendor-completions/_tcplab"
"$bin" completions fish >"$stage/usr/share/fish/vendor_completions.d/tcplab.fish"

# The unit of deploy/ as the package installs it: the binary in /usr/bin, the package's system
# user instead of a transient one, and no start until both key files exist.
install -d "$stage/lib/systemd/system"
{
  echo "# tcplab agent, as installed by the tcplab package: disabled until enabled with keys."
  echo "# Set up: tcplab key gen --out /etc/tcplab/key; the coordinators' public lines in"
  echo "# /etc/tcplab/clients; then systemctl enable --now tcplab-agent. See docs/fleet.md."
  sed -e '1,/^$/d' \
    -e 's|/usr/local/bin/tcplab|/usr/bin/tcplab|g' \
    -e 's|^DynamicUser=yes$|User=tcplab\nGroup=tcplab|' \
    -e 's|^Documentation=.*|Documentation=man:tcplab-serve(1)|' \
    -e 's|^\[Unit\]$|[Unit]\nConditionPathExists=/etc/tcplab/key\nConditionPathExists=/etc/tcplab/clients|' \
    "$root/deploy/tcplab-agent.service"
} >"$stage/lib/systemd/system/tcplab-agent.service"
grep -q '^User=tcplab$' "$stage/lib/systemd/system/tcplab-agent.service" ||
  { echo "deploy/deb/build.sh: deploy/tcplab-agent.service no longer says DynamicUser=yes; update this script" >&2; exit 1; }
{
  echo "# tcplab monitor, as installed by the tcplab package: disabled until enabled with its key"
  echo "# and hosts file. Set up: tcplab key gen --out /etc/tcplab/monitor.key; the fleet in"
  echo "# /etc/tcplab/hosts.toml; then systemctl enable --now tcplab-monitor. See docs/monitor.md."
  sed -e '1,/^$/d' \
    -e 's|/usr/local/bin/tcplab|/usr/bin/tcplab|g' \
    -e 's|^DynamicUser=yes$|User=tcplab\nGroup=tcplab|' \
    -e 's|^Documentation=.*|Documentation=man:tcplab-monitor(1)|' \
    -e 's|^\[Unit\]$|[Unit]\nConditionPathExists=/etc/tcplab/monitor.key\nConditionPathExists=/etc/tcplab/hosts.toml|' \
    "$root/deploy/tcplab-monitor.service"
} >"$stage/lib/systemd/system/tcplab-monitor.service"
grep -q '^User=tcplab$' "$stage/lib/systemd/system/tcplab-monitor.service" ||
  { echo "deploy/deb/build.sh: deploy/tcplab-monitor.service no longer says DynamicUser=yes; update this script" >&2; exit 1; }

install -d "$stage/usr/share/doc/tcplab"
{
  echo "tcplab $stamp"
  echo "License: $(sed -nE 's/^license = "(.*)"/\1/p' "$root/Cargo.toml")"
} >"$stage/usr/share/doc/tcplab/copyright"

# The oldest C library the binary accepts: the newest GLIBC_ symbol version it links.
glibc=$(objdump -T "$bin" 2>/dev/null | grep -oE 'GLIBC_[0-9]+\.[0-9]+' | sed 's/GLIBC_//' | sort -V | tail -1)
# The binary links the system's SQLite: at least the version it was built against.
sqlite=$(dpkg-query -W -f '${Version}' libsqlite3-0 2>/dev/null | sed -E 's/[-+].*//' || true)
install -d "$stage/DEBIAN"
cat >"$stage/DEBIAN/control" <<CONTROL
Package: tcplab
Version: $debversion
Architecture: $arch
Maintainer: tcplab developers <tcplab@example.invalid>
Installed-Size: $(du -sk "$stage/usr" "$stage/lib" | awk '{s += $1} END {print s}')
Depends: libc6${glibc:+ (>= $glibc)}, libsqlite3-0${sqlite:+ (>= $sqlite)}, passwd
Recommends: iproute2
Section: net
Priority: optional
Description: TCP performance lab for Linux
 Builds emulated networks out of namespaces (or reaches real hosts through an
 authenticated agent), runs workloads that show how the kernel's TCP stack
 behaves, diagnoses what limits a path, and finds settings that are
 consistently fast, with evidence. The tcplab-agent service (disabled until
 given keys) is the far end of tests from other hosts; the tcplab-monitor
 service (disabled until given a key and a hosts file) measures a fleet on a
 schedule for Prometheus and explains its regressions.
CONTROL
install -m 755 "$root/deploy/deb/postinst" "$root/deploy/deb/prerm" "$root/deploy/deb/postrm" "$stage/DEBIAN/"

mkdir -p "$out"
deb="$out/tcplab_${debversion}_${arch}.deb"
dpkg-deb --root-owner-group -Zxz --build "$stage" "$deb" >/dev/null
echo "$deb"
