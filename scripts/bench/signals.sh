#!/usr/bin/env bash
# The signals benchmark: what Varnish's traffic, Apache's workers and the
# backend's latency change against the load alone, on the demo's stack
# (scripts/demo/lib.sh: Apache + mod_php, a private varnishd, `gearshift
# run`), everything on loopback ports that were free, under one temporary
# directory. Each case starts a fresh daemon with its own config and log,
# in light (on_exit: light puts Varnish back there between cases), after
# the machine's Load1 has settled; gears are timed from the daemon's own
# record (`gearshift logs --transitions --json`, `status --json`):
#
#   workers   "idle CPU, busy workers": Apache with SIG_WORKERS workers and
#             mod_status, /slow.php sleeping SIG_SLOW_MS like a slow
#             database, wrk -c SIG_SLOW_CONNS through Varnish; rules on
#             apache_busy_ratio and backend_ttfb_ms (probe of / on Apache)
#             beside the load rule: does it reach heavy, on which signal,
#             and what was load_per_cpu
#   race      a wrk surge with the demo's mix (scripts/demo/surge.lua),
#             SIG_SURGE_CONNS connections pausing SIG_SURGE_DELAY_MS between
#             requests, until heavy (SIG_RACE_MAX s at most): the load rule
#             alone, then with `states.heavy.enter.client_rps: SIG_RPS_ENTER`;
#             then the request-rate rule again under the demo's own 10 ms
#             pause, which Varnish does not count until the connections
#             close (a keep-alive client back within timeout_linger keeps
#             its worker thread, whose counters reach MAIN.client_req only
#             when it lets go). varnish.targets[].name is set in every run.
#   cpu       every source on (Varnish's traffic, a cgroup, mod_status, the
#             probe, an inject file) at poll_interval 1s, no traffic: the
#             daemon's CPU from /proc/PID/stat over SIG_CPU s, its own
#             (utime+stime) and its children's (cutime+cstime: varnishstat);
#             then SIG_CPU_BASE s of a daemon without any optional source
#   guard     the same surge for SIG_SURGE s and SIG_TAIL s after it,
#             twice, with the traffic guard off (down_traffic_ratio 0) and
#             on (the default 0.6), down_window SIG_DOWN_WINDOW and
#             min_dwell SIG_MIN_DWELL (short, like the demo's, so a bounce
#             can show): climbs, moves up and down, re-entries while wrk ran
#
# The load thresholds are the demo's (moderate 1.5/1.0, heavy 3.0/2.0 per
# CPU; STACK_{MODERATE,HEAVY}_{ENTER,STAY}), raised by SIG_SHIFT (a number,
# or auto: for each case the load per CPU at its start, rounded up to 0.5)
# on a machine that others' work keeps busy. A benchmark measures: no number
# fails the run; a case that could not be measured (the daemon was not in
# light when the surge began, say) says so in the table.
#
# Writes SIG_OUT/signals.md (the tables) and, beside it, each case's config,
# log, per-half-second status trace and wrk report. SIG_DOC=FILE also
# writes the tables there, SIG_APPEND=FILE puts them at its end, in place of
# an earlier run's (make bench-signals: BENCHMARKS.md). SIG_CASES picks cases (default "workers race cpu guard").
# About 6 minutes, more while others' work keeps the load up (each settle
# waits SIG_SETTLE_MAX s at most).
#
# Knobs (environment, defaults in brackets): SIG_CASES SIG_RPS_ENTER [10]
# SIG_RPS_STAY [5] SIG_SURGE_CONNS [48] SIG_SURGE_DELAY_MS [100]
# SIG_RACE_MAX [20] SIG_SURGE [30] SIG_TAIL [30] SIG_DOWN_WINDOW [10s]
# SIG_MIN_DWELL [10s] SIG_WORKERS [8] SIG_SLOW_MS [500] SIG_SLOW_CONNS [16]
# SIG_SLOW [30] SIG_CPU [60] SIG_CPU_BASE [30] SIG_SHIFT [0] SIG_SETTLE_LOAD [moderate's
# stay] SIG_SETTLE_MAX
# [40] SIG_OUT [/tmp/gearshift-bench-signals] SIG_DOC SIG_APPEND
# STACK_{MODERATE,HEAVY}_{ENTER,STAY} GEARSHIFT.
set -euo pipefail
STACK_NAME=signals
STACK_ACCESS_LOG=0
# shellcheck source=scripts/demo/lib.sh
. "$(dirname "$0")/../demo/lib.sh"

