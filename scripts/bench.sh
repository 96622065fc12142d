#!/usr/bin/env bash
# make bench: does a PHP site survive a surge by itself with gearshift in
# auto? The demo's stack (scripts/demo/lib.sh: Apache + mod_php, Varnish,
# the gearshift daemon), all on loopback, and one identical surge load run
# four ways, side by side in one run:
#
#   apache   Apache alone, no Varnish in front
#   light    Varnish with gearshift's light profile pinned (what most sites run)
#   auto     gearshift in auto with the default config (only the addresses set)
#   heavy    Varnish with the heavy profile pinned (the upper bound)
#
# The load (wrk with scripts/demo/surge.lua: 60% anonymous home page, 15%
# news, 15% static files, 10% logged-in users' home page): a calm phase of
# BENCH_CALM_CONNS connections pausing BENCH_CALM_DELAY_MS between requests,
# then for BENCH_SURGE seconds BENCH_SURGE_CONNS more connections pausing
# BENCH_SURGE_DELAY_MS (many times what PHP can serve), then calm again; the
# auto run stays calm until gearshift is back in light (BENCH_DOWN_MAX at
# most). Per second the script polls `gearshift status --json` (gear,
# load_per_cpu) and varnishstat (MAIN.backend_req); varnishncsa records each
# request Varnish served (time, duration, status).
#
# The daemon's RSS and CPU come from the auto run's samples, over
# BENCH_OVERHEAD s of its calm after the surge. Then: the reaction time of
# the same surge with `fast_window: 0` (Load1 alone), the pinned runs, and
# the Go benchmarks of the switch (controller/varnishadm:
# native vcl.use and vcl.label vs the varnishadm program; controller: the loop's sync path
# to 1 and 3 targets, compiling at switch time).
#
# Writes BENCH_DOC (default BENCHMARKS.md at the top of the repository) and
# its chart BENCH_CHART (default BENCHMARKS.png beside it); every raw file
# goes to BENCH_OUT. Benchmarks measure: no number fails the run.
#
# Knobs (environment, defaults in brackets): BENCH_CALM [10] BENCH_SURGE [60]
# BENCH_SURGE_CONNS [24] BENCH_SURGE_DELAY_MS [10] BENCH_CALM_CONNS [2]
# BENCH_CALM_DELAY_MS [500] BENCH_USERS [20] BENCH_DOWN_MAX [420]
# BENCH_SETTLE_MAX [120] BENCH_OVERHEAD [60] BENCH_GO [1] BENCH_GO_N [2000]
# BENCH_COMPILE_N [100] BENCH_OUT BENCH_DOC BENCH_CHART GEARSHIFT.
set -euo pipefail
STACK_NAME=bench
STACK_ACCESS_LOG=0
STACK_OWN_CONFIG=1
# shellcheck source=scripts/demo/lib.sh
. "$(dirname "$0")/demo/lib.sh"

BENCH_CALM=${BENCH_CALM:-10}
BENCH_SURGE=${BENCH_SURGE:-60}
BENCH_SURGE_CONNS=${BENCH_SURGE_CONNS:-24}
BENCH_SURGE_DELAY_MS=${BENCH_SURGE_DELAY_MS:-10}
BENCH_CALM_CONNS=${BENCH_CALM_CONNS:-2}
BENCH_CALM_DELAY_MS=${BENCH_CALM_DELAY_MS:-500}
BENCH_USERS=${BENCH_USERS:-20}
BENCH_DOWN_MAX=${BENCH_DOWN_MAX:-420}
BENCH_SETTLE_MAX=${BENCH_SETTLE_MAX:-120}
BENCH_OVERHEAD=${BENCH_OVERHEAD:-60}
BENCH_GO=${BENCH_GO:-1}
BENCH_GO_N=${BENCH_GO_N:-2000}
BENCH_COMPILE_N=${BENCH_COMPILE_N:-100}
BENCH_OUT=${BENCH_OUT:-${TMPDIR:-/tmp}/gearshift-bench}
BENCH_DOC=${BENCH_DOC:-$ROOT/BENCHMARKS.md}
BENCH_CHART=${BENCH_CHART:-$(dirname "$BENCH_DOC")/BENCHMARKS.png}
SURGE_LUA="$DEMO_SRC/surge.lua"

