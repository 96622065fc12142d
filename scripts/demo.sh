#!/usr/bin/env bash
# gearshift demo: a small PHP site on a private Apache, a Varnish in front of
# it (http, and https through Debian's hitch speaking PROXY v2 to it), and
# gearshift in the foreground driving that Varnish, all on loopback. About
# 30 s after start a bounded wrk surge loads the site, the gear shifts up
# to heavy, and once the surge is over it steps back down. The surge and
# the probes come as the visitors they play (X-Forwarded-For through a
# trusted proxy on loopback, or through hitch), so gearshift counts none
# of them as unidentified (status front_door).
#
#   scripts/demo.sh              run the demo until Ctrl-C (make demo)
#   DEMO_SITE=wordpress scripts/demo.sh
#                                the same in front of Debian's WordPress and a
#                                private MariaDB (make demo SITE=wordpress)
#   STACK=fpm scripts/demo.sh    PHP as PHP-FPM behind Apache's event MPM instead of
#                                mod_php, its pool's status read by gearshift
#                                (make demo STACK=fpm; with either site)
#   DEMO_SECONDS=90 scripts/demo.sh
#                                run for 90 s, then stop everything and exit 0
#   scripts/demo.sh load [SECONDS] [CONNECTIONS]
#                                another surge against the running demo
#   scripts/demo.sh status|force heavy --for 30s|auto|logs -f|...
#                                the gearshift CLI against the running demo
#
# Knobs (environment): DEMO_SECONDS (0 = until Ctrl-C), DEMO_SURGE_AT (30),
# DEMO_SURGE_SECONDS (30, 0 = no automatic surge), DEMO_SURGE_CONNS (24),
# DEMO_SURGE_DELAY_MS (10, each connection's pause between requests),
# DEMO_TICK (5, seconds between probe lines), DEMO_LOG (human = gearshift
# logs -f; stderr = the daemon's own stderr),
# STACK_{MODERATE,HEAVY}_{ENTER,STAY} (load_per_cpu thresholds), STACK
# (mod_php or fpm), STACK_FPM_CHILDREN (16, the fpm pool's pm.max_children),
# STACK_KEEP=1 keeps the temporary directory, GEARSHIFT=path uses that binary.
set -euo pipefail
STACK_NAME=demo
STACK_HTTPS=1
# shellcheck source=scripts/demo/lib.sh
. "$(dirname "$0")/demo/lib.sh"

DEMO_SECONDS=${DEMO_SECONDS:-0}
# The surge waits for the run queue of the start (varnishd compiling the
# three profiles) to leave the fast signal: load/cpu is near 0 before it.
DEMO_SURGE_AT=${DEMO_SURGE_AT:-30}
DEMO_SURGE_SECONDS=${DEMO_SURGE_SECONDS:-30}
DEMO_SURGE_CONNS=${DEMO_SURGE_CONNS:-24}
DEMO_TICK=${DEMO_TICK:-5}
DEMO_LOG=${DEMO_LOG:-human}
DEMO_SITE=${DEMO_SITE:-php}
case $DEMO_SITE in
php) ;;
wordpress)
	# shellcheck source=scripts/demo/wordpress.sh
	. "$(dirname "$0")/demo/wordpress.sh"
	;;
*) die "DEMO_SITE must be php or wordpress, got '$DEMO_SITE'" ;;
esac
# The cookie that carries a logged-in session, and the surge's mix.
SESSION_COOKIE=PHPSESSID
# The address alice's probe comes from (a documentation address, through
# the trusted proxy on loopback that this script plays).
ALICE_IP=192.0.2.10
export DEMO_NEWS=/news.php DEMO_STATICS="/style.css /logo.png"
# Where a running demo leaves its addresses for `demo.sh load|status|...`.
DEMO_ENV=${DEMO_ENV:-/tmp/gearshift-demo.env}

# ---- talking to a running demo --------------------------------------------

load_env() {
	[ -r "$DEMO_ENV" ] || die "no demo is running (start one with 'make demo')"
	# shellcheck disable=SC1090
	. "$DEMO_ENV"
	alive "$DEMO_PID" || die "the demo recorded in $DEMO_ENV is no longer running"
}

