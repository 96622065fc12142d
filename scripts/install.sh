#!/bin/sh
# Installs gearshift on hosts without the Debian package (make install): the
# binary, the config, the systemd unit, the cron.d watchdog, the logrotate
# file, man pages, shell completions, example hooks, the label-mode VCL
# snippet, and the Grafana dashboard and Prometheus alert rules. Idempotent: run it again to upgrade.
#
#   scripts/install.sh [BINARY]              install or upgrade
#   scripts/install.sh --uninstall [BINARY]  remove what an install put there
#
# BINARY defaults to bin/gearshift, built with `go build` when missing.
# Environment:
#   DESTDIR  stage everything under this directory (packaging, tests); then
#            nothing outside it is touched and systemd is not told.
#   PREFIX   where the binary and its data go: PREFIX/bin/gearshift,
#            PREFIX/share/man, ... (default /usr/local).
#   PURGE=1  with --uninstall: remove changed config files and the logs too.
#
# The files under /etc are the admin's once installed: a file changed since
# it was installed is never overwritten. The new version goes beside it as
# FILE.dist (merge it, or copy it over FILE to take it as it is), and
# --uninstall keeps a changed file. What was installed, with checksums, is
# recorded in PREFIX/share/gearshift/installed.
set -eu

repo=$(cd "$(dirname "$0")/.." && pwd)
DESTDIR=${DESTDIR:-}
PREFIX=${PREFIX:-/usr/local}
PURGE=${PURGE:-}
mode=install
if [ "${1:-}" = --uninstall ]; then
	mode=uninstall
	shift
fi
bin=${1:-$repo/bin/gearshift}
manifest=$PREFIX/share/gearshift/installed

