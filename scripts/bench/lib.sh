# The helpers of scripts/bench.sh: sourced by it after demo/lib.sh, with its
# settings (BENCH_*, RESULTS, the stack's ports and directories) set.
# shellcheck shell=bash

now() { date +%s.%N; }
CLK_TCK=$(getconf CLK_TCK)

# ms VALUE prints a wrk latency ("812.00us", "25.31ms", "1.02s", "1.5m") in ms.
ms() {
	awk -v v="$1" 'BEGIN {
		n = v + 0
		if (v ~ /us$/) n /= 1000; else if (v ~ /ms$/) n += 0; else if (v ~ /m$/) n *= 60000; else if (v ~ /s$/) n *= 1000
		printf "%.2f", n }'
}

varnish_counter() {
	varnishstat -n "$STACK_DIR/varnish" -1 -f "$1" 2>/dev/null | awk '{ print $2 + 0 }'
}

# json_field JSON NAME: the first scalar NAME in JSON.
json_field() {
	printf '%s' "$1" | tr -d '\n ' | sed -n "s/.*\"$2\":\"\{0,1\}\([^\",}]*\).*/\1/p" | head -1
}

# ---- the daemon --------------------------------------------------------------

# write_config [fast_window]: the default config, only the stack's addresses
# set (and fast_window when given).
write_config() {
	{
		say "# gearshift config for the benchmark: the defaults, this stack's addresses."
		say "poll_interval: 1s"
		[ -z "${1:-}" ] || say "fast_window: $1"
		cat <<EOF
varnish:
  timeout: 5s
  targets:
    - admin: 127.0.0.1:$ADMIN_PORT
      secret_file: $STACK_DIR/secret
backend: { host: 127.0.0.1, port: $APACHE_PORT }
on_exit: keep
control: { socket: $STACK_DIR/gearshift.sock }
log: { file: $STACK_DIR/gearshift.log, level: info }
pid_file: $STACK_DIR/gearshift.pid
EOF
	} >"$GS_CONFIG"
}

# restart_daemon [fast_window]: stop the daemon (Varnish keeps its gear) and
# start it again on a config with that fast_window.
restart_daemon() {
	gs force light --for 30m >/dev/null || die "gearshift force light failed"
	done_pid "$GS_PID"
	write_config "${1:-}"
	stack_gearshift "$STACK_DIR/gearshift.stderr"
	gs auto >/dev/null
}

# settle: wait (BENCH_SETTLE_MAX at most) until gearshift is in light, in
# auto, with load_per_cpu under moderate's default enter (0.70). Sets
# SETTLE_NOTE to what it found.
settle() {
	local t0=$SECONDS st lpc js
	gs auto >/dev/null
	while :; do
		js=$(gs status --json 2>/dev/null || true)
		st=$(json_field "$js" state)
		lpc=$(json_field "$js" load_per_cpu)
		if [ "$st" = light ] && awk -v l="${lpc:-9}" 'BEGIN { exit !(l < 0.7) }'; then
			SETTLE_NOTE="light, load_per_cpu $lpc after $((SECONDS - t0)) s of waiting"
			return 0
		fi
		if [ $((SECONDS - t0)) -ge "$BENCH_SETTLE_MAX" ]; then
			SETTLE_NOTE="$st, load_per_cpu $lpc: not calm after $BENCH_SETTLE_MAX s of waiting, started anyway"
			return 0
		fi
		sleep 2
	done
}

# pin GEAR: `gearshift force GEAR`, then wait until Varnish answers with it.
pin() {
	local gear=$1 i
	gs force "$gear" --for 30m >/dev/null || die "gearshift force $gear failed"
	for i in $(seq 1 100); do
		[ "$(profile_header /style.css)" = "$gear" ] && return 0
		sleep 0.1
	done
	die "Varnish does not answer with X-Gearshift-Profile: $gear after gearshift force $gear"
}