SIG_CASES=${SIG_CASES:-workers race cpu guard}
SIG_RPS_ENTER=${SIG_RPS_ENTER:-10}
SIG_RPS_STAY=${SIG_RPS_STAY:-5}
SIG_RACE_MAX=${SIG_RACE_MAX:-20}
SIG_SURGE_CONNS=${SIG_SURGE_CONNS:-48}
SIG_SURGE_DELAY_MS=${SIG_SURGE_DELAY_MS:-100}
SIG_SURGE=${SIG_SURGE:-30}
SIG_TAIL=${SIG_TAIL:-30}
SIG_DOWN_WINDOW=${SIG_DOWN_WINDOW:-10s}
SIG_MIN_DWELL=${SIG_MIN_DWELL:-10s}
SIG_WORKERS=${SIG_WORKERS:-8}
SIG_SLOW_MS=${SIG_SLOW_MS:-500}
SIG_SLOW_CONNS=${SIG_SLOW_CONNS:-16}
SIG_SLOW=${SIG_SLOW:-30}
SIG_CPU=${SIG_CPU:-60}
SIG_CPU_BASE=${SIG_CPU_BASE:-30}
SIG_SETTLE_MAX=${SIG_SETTLE_MAX:-40}
SIG_OUT=${SIG_OUT:-${TMPDIR:-/tmp}/gearshift-bench-signals}
SIG_DOC=${SIG_DOC:-}
SIG_APPEND=${SIG_APPEND:-}
SIG_SHIFT=${SIG_SHIFT:-0}
CPUS=$(nproc)
# SIG_SHIFT=auto: at the start of each case, the load per CPU then, rounded
# up to 0.5, is added to every load threshold, so that others' work on a
# shared machine does not shift the gear before the case begins: the rules
# then measure what the case adds to the load. (+N) in the tables.
SHIFT_AUTO=0
shift_now() { awk -v c="$CPUS" '{ v = $1 / c; n = int(v * 2); if (n < v * 2) n++; printf "%.1f", n / 2 }' /proc/loadavg; }
shifted() { awk -v v="$1" -v s="$SIG_SHIFT" 'BEGIN { printf "%.1f", v + s }'; }
set_thresholds() {
	if [ "$SHIFT_AUTO" = 1 ]; then SIG_SHIFT=$(shift_now); fi
	MOD_ENTER=$(shifted "${STACK_MODERATE_ENTER:-1.5}")
	MOD_STAY=$(shifted "${STACK_MODERATE_STAY:-1.0}")
	HEAVY_ENTER=$(shifted "${STACK_HEAVY_ENTER:-3.0}")
	HEAVY_STAY=$(shifted "${STACK_HEAVY_STAY:-2.0}")
}
shift_tag() { if [ "$SHIFT_AUTO" = 1 ]; then printf ' (+%s)' "$SIG_SHIFT"; fi; }
if [ "$SIG_SHIFT" = auto ]; then SHIFT_AUTO=1; fi
set_thresholds
# Settling aims below moderate's stay as it stands at the start of the run.
SIG_SETTLE_LOAD=${SIG_SETTLE_LOAD:-$MOD_STAY}

need_cmds go apache2 varnishd varnishstat curl wrk jq
mkdir -p "$SIG_OUT"
rm -f "$SIG_OUT"/{signals.md,*.yaml,*.log,*.trace.tsv,*.wrk.txt}