# surge_start SECONDS CONNS OUT starts a bounded wrk run in the background:
# plain http, each request from a visitor of surge.lua's crowd.
surge_start() {
	need_cmds wrk
	DEMO_CROWD=1 DEMO_SESSIONS="$SESSIONS" DEMO_SESSION_COOKIE="$SESSION_COOKIE" wrk -t2 -c"$2" -d"$1s" --timeout 10s --latency \
		-s "$DEMO_SRC/surge.lua" "$SITE/" >"$3" 2>&1 &
	SURGE_PID=$!
}

# surge_summary OUT prints one line from a wrk report.
surge_summary() {
	awk '/Requests\/sec/ { rps = $2 }
	     $1 == "50%" { p50 = $2 } $1 == "99%" { p99 = $2 }
	     /Non-2xx/ { bad = $NF } /Socket errors/ { err = $0 }
	     END { printf "%s req/s, latency p50 %s p99 %s", rps, p50, p99
	           if (bad) printf ", %s non-2xx", bad
	           if (err) printf ", %s", err
	           print "" }' "$1"
}

cmd_load() {
	load_env
	local secs=${1:-30} conns=${2:-$DEMO_SURGE_CONNS}
	LOAD_OUT=$(mktemp)
	say "demo: wrk surge through Varnish for ${secs}s with $conns connections ($SITE/)"
	surge_start "$secs" "$conns" "$LOAD_OUT"
	trap 'stop_pid "$SURGE_PID"; rm -f "$LOAD_OUT"' EXIT
	trap 'exit 130' INT
	wait "$SURGE_PID" || true
	say "demo: surge done: $(surge_summary "$LOAD_OUT")"
}

# ---- the demo itself --------------------------------------------------------

# probe LABEL BASE [curl args] prints what a client of BASE (the http or
# the https URL) sees: gear, cache verdict, time.
probe() {
	local label=$1 base=$2
	shift 2
	curl -s -o /dev/null -D - -w 'time %{time_total}\n' --max-time 5 "$@" "$base/" | tr -d '\r' |
		awk -v label="$label" -F': ' '
			tolower($1) == "x-gearshift-profile" { gear = $2 }
			tolower($1) == "x-cache" { cache = $2 }
			/^time / { split($0, t, " "); ms = t[2] * 1000 }
			END { printf "%s %s %s %.0fms", label, (gear ? gear : "-"), (cache ? cache : "-"), ms }'
}

# note T TEXT prints one line of the demo's own narration.
note() { printf '[demo +%3ss] %s\n' "$1" "$2"; }

tick() {
	local t=$1 gear mode lpc queue busy
	gear=$(status_field state)
	mode=$(status_field mode)
	lpc=$(status_field load_per_cpu)
	if [ "$STACK" = fpm ]; then
		queue=$(status_field phpfpm_queue)
		busy=$(status_field phpfpm_busy_ratio)
		lpc="${lpc:-?} fpm queue ${queue:-?} busy ${busy:-?}"
	fi
	note "$t" "$(printf 'gear %-8s %-6s load/cpu %-5s | GET / %s | %s' "${gear:-?}" "${mode:-?}" \
		"${lpc:-?}" "$(probe https "$SITE_HTTPS" --cacert "$STACK_CERT")" \
		"$(probe alice "$SITE" -H "X-Forwarded-For: $ALICE_IP" -b "$SESSION_COOKIE=$ALICE")")"
}

transitions_summary() {
	local log=$STACK_DIR/gearshift.log n
	n=$(grep -c '"state change"' "$log" 2>/dev/null || true)
	say "demo: gearshift logged ${n:-0} state change(s):"
	grep '"state change"' "$log" 2>/dev/null |
		sed -n 's/.*"ts":"\{0,1\}\([^",]*\).*"from":"\([a-z]*\)".*"to":"\([a-z]*\)".*/  \1  \2 -> \3/p' || true
}

