#!/usr/bin/env bash
# The open-loop surge benchmark (make bench-surge): BenchmarkSurge
# (tests/system) on Debian's real WordPress, everything on loopback ports
# that were free, under the test's temporary directories. It measures what
# Apache alone serves (C), then the same surge four ways, each on a fresh
# cache (Varnish passing every page without gearshift, light pinned, the
# daemon in auto with the default config, heavy pinned), then a 30 s
# backend outage under light; see docs/benchmarks.md.
#
# Its markdown section goes to $SURGE_OUT (/tmp/gearshift-bench-surge/
# surge.md), its chart beside it (surge.png). With SURGE_APPEND set to a
# file (make bench-surge: BENCHMARKS.md), the section replaces its earlier
# copy in that file (or goes at its end; FRONT=hitch's after the plain
# surge's section) and the chart is copied beside it as
# BENCHMARKS-surge.png.
#
# STACK=fpm runs it on Apache's event MPM with PHP-FPM (proxy_fcgi to a
# private pool) instead of prefork with mod_php: a section of its own
# (its heading names PHP-FPM), its chart as BENCHMARKS-surge-fpm.png.
#
# FRONT=hitch runs, instead, the surge through TLS (about 10 minutes):
# the daemon in auto with the default config, over plain http and through
# Debian's hitch (PROXY v2 to a PROXY listener of varnishd, a self-signed
# certificate), each on a fresh cache, every anonymous visitor a new
# connection (a full TLS handshake), the CPU each process took; a section
# of its own (its heading says TLS), its chart as BENCHMARKS-surge-tls.png
# (BENCHMARKS-surge-fpm-tls.png with STACK=fpm).
#
# SHAPE=ramp or SHAPE=bursts runs, instead, the daemon in auto alone
# under another shape of surge (about 7 minutes each; step, the default,
# is 0.4's): ramp climbs from the quiet rate to the peak over 2 x SURGE_FOR
# and decays over 3 x SURGE_FOR; bursts are three bursts of SURGE_FOR at
# the peak, SURGE_FOR quiet between them. A section of its own each, its
# chart as BENCHMARKS-surge-ramp.png or BENCHMARKS-surge-bursts.png.
#
# Knobs (durations as Go writes them), for short runs while developing:
#   SURGE_QUIET (20s)  SURGE_FOR (60s)  SURGE_FACTOR (10)  SURGE_QUIET_RATE (2)
#   SURGE_CAPACITY_FOR (10s)  SURGE_SETTLE (4m: the longest wait for a quiet machine)
#   SURGE_OUTAGE_WARM (30s)  SURGE_OUTAGE (30s)  SURGE_OUTAGE_AFTER (15s)  SURGE_OUTAGE_RATE (20)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
GO=${GO:-go}
SURGE_OUT=${SURGE_OUT:-/tmp/gearshift-bench-surge/surge.md}
SURGE_APPEND=${SURGE_APPEND:-}
STACK=${STACK:-mod_php}
case $STACK in
mod_php) CHART=BENCHMARKS-surge.png ;;
fpm) CHART=BENCHMARKS-surge-fpm.png ;;
*) printf 'bench-surge: STACK must be mod_php or fpm, got %s\n' "$STACK" >&2; exit 2 ;;
esac
FRONT=${FRONT:-}
case $FRONT in
'') ;;
hitch) CHART=${CHART%.png}-tls.png ;;
*) printf 'bench-surge: FRONT must be hitch or nothing, got %s\n' "$FRONT" >&2; exit 2 ;;
esac
SHAPE=${SHAPE:-step}
case $SHAPE in
step) ;;
ramp | bursts)
	[ -z "$FRONT" ] || { printf 'bench-surge: SHAPE=%s runs over plain http alone: leave FRONT out\n' "$SHAPE" >&2; exit 2; }
	CHART=${CHART%.png}-$SHAPE.png
	;;
*) printf 'bench-surge: SHAPE must be step, ramp or bursts, got %s\n' "$SHAPE" >&2; exit 2 ;;
esac
export SURGE_OUT STACK FRONT SHAPE
if [ -n "$SURGE_APPEND" ]; then export SURGE_CHART_LINK=$CHART; fi

say() { printf '%s\n' "$*" >&2; }
die() { say "bench-surge: $*"; exit 1; }
. "$ROOT/scripts/bench/section.sh"

# The TLS section stands after the plain surge's of the same stack.
AFTER=
if [ -n "$FRONT" ]; then
	AFTER='## An open-loop surge on WordPress (0.4)'
	if [ "$STACK" = fpm ]; then AFTER='## An open-loop surge on WordPress on PHP-FPM (0.4)'; fi
fi
# A shape's section stands after the plain surge's too.
if [ "$SHAPE" != step ]; then AFTER='## An open-loop surge on WordPress (0.4)'; fi

mkdir -p "$(dirname "$SURGE_OUT")"
rm -f "$SURGE_OUT" "${SURGE_OUT%.*}.png"
say "bench-surge: on $STACK${FRONT:+ behind $FRONT}; load average before: $(cut -d' ' -f1-3 /proc/loadavg); results in $SURGE_OUT"
cd "$ROOT"
"$GO" test -run '^$' -bench '^BenchmarkSurge$' -benchtime 1x -timeout 40m ./tests/system 2>&1 |
	tee "$(dirname "$SURGE_OUT")/bench.txt"
[ -s "$SURGE_OUT" ] || die "no report in $SURGE_OUT (see $(dirname "$SURGE_OUT")/bench.txt)"
if [ -n "$SURGE_APPEND" ]; then
	[ -f "$SURGE_APPEND" ] || die "$SURGE_APPEND: no such file"
	replace_section "$SURGE_APPEND" "$SURGE_OUT" "$AFTER"
	cp "${SURGE_OUT%.*}.png" "$(dirname "$SURGE_APPEND")/$CHART"
	say "bench-surge: section replaced in $SURGE_APPEND, chart in $(dirname "$SURGE_APPEND")/$CHART"
fi
