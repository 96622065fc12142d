#!/usr/bin/env bash
# One site's surge among neighbours (make bench-sites): BenchmarkSites
# (tests/system) on Debian's real WordPress serving three sites from one
# Apache behind one varnishd, everything on loopback ports that were free,
# under the test's temporary directories. It measures what Apache alone
# serves of the surging site (C), the neighbours' traffic alone, then the
# same surge twice, each on a fresh cache: the daemon with 0.4's single
# gear (no sites key) and with a site per host; see docs/sites.md.
#
# Its markdown section goes to $SITES_OUT (/tmp/gearshift-bench-sites/
# sites.md), its chart beside it (sites.png). With SITES_APPEND set to a
# file (make bench-sites: BENCHMARKS.md), the section replaces its earlier
# copy at the end of that file and the chart is copied beside it as
# BENCHMARKS-sites.png.
#
# Knobs are bench-surge's (durations as Go writes them): SURGE_QUIET (20s)
# SURGE_FOR (60s) SURGE_FACTOR (10) SURGE_QUIET_RATE (2)
# SURGE_CAPACITY_FOR (10s) SURGE_SETTLE (4m).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/scripts/bench/section.sh"
GO=${GO:-go}
SITES_OUT=${SITES_OUT:-/tmp/gearshift-bench-sites/sites.md}
SITES_APPEND=${SITES_APPEND:-}
CHART=BENCHMARKS-sites.png
export SITES_OUT
if [ -n "$SITES_APPEND" ]; then export SITES_CHART_LINK=$CHART; fi

say() { printf '%s\n' "$*" >&2; }
die() { say "bench-sites: $*"; exit 1; }

mkdir -p "$(dirname "$SITES_OUT")"
rm -f "$SITES_OUT" "${SITES_OUT%.*}.png"
say "bench-sites: load average before: $(cut -d' ' -f1-3 /proc/loadavg); results in $SITES_OUT"
cd "$ROOT"
"$GO" test -run '^$' -bench '^BenchmarkSites$' -benchtime 1x -timeout 40m ./tests/system 2>&1 |
	tee "$(dirname "$SITES_OUT")/bench.txt"
[ -s "$SITES_OUT" ] || die "no report in $SITES_OUT (see $(dirname "$SITES_OUT")/bench.txt)"
if [ -n "$SITES_APPEND" ]; then
	[ -f "$SITES_APPEND" ] || die "$SITES_APPEND: no such file"
	replace_section "$SITES_APPEND" "$SITES_OUT"
	cp "${SITES_OUT%.*}.png" "$(dirname "$SITES_APPEND")/$CHART"
	say "bench-sites: section replaced in $SITES_APPEND, chart in $(dirname "$SITES_APPEND")/$CHART"
fi
