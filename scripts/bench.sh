#!/usr/bin/env bash
# make bench: gearshift's end-to-end benchmark on real Apache + PHP through
# Varnish, on loopback. The same stack as the demo (scripts/demo/lib.sh) with
# the gearshift daemon driving Varnish; each gear is pinned with
# `gearshift force`, so what is measured is the product's own VCL profiles.
#
# For each gear (light, moderate, heavy), wrk measures requests/s and latency
# (p50/p99 from --latency) of:
#   /           anonymous        the PHP home page, PHP's no-cache headers
#   /           logged in        the same page with PHPSESSID (BENCH_USERS users)
#   /news.php   anonymous        a PHP page that sends Cache-Control: max-age=30
# plus Apache direct (no Varnish) as the baseline, and the Go micro-benchmarks
# of controller/varnishadm (native vcl.use vs spawning varnishadm). Everything
# runs in one go and is printed as one table; ratios compare figures measured
# side by side in this run. A PNG chart is drawn when gnuplot is installed.
#
# Knobs (environment): BENCH_SECONDS (6, per wrk run), BENCH_CONNS (16),
# BENCH_THREADS (2), BENCH_USERS (20), BENCH_GO (1; 0 skips the Go
# micro-benchmarks), BENCH_GO_ARGS (-benchtime 2000x), BENCH_OUT (directory
# for the results; default ${TMPDIR:-/tmp}/gearshift-bench), GEARSHIFT.
set -euo pipefail
STACK_NAME=bench
STACK_ACCESS_LOG=0
# shellcheck source=scripts/demo/lib.sh
. "$(dirname "$0")/demo/lib.sh"

BENCH_SECONDS=${BENCH_SECONDS:-6}
BENCH_CONNS=${BENCH_CONNS:-16}
BENCH_THREADS=${BENCH_THREADS:-2}
BENCH_USERS=${BENCH_USERS:-20}
BENCH_GO=${BENCH_GO:-1}
BENCH_GO_ARGS=${BENCH_GO_ARGS:--benchtime 2000x}
BENCH_OUT=${BENCH_OUT:-${TMPDIR:-/tmp}/gearshift-bench}
BENCH_LUA="$ROOT/scripts/bench/sessions.lua"

need_cmds go apache2 varnishd varnishadm varnishstat curl wrk
mkdir -p "$BENCH_OUT"
# Only this run's results in there (the names this script writes, nothing else).
rm -f "$BENCH_OUT"/wrk-*.txt "$BENCH_OUT"/{results.tsv,table.md,go-bench.txt,chart.dat,bench.png}
RESULTS="$BENCH_OUT/results.tsv" # case, gear, rps, p50_ms, p99_ms, errors, backend_rps, x_cache
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

# ms VALUE prints a wrk latency ("812.00us", "25.31ms", "1.02s") in milliseconds.
ms() {
	awk -v v="$1" 'BEGIN {
		n = v + 0
		if (v ~ /us$/) n /= 1000; else if (v ~ /ms$/) n += 0; else if (v ~ /m$/) n *= 60000; else if (v ~ /s$/) n *= 1000
		printf "%.2f", n }'
}

backend_reqs() {
	varnishstat -n "$STACK_DIR/varnish" -1 -f MAIN.backend_req 2>/dev/null | awk '{ print $2 + 0 }'
}

# x_cache URL [curl args] prints the X-Cache verdict of one request.
x_cache() {
	local url=$1
	shift
	curl -s -o /dev/null -D - --max-time 10 "$@" "$url" | tr -d '\r' |
		awk -F': ' 'tolower($1) == "x-cache" { v = $2 } END { print (v ? v : "-") }'
}

