#!/bin/sh
# Installs gearshift: the binary, the example config (an existing
# /etc/gearshift/gearshift.yaml is never overwritten), the systemd unit, the
# cron.d watchdog and the logrotate file. Idempotent: run it again to upgrade.
#
#   scripts/install.sh [BINARY]
#
# BINARY defaults to bin/gearshift, built with `go build` when missing.
# Environment:
#   DESTDIR  stage everything under this directory (packaging, tests); then
#            nothing outside it is touched and systemd is not told.
#   PREFIX   where the binary goes, PREFIX/bin/gearshift (default /usr/local).
set -eu

repo=$(cd "$(dirname "$0")/.." && pwd)
DESTDIR=${DESTDIR:-}
PREFIX=${PREFIX:-/usr/local}
bin=${1:-$repo/bin/gearshift}

say() { printf 'install: %s\n' "$*"; }

if [ ! -x "$bin" ]; then
	if [ $# -gt 0 ]; then
		say "no executable $bin" >&2
		exit 2
	fi
	command -v go >/dev/null 2>&1 || PATH=$PATH:/usr/local/go/bin
	say "building $bin"
	(cd "$repo" && go build -o "$bin" ./cmd/gearshift)
fi

# install_file MODE SRC DEST: copy when the content differs, set the mode.
install_file() {
	mode=$1 src=$2 dest=$DESTDIR$3
	if [ -f "$dest" ] && cmp -s "$src" "$dest"; then
		chmod "$mode" "$dest"
		return
	fi
	mkdir -p "$(dirname "$dest")"
	# Through a temporary file and a rename: a running binary is replaced,
	# never written over.
	cp "$src" "$dest.new.$$"
	chmod "$mode" "$dest.new.$$"
	mv -f "$dest.new.$$" "$dest"
	say "installed $3"
}

# filled SRC: the file with the binary's installed path in it.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
filled() {
	out=$tmp/$(basename "$1")
	sed -e "s|/usr/local/bin/gearshift|$PREFIX/bin/gearshift|g" "$1" >"$out"
	echo "$out"
}

install_file 0755 "$bin" "$PREFIX/bin/gearshift"

mkdir -p "$DESTDIR/etc/gearshift"
chmod 0755 "$DESTDIR/etc/gearshift"
install_file 0644 "$repo/scripts/gearshift.yaml" /etc/gearshift/gearshift.yaml.example
if [ -e "$DESTDIR/etc/gearshift/gearshift.yaml" ]; then
	say "kept /etc/gearshift/gearshift.yaml (the new example is gearshift.yaml.example)"
else
	install_file 0640 "$repo/scripts/gearshift.yaml" /etc/gearshift/gearshift.yaml
fi

install_file 0644 "$(filled "$repo/scripts/gearshift.service")" /etc/systemd/system/gearshift.service
# cron ignores cron.d files that are group- or world-writable, or not root's.
install_file 0644 "$(filled "$repo/scripts/cron.d/gearshift")" /etc/cron.d/gearshift
install_file 0644 "$repo/scripts/logrotate/gearshift" /etc/logrotate.d/gearshift
# Examples: on_change hooks, and the snippet for varnish.mode: label.
for hook in "$repo"/scripts/hooks/*.sh; do
	install_file 0755 "$hook" "$PREFIX/share/gearshift/hooks/$(basename "$hook")"
done
install_file 0644 "$repo/scripts/varnish/gearshift-label.vcl" "$PREFIX/share/gearshift/varnish/gearshift-label.vcl"
mkdir -p "$DESTDIR/var/log/gearshift"
chmod 0750 "$DESTDIR/var/log/gearshift"

if [ -z "$DESTDIR" ]; then
	if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
		systemctl daemon-reload
		if systemctl is-active --quiet gearshift.service; then
			say "gearshift.service is running the old binary: systemctl restart gearshift"
		else
			say "next: systemctl enable --now gearshift"
		fi
	else
		say "no systemd here: the cron.d watchdog starts gearshift within a minute (or: gearshift start)"
	fi
	"$PREFIX/bin/gearshift" config check || say "fix /etc/gearshift/gearshift.yaml before starting gearshift"
fi
say "done"
