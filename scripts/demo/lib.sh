# shellcheck shell=bash
# Shared by scripts/demo.sh and scripts/bench.sh: a private Apache + PHP site,
# a Varnish in front of it and a gearshift daemon driving that Varnish, all on
# loopback ports that were free a moment ago, all under one temporary
# directory, all stopped by stack_down (the callers trap EXIT).
#
# Source it, set STACK_* variables if the defaults do not suit, then:
#   stack_init; stack_apache; stack_varnish; stack_gearshift
# It sets APACHE_PORT, VARNISH_PORT, ADMIN_PORT, STACK_DIR, GS_CONFIG.
# With STACK_HTTPS=1, stack_varnish adds a PROXY listener and stack_hitch
# puts Debian's hitch in front of it: https on SITE_HTTPS (HTTPS_PORT),
# its self-signed certificate in STACK_CERT.
#
# STACK says how PHP runs: mod_php (the default; Apache prefork) or fpm
# (Apache event + proxy_fcgi to a private PHP-FPM pool of
# STACK_FPM_CHILDREN, 16, children, whose status gearshift then reads
# with sensor.phpfpm).

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DEMO_SRC="$ROOT/scripts/demo"
export PATH="$PATH:/usr/local/go/bin:/usr/sbin:/sbin"

GEARSHIFT=${GEARSHIFT:-$ROOT/bin/gearshift}
STACK_ACCESS_LOG=${STACK_ACCESS_LOG:-1}  # 0: no Apache access log (benchmark)
STACK_WORK=${STACK_WORK:-120000}         # PHP work rounds per page (~25 ms)
STACK_LOG_LEVEL=${STACK_LOG_LEVEL:-info}
STACK=${STACK:-mod_php}                  # how PHP runs: mod_php or fpm
STACK_FPM_CHILDREN=${STACK_FPM_CHILDREN:-16} # fpm: the pool's pm.max_children
STACK_PIDS=()                            # started by us, stopped in reverse order

say() { printf '%s\n' "$*"; }
die() { printf '%s: %s\n' "${0##*/}" "$*" >&2; exit 1; }

# free_port prints a loopback TCP port nobody listens on, avoiding the
# well-known ones and the ones this stack already took.
free_port() {
	local p i
	for i in $(seq 1 200); do
		p=$((20000 + (RANDOM * 32768 + RANDOM) % 40000))
		case " ${APACHE_PORT:-} ${VARNISH_PORT:-} ${ADMIN_PORT:-} ${HTTPS_PORT:-} ${PROXY_PORT:-} " in *" $p "*) continue ;; esac
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return 0
		fi
	done
	die "no free loopback port found"
}

