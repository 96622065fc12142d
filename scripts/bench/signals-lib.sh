# The helpers of scripts/bench/signals.sh: sourced by it, with its settings
# (SIG_*, the stack's ports and directories) set.
# shellcheck shell=bash

now() { date +%s.%N; }
# calc EXPR: awk arithmetic, printed with up to two decimals.
calc() { awk "BEGIN { v = $1; printf \"%.2f\", v }"; }
# lt A B: true when the number A is below B.
lt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 < b + 0) }'; }
load1() { awk '{ print $1 }' /proc/loadavg; }
has_case() { case " $SIG_CASES " in *" $1 "*) return 0 ;; esac; return 1; }

# settle waits until Load1 per CPU is below SIG_SETTLE_LOAD, SIG_SETTLE_MAX
# seconds at most (others' work on a shared machine may keep it above).
settle() {
	local i
	for ((i = 0; i < SIG_SETTLE_MAX; i++)); do
		lt "$(calc "$(load1) / $CPUS")" "$SIG_SETTLE_LOAD" && break
		sleep 1
	done
	say "signals: load average $(load1) after settling ${i}s"
}

# apache_lines [small]: mod_status on /server-status for loopback, the slow
# page's delay and, with "small", a prefork of SIG_WORKERS workers.
apache_lines() {
	cat <<EOF
LoadModule status_module /usr/lib/apache2/modules/mod_status.so
LoadModule authz_host_module /usr/lib/apache2/modules/mod_authz_host.so
<Location "/server-status">
    SetHandler server-status
    Require local
</Location>
SetEnv DEMO_SLOW_MS $SIG_SLOW_MS
EOF
	if [ "${1:-}" = small ]; then
		cat <<EOF
StartServers            $SIG_WORKERS
MinSpareServers         1
MaxSpareServers         $SIG_WORKERS
ServerLimit             $SIG_WORKERS
MaxRequestWorkers       $SIG_WORKERS
EOF
	fi
}

# apache_restart [small]: Apache again on the same port with other lines.
apache_restart() {
	local keep=() p
	if [ -n "${APACHE_PID:-}" ]; then
		stop_pid "$APACHE_PID"
		for p in "${STACK_PIDS[@]}"; do [ "$p" = "$APACHE_PID" ] || keep+=("$p"); done
		STACK_PIDS=("${keep[@]}")
	fi
	apache_lines "${1:-}" >"$STACK_DIR/signals-apache.conf"
	STACK_SITE_LINES="Include $STACK_DIR/signals-apache.conf"
	stack_apache
	curl -sf -o /dev/null --max-time 5 "$ORIGIN/server-status?auto" || die "mod_status does not answer on $ORIGIN/server-status"
}

# The config of one case, from CFG_* set by the caller: CFG_NAME=1 names the
# target (Varnish's traffic signals), CFG_HEAVY_ENTER / CFG_HEAVY_STAY add
# rules to heavy's, CFG_SENSOR is a sensor: block, CFG_GUARD the guard's ratio.
stack_gearshift_config() {
	local name_line="" guard=""
	if [ "${CFG_NAME:-0}" = 1 ]; then name_line="      name: $STACK_DIR/varnish"; fi
	if [ -n "${CFG_GUARD:-}" ]; then guard=", down_traffic_ratio: $CFG_GUARD"; fi
	cat >"$GS_CONFIG" <<EOF
# gearshift config of the signals benchmark, case $CASE (scripts/bench/signals.sh).
poll_interval: 1s
fast_window: 10s
varnish:
  timeout: 5s
  targets:
    - admin: 127.0.0.1:$ADMIN_PORT
      secret_file: $STACK_DIR/secret
$name_line
backend: { host: 127.0.0.1, port: $APACHE_PORT }
${CFG_SENSOR:-}
states:
  moderate: { enter: { load_per_cpu: $MOD_ENTER }, stay: { load_per_cpu: $MOD_STAY } }
  heavy:    { enter: { load_per_cpu: $HEAVY_ENTER${CFG_HEAVY_ENTER:+, $CFG_HEAVY_ENTER} }, stay: { load_per_cpu: $HEAVY_STAY${CFG_HEAVY_STAY:+, $CFG_HEAVY_STAY} } }
hysteresis: { up_confirm: 3, down_window: ${CFG_DOWN_WINDOW:-20s}, min_dwell: ${CFG_MIN_DWELL:-15s}$guard }
on_exit: light
control: { socket: $STACK_DIR/gs-$CASE.sock }
log: { file: $SIG_OUT/$CASE.log, level: info }
pid_file: $STACK_DIR/gs-$CASE.pid
EOF
}

