#!/usr/bin/env bash
# Installs what gearshift's build, tests, demo and benchmark need, when missing:
# Debian's varnish, apache2, libapache2-mod-php, wrk, curl, gnuplot-nox
# (make bench's chart) and jq (the signals benchmark); for the WordPress
# integration test wordpress, its twentytwentyone theme, mariadb-server and
# php-mysql; for the other applications' tests (profiles/apps) mediawiki
# and phpmyadmin; the packaging tools (lintian, man-db, groff); prometheus
# (promtool, and a server the metrics tests start on their own port); and
# the Go modules; prometheus-mysqld-exporter for the fleet test (a shared
# database's pressure as a signal); chromium, a headless browser for the
# status page's test; varnish-modules (xkey and vsthrottle: session pages
# dropped by tag, the per-client budget); php8.2-fpm, the PHP-FPM stack the
# tests also run on; hitch, nginx-light and openssl, the TLS front doors.
# Idempotent: a second run changes nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
# The stock varnish service (varnishd's default instance) is stopped when
# it comes with this install: the tests' daemons read the default
# instance's counters when no name is set, and are to find none.
stop_varnish=""
if ! command -v varnishd >/dev/null 2>&1 && ! [ -x /usr/sbin/varnishd ]; then
	need+=(varnish)
	stop_varnish=1
fi
[ -x /usr/sbin/apache2 ] || need+=(apache2)
dpkg-query -W -f='${Status}' libapache2-mod-php 2>/dev/null | grep -q "ok installed" || need+=(libapache2-mod-php)
command -v wrk >/dev/null 2>&1 || need+=(wrk)
command -v curl >/dev/null 2>&1 || need+=(curl)
command -v jq >/dev/null 2>&1 || need+=(jq) # the signals benchmark reads status --json
command -v gnuplot >/dev/null 2>&1 || need+=(gnuplot-nox) # make bench's chart
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "ok installed"; }
for pkg in varnish-modules php8.2-fpm; do
	installed "$pkg" || need+=("$pkg")
done
for pkg in wordpress wordpress-theme-twentytwentyone mariadb-server php-mysql mediawiki phpmyadmin; do
	installed "$pkg" || need+=("$pkg")
done
# phpmyadmin's maintainer scripts would ask to set up a database through
# dbconfig-common (a running MariaDB) and to configure a web server; the
# tests give it a config and a database of their own.
preseed_phpmyadmin=""
installed phpmyadmin || preseed_phpmyadmin=1
# The package: build, lint, install and read its manual; systemd-analyze
# verifies the unit.
command -v dpkg-deb >/dev/null 2>&1 || need+=(dpkg)
command -v lintian >/dev/null 2>&1 || need+=(lintian)
command -v man >/dev/null 2>&1 || need+=(man-db)
command -v groff >/dev/null 2>&1 || need+=(groff-base)
command -v deb-systemd-helper >/dev/null 2>&1 || need+=(init-system-helpers)
command -v systemd-analyze >/dev/null 2>&1 || need+=(systemd)
# The metrics tests: promtool checks the exposition, the alert rules and
# their unit tests; a private prometheus scrapes a test daemon.
stop_prometheus=""
if ! command -v promtool >/dev/null 2>&1 || ! command -v prometheus >/dev/null 2>&1; then
	need+=(prometheus)
	installed prometheus || stop_prometheus=1
fi
# The front door's tests: TLS terminators in front of Varnish (hitch
# speaks PROXY v2, nginx forwards with X-Forwarded-For/-Proto) and openssl
# for their self-signed certificate. Their stock services are not used.
stop_front=()
for pkg in hitch nginx-light; do
	if ! installed "$pkg"; then
		need+=("$pkg")
		stop_front+=("${pkg%-light}")
	fi
done
command -v openssl >/dev/null 2>&1 || need+=(openssl)
# The status page's test loads it in a headless browser.
command -v chromium >/dev/null 2>&1 || need+=(chromium)
stop_exporter=""
if ! command -v prometheus-mysqld-exporter >/dev/null 2>&1; then
	need+=(prometheus-mysqld-exporter)
	installed prometheus-mysqld-exporter || stop_exporter=1
fi

if [ ${#need[@]} -gt 0 ]; then
	sudo=""
	[ "$(id -u)" -eq 0 ] || sudo="sudo"
	echo "install-deps: installing ${need[*]}"
	$sudo apt-get update -qq
	if [ -n "$preseed_phpmyadmin" ]; then
		printf '%s\n' \
			'phpmyadmin phpmyadmin/dbconfig-install boolean false' \
			'phpmyadmin phpmyadmin/reconfigure-webserver multiselect' |
			$sudo debconf-set-selections
	fi
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}"
	# The Debian packages start their services; gearshift's tests and demo
	# run their own instances on free ports, so the stock ones are not needed.
	# The stock prometheus would hold :9090 and scrape nothing of ours: it
	# is stopped and kept from starting at boot (the tests never use it).
	# So is the stock mysqld exporter (:9104, and no database of ours).
	for svc in ${stop_varnish:+varnish} ${stop_prometheus:+prometheus} ${stop_exporter:+prometheus-mysqld-exporter} ${stop_front[@]+"${stop_front[@]}"}; do
		if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
			$sudo systemctl disable --now "$svc" >/dev/null 2>&1 || true
		elif [ -x "/etc/init.d/$svc" ]; then
			$sudo "/etc/init.d/$svc" stop >/dev/null 2>&1 || true
		fi
	done
fi

export PATH="$PATH:/usr/local/go/bin"
go mod download
echo "install-deps: ok ($(varnishd -V 2>&1 | head -1))"