need_cmds() {
	local c missing=()
	for c in "$@"; do command -v "$c" >/dev/null 2>&1 || missing+=("$c"); done
	[ ${#missing[@]} -eq 0 ] || die "missing ${missing[*]}: run 'make deps' (scripts/install-deps.sh)"
}

# build_gearshift builds bin/gearshift unless GEARSHIFT points elsewhere.
build_gearshift() {
	if [ "$GEARSHIFT" = "$ROOT/bin/gearshift" ]; then
		(cd "$ROOT" && go build -o bin/gearshift ./cmd/gearshift) || die "go build failed"
	fi
	[ -x "$GEARSHIFT" ] || die "$GEARSHIFT is not an executable"
}

stack_init() {
	need_cmds apache2 varnishd curl setsid
	PHPMOD="" PHPFPM=""
	case $STACK in
	mod_php)
		PHPMOD=$(find /usr/lib/apache2/modules -name 'libphp*.so' 2>/dev/null | sort | tail -1)
		[ -n "$PHPMOD" ] || die "mod_php not found: run 'make deps' (Debian package libapache2-mod-php)"
		;;
	fpm)
		PHPFPM=$(find /usr/sbin -name 'php-fpm*' 2>/dev/null | sort | tail -1)
		[ -n "$PHPFPM" ] || die "php-fpm not found: run 'make deps' (Debian package php8.2-fpm)"
		;;
	*) die "STACK must be mod_php or fpm, got '$STACK'" ;;
	esac
	# Under /tmp, not $TMPDIR: a private TMPDIR (0700, or under /root) would
	# hide the directory from Varnish's and Apache's unprivileged users.
	STACK_DIR=$(mktemp -d "${STACK_TMP:-/tmp}/gearshift-${STACK_NAME:-stack}.XXXXXX")
	# Varnish's VCL compiler and Apache's workers run as unprivileged users:
	# they must reach everything in here (a 0700 mktemp dir would stop them).
	chmod 755 "$STACK_DIR"
	mkdir -p "$STACK_DIR/apache-run" "$STACK_DIR/php-sessions" "$STACK_DIR/site"
	cp -R "$DEMO_SRC/site/." "$STACK_DIR/site/"
	chmod -R a+rX "$STACK_DIR/site"
	APACHE_PORT=$(free_port)
	VARNISH_PORT=$(free_port)
	ADMIN_PORT=$(free_port)
	GS_CONFIG="$STACK_DIR/gearshift.yaml"
	SITE="http://127.0.0.1:$VARNISH_PORT"
	ORIGIN="http://127.0.0.1:$APACHE_PORT"
	if [ "${STACK_HTTPS:-0}" = 1 ]; then
		HTTPS_PORT=$(free_port)
		PROXY_PORT=$(free_port)
		SITE_HTTPS="https://127.0.0.1:$HTTPS_PORT"
		STACK_CERT="$STACK_DIR/tls/cert.pem"
		# Varnish takes a PROXY connection for a visitor's when the
		# address hitch tells differs from hitch's own: on one host a
		# browser connects to hitch from 127.0.0.1, the address hitch
		# would connect to Varnish from. Over ::1, hitch's is another.
		PROXY_HOST=127.0.0.1 PROXY_ADDR=127.0.0.1:$PROXY_PORT
		if grep -q '^00000000000000000000000000000001 ' /proc/net/if_inet6 2>/dev/null; then
			PROXY_HOST=::1 PROXY_ADDR="[::1]:$PROXY_PORT"
		fi
	fi
}

# wait_http URL SECONDS waits until URL answers with any HTTP status.
wait_http() {
	local i
	for i in $(seq 1 $(($2 * 10))); do
		curl -s -o /dev/null --max-time 1 "$1" && return 0
		sleep 0.1
	done
	return 1
}

# alive PID: true when a process we started is still running.
alive() { kill -0 "$1" 2>/dev/null; }

# stack_fpm starts the stack's PHP-FPM (STACK=fpm), unless it runs already,
# and waits for its status socket.
stack_fpm() {
	local user_lines="" args=() i
	if [ -n "${FPM_PID:-}" ] && alive "$FPM_PID"; then return 0; fi
	if [ "$(id -u)" -eq 0 ]; then
		# The master keeps root (hence -R); the children, and the sockets
		# Apache connects to, are Debian's web user's.
		user_lines=$'user = www-data\ngroup = www-data\nlisten.owner = www-data\nlisten.group = www-data\nlisten.mode = 0660'
		args=(-R)
	fi
	awk -v dir="$STACK_DIR" -v children="$STACK_FPM_CHILDREN" -v users="$user_lines" '
		{ gsub(/@DIR@/, dir); gsub(/@FPM_CHILDREN@/, children)
		  if ($0 == "@FPM_USER_LINES@") $0 = users
		  print }' "$DEMO_SRC/php-fpm-pool.conf.in" >"$STACK_DIR/php-fpm.conf"
	"$PHPFPM" -t -y "$STACK_DIR/php-fpm.conf" >"$STACK_DIR/php-fpm-configtest.log" 2>&1 ||
		die "php-fpm config rejected: $(cat "$STACK_DIR/php-fpm-configtest.log")"
	setsid "$PHPFPM" -F -y "$STACK_DIR/php-fpm.conf" "${args[@]}" >>"$STACK_DIR/php-fpm.out" 2>&1 &
	FPM_PID=$!
	STACK_PIDS+=("$FPM_PID")
	for i in $(seq 1 150); do
		alive "$FPM_PID" || die "php-fpm exited: $(tail -5 "$STACK_DIR/php-fpm.log" "$STACK_DIR/php-fpm.out" 2>/dev/null)"
		[ -S "$STACK_DIR/fpm-status.sock" ] && [ -S "$STACK_DIR/fpm.sock" ] && return 0
		sleep 0.1
	done
	die "php-fpm did not listen on $STACK_DIR/fpm.sock within 15 s: $(tail -5 "$STACK_DIR/php-fpm.log")"
}