need_cmds go apache2 varnishd varnishadm varnishstat varnishncsa curl wrk gnuplot
[ "$BENCH_SURGE_DELAY_MS" -ge 1 ] 2>/dev/null || die "BENCH_SURGE_DELAY_MS must be a whole number of milliseconds, 1 or more"
mkdir -p "$BENCH_OUT"
rm -f "$BENCH_OUT"/*.txt "$BENCH_OUT"/*.tsv "$BENCH_OUT"/*.log "$BENCH_OUT"/*.dat
RESULTS="$BENCH_OUT/results.tsv"
: >"$RESULTS"

bench_down() {
	local rc=$?
	trap - EXIT INT TERM
	stack_down
	exit "$rc"
}
trap bench_down EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# shellcheck source=scripts/bench/lib.sh
. "$(dirname "$0")/bench/lib.sh"

# ---- run ---------------------------------------------------------------------

started=$SECONDS
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
COMMIT=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
DIRTY=$(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null | grep -v -e BENCHMARKS -e '^$' | head -1 || true)
say "bench: load average before: $LOAD_BEFORE; commit $COMMIT${DIRTY:+ (with local changes)}"
say "bench: building gearshift"
build_gearshift
stack_init
stack_apache
stack_varnish
SESSIONS=""
for i in $(seq 1 "$BENCH_USERS"); do SESSIONS="$SESSIONS $(login "bench$i")"; done
SESSIONS=${SESSIONS# }
[ -n "${SESSIONS%% *}" ] || die "could not log in to the PHP site"
write_config
stack_gearshift "$STACK_DIR/gearshift.stderr"
say "bench: stack up in $STACK_DIR (Apache $ORIGIN, Varnish $SITE)"
: >"$BENCH_OUT/times.tsv"

SINGLE_MS=$(for i in 1 2 3 4 5 6 7; do curl -s -o /dev/null -w '%{time_total}\n' "$ORIGIN/"; done |
	sort -n | awk '{ v[NR] = $1 } END { printf "%.0f", v[int((NR + 1) / 2)] * 1000 }')
say "bench: the PHP home page alone: ${SINGLE_MS} ms (median of 7)"

URL=$SITE
fresh_cache
settle
SETTLE_AUTO=$SETTLE_NOTE
say "bench: auto run starts in $SETTLE_AUTO"
run auto 1

say "bench: restarting gearshift with fast_window: 0 (Load1 alone)"
restart_daemon 0
fresh_cache
settle
SETTLE_CLASSIC=$SETTLE_NOTE
say "bench: fast_window 0 run starts in $SETTLE_CLASSIC"
# The same surge, stopped once heavy is on (or at its end).
samples="$BENCH_OUT/samples-classic.tsv"
: >"$samples"
sampler "$samples" &
SPID=$!
STACK_PIDS+=("$SPID")
load "$BENCH_CALM" "$BENCH_CALM_CONNS" "$BENCH_CALM_DELAY_MS" "$BENCH_OUT/wrk-classic-calm0.txt"
T_CLASSIC=$(now)
load "$BENCH_SURGE" "$BENCH_SURGE_CONNS" "$BENCH_SURGE_DELAY_MS" "$BENCH_OUT/wrk-classic-surge.txt" &
WPID=$!
STACK_PIDS+=("$WPID")
while alive "$WPID" && [ "$(status_field state)" != heavy ]; do sleep 0.5; done
done_pid "$WPID"
done_pid "$SPID"
T_CLASSIC_END=$(now)
say "bench: restarting gearshift with the default config again"
restart_daemon

for gear in heavy light; do
	pin "$gear"
	fresh_cache
	run "$gear"
done
# PHP's capacity: the home page at 8 connections for 5 s, straight from
# Apache (here, not first: it loads the machine, and auto must start calm).
wrk -t2 -c8 -d5s "$ORIGIN/" >"$BENCH_OUT/wrk-capacity.txt" 2>&1 || die "wrk failed: $(cat "$BENCH_OUT/wrk-capacity.txt")"
PHP_RPS=$(awk '/^Requests\/sec/ { printf "%.0f", $2 }' "$BENCH_OUT/wrk-capacity.txt")
say "bench: the PHP home page, straight from Apache: ${PHP_RPS} req/s at most (wrk -c8)"
URL=$ORIGIN
run apache

TRANSITIONS_LOG="$BENCH_OUT/transitions.txt"
gs logs -n 0 --transitions >"$TRANSITIONS_LOG" 2>&1 || true
# Transitions of the auto and classic runs, relative to their surge starts.
read -r _ A_START A_SURGE A_END A_STOP _ _ < <(grep '^auto' "$BENCH_OUT/times.tsv")
transitions "$A_SURGE" "$A_START" "$A_STOP" >"$BENCH_OUT/transitions-auto.txt"
transitions "$T_CLASSIC" "$T_CLASSIC" "$T_CLASSIC_END" >"$BENCH_OUT/transitions-classic.txt"
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
stack_down
trap - EXIT

GO_OUT="$BENCH_OUT/go-bench.txt"
: >"$GO_OUT"
if [ "$BENCH_GO" = 1 ]; then
	say "bench: Go benchmarks of the switch ($BENCH_GO_N switches each; $BENCH_COMPILE_N compiles)"
	(
		cd "$ROOT"
		go test -run '^$' -bench 'VCLUse|VCLLabel' -benchtime "${BENCH_GO_N}x" ./controller/varnishadm/
		go test -run '^$' -bench 'SyncAll' -benchtime "${BENCH_GO_N}x" ./controller/
		go test -run '^$' -bench 'CompileAtSwitch' -benchtime "${BENCH_COMPILE_N}x" -timeout 30m ./controller/varnish/
	) >"$GO_OUT" 2>&1 || say "bench: a Go benchmark failed (see $GO_OUT)"
fi
ELAPSED=$((SECONDS - started))

# ---- numbers -------------------------------------------------------------------

# Per run: requests/s during the surge, latency from the surge's wrk,
# errors over all its wrk runs, requests that reached Apache.
for name in apache light auto heavy; do
	read -r _ t_start t_surge t_end t_stop b0 b1 < <(grep "^$name" "$BENCH_OUT/times.tsv")
	surge="$BENCH_OUT/wrk-$name-surge.txt"
	read -r reqs bad errs < <(wrk_sum "$BENCH_OUT"/wrk-"$name"-*.txt)
	read -r sreqs _ _ < <(wrk_sum "$surge" "$BENCH_OUT/wrk-$name-calm1.txt")
	p50=$(ms "$(awk '$1 == "50%" { print $2 }' "$surge")")
	p99=$(ms "$(awk '$1 == "99%" { print $2 }' "$surge")")
	pmax=$(ms "$(awk '$1 == "Latency" { print $4 }' "$surge")")
	if [ "$name" = apache ]; then
		to_apache=$sreqs
	else
		to_apache=$((b1 - b0))
	fi
	peak=$(awk -F'\t' 'BEGIN { m = 0 } $3 + 0 > m { m = $3 + 0 } END { print m }' "$BENCH_OUT/samples-$name.tsv")
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" \
		"$(awk -v n="$sreqs" -v a="$t_surge" -v b="$t_end" 'BEGIN { printf "%.1f", n / (b - a) }')" \
		"$p50" "$p99" "$pmax" "$bad" "$errs" \
		"$(awk -v n="$to_apache" -v a="$t_surge" -v b="$t_end" 'BEGIN { printf "%.1f", n / (b - a) }')" \
		"$peak" "$reqs" >>"$RESULTS"
done

# first_to GEAR FILE: seconds from the surge start to the first change to GEAR.
first_to() {
	awk -v g="$1" '$3 == g && $1 >= -0.5 { printf "%.1f", $1; found = 1; exit } END { if (!found) print "never" }' "$2"
}
# gear_at FILE T: the gear of the last sample in FILE at or before T.
gear_at() { awk -F'\t' -v t="$2" '$1 <= t { g = $2 } END { print (g ? g : "-") }' "$1"; }
AUTO_AT_SURGE=$(gear_at "$BENCH_OUT/samples-auto.tsv" "$A_SURGE")
CLASSIC_AT_SURGE=$(gear_at "$BENCH_OUT/samples-classic.tsv" "$T_CLASSIC")
TO_HEAVY=$(first_to heavy "$BENCH_OUT/transitions-auto.txt")
TO_HEAVY_NOTE=""
if [ "$AUTO_AT_SURGE" = heavy ]; then TO_HEAVY=0 TO_HEAVY_NOTE=" (already heavy when the surge began: not a reaction time)"; fi
AUTO_TRANSITIONS=$(wc -l <"$BENCH_OUT/transitions-auto.txt")
CLASSIC_HEAVY=$(awk '$3 == "heavy" { printf "%.1f", $1; found = 1; exit } END { if (!found) print "never" }' "$BENCH_OUT/transitions-classic.txt")
CLASSIC_NOTE=""
if [ "$CLASSIC_AT_SURGE" = heavy ]; then CLASSIC_HEAVY=0 CLASSIC_NOTE=" (already heavy when the surge began: not a reaction time)"; fi
# Overhead: the daemon's CPU ticks and RSS from the auto run's samples, over
# BENCH_OVERHEAD s of calm starting 10 s after the surge ended.
OVERHEAD=$(awk -F'\t' -v a="$A_END" -v w="$BENCH_OVERHEAD" -v hz="$CLK_TCK" '
	$1 >= a + 10 && $1 <= a + 10 + w { if (t0 == "") { t0 = $1; c0 = $5 } t1 = $1; c1 = $5; if ($6 > r) r = $6 }
	END { if (t0 == "" || t1 == t0) { print "not measured (the auto run had no calm after its surge)"; exit }
	      printf "%.2f s of CPU in %.0f s (%.2f%% of one CPU), RSS at most %.1f MiB", (c1 - c0) / hz, t1 - t0, 100 * (c1 - c0) / hz / (t1 - t0), r / 1024 }' \
	"$BENCH_OUT/samples-auto.tsv")
AUTO_END_STATE=$(awk -F'\t' 'END { print $2 }' "$BENCH_OUT/samples-auto.tsv")
AUTO_SURGE_LEN=$(awk -v a="$A_SURGE" -v b="$A_END" 'BEGIN { printf "%.1f", b - a }')
BACK_LIGHT=$(awk -v s="$AUTO_SURGE_LEN" '$3 == "light" && $1 > s { t = $1 - s } END { if (t != "") printf "%.0f", t; else print "never" }' "$BENCH_OUT/transitions-auto.txt")

# Per second relative to each run's surge start: served, to Apache, p99 (ms),
# gear (0 light, 1 moderate, 2 heavy), load_per_cpu.
series() {
	local name=$1 t_surge
	t_surge=$(awk -F'\t' -v n="$name" '$1 == n { print $3 }' "$BENCH_OUT/times.tsv")
	awk -v t0="$t_surge" -v FS='[ \t]' '
		FILENAME ~ /ncsa/ { s = int($1 - int(t0)); n[s]++; d[s, n[s]] = $2 / 1000
			if (!seen || s < lo) lo = s
			if (!seen || s > hi) hi = s
			seen = 1; next }
		{ s = int($1 - t0); g[s] = ($2 == "heavy") ? 2 : ($2 == "moderate") ? 1 : 0; l[s] = $3
		  if (pt != "") be[s] = ($4 - pb) / ($1 - pt)
		  pt = $1; pb = $4
		  if (!seen || s < lo) lo = s
		  if (!seen || s > hi) hi = s
		  seen = 1 }
		END {
			for (s = lo; s <= hi; s++) {
				# a second without a sample keeps the last one (the poll drifts)
				if (s in g) { cg = g[s]; cl = l[s]; cb = be[s] + 0 }
				if (cl == "") continue
				c = n[s] + 0; p = 0
				if (c > 0) {
					for (i = 1; i <= c; i++) v[i] = d[s, i]
					k = int(0.99 * c + 0.5); if (k < 1) k = 1
					p = kth(v, c, k)
				}
				printf "%d\t%d\t%.1f\t%.2f\t%d\t%s\n", s, c, cb, p, cg, cl
			}
		}
		# kth: the k-th smallest of a[1..n] (quickselect; a is reordered)
		function kth(a, n, k,   lo2, hi2, piv, i, j, t) {
			lo2 = 1; hi2 = n
			while (lo2 < hi2) {
				piv = a[int((lo2 + hi2) / 2)]; i = lo2; j = hi2
				while (i <= j) {
					while (a[i] < piv) i++
					while (a[j] > piv) j--
					if (i <= j) { t = a[i]; a[i] = a[j]; a[j] = t; i++; j-- }
				}
				if (k <= j) hi2 = j; else if (k >= i) lo2 = i; else return a[k]
			}
			return a[k]
		}' "$BENCH_OUT/ncsa-$name.log" "$BENCH_OUT/samples-$name.tsv" >"$BENCH_OUT/series-$name.dat"
}
for name in auto light heavy; do series "$name"; done

# p99 (Varnish's own timing, varnishncsa) over [from, to) s after the surge start.
ncsa_p99() {
	awk -v t0="$(awk -F'\t' -v n="$1" '$1 == n { print int($3) }' "$BENCH_OUT/times.tsv")" -v a="$2" -v b="$3" \
		'{ s = $1 - t0; if (s >= a && s < b) print $2 / 1000 }' "$BENCH_OUT/ncsa-$1.log" |
		sort -n | awk '{ v[NR] = $1 } END { if (NR == 0) { print "-"; exit } k = int(0.99 * NR + 0.5); if (k < 1) k = 1; printf "%.2f", v[k] }'
}
if [ "$TO_HEAVY" != never ] && awk -v t="$TO_HEAVY" -v s="$AUTO_SURGE_LEN" 'BEGIN { exit !(t + 3 < s) }'; then
	HEAVY_FROM=$(awk -v t="$TO_HEAVY" 'BEGIN { printf "%d", t + 2 }')
	P99_AUTO_HEAVY=$(ncsa_p99 auto "$HEAVY_FROM" "$AUTO_SURGE_LEN")
	P99_HEAVY_SAME=$(ncsa_p99 heavy "$HEAVY_FROM" "$AUTO_SURGE_LEN")
else
	HEAVY_FROM="-" P99_AUTO_HEAVY="-" P99_HEAVY_SAME="-"
fi

col() { awk -F'\t' -v n="$1" -v c="$2" '$1 == n { print $c }' "$RESULTS"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 > 0 && a != "-") printf "%.1f", a / b; else print "-" }'; }
RPS_X=$(ratio "$(col auto 2)" "$(col light 2)")
P99_X=$(ratio "$P99_AUTO_HEAVY" "$P99_HEAVY_SAME")
AUTO_ERRS=$(($(col auto 6) + $(col auto 7)))
RT_X=$(ratio "$CLASSIC_HEAVY" "$TO_HEAVY")
[ -z "$TO_HEAVY_NOTE$CLASSIC_NOTE" ] || RT_X=-

# Go benchmark figures: name -> ns/op, p50, p99, max (us).
gofig() {
	awk -v n="$1" -v f="$2" '$1 ~ "^"n"(-[0-9]+)?$" { for (i = 2; i < NF; i++) if ($(i + 1) == f) { print $i; exit } }' "$GO_OUT"
}
goms() { awk -v v="$1" -v d="$2" 'BEGIN { if (v == "") print "-"; else printf "%.3f", v / d }'; }
gorow() {
	printf '| %s | %s | %s | %s | %s |\n' "$2" "$(goms "$(gofig "$1" ns/op)" 1e6)" "$(goms "$(gofig "$1" p50-us)" 1e3)" \
		"$(goms "$(gofig "$1" p99-us)" 1e3)" "$(goms "$(gofig "$1" max-us)" 1e3)"
}
goratio() { ratio "$(gofig "$1" "$3")" "$(gofig "$2" "$3")"; }

# ---- chart -----------------------------------------------------------------------

gnuplot <<EOF
set terminal pngcairo size 1100,1000 font ",10" noenhanced
set output "$BENCH_CHART"
set multiplot layout 3,1 title "gearshift in auto (default config) through one surge, per second; fixed light for comparison (x: seconds since the surge started; surge ${BENCH_SURGE}s)"
set datafile separator "\t"
set grid
set xrange [-$BENCH_CALM:*]
set key outside right top
set lmargin 12
set rmargin 34
set logscale y
set yrange [0.5:*]
set ylabel "requests/s (0 drawn at 0.5)"
set arrow 1 from 0, graph 0 to 0, graph 1 nohead dt 2
set arrow 2 from $AUTO_SURGE_LEN, graph 0 to $AUTO_SURGE_LEN, graph 1 nohead dt 2
plot "$BENCH_OUT/series-auto.dat" using 1:(\$2 > 0.5 ? \$2 : 0.5) with lines lw 2 lc rgb "#1f77b4" title "auto: served", \
     "" using 1:(\$3 > 0.5 ? \$3 : 0.5) with lines lw 2 lc rgb "#d62728" title "auto: reaching Apache", \
     "$BENCH_OUT/series-light.dat" using 1:(\$2 > 0.5 ? \$2 : 0.5) with lines lw 2 lc rgb "#7f7f7f" title "fixed light: served"
set ylabel "p99 ms (varnishncsa)"
set yrange [*:*]
plot "$BENCH_OUT/series-auto.dat" using 1:(\$4 > 0 ? \$4 : 1/0) with lines lw 2 lc rgb "#1f77b4" title "auto: p99", \
     "$BENCH_OUT/series-light.dat" using 1:(\$4 > 0 ? \$4 : 1/0) with lines lw 1 lc rgb "#7f7f7f" title "fixed light: p99"
unset logscale y
set yrange [0:*]
set ylabel "load per CPU"
set y2label "gear"
set y2range [-0.2:2.5]
set y2tics ("light" 0, "moderate" 1, "heavy" 2)
set ytics nomirror
set xlabel "seconds since the surge started"
plot "$BENCH_OUT/series-auto.dat" using 1:6 with lines lw 2 lc rgb "#2ca02c" title "auto: load_per_cpu", \
     "" using 1:5 axes x1y2 with steps lw 3 lc rgb "#9467bd" title "auto: gear"
unset multiplot
EOF

# ---- BENCHMARKS.md ------------------------------------------------------------

goal() { if [ "$1" = 1 ]; then printf 'met'; else printf '**not met**'; fi; }
yes_if() { awk "BEGIN { exit !($1) }" && echo 1 || echo 0; }
G_RPS=$(yes_if "\"$RPS_X\" != \"-\" && $RPS_X + 0 >= 10")
G_ERR=$([ "$AUTO_ERRS" -eq 0 ] && echo 1 || echo 0)
G_P99=$(yes_if "\"$P99_X\" != \"-\" && $P99_X + 0 <= 2")
G_DOWN=$([ "$AUTO_END_STATE" = light ] && echo 1 || echo 0)
FAN_X=$(goratio 'BenchmarkSyncAll/targets=3' 'BenchmarkSyncAll/targets=1' p50-us)
G_FAN=$(yes_if "\"$FAN_X\" != \"-\" && $FAN_X + 0 <= 1.5")

# Sections measured elsewhere (make bench-signals, bench-fleet, the
# applications' benchmarks) follow KEEP_MARK in BENCH_DOC; a rewrite keeps
# them, the mark included.
KEEP_MARK='<!-- make bench keeps the sections below this line -->'
KEPT=""
if [ -f "$BENCH_DOC" ]; then
	KEPT=$(awk -v m="$KEEP_MARK" 'found || $0 == m { found = 1; print }' "$BENCH_DOC")
fi

{
	cat <<EOF
# gearshift benchmarks

Written by \`make bench\` (\`scripts/bench.sh\`) at commit \`$COMMIT\`${DIRTY:+ (with local changes)}, $(date -u '+%Y-%m-%d %H:%M UTC'), in $ELAPSED s.
To reproduce: \`git checkout $COMMIT && make bench\` (it installs what is missing, builds, runs everything on loopback, and rewrites this file and \`BENCHMARKS.png\`).

Machine: $(describe_machine).
Everything ran on that one machine: wrk, Apache + PHP, Varnish and gearshift share its CPUs.
The machine was shared with other work: load average (1, 5, 15 min) $LOAD_BEFORE before the run, $LOAD_AFTER at its end.
Figures that PHP produces (anything not served from cache) move with that load; the ratios between runs are the result.

The site is the demo's PHP site (\`scripts/demo/site\`): the home page costs ${SINGLE_MS} ms of CPU alone and asks to be revalidated every time (\`Cache-Control: no-cache, must-revalidate, max-age=0\`, \`Expires\` 1981: heavy overrides that, never \`no-store\`); straight from Apache it serves at most ${PHP_RPS} req/s here (wrk -c8, 5 s).

## 1. Surviving a surge

The same load four times. Calm: $BENCH_CALM_CONNS connections pausing $BENCH_CALM_DELAY_MS ms between requests. Surge: ${BENCH_SURGE} s with $BENCH_SURGE_CONNS more connections pausing $BENCH_SURGE_DELAY_MS ms (at most $((BENCH_SURGE_CONNS * 1000 / BENCH_SURGE_DELAY_MS)) req/s offered when answers are instant, $(awk -v a="$BENCH_SURGE_CONNS" -v d="$BENCH_SURGE_DELAY_MS" -v p="$PHP_RPS" 'BEGIN { printf "%.0f", a * 1000 / d / p }')× what PHP can serve). Each request is drawn from \`scripts/demo/surge.lua\`: 60% anonymous home page, 15% \`/news.php\` (max-age=30), 15% static files, 10% the home page of one of $BENCH_USERS logged-in users. Then calm for ${BENCH_CALM} s; the auto run stays calm until gearshift is back in light (at most $BENCH_DOWN_MAX s). Varnish's cache is emptied before each run.

- **apache**: Apache alone, wrk straight to it.
- **light**: Varnish with gearshift's light profile pinned (\`gearshift force light\`): what most sites run.
- **auto**: \`gearshift run\` with the default config (only the addresses set): $SETTLE_AUTO.
- **heavy**: Varnish with the heavy profile pinned: the upper bound.

| run | req/s served in the surge | p50 ms | p99 ms | max ms | non-2xx | socket errors | req/s reaching Apache in the surge | peak load per CPU | requests in all |
|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|
EOF
	awk -F'\t' '{ printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6, $7, $8, $9, $10 }' "$RESULTS"
	cat <<EOF

Latency is what wrk measured for the surge's connections (\`--latency\`); errors are counted over every wrk run of the run (calm and surge); requests reaching Apache are varnishstat's \`MAIN.backend_req\` over the surge (for apache, every request of the surge); peak load per CPU is \`gearshift status\`'s \`load_per_cpu\`, polled every second.

The auto run was in $AUTO_AT_SURGE when the surge began; heavy $( [ "$TO_HEAVY" = never ] && echo "was not entered during the run" || echo "was on $TO_HEAVY s after the surge started$TO_HEAVY_NOTE"); $AUTO_TRANSITIONS transition(s) in the run$(awk 'NR == 1 { printf " (" } { printf "%s%s→%s at %+.1f s", (NR > 1 ? ", " : ""), $2, $3, $1 } END { if (NR) printf ")" }' "$BENCH_OUT/transitions-auto.txt"); at the end of the run it was in **$AUTO_END_STATE** ($( [ "$BACK_LIGHT" = never ] && echo "not back in light within $BENCH_DOWN_MAX s of calm after the surge" || echo "back in light $BACK_LIGHT s after the surge ended")).

| goal for auto | measured | |
|---|---|---|
| ≥ 10× the requests/s of fixed light during the surge | ${RPS_X}× ($(col auto 2) vs $(col light 2) req/s) | $(goal "$G_RPS") |
| zero errors | $AUTO_ERRS (non-2xx + socket errors) | $(goal "$G_ERR") |
| p99 within 2× of fixed heavy once heavy is on | $(if [ "$P99_X" = - ]; then echo "not measurable: heavy was not entered during the surge"; else echo "${P99_X}× ($P99_AUTO_HEAVY ms vs $P99_HEAVY_SAME ms: Varnish's own request times, varnishncsa \`%D\`, from $HEAVY_FROM s after the surge start to its end, in both runs)"; fi) | $(goal "$G_P99") |
| back in light after the surge | $AUTO_END_STATE | $(goal "$G_DOWN") |

## 2. Chart

![per second through the surge: gear, load per CPU, requests/s served and reaching Apache, p99](BENCHMARKS.png)

Per second, for the auto run: requests/s served and reaching Apache (top, log scale), p99 (middle; Varnish's own timing per request, varnishncsa \`%D\`), \`load_per_cpu\` and the gear (bottom); the fixed-light run's requests/s and p99 on the same axes. The dashed lines are the surge's start and end.

## 3. Reaction time

The same surge from calm, default config (\`fast_window: 10s\`, the run above) against \`fast_window: 0\` (Load1 alone, the classic design; the daemon restarted with that one key changed, started in $SETTLE_CLASSIC):

| config | seconds from surge start to heavy |
|---|---:|
| default (\`fast_window: 10s\`) | $TO_HEAVY$TO_HEAVY_NOTE |
| \`fast_window: 0\` | $CLASSIC_HEAVY$CLASSIC_NOTE |

$(if [ "$RT_X" = - ]; then say "No ratio: one of the runs did not start in calm, or did not reach heavy."; else say "Ratio (\`fast_window: 0\` / default): ${RT_X}×."; fi)

## 4. Switch cost

$(if [ "$BENCH_GO" != 1 ]; then echo "Not run in this run (BENCH_GO=$BENCH_GO)."; fi)
Go benchmarks against real varnishd instances (\`go test -bench\`), $BENCH_GO_N switches each, alternating two loaded VCLs:

| switch | mean ms | p50 ms | p99 ms | max ms |
|---|---:|---:|---:|---:|
$(gorow BenchmarkVCLUse "native \`vcl.use\` over the kept connection (\`BenchmarkVCLUse\`)")
$(gorow BenchmarkVCLLabel "native \`vcl.label\`, a switch in label mode (\`BenchmarkVCLLabel\`)")
$(gorow BenchmarkVCLUseVarnishadmProcess "\`varnishadm vcl.use\`, a process per switch (\`BenchmarkVCLUseVarnishadmProcess\`)")
$(gorow BenchmarkCompileAtSwitch "compile at switch: \`vcl.inline\` of gearshift's profile, then \`vcl.use\` (\`BenchmarkCompileAtSwitch\`, $BENCH_COMPILE_N switches)")
$(gorow 'BenchmarkSyncAll/targets=1' "gearshift's sync path, 1 target (\`BenchmarkSyncAll/targets=1\`: \`vcl.list\` + \`vcl.use\`)")
$(gorow 'BenchmarkSyncAll/targets=3' "the same, fanned out to 3 targets at once (\`BenchmarkSyncAll/targets=3\`)")

- \`varnishadm\` per switch vs native: $(goratio BenchmarkVCLUseVarnishadmProcess BenchmarkVCLUse p50-us)× at p50, $(goratio BenchmarkVCLUseVarnishadmProcess BenchmarkVCLUse p99-us)× at p99.
- Compiling at switch vs native: $(goratio BenchmarkCompileAtSwitch BenchmarkVCLUse p50-us)× at p50, $(goratio BenchmarkCompileAtSwitch BenchmarkVCLUse p99-us)× at p99.
- Fan-out to 3 targets vs 1: ${FAN_X}× at p50, $(goratio 'BenchmarkSyncAll/targets=3' 'BenchmarkSyncAll/targets=1' p99-us)× at p99 (goal within 1.5×: $(goal "$G_FAN")).

## 5. Overhead

The daemon of the auto run (default config, \`poll_interval: 1s\`) over the $BENCH_OVERHEAD s of calm that began 10 s after the surge ended, with the calm load going on and the benchmark asking it for \`status --json\` every second: $OVERHEAD. CPU is the process's utime + stime from \`/proc/PID/stat\`, RSS its \`VmRSS\`, both read every second.

## Goals not met, and why

EOF
	n=0
	if [ "$AUTO_AT_SURGE" != light ]; then n=1; say "- **a surge from calm**: the auto run was in $AUTO_AT_SURGE when its surge began ($SETTLE_AUTO). Other work on the shared machine kept \`load_per_cpu\` above moderate's default enter (0.70), so the figures for auto are those of a site already shifted up."; fi
	if [ "$G_RPS" != 1 ]; then n=1; say "- **≥ 10× fixed light's requests/s**: ${RPS_X}×. Auto serves the surge in light until heavy is on (after ${TO_HEAVY} s here); the offered rate ($BENCH_SURGE_CONNS connections pausing $BENCH_SURGE_DELAY_MS ms) caps what any gear can serve, on CPUs shared with wrk and with other work on the machine."; fi
	if [ "$G_ERR" != 1 ]; then n=1; say "- **zero errors**: $AUTO_ERRS; see the wrk reports in \`$BENCH_OUT\` (socket errors are most often wrk's 10 s timeout while PHP queues in light)."; fi
	if [ "$G_P99" != 1 ]; then
		n=1
		if [ "$P99_X" = - ]; then
			say "- **p99 within 2× of fixed heavy once heavy is on**: not measurable, heavy was not entered early enough in the surge (the run started in $SETTLE_AUTO)."
		else
			say "- **p99 within 2× of fixed heavy once heavy is on**: ${P99_X}× ($P99_AUTO_HEAVY vs $P99_HEAVY_SAME ms). Auto's cache was cold when heavy came on (each page and each logged-in user's page is fetched from PHP once, while PHP still works off the queue built in light); fixed heavy had been caching since its calm phase."
		fi
	fi
	if [ "$G_DOWN" != 1 ]; then n=1; say "- **back in light after the surge**: it ended in $AUTO_END_STATE. With the default hysteresis (\`down_window: 120s\`, \`min_dwell: 60s\`, one step at a time) and Load1's one-minute decay, the way down from heavy takes several minutes of calm, more while other work on the machine keeps \`load_per_cpu\` above a stay rule; this run waited at most $BENCH_DOWN_MAX s."; fi
	if [ "$BENCH_GO" = 1 ] && [ "$G_FAN" != 1 ]; then n=1; say "- **fan-out within 1.5× of one target**: ${FAN_X}×. Here the three varnishd managers share $(nproc) CPUs with the benchmark itself, so their work cannot overlap as it would on three machines."; fi
	if [ "$BENCH_GO" = 1 ] && [ "$BENCH_COMPILE_N" -lt "$BENCH_GO_N" ]; then n=1; say "- **2000 switches for compile-at-switch**: $BENCH_COMPILE_N. Each compile takes a third of a second or more here, so 2000 would take over ten minutes alone and break the benchmark's 15-minute bound; the figures above are over $BENCH_COMPILE_N (BENCH_COMPILE_N)."; fi
	if [ "$ELAPSED" -gt 900 ]; then n=1; say "- **under ~15 minutes**: $ELAPSED s. The waits are bounded but long on a busy machine: up to $BENCH_SETTLE_MAX s twice for calm before the auto and \`fast_window: 0\` runs, up to $BENCH_DOWN_MAX s for auto to come back to light."; fi
	[ "$n" = 1 ] || say "None."
	cat <<EOF

Raw files of this run (wrk reports, per-second samples, varnishncsa logs, Go output) were in \`$BENCH_OUT\`.
EOF
	if [ -n "$KEPT" ]; then printf '\n%s\n' "$KEPT"; fi
} >"$BENCH_DOC"

say ""
say "bench: wrote $BENCH_DOC and $BENCH_CHART in $ELAPSED s (raw files in $BENCH_OUT)"