banner() {
	if [ "$DEMO_SITE" = wordpress ]; then
		cat <<EOF

gearshift demo with WordPress: everything on loopback, in $STACK_DIR
  WordPress, through Varnish  $SITE/            (log in at $SITE/wp-login.php)
  the same over https (hitch) $SITE_HTTPS/           (certificate $STACK_CERT)
  Apache + PHP ($STACK) directly $ORIGIN/
  MariaDB                     127.0.0.1:$DB_PORT (socket $STACK_DIR/mysql.sock, root without password)
  users                       admin (administrator), $WP_USERS; password $WP_PASS
  gearshift config            $GS_CONFIG

Try, in a browser or another terminal:
  curl -sI $SITE/ | grep -i '^x-'                          # X-Gearshift-Profile, X-Cache
  curl -sI --cacert $STACK_CERT $SITE_HTTPS/ | grep -i '^x-'  # over https, through hitch
  curl -sI -b $STACK_DIR/jar-alice $SITE/ | grep -i '^x-'   # alice, logged in (her cookie jar)
  scripts/demo.sh force heavy --for 60s   # then log in as admin and comment on "Hello world!":
                                          # the comment shows at once, logging out logs out
  scripts/demo.sh status                  # also: logs -f --transitions, load 30, auto

EOF
	else
		cat <<EOF

gearshift demo: everything on loopback, in $STACK_DIR
  the site, through Varnish   $SITE/            (also /news.php /login.php /style.css /logo.png)
  the same over https (hitch) $SITE_HTTPS/           (certificate $STACK_CERT)
  Apache + PHP ($STACK) directly $ORIGIN/
  Varnish admin port          127.0.0.1:$ADMIN_PORT (secret $STACK_DIR/secret)
  gearshift config            $GS_CONFIG

Try, in another terminal:
  curl -sI $SITE/ | grep -i '^x-'                         # X-Gearshift-Profile, X-Cache
  curl -sI --cacert $STACK_CERT $SITE_HTTPS/ | grep -i '^x-'  # over https, through hitch
  curl -sI -b PHPSESSID=$ALICE $SITE/ | grep -i '^x-'     # alice, logged in
  scripts/demo.sh status                 # = $GEARSHIFT status --config $GS_CONFIG
  scripts/demo.sh force heavy --for 30s  # pin a gear; 'scripts/demo.sh auto' releases it
  scripts/demo.sh logs -f --transitions
  scripts/demo.sh load 30                # another 30 s wrk surge through Varnish

EOF
	fi
	if [ "$DEMO_SURGE_SECONDS" -gt 0 ]; then
		say "A ${DEMO_SURGE_SECONDS}s wrk surge starts at +${DEMO_SURGE_AT}s: watch the gear go up, then back down."
	fi
	if [ "$DEMO_SECONDS" -gt 0 ]; then
		say "The demo stops by itself after ${DEMO_SECONDS}s (Ctrl-C stops it sooner)."
	else
		say "Ctrl-C stops everything."
	fi
	say ""
}

demo_down() {
	local rc=$?
	trap - EXIT INT TERM
	if [ -n "${STACK_DIR:-}" ] && [ -f "$STACK_DIR/gearshift.log" ]; then
		transitions_summary
		# What the flight recorder kept of the run: the incident, and a
		# chart for the postmortem.
		if [ -d "$STACK_DIR/history" ] && gs report --help >/dev/null 2>&1; then
			say "demo: gearshift report --since 1h --svg $STACK_DIR/report.svg"
			gs report --since 1h --svg "$STACK_DIR/report.svg" >&2 || true
		fi
	fi
	say "demo: stopping gearshift, hitch, Varnish, Apache and PHP"
	stack_down
	if [ "${ENV_OURS:-0}" = 1 ]; then rm -f "$DEMO_ENV"; fi
	exit "$rc"
}