# render TEMPLATE [USER_LINES] [ACCESS_LOG] prints an Apache config
# template with the stack's values.
render() {
	awk -v dir="$STACK_DIR" -v port="$APACHE_PORT" -v moddir=/usr/lib/apache2/modules \
		-v phpmod="$PHPMOD" -v work="$STACK_WORK" -v users="${2:-}" -v alog="${3:-}" \
		-v site="${STACK_SITE_LINES:-}" '
		{ gsub(/@DIR@/, dir); gsub(/@APACHE_PORT@/, port); gsub(/@MODDIR@/, moddir)
		  gsub(/@PHPMOD@/, phpmod); gsub(/@DEMO_WORK@/, work)
		  if ($0 == "@USER_LINES@") $0 = users
		  if ($0 == "@ACCESS_LOG@") $0 = alog
		  if ($0 == "@SITE_LINES@") $0 = site
		  print }' "$1"
}

stack_apache() {
	local user_lines="" access_log=""
	if [ "$(id -u)" -eq 0 ]; then
		# Apache refuses to serve as root; Debian's web user owns the sessions.
		user_lines=$'User www-data\nGroup www-data'
		chown www-data:www-data "$STACK_DIR/php-sessions"
	fi
	if [ "$STACK_ACCESS_LOG" = 1 ]; then
		access_log="CustomLog $STACK_DIR/apache-access.log demo"
	fi
	if [ "$STACK" = fpm ]; then stack_fpm; fi
	render "$DEMO_SRC/php-$STACK.conf.in" >"$STACK_DIR/php.conf"
	render "$DEMO_SRC/apache.conf.in" "$user_lines" "$access_log" >"$STACK_DIR/apache.conf"
	apache2 -f "$STACK_DIR/apache.conf" -t >/dev/null 2>"$STACK_DIR/apache-configtest.log" ||
		die "apache config rejected: $(cat "$STACK_DIR/apache-configtest.log")"
	# Its own session: on SIGTERM Apache signals its whole process group,
	# which would otherwise include this script.
	setsid apache2 -f "$STACK_DIR/apache.conf" -DFOREGROUND >>"$STACK_DIR/apache-error.log" 2>&1 &
	APACHE_PID=$!
	STACK_PIDS+=("$APACHE_PID")
	wait_http "$ORIGIN/style.css" 15 || die "apache did not answer on $ORIGIN: $(tail -5 "$STACK_DIR/apache-error.log")"
}

stack_varnish() {
	sed "s/@APACHE_PORT@/$APACHE_PORT/" "$DEMO_SRC/boot.vcl.in" >"$STACK_DIR/boot.vcl"
	# A trailing newline, as most tools leave one; it is part of the secret.
	head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$STACK_DIR/secret"
	echo >>"$STACK_DIR/secret"
	chmod 600 "$STACK_DIR/secret"
	local proxy=()
	# The PROXY listener on loopback alone: whoever reaches it says which
	# address it is.
	[ "${STACK_HTTPS:-0}" != 1 ] || proxy=(-a "proxy=$PROXY_ADDR,PROXY")
	setsid varnishd -F -n "$STACK_DIR/varnish" \
		-a "127.0.0.1:$VARNISH_PORT" "${proxy[@]}" -T "127.0.0.1:$ADMIN_PORT" -S "$STACK_DIR/secret" \
		-f "$STACK_DIR/boot.vcl" -s malloc,128m \
		>>"$STACK_DIR/varnishd.log" 2>&1 &
	VARNISH_PID=$!
	STACK_PIDS+=("$VARNISH_PID")
	wait_http "$SITE/" 30 || die "varnish did not answer on $SITE: $(tail -5 "$STACK_DIR/varnishd.log")"
}