# daemon_start CASE: a fresh `gearshift run` with this case's config (CFG_*),
# once Varnish serves one of its profiles; START_STATE is its gear then.
# A daemon that others' work on the machine has shifted up by then is
# stopped (back to light) and started once more after another settle.
daemon_start() {
	CASE=$1
	GS_CONFIG="$SIG_OUT/$CASE.yaml"
	set_thresholds
	stack_gearshift "$STACK_DIR/gs-$CASE.stderr"
	sleep 3 # a baseline for the rates: two samples at least
	START_STATE=$(gs status --json | jq -r .state)
	if [ "$START_STATE" != light ] && [ "${2:-}" != again ]; then
		say "signals: $CASE began in $START_STATE (load average $(load1)): once more after settling"
		gs_stop
		settle
		daemon_start "$1" again
	fi
}

gs_stop() {
	local keep=() p
	stop_pid "$GS_PID"
	for p in "${STACK_PIDS[@]}"; do [ "$p" = "$GS_PID" ] || keep+=("$p"); done
	STACK_PIDS=("${keep[@]}")
}

daemon_stop() {
	gs_stop
	CFG_NAME=0 CFG_HEAVY_ENTER="" CFG_HEAVY_STAY="" CFG_SENSOR="" CFG_GUARD="" CFG_DOWN_WINDOW="" CFG_MIN_DWELL=""
}

# trace_line T0: one line of `status --json` to the case's trace, seconds
# since T0 first; prints the state.
TRACE_COLS="t_s	state	load_per_cpu	client_rps	apache_busy_ratio	backend_ttfb_ms	reason"
trace_line() {
	local t
	t=$(calc "$(now) - $1")
	gs status --json 2>/dev/null | jq -r --arg t "$t" '[$t, .state, .sample.load_per_cpu,
		.sample.client_rps, .sample.apache_busy_ratio, .sample.backend_ttfb_ms, .reason]
		| map(if . == null then "-" else tostring end) | @tsv' | tee -a "$SIG_OUT/$CASE.trace.tsv" | cut -f2
}

# transitions T0: the case's state changes as TSV: seconds since T0, from,
# to, load_per_cpu, client_rps, apache_busy_ratio, backend_ttfb_ms, reason.
transitions() {
	gs logs --transitions --json -n 1000 2>/dev/null | jq -r --argjson t0 "$1" '
		def epoch: (sub("\\.[0-9]+Z$"; "Z") | fromdateiso8601)
			+ ((capture("(?<f>\\.[0-9]+)Z$").f // "0") | tonumber);
		select(.msg == "state change")
		| [((.ts | epoch) - $t0 | . * 10 | round / 10), .from, .to, .load_per_cpu, .client_rps,
		   .apache_busy_ratio, .backend_ttfb_ms, .reason]
		| map(if . == null then "-" else tostring end) | @tsv'
}

# surge_start SECONDS CONNS OUT [DELAY_MS]: the demo's wrk surge (its mix,
# each connection pausing DELAY_MS, default SIG_SURGE_DELAY_MS, between
# requests) in the background.
surge_start() {
	DEMO_SESSIONS="$SESSIONS" DEMO_STATICS="/style.css /logo.png" DEMO_NEWS=/news.php \
		DEMO_SURGE_DELAY_MS="${4:-$SIG_SURGE_DELAY_MS}" \
		wrk -t2 -c"$2" -d"$1s" --timeout 10s --latency -s "$DEMO_SRC/surge.lua" "$SITE/" >"$3" 2>&1 &
	SURGE_PID=$!
	STACK_PIDS+=("$SURGE_PID")
}

surge_stop() {
	local keep=() p
	stop_pid "$SURGE_PID"
	for p in "${STACK_PIDS[@]}"; do [ "$p" = "$SURGE_PID" ] || keep+=("$p"); done
	STACK_PIDS=("${keep[@]}")
}

# trace_max COLUMN UNTIL: the highest number in a column of the case's
# trace, over the rows up to UNTIL seconds.
trace_max() {
	awk -F'\t' -v c="$1" -v u="$2" 'NR > 1 && $1 + 0 <= u + 0 && $c != "-" && $c + 0 > m { m = $c + 0 } END { print m + 0 }' "$SIG_OUT/$CASE.trace.tsv"
}

wrk_rps() { awk '/Requests\/sec/ { print $2 }' "$1"; }

# gear_rank NAME: light 0, moderate 1, heavy 2.
gear_rank() { case $1 in light) echo 0 ;; moderate) echo 1 ;; heavy) echo 2 ;; *) echo -1 ;; esac; }