cmd_run() {
	need_cmds go apache2 varnishd hitch openssl curl wrk
	trap demo_down EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	say "demo: building gearshift"
	build_gearshift
	stack_init
	if [ "$DEMO_SITE" = wordpress ]; then
		say "demo: starting MariaDB and installing WordPress"
		wp_site
	fi
	say "demo: starting Apache + PHP ($STACK) on $ORIGIN"
	stack_apache
	say "demo: starting Varnish on $SITE (admin 127.0.0.1:$ADMIN_PORT, PROXY listener $PROXY_ADDR)"
	stack_varnish
	say "demo: starting hitch on $SITE_HTTPS (TLS, PROXY v2 to Varnish)"
	stack_hitch
	local i login=login
	if [ "$DEMO_SITE" = wordpress ]; then
		login=wp_login
		DEMO_NEWS=/hello-world/
		DEMO_STATICS="/wp-includes/css/buttons.min.css /wp-content/themes/twentytwentyone/style.css"
	fi
	ALICE=$($login alice)
	[ -n "$ALICE" ] || die "could not log in as alice"
	[ "$DEMO_SITE" != wordpress ] || SESSION_COOKIE=$(wp_cookie_name)
	SESSIONS="$ALICE"
	for i in 1 2 3 4 5 6 7 8 9; do SESSIONS="$SESSIONS $($login "user$i")"; done

	say "demo: starting gearshift run --config $GS_CONFIG"
	local gs_out="$STACK_DIR/gearshift.stderr"
	if [ "$DEMO_LOG" = stderr ]; then gs_out=/dev/stderr; fi
	stack_gearshift "$gs_out"
	if [ "$DEMO_LOG" != stderr ]; then
		# gearshift's own human log view, following the daemon's log file.
		if gs logs --help >/dev/null 2>&1; then
			"$GEARSHIFT" --config "$GS_CONFIG" logs -f -n 50 &
		else
			tail -n +1 -f --pid="$GS_PID" "$gs_out" &
		fi
		STACK_PIDS+=("$!")
	fi

	# shellcheck disable=SC1090
	if [ ! -e "$DEMO_ENV" ] || ! (. "$DEMO_ENV" && alive "$DEMO_PID"); then
		cat >"$DEMO_ENV" <<EOF
DEMO_PID=$$
STACK_DIR=$STACK_DIR
SITE=$SITE
SITE_HTTPS=$SITE_HTTPS
STACK_CERT=$STACK_CERT
ORIGIN=$ORIGIN
GS_CONFIG=$GS_CONFIG
GEARSHIFT=$GEARSHIFT
SESSIONS="$SESSIONS"
SESSION_COOKIE=$SESSION_COOKIE
DEMO_NEWS=$DEMO_NEWS
DEMO_STATICS="$DEMO_STATICS"
EOF
		ENV_OURS=1
	fi
	banner

	local start=$SECONDS t next_tick=0 surge_out="$STACK_DIR/surge.txt" surging=0
	SURGE_PID=""
	while :; do
		t=$((SECONDS - start))
		if [ "$DEMO_SECONDS" -gt 0 ] && [ "$t" -ge "$DEMO_SECONDS" ]; then
			say "demo: ${DEMO_SECONDS}s are up"
			break
		fi
		alive "$APACHE_PID" || die "Apache stopped unexpectedly: $(tail -3 "$STACK_DIR/apache-error.log")"
		[ -z "${FPM_PID:-}" ] || alive "$FPM_PID" || die "php-fpm stopped unexpectedly: $(tail -3 "$STACK_DIR/php-fpm.log")"
		alive "$VARNISH_PID" || die "Varnish stopped unexpectedly: $(tail -3 "$STACK_DIR/varnishd.log")"
		alive "$GS_PID" || die "gearshift stopped unexpectedly (see $STACK_DIR/gearshift.log)"
		if [ "$DEMO_SURGE_SECONDS" -gt 0 ] && [ "$t" -ge "$DEMO_SURGE_AT" ] && [ -z "$SURGE_PID" ]; then
			note "$t" "surge: wrk -c$DEMO_SURGE_CONNS for ${DEMO_SURGE_SECONDS}s through Varnish (home page, news, static, logged-in users)"
			surge_start "$DEMO_SURGE_SECONDS" "$DEMO_SURGE_CONNS" "$surge_out"
			STACK_PIDS+=("$SURGE_PID")
			surging=1
		fi
		if [ "$surging" = 1 ] && ! alive "$SURGE_PID"; then
			wait "$SURGE_PID" || true
			surging=0
			note "$t" "surge over: $(surge_summary "$surge_out")"
		fi
		if [ "$t" -ge "$next_tick" ]; then
			tick "$t"
			next_tick=$((t + DEMO_TICK))
		fi
		sleep 1
	done
}

case ${1:-run} in
run) cmd_run ;;
load) shift; cmd_load "$@" ;;
-h | --help | help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' ;;
*)
	load_env
	exec "$GEARSHIFT" --config "$GS_CONFIG" "$@"
	;;
esac