# stack_hitch starts Debian's hitch (STACK_HTTPS=1, after stack_varnish):
# TLS on $SITE_HTTPS with a self-signed certificate for localhost,
# 127.0.0.1 and ::1 made here ($STACK_CERT), PROXY v2 to Varnish's PROXY
# listener, as docs/frontdoor.md sets it up.
stack_hitch() {
	local dir=$STACK_DIR/tls user="" i
	need_cmds hitch openssl
	mkdir -p "$dir"
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 -subj /CN=localhost \
		-addext "subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1" \
		-keyout "$dir/key.pem" -out "$STACK_CERT" >"$dir/openssl.log" 2>&1 ||
		die "openssl could not make a certificate: $(tail -3 "$dir/openssl.log")"
	(umask 077 && cat "$dir/key.pem" "$STACK_CERT" >"$dir/hitch.pem")
	if [ "$(id -u)" -eq 0 ]; then
		# hitch refuses to run its workers as root; Debian's package
		# makes a user for them.
		user=nobody
		if id -u _hitch >/dev/null 2>&1; then user=_hitch; fi
		user="user = \"$user\""
	fi
	printf '%s\n' "frontend = \"[127.0.0.1]:$HTTPS_PORT\"" "backend = \"[$PROXY_HOST]:$PROXY_PORT\"" \
		"pem-file = \"$dir/hitch.pem\"" "write-proxy-v2 = on" "workers = 1" "daemon = off" "$user" >"$dir/hitch.conf"
	setsid hitch --config="$dir/hitch.conf" >>"$STACK_DIR/hitch.log" 2>&1 &
	HITCH_PID=$!
	STACK_PIDS+=("$HITCH_PID")
	for i in $(seq 1 150); do
		alive "$HITCH_PID" || die "hitch exited: $(tail -3 "$STACK_DIR/hitch.log")"
		curl -s -o /dev/null --max-time 1 --cacert "$STACK_CERT" "$SITE_HTTPS/" && return 0
		sleep 0.1
	done
	die "hitch did not answer on $SITE_HTTPS within 15 s: $(tail -3 "$STACK_DIR/hitch.log")"
}

# stack_gearshift_config writes the daemon's config. The way up is the
# defaults' (fast_window 10s, up_confirm 3: the short spike of Varnish
# compiling three profiles at start does not shift); the way down is the
# demo's, not a production setting: short windows, so it takes a minute or
# two, not ten. The thresholds sit above the defaults so a machine busy with
# other work still starts in light (STACK_{MODERATE,HEAVY}_{ENTER,STAY}).
# With STACK=fpm the daemon also reads the pool's status (sensor.phpfpm),
# and the rules, which the file gives, carry the defaults' PHP-FPM
# conditions (docs/signals.md): a queue is moderate, nine children busy in
# ten heavy.
stack_gearshift_config() {
	local mq="" hq="" ms="" hs="" fpm=""
	if [ "$STACK" = fpm ]; then
		mq=", phpfpm_queue: 1" ms=", phpfpm_queue: 1"
		hq=", phpfpm_busy_ratio: 0.9" hs=", phpfpm_busy_ratio: 0.7"
		fpm="sensor: { phpfpm: { socket: $STACK_DIR/fpm-status.sock, listen: $STACK_DIR/fpm.sock, path: /fpm-status } }"
	fi
	cat >"$GS_CONFIG" <<EOF
# gearshift config for the local demo stack (written by scripts/demo/lib.sh).
poll_interval: 1s
fast_window: 10s
varnish:
  timeout: 5s
  targets:
    - admin: 127.0.0.1:$ADMIN_PORT
      secret_file: $STACK_DIR/secret
      name: $STACK_DIR/varnish
backend: { host: 127.0.0.1, port: $APACHE_PORT }
$fpm
states:
  moderate: { enter: { load_per_cpu: ${STACK_MODERATE_ENTER:-1.5}$mq }, stay: { load_per_cpu: ${STACK_MODERATE_STAY:-1.0}$ms } }
  heavy:    { enter: { load_per_cpu: ${STACK_HEAVY_ENTER:-3.0}$hq }, stay: { load_per_cpu: ${STACK_HEAVY_STAY:-2.0}$hs } }
hysteresis: { up_confirm: 3, down_window: 20s, min_dwell: 15s }
on_exit: keep
control: { socket: $STACK_DIR/gearshift.sock }
log: { file: $STACK_DIR/gearshift.log, level: $STACK_LOG_LEVEL }
pid_file: $STACK_DIR/gearshift.pid
history: { dir: $STACK_DIR/history }
EOF
}