signals_down() {
	local rc=$?
	trap - EXIT INT TERM
	stack_down
	exit "$rc"
}
trap signals_down EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# shellcheck source=scripts/bench/signals-lib.sh
. "$(dirname "$0")/signals-lib.sh"

# ---- the cases ----------------------------------------------------------

RESULTS_WORKERS="" RESULTS_RACE=() RESULTS_CPU=() RESULTS_GUARD=() CPU_GOAL="" CPU_CGROUP=""

# race LABEL [DELAY_MS]: the surge until heavy, SIG_RACE_MAX s at most.
race() {
	local label=$1 delay=${2:-$SIG_SURGE_DELAY_MS} t0 load0 st="" i tr heavy secs reason lpc rps maxr goal
	settle
	CFG_NAME=1
	daemon_start "race-${label//[^a-z0-9]/_}-${delay}ms"
	load0="$(load1)$(shift_tag)"
	printf '%s\n' "$TRACE_COLS" >"$SIG_OUT/$CASE.trace.tsv"
	t0=$(now)
	surge_start "$SIG_RACE_MAX" "$SIG_SURGE_CONNS" "$SIG_OUT/$CASE.wrk.txt" "$delay"
	for ((i = 0; i < SIG_RACE_MAX * 2; i++)); do
		st=$(trace_line "$t0")
		[ "$st" != heavy ] || break
		alive "$SURGE_PID" || break
		sleep 0.5
	done
	surge_stop
	tr=$(transitions "$t0")
	heavy=$(printf '%s\n' "$tr" | awk -F'\t' '$3 == "heavy" && $1 >= 0 { print; exit }')
	reason="-" lpc="-" rps="-"
	if [ "$START_STATE" != light ]; then
		secs="n/a: in $START_STATE before the surge (machine load)"
	elif [ -z "$heavy" ]; then
		secs="not within ${SIG_RACE_MAX} s"
	else
		secs=$(printf '%s' "$heavy" | cut -f1)
		lpc=$(printf '%s' "$heavy" | cut -f4)
		rps=$(printf '%s' "$heavy" | cut -f5)
		reason=$(printf '%s' "$heavy" | cut -f8)
	fi
	maxr=$(awk -F'\t' 'NR > 1 && $4 != "-" && $4 + 0 > m { m = $4 + 0 } END { print m + 0 }' "$SIG_OUT/$CASE.trace.tsv")
	goal="reference"
	case $label in client_rps*)
		goal="not met"
		if [ -n "$heavy" ] && [ "$START_STATE" = light ] && ! lt 3 "$secs"; then goal="met"; fi
		;;
	esac
	daemon_stop
	RESULTS_RACE+=("$label	$delay	$load0	$secs	$lpc	$rps	$maxr	$reason	$goal")
	say "signals: race $label (pause ${delay} ms): heavy after: $secs ($reason)"
}

case_race() {
	race "load rule alone"
	CFG_HEAVY_ENTER="client_rps: $SIG_RPS_ENTER" CFG_HEAVY_STAY="client_rps: $SIG_RPS_STAY"
	race "client_rps >= $SIG_RPS_ENTER"
	# The demo's own pause: a keep-alive client back within Varnish's
	# timeout_linger keeps its worker, whose counters reach MAIN.client_req
	# only when the connection closes.
	if [ "$SIG_SURGE_DELAY_MS" != 10 ]; then
		CFG_HEAVY_ENTER="client_rps: $SIG_RPS_ENTER" CFG_HEAVY_STAY="client_rps: $SIG_RPS_STAY"
		race "client_rps >= $SIG_RPS_ENTER" 10
	fi
}

