# gearshift — see README.md.
GO      ?= go
BIN     := bin/gearshift
export PATH := $(PATH):/usr/local/go/bin:/usr/sbin

.PHONY: all build test bench demo deps deps-if-missing clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/gearshift

# Unit and integration tests; integration tests start real varnishd instances.
test: deps-if-missing
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 20m ./...

deps-if-missing:
	@command -v varnishd >/dev/null 2>&1 || bash scripts/install-deps.sh

deps:
	bash scripts/install-deps.sh

# End-to-end: Apache + PHP through Varnish with each gear pinned by gearshift,
# plus the varnishadm micro-benchmarks, in one table (about 2 minutes).
bench: deps build
	bash scripts/bench.sh

# A local Apache + PHP site, Varnish and gearshift on loopback; Ctrl-C stops
# all. DEMO_SECONDS=90 make demo runs for 90 s and exits 0; SITE=wordpress
# puts Debian's WordPress (and a private MariaDB) behind it instead.
demo: deps build
	DEMO_SITE="$(or $(SITE),php)" bash scripts/demo.sh

clean:
	rm -rf bin