# gs runs the gearshift CLI against this stack's daemon.
gs() { "$GEARSHIFT" --config "$GS_CONFIG" "$@"; }

# stack_gearshift starts `gearshift run` in the background, its stderr going
# to $1 (default: a file in the stack dir), and waits until it answers and
# Varnish serves one of its profiles. STACK_OWN_CONFIG=1: the caller wrote
# $GS_CONFIG itself (stack_gearshift_config is not called).
stack_gearshift() {
	local out=${1:-$STACK_DIR/gearshift.stderr} i
	[ "${STACK_OWN_CONFIG:-0}" = 1 ] || stack_gearshift_config
	"$GEARSHIFT" run --config "$GS_CONFIG" 2>>"$out" >>"$out" &
	GS_PID=$!
	STACK_PIDS+=("$GS_PID")
	for i in $(seq 1 300); do
		alive "$GS_PID" || die "gearshift run exited: $(tail -5 "$out")"
		if gs status >/dev/null 2>&1 && [ -n "$(profile_header /style.css)" ]; then
			return 0
		fi
		sleep 0.1
	done
	die "gearshift did not take over Varnish within 30 s: $(tail -5 "$out")"
}

# profile_header PATH [curl args] prints the X-Gearshift-Profile header Varnish answers with.
profile_header() {
	local path=$1
	shift
	curl -s -o /dev/null -D - --max-time 5 "$@" "$SITE$path" |
		tr -d '\r' | awk -F': ' 'tolower($1) == "x-gearshift-profile" { print $2 }'
}

# status_field NAME prints one scalar field of `gearshift status --json`
# (first occurrence; good enough for state, mode, load_per_cpu, last_switch_ms).
status_field() {
	gs status --json 2>/dev/null | tr -d '\n ' |
		sed -n "s/.*\"$1\":\"\{0,1\}\([^\",}]*\).*/\1/p" | head -1
}

# login NAME prints the PHPSESSID of a fresh session logged in as NAME.
login() {
	curl -s -o /dev/null -c - --max-time 10 "$ORIGIN/login.php?user=$1" |
		awk '$6 == "PHPSESSID" { print $7 }'
}

# stop_pid PID: SIGTERM, then SIGKILL after 10 s. Only for our own children.
stop_pid() {
	local pid=$1 i
	alive "$pid" || return 0
	kill -TERM "$pid" 2>/dev/null || return 0
	for i in $(seq 1 100); do
		# set -e: wait reports the signal the process died of.
		alive "$pid" || { wait "$pid" 2>/dev/null || true; return 0; }
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	return 0
}

# stack_down stops everything this stack started, newest first, and removes
# its directory unless STACK_KEEP=1.
stack_down() {
	local i
	for ((i = ${#STACK_PIDS[@]} - 1; i >= 0; i--)); do
		stop_pid "${STACK_PIDS[$i]}"
	done
	STACK_PIDS=()
	if [ -n "${STACK_DIR:-}" ] && [ -d "$STACK_DIR" ]; then
		if [ "${STACK_KEEP:-0}" = 1 ]; then
			say "kept $STACK_DIR"
		else
			rm -rf "$STACK_DIR"
		fi
	fi
}