case_workers() {
	local t0 load0 out i st tr heavy secs="" reason="-" lpc="-" maxl maxb maxt verdict rps until nob
	apache_restart small
	settle
	CFG_NAME=1
	CFG_SENSOR="sensor:
  apache_status: $ORIGIN/server-status?auto
  probe: { url: $ORIGIN/, timeout: 1s }"
	CFG_HEAVY_ENTER="apache_busy_ratio: 0.9, backend_ttfb_ms: 400"
	CFG_HEAVY_STAY="apache_busy_ratio: 0.5, backend_ttfb_ms: 200"
	daemon_start workers
	load0="$(load1)$(shift_tag)"
	out="$SIG_OUT/$CASE.wrk.txt"
	printf '%s\n' "$TRACE_COLS" >"$SIG_OUT/$CASE.trace.tsv"
	t0=$(now)
	wrk -t2 -c"$SIG_SLOW_CONNS" -d"${SIG_SLOW}s" --timeout 10s "$SITE/slow.php" >"$out" 2>&1 &
	SURGE_PID=$!
	STACK_PIDS+=("$SURGE_PID")
	for ((i = 0; i < SIG_SLOW * 2; i++)); do
		st=$(trace_line "$t0")
		alive "$SURGE_PID" || break
		sleep 0.5
	done
	surge_stop
	tr=$(transitions "$t0")
	heavy=$(printf '%s\n' "$tr" | awk -F'\t' '$3 == "heavy" && $1 >= 0 { print; exit }')
	if [ "$START_STATE" != light ]; then
		secs="n/a: in $START_STATE before the load (machine load)"
	elif [ -z "$heavy" ]; then
		secs="not within ${SIG_SLOW} s"
	else
		secs=$(printf '%s' "$heavy" | cut -f1)
		lpc=$(printf '%s' "$heavy" | cut -f4)
		reason=$(printf '%s' "$heavy" | cut -f8)
	fi
	# The highest figures of the trace from the load's start until heavy (all
	# of it when heavy did not come), and how often mod_status had no answer.
	until=$(printf '%s' "$heavy" | cut -f1)
	maxl=$(trace_max 3 "${until:-1e9}")
	maxb=$(trace_max 5 "${until:-1e9}")
	maxt=$(trace_max 6 "${until:-1e9}")
	nob=$(awk -F'\t' -v u="${until:-1e9}" 'NR > 1 && $1 + 0 <= u + 0 { n++; if ($5 == "-") z++ } END { printf "%d of %d", z, n }' "$SIG_OUT/$CASE.trace.tsv")
	rps=$(wrk_rps "$out")
	verdict="not met"
	if [ -n "$heavy" ] && [ "$START_STATE" = light ] && lt "$lpc" "$HEAVY_ENTER"; then verdict="met"; fi
	daemon_stop
	RESULTS_WORKERS="$load0	$secs	$reason	$lpc	$maxl	$maxb	$nob	$maxt	${rps:-?}	$verdict"
	say "signals: workers: heavy after: $secs ($reason), load_per_cpu at most $maxl"
	apache_restart
}

