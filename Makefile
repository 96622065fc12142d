# gearshift — see README.md.
GO      ?= go
BIN     := bin/gearshift
export PATH := $(PATH):/usr/local/go/bin:/usr/sbin
PREFIX  ?= /usr/local
DESTDIR ?=

.PHONY: all build test test-long idle sites-surge soak fuzz bench bench-signals bench-surge bench-fleet bench-history demo deps deps-if-missing clean man deb install uninstall

all: build

build:
	$(GO) build -o $(BIN) ./cmd/gearshift

# Unit and integration tests; integration tests start real varnishd instances.
# The idle test, one site's real surge and the slowest system tests
# (LONG_TESTS: two-node fleets, the .deb and the install script, the
# advice's minute of traffic) are the longer stage (test-long), which CI
# runs after it: with them, make test passed 20 minutes on a 2-CPU machine.
LONG_TESTS := ^(TestFleet|TestSitesFleet|TestAdviceThroughCheck|TestDebPackage|TestDebInstallRoundTrip|TestInstallScript)$$
test: deps-if-missing
	$(GO) vet ./...
	$(GO) vet -tags soak,idle,sitessurge ./...
	$(GO) test -race -count=1 -timeout 20m -skip '$(LONG_TESTS)' ./...
	$(MAKE) --no-print-directory soak SOAK=3m
	$(MAKE) --no-print-directory fuzz

# The longer stage of CI, after make test: the idle test alone, since it
# needs the machine to itself (it first waits for the load to settle),
# the slowest system tests, then one site's surge among its neighbours.
test-long: deps-if-missing
	$(MAKE) --no-print-directory idle
	$(GO) test -race -count=1 -timeout 20m -run '$(LONG_TESTS)' ./tests/system
	$(MAKE) --no-print-directory sites-surge

# One site's real surge among neighbours (TestSitesSurge): Debian's
# WordPress, MediaWiki and the session site as virtual hosts of one Apache
# behind one varnishd, `gearshift run` with three sites; an open-loop
# surge on the blog puts it, and only it, in heavy (about 2 minutes; the
# gears follow the machine's load, so it runs alone).
sites-surge:
	$(GO) test -tags sitessurge -run '^TestSitesSurge$$' -count=1 -timeout 15m -v ./profiles/apps

# The daemon with the default config on a machine nobody else uses: its
# run queue matches an independent reader's and the gear stays light. It
# needs the machine to itself, so it runs alone (about 3 minutes; it
# first waits for the load average to settle).
idle:
	$(GO) test -tags idle -run '^TestIdle$$' -count=1 -timeout 15m -v ./tests/system

# The soak: the daemon at poll_interval 100ms before a real varnishd,
# Apache and PHP, shifting every 1.5 s, with traffic, signed-in writes
# and faults on a schedule (cache child killed, varnishd restarted, good
# and bad reloads, the history's disk full, Prometheus down, a hanging
# hook, SIGHUP storms). It fails on growth (RSS, goroutines, fds, VCLs,
# bans, history) and on a shift Varnish did not run; its CSV, chart and
# summary go to $(SOAK_OUT). SOAK=2h runs longer; make test runs SOAK=3m.
# It needs root (the history's disk is a tmpfs it mounts).
SOAK     ?= 30m
SOAK_OUT ?= /tmp/gearshift-soak
soak: deps-if-missing
	@set -e; t=$(SOAK); case $$t in \
		*h) s=$$(( $${t%h} * 3600 ));; *m) s=$$(( $${t%m} * 60 ));; *s) s=$${t%s};; *) s=86400;; esac; \
	GEARSHIFT_SOAK=$(SOAK) GEARSHIFT_SOAK_OUT=$(SOAK_OUT) $(GO) test -tags soak -run '^TestSoak$$' -count=1 \
		-timeout $$(( s + 900 ))s -v ./tests/system

# A short run of each fuzz target (go test fuzzes one target at a time);
# the seed corpora and every past finding are under testdata/fuzz/ and
# also run as plain tests above. FUZZTIME=500000x or 2m fuzzes longer.
# The default is a count of inputs, not a duration: with a duration, Go
# 1.26's fuzzing coordinator can report "context deadline exceeded" as a
# failure at the deadline while a worker is mid-input (golang/go#75804,
# fixed in Go 1.27), without any failing input.
FUZZTIME ?= 50000x
FUZZ_TARGETS := \
	FuzzReadResponse:./controller/varnishadm \
	FuzzParseVCLList:./controller/varnishadm \
	FuzzParseSettings:./controller/config \
	FuzzParse:./controller/trace \
	FuzzForceBody:./controller/api \
	FuzzPrint:./controller/logging \
	FuzzBan:./internal/offline/ban \
	FuzzReadResponse:./internal/fastcgi \
	FuzzParseDump:./internal/sockdiag

fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		echo "fuzz $${t%%:*} ($(FUZZTIME))"; \
		$(GO) test -run '^$$' -fuzz "^$${t%%:*}\$$" -fuzztime $(FUZZTIME) $${t#*:}; \
	done

deps-if-missing:
	@command -v varnishd >/dev/null 2>&1 || bash scripts/install-deps.sh

deps:
	bash scripts/install-deps.sh

# The surge benchmark: Apache + PHP alone, through Varnish in light, with
# gearshift in auto and in heavy, plus the switch-cost Go benchmarks; writes
# BENCHMARKS.md and BENCHMARKS.png (about 14 minutes, loopback only).
bench: deps build
	bash scripts/bench.sh

# The signals benchmark on the same stack: seconds to heavy on the request
# rate vs the load, transitions with and without the traffic guard, heavy on
# Apache's workers or the backend's latency with idle CPUs, the daemon's CPU
# with every source on (about 8 minutes, loopback only); its tables go to
# $SIG_OUT/signals.md (/tmp/gearshift-bench-signals) and replace their earlier
# section at the end of BENCHMARKS.md (below the line make bench keeps).
bench-signals: deps build
	SIG_APPEND="$${BENCH_DOC:-$(CURDIR)/BENCHMARKS.md}" bash scripts/bench/signals.sh

# The open-loop surge on Debian's real WordPress (BenchmarkSurge): what
# Apache alone serves (C), then 20 s quiet and 60 s of 10 x C requests/s
# (vegeta, a constant arrival rate; fbclid/utm parameters, 5 logged-in
# users) with light pinned, gearshift in auto and heavy pinned, each on a
# fresh cache, then Apache stopped for 30 s under light (about 10-15
# minutes, loopback only). Its section goes to $SURGE_OUT
# (/tmp/gearshift-bench-surge/surge.md) and replaces its earlier one in
# BENCHMARKS.md (else goes at its end), its chart beside it as
# BENCHMARKS-surge.png.
# STACK=fpm: on Apache event + PHP-FPM instead of prefork + mod_php, a
# section (and BENCHMARKS-surge-fpm.png) of its own. FRONT=hitch: the
# surge in auto over plain http and through TLS (Debian's hitch, PROXY
# v2) side by side, and the CPU hitch and PHP took (about 10 minutes), a
# section (and BENCHMARKS-surge-tls.png) of its own, after the plain
# surge's. SHAPE=ramp or SHAPE=bursts: the daemon in auto alone under a
# ramp (quiet to 10 x C over 2 minutes, back over 3) or three 1-minute
# bursts a minute apart (about 7 minutes each), a section (and
# BENCHMARKS-surge-ramp.png or -bursts.png) of its own each; SHAPE=step
# (the default) is the surge above.
bench-surge: deps
	SURGE_APPEND="$${BENCH_DOC:-$(CURDIR)/BENCHMARKS.md}" GO="$(GO)" STACK="$(STACK)" FRONT="$(FRONT)" SHAPE="$(SHAPE)" bash scripts/bench/surge.sh

# Hostile visitors (issue 29), side by side in one run (about 12 minutes,
# loopback only): hit throughput before and after 20,000 session writes
# with random cookies, heavy with varnish-modules against its Plain twin
# (0.3's bans), on the session site (BenchmarkSessionWritesAndHits); then
# 20 visitors and 5 logged-in users browsing Debian's WordPress in heavy
# without a flood and with one client flooding at 300 req/s from
# 127.0.0.2 (a process of its own), three rounds in alternate order, then
# once with that flood and client_budget.rate: 0 (BenchmarkFlood). Tables
# to /tmp/gearshift-bench-flood/bans.md and flood.md (BANS_OUT,
# FLOOD_OUT); BANS_PAGES, BANS_WRITES, FLOOD_FOR, FLOOD_RATE, FLOOD_ROUNDS
# shorten it.
.PHONY: bench-flood
bench-flood: deps-if-missing
	$(GO) test -run '^$$' -bench '^BenchmarkSessionWritesAndHits$$' -benchtime 1x -timeout 20m ./profiles/apps
	$(GO) test -run '^$$' -bench '^BenchmarkFlood$$' -benchtime 1x -timeout 30m ./tests/system

# One site's surge among neighbours (BenchmarkSites): Debian's WordPress
# serving three sites from one Apache behind one varnishd; one site at
# 10 x its capacity (open loop, the click mix) while the two others keep
# steady traffic with logged-in users, with 0.4's single gear and with a
# site per host, side by side in one run (about 10 minutes, loopback
# only). Its section goes to $SITES_OUT (/tmp/gearshift-bench-sites/
# sites.md) and replaces its earlier one in BENCHMARKS.md, its chart
# beside it as BENCHMARKS-sites.png; bench-surge's SURGE_* knobs apply.
.PHONY: bench-sites
bench-sites: deps
	SITES_APPEND="$${BENCH_DOC:-$(CURDIR)/BENCHMARKS.md}" GO="$(GO)" bash scripts/bench/sites.sh

# Many sites on one Varnish: 300 sites beside one, side by side on a
# varnishd each (config checks, rendering, the first sync, loaded VCLs, a
# one-site shift, a poll's sync; about a minute), then three daemons
# side by side, without sites, with one and with 300, each on a varnishd
# of its own: their CPU per poll over two minutes (about four minutes).
.PHONY: bench-sites-scale
bench-sites-scale: deps-if-missing
	$(GO) test -run '^$$' -bench '^BenchmarkSitesScale$$' -benchtime 1x -timeout 20m ./controller/varnish
	$(GO) test -run '^$$' -bench '^BenchmarkSitesPoll$$' -benchtime 1x -timeout 20m ./tests/system

# The fleet recipe, side by side in one run: the seconds from a database
# surge to three nodes in heavy on Prometheus queries, against a node on
# its machine's signals alone, and the cost of the queries per poll
# (Debian's prometheus, prometheus-mysqld-exporter and MariaDB; about 3 min).
bench-fleet: deps
	$(GO) test -run '^$$' -bench '^BenchmarkPrometheusRead$$' -benchtime 500x ./controller/sensor
	$(GO) test -run '^$$' -bench '^BenchmarkFleetSurge$$' -benchtime 3x -timeout 30m ./tests/system

# The flight recorder's cost: a day at one record a second, the CPU of a
# record and the bytes of a day, plain and compressed (a few seconds).
bench-history:
	$(GO) test -run '^$$' -bench '^BenchmarkRecorderDay$$' -benchtime 3x ./controller/history

# A local Apache + PHP site, Varnish (http, and https through Debian's
# hitch speaking PROXY v2 to it: both URLs in the banner) and gearshift on
# loopback; Ctrl-C stops all. DEMO_SECONDS=90 make demo runs for 90 s and
# exits 0; SITE=wordpress
# puts Debian's WordPress (and a private MariaDB) behind it instead;
# STACK=fpm runs PHP as PHP-FPM behind Apache's event MPM, its pool's
# status read by gearshift (sensor.phpfpm).
demo: deps build
	DEMO_SITE="$(or $(SITE),php)" STACK="$(or $(STACK),mod_php)" bash scripts/demo.sh

# The manual, gearshift(8) and gearshift-<command>(8), into bin/man.
man: build
	$(BIN) manpages bin/man

# gearshift_<version>_<arch>.deb here, built with dpkg-deb (see docs/operating.md).
deb:
	sh scripts/deb/build.sh

# For hosts without the Debian package: PREFIX (/usr/local), DESTDIR.
# A config file changed since it was installed is kept; the new one goes
# beside it as .dist.
install: build
	DESTDIR="$(DESTDIR)" PREFIX="$(PREFIX)" sh scripts/install.sh $(BIN)

# Removes what install put there; keeps changed config files and the logs
# (PURGE=1 removes them too).
uninstall:
	DESTDIR="$(DESTDIR)" PREFIX="$(PREFIX)" sh scripts/install.sh --uninstall

clean:
	rm -rf bin gearshift_*.deb

# The cost of the reason words (docs/reasons.md): heavy's throughput with
# and without its std.log lines, side by side in one varnishd (wrk on
# loopback, 5 pairs of alternating 3 s runs, on hits and on passes), and
# the CPU of gearshift top while the passes run (about 70 s).
.PHONY: bench-reasons
bench-reasons: build
	GEARSHIFT_BIN=$(CURDIR)/$(BIN) $(GO) test -run '^$$' -bench '^BenchmarkReasons$$' -benchtime 1x -timeout 10m ./controller/top
