package system

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/sensor"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/internal/testsupport/lampstack"
)

// BenchmarkFPMSurge is issue 31's side by side: the open-loop surge of
// BenchmarkSurge on WordPress on Apache event + PHP-FPM, run by the daemon
// in auto two ways, each on a fresh cache and a fresh daemon: with the
// default config (the load alone), and with sensor.phpfpm on (the pool's
// status socket, its own socket's accept queue) and that source's default
// rules (docs/signals.md: a queue is moderate, nine children busy in ten
// heavy), as a config that leaves the rules out gets them. FPM_ROUNDS (2)
// rounds, each running both, the second round in the other order; before
// each run it waits (SURGE_SETTLE at most) for a quiet machine. It
// reports, for each run, the seconds from the surge's start to moderate
// and to heavy, the reason of the first shift, and how the surge fared;
// the table goes to FPM_OUT (/tmp/gearshift-bench-fpm/fpm.md). The SURGE_*
// knobs of BenchmarkSurge apply (STACK does not: this is PHP-FPM's).
//
//	go test -run '^$' -bench '^BenchmarkFPMSurge$' -benchtime 1x -timeout 40m ./tests/system
func BenchmarkFPMSurge(b *testing.B) {
	k := surgeKnobsFromEnv(b)
	k.stack = lampstack.FPM
	rounds := 2
	if v := os.Getenv("FPM_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("FPM_ROUNDS=%q: want a positive count", v)
		}
		rounds = n
	}
	out := os.Getenv("FPM_OUT")
	if out == "" {
		out = "/tmp/gearshift-bench-fpm/fpm.md"
	}
	st := startSurgeStack(b, lampstack.FPM)
	// The load alone, as 0.4's default config read it: not this
	// varnishd's counters (backend_busy's rule would join the defaults).
	loadAlone := func(cfg *config.Config) { cfg.Varnish.Targets[0].Name = "/nonexistent" }
	withFPM := func(cfg *config.Config) {
		cfg.Sensor.PHPFPM.Socket, cfg.Sensor.PHPFPM.Listen = st.apache.FPMStatusSocket(), st.apache.FPMSocket()
		cfg.Sensor.PHPFPM.Path = "/fpm-status"
		addSourceRules(b, cfg, "phpfpm")
	}
	for range b.N {
		rep := &fpmReport{started: time.Now(), loadBefore: surgeLoadavg(), knobs: k}
		rep.capacity = st.capacity(b, k.capacityFor)
		rep.rate = max(1, int(rep.capacity*k.factor+0.5))
		b.Logf("fpm surge: Apache alone serves %.1f req/s; the surge offers %d req/s", rep.capacity, rep.rate)
		ways := []struct {
			name string
			edit func(*config.Config)
		}{{"load alone", loadAlone}, {"with the fpm queue", withFPM}}
		for round := 1; round <= rounds; round++ {
			for i := range ways {
				w := ways[i]
				if round%2 == 0 {
					w = ways[len(ways)-1-i]
				}
				settled := st.settle(b, k.settle)
				st.edit = w.edit
				r := st.surgeRun(b, w.name, "", k, rep.rate)
				st.edit = nil
				row := fpmRow{round: round, run: r, settled: settled, reason: firstShift(b, st.daemon.cfg.Log.File)}
				row.toModerate, row.toHeavy = r.mon.firstAt(r.surgeAt, "moderate", "heavy"), r.mon.firstAt(r.surgeAt, "heavy")
				b.Logf("fpm surge: round %d, %s: moderate after %s, heavy after %s (%s)", round, w.name, since(row.toModerate), since(row.toHeavy), row.reason)
				rep.rows = append(rep.rows, row)
			}
		}
		rep.elapsed = time.Since(rep.started)
		rep.write(b, out)
		b.ReportMetric(rep.capacity, "capacity-req/s")
		b.ReportMetric(0, "ns/op")
	}
}

// addSourceRules adds the default conditions of the named source to the
// config's rules where they have none on its signals, as loading a config
// file that leaves the rules out does (config.Config.addSourceRules): the
// benchmark's config file gives every rule.
func addSourceRules(tb testing.TB, cfg *config.Config, name string) {
	tb.Helper()
	for _, src := range sensor.Sources {
		if src.Name != name {
			continue
		}
		for st, b := range cfg.States.Bands() {
			if b == nil {
				continue
			}
			for sig, v := range src.Rules[st].Enter {
				b.Enter[sig] = v
			}
			for sig, v := range src.Rules[st].Stay {
				b.Stay[sig] = v
			}
		}
		return
	}
	tb.Fatalf("no source %q", name)
}