# cpu_window LABEL SECONDS: the running daemon's CPU over SECONDS, from
# /proc/PID/stat: utime stime cutime cstime are fields 14-17, counted here
# after the ")" that ends comm. Appends a row to RESULTS_CPU.
cpu_window() {
	local label=$1 secs=$2 hz a b t0 t1 nulls
	hz=$(getconf CLK_TCK)
	sleep 2 # past the start: the profiles loaded, the first samples taken
	a=$(sed 's/.*) //' "/proc/$GS_PID/stat" | awk '{ print $12, $13, $14, $15 }')
	t0=$(now)
	sleep "$secs"
	b=$(sed 's/.*) //' "/proc/$GS_PID/stat" | awk '{ print $12, $13, $14, $15 }')
	t1=$(now)
	nulls=$(gs status --json | jq -r '[.sample | to_entries[] | select(.value == null) | .key] | join(", ")')
	RESULTS_CPU+=("$(awk -v a="$a" -v b="$b" -v hz="$hz" -v d="$(calc "$t1 - $t0")" -v l="$label" -v n="${nulls:-none}" '
		BEGIN { split(a, x); split(b, y)
		        self = ((y[1] + y[2]) - (x[1] + x[2])) / hz; kids = ((y[3] + y[4]) - (x[3] + x[4])) / hz
		        printf "%s\t%.0f\t%.2f\t%.2f\t%.2f\t%.1f\t%s", l, d, self / d * 100, kids / d * 100,
		               (self + kids) / d * 100, (self + kids) / d * 1000, n }')")
}

case_cpu() {
	local inject="$STACK_DIR/injected" mnt rel total
	settle
	echo 0 >"$inject"
	# The cgroup this script runs in, under the cgroup v2 mount.
	mnt=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/self/mounts)
	rel=$(awk -F: '$1 == "0" { print $3 }' /proc/self/cgroup)
	CPU_CGROUP=""
	if [ -n "$mnt" ]; then CPU_CGROUP="${mnt%/}${rel%/}"; fi
	CFG_NAME=1
	CFG_SENSOR="sensor:
  cgroup: ${CPU_CGROUP:-\"\"}
  apache_status: $ORIGIN/server-status?auto
  probe: { url: $ORIGIN/, timeout: 1s }
  inject_file: $inject"
	daemon_start cpu
	cpu_window "every source on" "$SIG_CPU"
	daemon_stop
	total=$(printf '%s' "${RESULTS_CPU[0]}" | cut -f5)
	CPU_GOAL="not met"
	if lt "$total" 0.5; then CPU_GOAL="met"; fi
	# The same daemon without any optional source: what the loop costs alone.
	daemon_start cpu-base
	cpu_window "no optional source" "$SIG_CPU_BASE"
	daemon_stop
	say "signals: cpu: $total % of a core with every source on; $(printf '%s' "${RESULTS_CPU[1]}" | cut -f5) % without"
}

# guard LABEL RATIO: the demo's surge, SIG_SURGE s, then SIG_TAIL s.
guard() {
	local label=$1 ratio=$2 t0 load0 i end tr ups downs reent during climbs seq rps goal
	settle
	CFG_NAME=1 CFG_GUARD=$ratio CFG_DOWN_WINDOW=$SIG_DOWN_WINDOW CFG_MIN_DWELL=$SIG_MIN_DWELL
	daemon_start "guard-$label"
	load0="$(load1)$(shift_tag)"
	printf '%s\n' "$TRACE_COLS" >"$SIG_OUT/$CASE.trace.tsv"
	t0=$(now)
	surge_start "$SIG_SURGE" "$SIG_SURGE_CONNS" "$SIG_OUT/$CASE.wrk.txt"
	while alive "$SURGE_PID"; do
		trace_line "$t0" >/dev/null
		sleep 1
	done
	end=$(calc "$(now) - $t0")
	surge_stop
	for ((i = 0; i < SIG_TAIL; i++)); do
		trace_line "$t0" >/dev/null
		sleep 1
	done
	tr=$(transitions "$t0")
	# Ups and downs from the surge's start on; a re-entry is a move up after
	# a move down while wrk still ran.
	# A climb is a run of moves up (light→moderate→heavy is one).
	read -r ups downs during reent climbs < <(printf '%s\n' "$tr" | awk -F'\t' -v end="$end" '
		function rank(g) { return g == "heavy" ? 2 : g == "moderate" ? 1 : 0 }
		$1 >= 0 && NF >= 3 {
			if (rank($3) > rank($2)) { u++; if (!up_last) c++; up_last = 1; if (down_seen && $1 <= end) r++ }
			else { d++; up_last = 0; if ($1 <= end) { dd++; down_seen = 1 } } }
		END { print u + 0, d + 0, dd + 0, r + 0, c + 0 }')
	goal="not met"
	if [ "$START_STATE" = light ] && [ "$climbs" = 1 ] && [ "$during" = 0 ] && [ "$downs" -ge 1 ]; then goal="met"; fi
	seq=$(printf '%s\n' "$tr" | awk -F'\t' '$1 >= 0 && NF >= 3 { printf "%s%s→%s +%ss", (n++ ? ", " : ""), $2, $3, $1 }')
	rps=$(wrk_rps "$SIG_OUT/$CASE.wrk.txt")
	if [ "$START_STATE" != light ]; then seq="n/a: in $START_STATE before the surge (machine load); ${seq}"; fi
	daemon_stop
	RESULTS_GUARD+=("$label	$ratio	$load0	$climbs	$ups	$downs	$during	$reent	${seq:-none}	${rps:-?}	$(calc "$end")	$goal")
	say "signals: guard $label: $ups up, $downs down ($during while wrk ran), $reent re-entries: $seq"
}

case_guard() {
	guard off 0
	guard on 0.6
}

# ---- the run ------------------------------------------------------------

thresholds_note() {
	if [ "$SHIFT_AUTO" = 1 ]; then
		printf ' for each case the demo'"'"'s (moderate %s/%s, heavy %s/%s) raised by the load per CPU at its start, rounded up to 0.5: the (+N) beside its load average (SIG_SHIFT=auto)' \
			"${STACK_MODERATE_ENTER:-1.5}" "${STACK_MODERATE_STAY:-1.0}" "${STACK_HEAVY_ENTER:-3.0}" "${STACK_HEAVY_STAY:-2.0}"
	elif [ "$MOD_ENTER/$MOD_STAY/$HEAVY_ENTER/$HEAVY_STAY" = 1.5/1.0/3.0/2.0 ]; then
		printf ' moderate 1.5/1.0, heavy 3.0/2.0 (the demo'"'"'s)'
	else
		printf ' moderate %s/%s, heavy %s/%s (set for this run; the demo'"'"'s are 1.5/1.0 and 3.0/2.0)' "$MOD_ENTER" "$MOD_STAY" "$HEAVY_ENTER" "$HEAVY_STAY"
	fi
}

report() {
	local commit dirty l r
	commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
	dirty=""
	if [ -n "$(git -C "$ROOT" status --porcelain 2>/dev/null)" ]; then dirty=" (working tree with changes)"; fi
	{
		echo "## Signals: the request rate, the traffic guard, Apache's workers, the daemon's cost"
		echo
		echo "Measured $(date -u '+%Y-%m-%d %H:%M UTC') with \`scripts/bench/signals.sh\` at commit $commit$dirty:"
		echo "$CPUS CPUs, $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo);" \
			"$(varnishd -V 2>&1 | head -1 | sed 's/^varnishd //'), $(apache2 -v 2>/dev/null | awk -F': ' '/version/ { print $2 }')."
		echo "Load average before the run: $LOAD_BEFORE (the machine is shared: others' work counts in load_per_cpu)."
		echo "The run took $((SECONDS - RUN_START)) s. Load thresholds (load_per_cpu, enter/stay):$(thresholds_note); up_confirm 3, poll_interval 1s."
		echo
		if [ ${#RESULTS_RACE[@]} -gt 0 ]; then
			echo "### Seconds from a wrk surge to heavy (goal: ≤ 3 s with the request-rate rule, ~6 s on load)"
			echo
			echo "The demo's surge mix (scripts/demo/surge.lua), $SIG_SURGE_CONNS connections each pausing the given ms between requests, until the daemon is in heavy; \`varnish.targets[].name\` set in every row. \`client_rps\` rule: \`states.heavy.enter.client_rps: $SIG_RPS_ENTER\` (stay $SIG_RPS_STAY) beside the load rule."
			echo
			echo "| heavy's rule | pause ms | load avg at start | seconds to heavy | load_per_cpu then | client_rps then | client_rps max seen | reason | goal ≤ 3 s |"
			echo "|---|---:|---:|---:|---:|---:|---:|---|---|"
			for r in "${RESULTS_RACE[@]}"; do
				printf '%s\n' "$r" | awk -F'\t' '{ printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6, $7, $8, $9 }'
			done
			echo
		fi
		if [ ${#RESULTS_GUARD[@]} -gt 0 ]; then
			echo "### Transitions of one ${SIG_SURGE} s surge, without and with the traffic guard (goal: 1 up, 1 down, no re-entry while wrk runs)"
			echo
			echo "The demo's surge mix, $SIG_SURGE_CONNS connections pausing $SIG_SURGE_DELAY_MS ms, then ${SIG_TAIL} s without traffic; down_window $SIG_DOWN_WINDOW, min_dwell $SIG_MIN_DWELL. Times from the surge's start."
			echo
			echo "| guard | down_traffic_ratio | load avg at start | climbs | moves up | moves down | down while wrk ran | re-entries while wrk ran | wrk req/s | transitions | goal |"
			echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"
			for r in "${RESULTS_GUARD[@]}"; do
				printf '%s\n' "$r" | awk -F'\t' '{ printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s (wrk ended +%ss) | %s |\n", $1, $2, $3, $4, $5, $6, $7, $8, $10, $9, $11, $12 }'
			done
			echo
			echo "A climb is a run of moves up (light→moderate→heavy is one); the goal is met by one climb, no move down while wrk ran and one after it."
			echo
		fi
		if [ -n "$RESULTS_WORKERS" ]; then
			echo "### Idle CPU, busy workers (goal: heavy on the workers or the latency, load_per_cpu low)"
			echo
			echo "Apache with $SIG_WORKERS workers (prefork) and mod_status; wrk -c$SIG_SLOW_CONNS for ${SIG_SLOW} s of \`/slow.php\` through Varnish, which sleeps $SIG_SLOW_MS ms like a page waiting on its database."
			echo "Heavy's rule: \`apache_busy_ratio: 0.9, backend_ttfb_ms: 400\` beside the load; the probe is \`/\` on Apache."
			echo
			echo "| load avg at start | seconds to heavy | reason | load_per_cpu then | load_per_cpu max | apache_busy_ratio max | apache_busy_ratio unavailable | backend_ttfb_ms max | wrk req/s | goal |"
			echo "|---:|---:|---|---:|---:|---:|---:|---:|---:|---|"
			printf '%s\n' "$RESULTS_WORKERS" | awk -F'\t' '{ printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6, $7, $8, $9, $10 }'
			echo
			echo "Maxima and unavailable readings (of the half-second status polls) are from the load's start until heavy. The goal counts as met when heavy came with load_per_cpu below heavy's load threshold."
			echo
		fi
		if [ ${#RESULTS_CPU[@]} -gt 0 ]; then
			echo "### The daemon's CPU with every source on, one sample a second (goal: < 0.5 % of a core)"
			echo
			echo "\`gearshift run\` with no traffic: its own utime+stime and its children's cutime+cstime (varnishstat), from /proc/PID/stat over the window."
			echo "Every source: \`varnish.targets[].name\`, \`sensor.cgroup: ${CPU_CGROUP:-none}\`, \`apache_status\`, \`probe\` (\`/\` on Apache), \`inject_file\`. Goal: **$CPU_GOAL**."
			echo
			echo "| daemon | seconds | gearshift % of a core | children % | total % | ms of CPU per sample | signals without a value |"
			echo "|---|---:|---:|---:|---:|---:|---|"
			for r in "${RESULTS_CPU[@]}"; do
				printf '%s\n' "$r" | awk -F'\t' '{ printf "| %s | %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6, $7 }'
			done
			echo
		fi
	} >"$SIG_OUT/signals.md"
	if [ -n "$SIG_DOC" ]; then cp "$SIG_OUT/signals.md" "$SIG_DOC"; fi
	if [ -n "$SIG_APPEND" ]; then replace_section "$SIG_APPEND" "$SIG_OUT/signals.md"; fi
}

. "$(dirname "$0")/section.sh"

RUN_START=$SECONDS
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
say "signals: load average before: $LOAD_BEFORE; cases: $SIG_CASES; results in $SIG_OUT"
build_gearshift
stack_init
apache_restart
stack_varnish
SESSIONS=""
for u in alice user1 user2 user3 user4 user5 user6 user7 user8 user9; do SESSIONS="$SESSIONS $(login "$u")"; done

! has_case workers || case_workers
! has_case race || case_race
! has_case cpu || case_cpu
! has_case guard || case_guard
report
cat "$SIG_OUT/signals.md"