say() { printf '%s: %s\n' "$mode" "$*"; }
sum() { sha256sum <"$1" | awk '{print $1}'; }
# recorded PATH: the checksum PATH had when it was last installed, if any.
recorded() {
	[ -f "$DESTDIR$manifest" ] || return 0
	awk -v p="$1" '$3 == p { print $2 }' "$DESTDIR$manifest"
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The release, rendered under $tmp/stage: each line of $tmp/files is
# "MODE KIND PATH", KIND conf (the admin's once installed) or data.
stage() {
	if [ ! -x "$bin" ]; then
		if [ $# -gt 0 ]; then
			say "no executable $bin" >&2
			exit 2
		fi
		command -v go >/dev/null 2>&1 || PATH=$PATH:/usr/local/go/bin
		say "building $bin"
		(cd "$repo" && go build -o "$bin" ./cmd/gearshift)
	fi
	: >"$tmp/files"
	# add MODE KIND PATH [SRC]: SRC (default stdin) is the release's PATH.
	add() {
		mkdir -p "$tmp/stage$(dirname "$3")"
		if [ $# -gt 3 ]; then cp "$4" "$tmp/stage$3"; else cat >"$tmp/stage$3"; fi
		echo "$1 $2 $3" >>"$tmp/files"
	}
	filled() { sed -e "s|/usr/local/bin/gearshift|$PREFIX/bin/gearshift|g" "$1"; }

	add 0755 data "$PREFIX/bin/gearshift" "$bin"
	add 0640 conf /etc/gearshift/gearshift.yaml "$repo/scripts/gearshift.yaml"
	filled "$repo/scripts/gearshift.service" | add 0644 conf /etc/systemd/system/gearshift.service
	# cron ignores cron.d files that are group- or world-writable, or not root's.
	filled "$repo/scripts/cron.d/gearshift" | add 0644 conf /etc/cron.d/gearshift
	add 0644 conf /etc/logrotate.d/gearshift "$repo/scripts/logrotate/gearshift"
	"$bin" manpages "$tmp/man"
	for page in "$tmp"/man/*.8; do
		add 0644 data "$PREFIX/share/man/man8/$(basename "$page")" "$page"
	done
	"$bin" completion bash | add 0644 data "$PREFIX/share/bash-completion/completions/gearshift"
	"$bin" completion zsh | add 0644 data "$PREFIX/share/zsh/site-functions/_gearshift"
	"$bin" completion fish | add 0644 data "$PREFIX/share/fish/vendor_completions.d/gearshift.fish"
	add 0644 data "$PREFIX/share/doc/gearshift/examples/gearshift.yaml" "$repo/scripts/gearshift.yaml"
	# Examples: on_change hooks, and the snippet for varnish.mode: label.
	for hook in "$repo"/scripts/hooks/*.sh; do
		add 0755 data "$PREFIX/share/gearshift/hooks/$(basename "$hook")" "$hook"
	done
	add 0644 data "$PREFIX/share/gearshift/varnish/gearshift-label.vcl" "$repo/scripts/varnish/gearshift-label.vcl"
	for f in "$repo"/scripts/monitoring/*; do
		add 0644 data "$PREFIX/share/gearshift/monitoring/$(basename "$f")" "$f"
	done
}

# place MODE SRC DEST: copy through a temporary file and a rename, so that a
# running binary is replaced, never written over.
place() {
	mkdir -p "$(dirname "$3")"
	cp "$2" "$3.new.$$"
	chmod "$1" "$3.new.$$"
	mv -f "$3.new.$$" "$3"
}

install_all() {
	stage "$@"
	: >"$tmp/manifest"
	while read -r fmode kind path; do
		src=$tmp/stage$path dest=$DESTDIR$path new=$(sum "$src")
		echo "$fmode $new $path" >>"$tmp/manifest"
		if [ -f "$dest" ] && [ "$(sum "$dest")" = "$new" ]; then
			chmod "$fmode" "$dest"
			rm -f "$dest.dist"
		elif [ "$kind" = conf ] && [ -e "$dest" ] && [ "$(sum "$dest")" != "$(recorded "$path")" ]; then
			if [ ! -f "$dest.dist" ] || [ "$(sum "$dest.dist")" != "$new" ]; then
				place "$fmode" "$src" "$dest.dist"
				say "kept $path (changed since it was installed); the new version is $path.dist"
			fi
		else
			place "$fmode" "$src" "$dest"
			say "installed $path"
		fi
	done <"$tmp/files"
	mkdir -p "$DESTDIR/etc/gearshift" "$DESTDIR/var/log/gearshift" "$DESTDIR/var/lib/gearshift/history" "$(dirname "$DESTDIR$manifest")"
	chmod 0755 "$DESTDIR/etc/gearshift"
	chmod 0750 "$DESTDIR/var/log/gearshift" "$DESTDIR/var/lib/gearshift" "$DESTDIR/var/lib/gearshift/history"
	place 0644 "$tmp/manifest" "$DESTDIR$manifest"

	[ -z "$DESTDIR" ] || return 0
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
}

uninstall_all() {
	if [ -f "$DESTDIR$manifest" ]; then
		cp "$DESTDIR$manifest" "$tmp/manifest"
	else
		# Installed before install.sh kept a record: judge the files
		# against what this release would install.
		stage "$@"
		while read -r fmode kind path; do
			echo "$fmode $(sum "$tmp/stage$path") $path"
		done <"$tmp/files" >"$tmp/manifest"
	fi
	if [ -z "$DESTDIR" ]; then
		if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
			systemctl disable --now gearshift.service 2>/dev/null || true
		elif [ -x "$PREFIX/bin/gearshift" ]; then
			"$PREFIX/bin/gearshift" stop || true
		fi
	fi
	while read -r fmode want path; do
		dest=$DESTDIR$path
		rm -f "$dest.dist"
		[ -e "$dest" ] || continue
		case $path in
		/etc/*)
			if [ "$(sum "$dest")" != "$want" ] && [ -z "$PURGE" ]; then
				say "kept $path (changed since it was installed; PURGE=1 removes it)"
				continue
			fi
			;;
		esac
		rm -f "$dest"
		say "removed $path"
	done <"$tmp/manifest"
	rm -f "$DESTDIR$manifest"
	# Left by installs that put the example beside the config.
	rm -f "$DESTDIR/etc/gearshift/gearshift.yaml.example"
	if [ -n "$PURGE" ]; then
		rm -rf "$DESTDIR/var/log/gearshift" "$DESTDIR/var/lib/gearshift"
		say "removed /var/log/gearshift and /var/lib/gearshift"
	elif [ -d "$DESTDIR/var/log/gearshift" ] || [ -d "$DESTDIR/var/lib/gearshift" ]; then
		say "kept the logs in /var/log/gearshift and the history in /var/lib/gearshift (PURGE=1 removes them)"
	fi
	for d in /etc/gearshift "$PREFIX/share/gearshift/hooks" "$PREFIX/share/gearshift/varnish" "$PREFIX/share/gearshift/monitoring" "$PREFIX/share/gearshift" "$PREFIX/share/doc/gearshift/examples" "$PREFIX/share/doc/gearshift"; do
		rmdir "$DESTDIR$d" 2>/dev/null || true
	done
	if [ -z "$DESTDIR" ] && [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
		systemctl daemon-reload
	fi
}

case $mode in
install) install_all "$@" ;;
uninstall) uninstall_all "$@" ;;
esac
say "done"