# measure CASE GEAR URL [wrk args]: one bounded wrk run, appended to $RESULTS.
measure() {
	local name=$1 gear=$2 url=$3 out b0 b1 rps p50 p99 errs verdict
	shift 3
	out="$BENCH_OUT/wrk-${gear}-${name//[^a-z]/_}.txt"
	b0=$(backend_reqs)
	wrk -t"$BENCH_THREADS" -c"$BENCH_CONNS" -d"${BENCH_SECONDS}s" --timeout 10s --latency "$@" "$url" >"$out" 2>&1 ||
		die "wrk failed: $(cat "$out")"
	b1=$(backend_reqs)
	rps=$(awk '/^Requests\/sec/ { printf "%.1f", $2 }' "$out")
	p50=$(ms "$(awk '$1 == "50%" { print $2 }' "$out")")
	p99=$(ms "$(awk '$1 == "99%" { print $2 }' "$out")")
	errs=$(awk '/Non-2xx/ { n += $NF } /Socket errors/ { gsub(/[^0-9 ]/, " "); for (i = 1; i <= NF; i++) n += $i } END { print n + 0 }' "$out")
	if [ "$gear" = apache ]; then
		verdict="-"
		b0=0 b1=0
	elif [ "$name" = "/ logged in" ]; then
		verdict=$(x_cache "$url" -b "PHPSESSID=${SESSIONS%% *}")
	else
		verdict=$(x_cache "$url")
	fi
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$gear" "$rps" "$p50" "$p99" "$errs" \
		"$(awk -v n=$((b1 - b0)) -v s="$BENCH_SECONDS" 'BEGIN { printf "%.1f", n / s }')" "$verdict" >>"$RESULTS"
	printf '  %-14s %-9s %9s req/s  p50 %8s ms  p99 %8s ms  errors %s  X-Cache %s\n' \
		"$name" "$gear" "$rps" "$p50" "$p99" "$errs" "$verdict"
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

# fresh_cache empties Varnish's cache so no gear profits from the one before.
fresh_cache() {
	varnishadm -T "127.0.0.1:$ADMIN_PORT" -S "$STACK_DIR/secret" ban req.url '~' . >/dev/null
}

# warm sends each measured request once, so every gear starts from the same
# point: heavy's first miss per page and per user is not what we measure.
warm() {
	local s
	curl -s -o /dev/null "$SITE/"
	curl -s -o /dev/null "$SITE/news.php"
	for s in $SESSIONS; do curl -s -o /dev/null -b "PHPSESSID=$s" "$SITE/"; done
}

# check_isolation GEAR: with the cache warm, each user still gets their own
# page and an anonymous visitor nobody's (SPEC 5: a security property).
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

# switch_under_load: one wrk run of / while gearshift force cycles the gears
# every 250 ms; SPEC's promise is that a switch drops no request. Sets SWITCHING.
switch_under_load() {
	local out="$BENCH_OUT/wrk-switching.txt" wpid n=0 g
	wrk -t"$BENCH_THREADS" -c"$BENCH_CONNS" -d"${BENCH_SECONDS}s" --timeout 10s "$SITE/" >"$out" 2>&1 &
	wpid=$!
	STACK_PIDS+=("$wpid")
	while alive "$wpid"; do
		for g in light moderate heavy; do
			alive "$wpid" || break
			gs force "$g" --for 30m >/dev/null || die "gearshift force $g failed under load"
			n=$((n + 1))
			sleep 0.25
		done
	done
	wait "$wpid" || die "wrk failed: $(cat "$out")"
	SWITCHING=$(awk -v n="$n" '/requests in/ { reqs = $1 } /Non-2xx/ { bad += $NF }
		/Socket errors/ { gsub(/[^0-9 ]/, " "); for (i = 1; i <= NF; i++) err += $i }
		END { printf "%d gear switches by gearshift force (light, moderate, heavy, every 250 ms) during one %s wrk run of / : %d requests, %d socket errors, %d non-2xx", n, "'"${BENCH_SECONDS}s"'", reqs, err, bad }' "$out")
}

describe_machine() {
	local cpu kernel os
	cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
	kernel=$(uname -r)
	os=$(. /etc/os-release 2>/dev/null && echo "${PRETTY_NAME:-}")
	printf '%s CPUs (%s), %s GiB RAM, %s, kernel %s\n' "$(nproc)" "${cpu:-unknown}" \
		"$(awk '/^MemTotal/ { printf "%.0f", $2 / 1048576 }' /proc/meminfo)" "${os:-Linux}" "$kernel"
	printf '%s, %s, PHP %s, %s\n' "$(varnishd -V 2>&1 | head -1 | sed 's/ (\(varnish-[0-9.]*\).*/ \1/; s/^varnishd *//')" \
		"$(apache2 -v | sed -n 's/^Server version: *//p')" "$(php -r 'echo PHP_VERSION;' 2>/dev/null || echo '?')" \
		"$(wrk -v 2>&1 | head -1 | awk '{ print $1, $2 }')"
}

# ---- run ---------------------------------------------------------------------

started=$SECONDS
say "bench: building gearshift"
build_gearshift
stack_init
stack_apache
stack_varnish
SESSIONS=""
for i in $(seq 1 "$BENCH_USERS"); do SESSIONS="$SESSIONS $(login "bench$i")"; done
SESSIONS=${SESSIONS# }
export DEMO_SESSIONS="$SESSIONS"
[ -n "${SESSIONS%% *}" ] || die "could not log in to the PHP site"
stack_gearshift "$STACK_DIR/gearshift.stderr"
say "bench: stack up in $STACK_DIR (Apache $ORIGIN, Varnish $SITE, gearshift $GS_CONFIG)"
say "bench: wrk -t$BENCH_THREADS -c$BENCH_CONNS -d${BENCH_SECONDS}s --latency per row; $BENCH_USERS logged-in users"
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
say "bench: load average before: $LOAD_BEFORE"

# One request at a time: what the PHP page costs when nothing queues.
SINGLE_MS=$(for i in 1 2 3 4 5 6 7; do curl -s -o /dev/null -w '%{time_total}\n' "$ORIGIN/"; done |
	sort -n | awk '{ v[NR] = $1 } END { printf "%.0f", v[int((NR + 1) / 2)] * 1000 }')
say "bench: the PHP home page alone, straight from Apache: ${SINGLE_MS} ms (median of 7)"
# A short unmeasured run first: PHP's opcache and Apache's workers warm up.
wrk -t"$BENCH_THREADS" -c"$BENCH_CONNS" -d2s "$ORIGIN/" >/dev/null 2>&1 || true
measure "/ anonymous" apache "$ORIGIN/"
SWITCH_MS=""
for gear in light moderate heavy; do
	pin "$gear"
	SWITCH_MS="$SWITCH_MS $gear=$(status_field last_switch_ms)"
	fresh_cache
	warm
	check_isolation "$gear"
	measure "/ anonymous" "$gear" "$SITE/"
	measure "/ logged in" "$gear" "$SITE/" -s "$BENCH_LUA"
	measure "/news.php" "$gear" "$SITE/news.php"
	check_isolation "$gear"
done
switch_under_load
say "  $SWITCHING"
gs auto >/dev/null || true
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)

GO_OUT="$BENCH_OUT/go-bench.txt"
: >"$GO_OUT"
if [ "$BENCH_GO" = 1 ]; then
	say "bench: go test -run '^\$' -bench . $BENCH_GO_ARGS ./controller/varnishadm/"
	# shellcheck disable=SC2086
	(cd "$ROOT" && go test -run '^$' -bench . $BENCH_GO_ARGS ./controller/varnishadm/) >"$GO_OUT" 2>&1 ||
		say "bench: the Go micro-benchmarks failed (see $GO_OUT)"
fi
stack_down
trap - EXIT

# ---- report ------------------------------------------------------------------

TABLE="$BENCH_OUT/table.md"
{
	say "gearshift end-to-end benchmark, $(date -u '+%Y-%m-%d %H:%M UTC'), $((SECONDS - started)) s in all"
	say ""
	describe_machine | sed 's/^/    /'
	say ""
	say "PHP page: $STACK_WORK md5 rounds per request, ${SINGLE_MS} ms for one request alone (median of 7); wrk -t$BENCH_THREADS -c$BENCH_CONNS -d${BENCH_SECONDS}s --latency per row,"
	say "all on loopback, wrk sharing the CPUs with Apache and Varnish. 'vs light' = req/s of the row / req/s of the light row;"
	say "'to Apache/s' = backend requests Varnish made per second (varnishstat MAIN.backend_req)."
	say "Load average (1, 5, 15 min) before the wrk runs: $LOAD_BEFORE; after: $LOAD_AFTER. Rows served by PHP"
	say "(X-Cache PASS) share the CPUs with whatever else runs on the machine: on a busy machine they differ from"
	say "one another by up to 2x from that alone. Compare cached rows (HIT) with PHP rows: that ratio is the result."
	say ""
	awk -F'\t' '
		{ rows[NR] = $0; if ($2 == "light") light[$1] = $3 }
		END {
			printf "| %-12s | %-16s | %9s | %8s | %9s | %9s | %11s | %-7s | %6s |\n", "request", "gear", "req/s", "vs light", "p50 ms", "p99 ms", "to Apache/s", "X-Cache", "errors"
			printf "|%s|%s|%s|%s|%s|%s|%s|%s|%s|\n", "--------------", "------------------", "----------:", "---------:", "----------:", "----------:", "------------:", "---------", "-------:"
			for (i = 1; i <= NR; i++) {
				split(rows[i], f, "\t")
				g = (f[2] == "apache") ? "Apache direct" : f[2]
				r = (light[f[1]] > 0) ? sprintf("%.1fx", f[3] / light[f[1]]) : "-"
				ba = (f[2] == "apache") ? "(all)" : f[7]
				printf "| %-12s | %-16s | %9s | %8s | %9s | %9s | %11s | %-7s | %6s |\n", f[1], g, f[3], r, f[4], f[5], ba, f[8], f[6]
			}
		}' "$RESULTS"
	say ""
	say "Gear switches as gearshift status reported them (last_switch_ms):$SWITCH_MS"
	say "Switching under load: $SWITCHING."
	say "Session isolation checked in every gear, before and after its runs (3 users + anonymous, cache warm): ok"
	if [ -s "$GO_OUT" ]; then
		say ""
		say "Go micro-benchmarks (controller/varnishadm, same run):"
		say ""
		grep -E '^(Benchmark|goos|goarch|cpu|ok|FAIL|---)' "$GO_OUT" | sed 's/^/    /'
		awk '$1 ~ /^BenchmarkVCLLabel/ {
			for (i = 2; i < NF; i++) {
				if ($(i + 1) == "ns/op") lab = $i
				if ($(i + 1) == "p99-us") labp99 = $i
			}
			next
		}
		$1 ~ /^BenchmarkVCLUse/ {
			for (i = 2; i < NF; i++) {
				if ($(i + 1) == "ns/op") ns[$1] = $i
				if ($(i + 1) == "p99-us") p99[$1] = $i
			}
		}
		END {
			nat = ""; sp = ""
			for (k in ns) { if (k ~ /[Ss]pawn|[Vv]arnishadm|[Pp]rocess|[Ee]xec/) sp = k; else nat = k }
			if (nat != "" && sp != "" && ns[nat] > 0) {
				printf "\nvcl.use, mean per switch: native client %.3f ms, spawning varnishadm %.3f ms: native %.1fx cheaper\n", ns[nat] / 1e6, ns[sp] / 1e6, ns[sp] / ns[nat]
				if (p99[nat] > 0 && p99[sp] > 0)
					printf "vcl.use, p99: native client %.3f ms, spawning varnishadm %.3f ms\n", p99[nat] / 1e3, p99[sp] / 1e3
			}
			if (lab > 0 && nat != "")
				printf "vcl.label (a switch in label mode), native client: mean %.3f ms, p99 %.3f ms, against vcl.use %.3f ms\n", lab / 1e6, labp99 / 1e3, ns[nat] / 1e6
		}' "$GO_OUT"
	fi
} | tee "$TABLE"

if command -v gnuplot >/dev/null 2>&1; then
	awk -F'\t' '$2 != "apache" { v[$2, $1] = $3; c[$1] = 1 }
		END { n = split("/ anonymous|/ logged in|/news.php", cs, "|")
		      for (i = 1; i <= n; i++) printf "\"%s\"\t%s\t%s\t%s\n", cs[i], v["light", cs[i]], v["moderate", cs[i]], v["heavy", cs[i]] }' \
		"$RESULTS" >"$BENCH_OUT/chart.dat"
	gnuplot <<EOF && say "" && say "chart: $BENCH_OUT/bench.png"
set terminal png size 900,500
set output "$BENCH_OUT/bench.png"
set title "gearshift: PHP site through Varnish, requests/s per gear (log scale; wrk -c$BENCH_CONNS, $(nproc) CPUs)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set logscale y
set xrange [-0.6:2.6]
set ylabel "requests/s"
set key top left
set grid ytics
plot "$BENCH_OUT/chart.dat" using 2:xtic(1) title "light", "" using 3 title "moderate", "" using 4 title "heavy"
EOF
fi
say ""
say "bench: results in $BENCH_OUT (table.md, results.tsv, wrk-*.txt, go-bench.txt)"