# forget PID: a process of ours that has ended, so stack_down never signals
# whatever process reuses its id later.
forget() {
	local keep=() p
	for p in "${STACK_PIDS[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
	STACK_PIDS=("${keep[@]}")
}

# done_pid PID: stop it (when still running) and forget it.
done_pid() {
	stop_pid "$1"
	forget "$1"
}

fresh_cache() {
	varnishadm -T "127.0.0.1:$ADMIN_PORT" -S "$STACK_DIR/secret" ban req.url '~' . >/dev/null
}

# check_isolation RUN: each user gets their own page, an anonymous visitor
# nobody's (a security property: docs/gears.md#what-is-never-shared-and-why),
# whatever the gear.
check_isolation() {
	local i=0 s page
	for s in $SESSIONS; do
		i=$((i + 1))
		[ "$i" -le 3 ] || break
		page=$(curl -s -b "PHPSESSID=$s" "$SITE/")
		case $page in *"<b>bench$i</b>"*) ;; *) die "$1: bench$i was served someone else's page" ;; esac
	done
	page=$(curl -s "$SITE/")
	case $page in *"anonymous visitor"*) ;; *) die "$1: an anonymous visitor was served a logged-in page" ;; esac
}

# ---- one run -----------------------------------------------------------------

# sampler FILE: every second, one line: time, gear, load_per_cpu,
# MAIN.backend_req, the daemon's CPU ticks and RSS (kB).
sampler() {
	local js st lpc be cpu rss
	while :; do
		js=$(gs status --json 2>/dev/null || true)
		st=$(json_field "$js" state)
		lpc=$(json_field "$js" load_per_cpu)
		be=$(varnish_counter MAIN.backend_req)
		cpu=$(awk '{ print $14 + $15 }' "/proc/$GS_PID/stat" 2>/dev/null || echo 0)
		rss=$(awk '/^VmRSS/ { print $2 }' "/proc/$GS_PID/status" 2>/dev/null || echo 0)
		printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$(now)" "${st:--}" "${lpc:-0}" "${be:-0}" "$cpu" "$rss" >>"$1"
		sleep 1
	done
}

# load SECONDS CONNS DELAY_MS OUT [background]: one bounded wrk run of the mix.
load() {
	DEMO_SESSIONS="$SESSIONS" DEMO_SURGE_DELAY_MS=$3 \
		wrk -t2 -c"$2" -d"$1s" --timeout 10s --latency -s "$SURGE_LUA" "$URL/" >"$4" 2>&1
}

# wrk_sum FILE...: requests, non-2xx, socket errors over wrk reports.
wrk_sum() {
	awk '/requests in/ { r += $1 } /Non-2xx/ { b += $NF }
		/Socket errors/ { gsub(/[^0-9 ]/, " "); for (i = 1; i <= NF; i++) e += $i }
		END { printf "%d\t%d\t%d\n", r, b, e }' "$@"
}