// firstAt is when the gear was first one of gears at or after from,
// relative to from (0 when it already was at from), or -1 if never.
func (m *monitor) firstAt(from time.Duration, gears ...string) time.Duration {
	before := m.gearAt(from)
	for _, g := range gears {
		if before == g {
			return 0
		}
	}
	for _, x := range m.gears {
		if x.at < from {
			continue
		}
		for _, g := range gears {
			if x.gear == g {
				return x.at - from
			}
		}
	}
	return -1
}

func since(d time.Duration) string {
	if d < 0 {
		return "never"
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

// firstShift is the reason of the first state change up the daemon logged
// to file ("none" without one).
func firstShift(tb testing.TB, file string) string {
	tb.Helper()
	f, err := os.Open(file)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var l struct{ Msg, From, To, Reason string }
		if json.Unmarshal(sc.Bytes(), &l) != nil || l.Msg != "state change" {
			continue
		}
		from, _ := state.Parse(l.From)
		to, _ := state.Parse(l.To)
		if to > from {
			return fmt.Sprintf("%s → %s: %s", l.From, l.To, l.Reason)
		}
	}
	return "none"
}

// fpmReport is BenchmarkFPMSurge's result.
type fpmReport struct {
	knobs      surgeKnobs
	started    time.Time
	elapsed    time.Duration
	loadBefore float64
	capacity   float64
	rate       int
	rows       []fpmRow
}

type fpmRow struct {
	round               int
	run                 *surgeRun
	settled             float64 // load average at the run's start, after waiting
	toModerate, toHeavy time.Duration
	reason              string
}

// fpmHeading is the section's heading in BENCHMARKS.md.
const fpmHeading = "## Time to heavy on PHP-FPM: the pool's queue against the load alone (0.4)"

func (rep *fpmReport) write(tb testing.TB, out string) {
	tb.Helper()
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		tb.Fatal(err)
	}
	k := rep.knobs
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	p("%s", fpmHeading)
	p("")
	p("Measured %s with `BenchmarkFPMSurge` (tests/system) at commit %s: %d CPUs, %s; %s, %s, %s.",
		rep.started.UTC().Format("2006-01-02 15:04 UTC"), commit(tb), runtime.NumCPU(), cpuModel(), version("varnishd", "-V"), version("apache2", "-v"), version("php-fpm8.2", "-v"))
	p("Load average before the run: %.2f (the machine is shared: others' work counts). The run took %s.", rep.loadBefore, rep.elapsed.Round(time.Second))
	p("")
	p("BenchmarkSurge's WordPress and load (anonymous Zipf mix with `fbclid`/`utm_*`, %d logged-in users) on Apache event + proxy_fcgi to PHP-FPM (a static pool of %d children on a unix socket), behind varnishd, all on loopback. PHP-FPM alone serves **%.1f req/s**; each run: %s of %d req/s, then **%d req/s (%.4g×) for %s**, on a fresh cache and a fresh `gearshift run` in auto (`poll_interval` 1s, `up_confirm` 3, `backend.max_connections: %d` where the config has it).",
		len(surgeUsers), lampstack.FPMMaxChildren, rep.capacity, k.quiet, k.quietRate, rep.rate, k.factor, k.surge, apacheWorkers)
	p("`load alone`: the default config. `with the fpm queue`: the same with `sensor.phpfpm` on (the pool's `pm.status_listen` socket, and its own socket for the queue, from the kernel) and that source's default rules beside the load's: `phpfpm_queue >= 1` moderate, `phpfpm_busy_ratio >= 0.90` heavy (stay `>= 0.70`). The rounds alternate the order; each run first waited (%s at most) for the load average to fall below half a CPU per CPU.", k.settle)
	p("")
	p("| round | run | load avg at start | gear at the surge | to moderate | to heavy | first shift | anonymous ok | p50 / p99 / max s | time to protect | backend requests |")
	p("|---:|---|---:|---|---:|---:|---|---:|---:|---:|---:|")
	for _, r := range rep.rows {
		s := r.run.summary()
		p("| %d | `%s` | %.2f | %s | %s | %s | %s | %s of %d | %s | %s | %d |", r.round, r.run.name, r.settled, s.gearAtSurge,
			since(r.toModerate), since(r.toHeavy), r.reason, pct(s.anonOK), s.anonN, lat(s.lat), s.protect, s.backend)
	}
	p("")
	p("To moderate, to heavy: from the surge's start until the daemon's status first said so (read every 0.5 s). First shift: the daemon's log line of its first shift up.")
	if err := os.WriteFile(out, []byte(b.String()), 0o644); err != nil {
		tb.Fatal(err)
	}
	tb.Logf("fpm surge: report in %s", out)
}