# run NAME: the surge against $URL, in the gear set before. Appends a row to
# $RESULTS and leaves $BENCH_OUT/{samples,ncsa,wrk}-NAME.*.
run() {
	local name=$1 until_light=${2:-0} spid npid wpid cpid t_start t_surge t_end t_stop b0 b1 seg=0
	local samples="$BENCH_OUT/samples-$name.tsv" ncsa="$BENCH_OUT/ncsa-$name.log"
	: >"$samples"
	: >"$ncsa"
	say "bench: run '$name': calm ${BENCH_CALM}s, surge ${BENCH_SURGE}s (wrk -c$BENCH_SURGE_CONNS, ${BENCH_SURGE_DELAY_MS} ms pauses), calm again"
	sampler "$samples" &
	spid=$!
	STACK_PIDS+=("$spid")
	if [ "$URL" = "$SITE" ]; then
		varnishncsa -n "$STACK_DIR/varnish" -F '%{%s}t %D %s %{Varnish:handling}x' >"$ncsa" 2>/dev/null &
		npid=$!
		STACK_PIDS+=("$npid")
	fi
	t_start=$(now)
	load "$BENCH_CALM" "$BENCH_CALM_CONNS" "$BENCH_CALM_DELAY_MS" "$BENCH_OUT/wrk-$name-calm0.txt"
	b0=$(varnish_counter MAIN.backend_req)
	t_surge=$(now)
	load "$BENCH_SURGE" "$BENCH_SURGE_CONNS" "$BENCH_SURGE_DELAY_MS" "$BENCH_OUT/wrk-$name-surge.txt" &
	wpid=$!
	STACK_PIDS+=("$wpid")
	load "$BENCH_SURGE" "$BENCH_CALM_CONNS" "$BENCH_CALM_DELAY_MS" "$BENCH_OUT/wrk-$name-calm1.txt" &
	cpid=$!
	STACK_PIDS+=("$cpid")
	wait "$wpid" || die "wrk (surge) failed: $(cat "$BENCH_OUT/wrk-$name-surge.txt")"
	wait "$cpid" || die "wrk (calm) failed: $(cat "$BENCH_OUT/wrk-$name-calm1.txt")"
	forget "$wpid"
	forget "$cpid"
	t_end=$(now)
	b1=$(varnish_counter MAIN.backend_req)
	while :; do
		seg=$((seg + 1))
		load "$BENCH_CALM" "$BENCH_CALM_CONNS" "$BENCH_CALM_DELAY_MS" "$BENCH_OUT/wrk-$name-calm$((seg + 1)).txt"
		[ "$until_light" = 1 ] || break
		[ "$(status_field state)" != light ] || break
		awk -v a="$t_end" -v b="$(now)" -v m="$BENCH_DOWN_MAX" 'BEGIN { exit !(b - a < m) }' || break
	done
	t_stop=$(now)
	done_pid "$spid"
	[ -z "${npid:-}" ] || done_pid "$npid"
	[ "$URL" != "$SITE" ] || check_isolation "$name"
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$t_start" "$t_surge" "$t_end" "$t_stop" "$b0" "$b1" >>"$BENCH_OUT/times.tsv"
}

# transitions BASE T0 T1: the state changes gearshift logged between T0 and
# T1, as lines "seconds-since-BASE from to".
transitions() {
	local line ts from to
	gs logs -n 0 --transitions --json 2>/dev/null | while IFS= read -r line; do
		ts=$(printf '%s' "$line" | sed -n 's/.*"ts":"\([^"]*\)".*/\1/p')
		from=$(printf '%s' "$line" | sed -n 's/.*"from":"\([^"]*\)".*/\1/p')
		to=$(printf '%s' "$line" | sed -n 's/.*"to":"\([^"]*\)".*/\1/p')
		[ -n "$ts" ] || continue
		awk -v t="$(date -d "$ts" +%s.%N)" -v z="$1" -v a="$2" -v b="$3" -v f="$from" -v o="$to" \
			'BEGIN { if (t >= a && t <= b) printf "%.1f %s %s\n", t - z, f, o }'
	done
}

describe_machine() {
	local cpu kernel os
	cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
	kernel=$(uname -r)
	os=$(. /etc/os-release 2>/dev/null && echo "${PRETTY_NAME:-}")
	printf '%s CPUs (%s), %s GiB RAM, %s, kernel %s; ' "$(nproc)" "${cpu:-unknown}" \
		"$(awk '/^MemTotal/ { printf "%.0f", $2 / 1048576 }' /proc/meminfo)" "${os:-Linux}" "$kernel"
	printf '%s, %s, PHP %s, %s, %s\n' "$(varnishd -V 2>&1 | head -1 | sed 's/ (\(varnish-[0-9.]*\).*/ \1/; s/^varnishd *//')" \
		"$(apache2 -v | sed -n 's/^Server version: *//p')" "$(php -r 'echo PHP_VERSION;' 2>/dev/null || echo '?')" \
		"$(wrk -v 2>&1 | head -1 | awk '{ print $1, $2 }')" "$(go version | awk '{ print $3 }')"
}
