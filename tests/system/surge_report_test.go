package system

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gearshift/gearshift/internal/testsupport/lampstack"
)

// surgeReport is BenchmarkSurge's result, written as a markdown section
// (a "## " heading, so make bench-surge can replace it in BENCHMARKS.md)
// and a chart beside it.
type surgeReport struct {
	knobs                  surgeKnobs
	started                time.Time
	elapsed                time.Duration
	cpus, posts            int
	subscribers            int
	loadBefore             float64
	capacity               float64 // C: 200s per second from Apache alone
	rate                   int     // the surge's anonymous req/s
	settled, outageSettled float64 // load averages after waiting for a quiet machine
	maxConnections         int
	runs                   []*surgeRun // none, auto, heavy
	outage                 *surgeRun
	session                *sessionReport // nil: not run (SURGE_SESSION=0)
}

// surgeHeading is the section's heading for a run on php's stack; make
// bench-surge replaces the section under it, so a run on PHP-FPM stands
// beside the one on mod_php.
func surgeHeading(php lampstack.Stack) string {
	if php == lampstack.FPM {
		return "## An open-loop surge on WordPress on PHP-FPM (0.4)"
	}
	return "## An open-loop surge on WordPress (0.4)"
}

// runSummary is what the report says of one surge run.
type runSummary struct {
	anonOK, userOK, first10OK float64
	anonN, userN              int
	lat, lat10                [3]time.Duration // p50, p99, max of the time to a good answer
	protect                   string
	backend, backend10        int
	distinct10                int // distinct cache objects asked for in the first 10 s
	hitRatio                  float64
	gearAtSurge, toHeavy      string
}

func ratio(n, of int) float64 {
	if of == 0 {
		return math.NaN()
	}
	return float64(n) / float64(of)
}

func (r *surgeRun) between(from, to time.Duration) []hit {
	var out []hit
	for _, h := range r.hits {
		if h.at >= from && h.at < to {
			out = append(out, h)
		}
	}
	return out
}

func okRatio(hs []hit, user bool) (float64, int) {
	n, ok := 0, 0
	for _, h := range hs {
		if h.user == user {
			n++
			if h.ok() {
				ok++
			}
		}
	}
	return ratio(ok, n), n
}

func latencies(hs []hit) (out [3]time.Duration) {
	ds := make([]time.Duration, len(hs))
	for i, h := range hs {
		ds[i] = h.good()
	}
	return [3]time.Duration{quantile(ds, 0.5), quantile(ds, 0.99), quantile(ds, 1)}
}

// second is one second of a run, for the chart and the time to protect.
type second struct {
	offered, ok, backend int
	p99                  time.Duration // of the time to a good answer
	gear                 string
}

func (r *surgeRun) seconds() []second {
	var end time.Duration
	for _, h := range r.hits {
		end = max(end, h.at)
	}
	n := int(end/time.Second) + 1
	out := make([]second, n)
	ds := make([][]time.Duration, n)
	for _, h := range r.hits {
		i := int(h.at / time.Second)
		out[i].offered++
		if h.ok() {
			out[i].ok++
		}
		ds[i] = append(ds[i], h.good())
	}
	for i := range out {
		out[i].p99 = quantile(ds[i], 0.99)
		t := time.Duration(i+1) * time.Second
		out[i].backend = r.mon.backendAt(t) - r.mon.backendAt(t-time.Second)
		out[i].gear = r.mon.gearAt(t)
	}
	return out
}

func (r *surgeRun) summary() runSummary {
	var s runSummary
	surge := r.between(r.surgeAt, r.surgeEnd)
	first := r.between(r.surgeAt, r.surgeAt+10*time.Second)
	s.anonOK, s.anonN = okRatio(surge, false)
	s.userOK, s.userN = okRatio(surge, true)
	s.first10OK, _ = okRatio(first, false)
	s.lat, s.lat10 = latencies(surge), latencies(first)
	hits := 0
	objects := map[string]bool{}
	for _, h := range surge {
		if h.cache == "HIT" || h.cache == "STALE" {
			hits++
		}
	}
	for _, h := range first {
		objects[fmt.Sprint(h.user, h.page)] = true
	}
	s.hitRatio = ratio(hits, len(surge))
	s.distinct10 = len(objects)
	s.backend = r.mon.backendAt(1<<62) - r.mon.backendAt(r.surgeAt)
	s.backend10 = r.mon.backendAt(r.surgeAt+10*time.Second) - r.mon.backendAt(r.surgeAt)

	s.protect = "never"
	secs := r.seconds()
	from, to := int(r.surgeAt/time.Second), min(int(r.surgeEnd/time.Second), len(secs))
	for i := to - 1; i >= from-1; i-- {
		if i < from || secs[i].p99 >= time.Second {
			if i < to-1 {
				s.protect = fmt.Sprintf("%d s", i+1-from)
			}
			break
		}
	}
	s.gearAtSurge = r.mon.gearAt(r.surgeAt)
	s.toHeavy = "never"
	for _, g := range r.mon.gears {
		if g.at >= r.surgeAt && g.gear == "heavy" {
			s.toHeavy = fmt.Sprintf("%.1f s", (g.at - r.surgeAt).Seconds())
			break
		}
	}
	if s.gearAtSurge == "heavy" {
		s.toHeavy = "0 s (heavy before)"
	}
	return s
}

// firstSeconds tells the anonymous failures and the p99 of each of the
// surge's first n seconds, for a run's log line.
func (r *surgeRun) firstSeconds(n int) string {
	var b strings.Builder
	secs := r.seconds()
	failed := 0
	for _, h := range r.between(r.surgeAt, r.surgeEnd) {
		if !h.user && !h.ok() {
			failed++
		}
	}
	fmt.Fprintf(&b, "%d anonymous failures; the first seconds (failures, p99):", failed)
	from := int(r.surgeAt / time.Second)
	for i := from; i < min(from+n, len(secs)); i++ {
		fails := 0
		for _, h := range r.between(time.Duration(i)*time.Second, time.Duration(i+1)*time.Second) {
			if !h.user && !h.ok() {
				fails++
			}
		}
		fmt.Fprintf(&b, " %d, %.2f s;", fails, secs[i].p99.Seconds())
	}
	// What the slow answers of those seconds were: over a second, by
	// X-Cache and whose.
	slow := map[string]int{}
	for _, h := range r.between(r.surgeAt, r.surgeAt+time.Duration(n)*time.Second) {
		if h.ok() && h.latency > time.Second {
			who := "anonymous"
			if h.user {
				who = "logged-in"
			}
			slow[who+" "+h.cache]++
		}
	}
	fmt.Fprintf(&b, " answers over 1 s: %v", slow)
	return b.String()
}

func pct(f float64) string {
	if math.IsNaN(f) {
		return "–"
	}
	return fmt.Sprintf("%.1f %%", f*100)
}

func secs(d time.Duration) string { return fmt.Sprintf("%.2f", d.Seconds()) }

func lat(l [3]time.Duration) string { return secs(l[0]) + " / " + secs(l[1]) + " / " + secs(l[2]) }

func goal(ok bool) string {
	if ok {
		return "met"
	}
	return "**not met**"
}

var runNotes = map[string]string{
	"plain": "Varnish passing every page: the server without gearshift",
	"none":  "gearshift's light pinned",
	"auto":  "the daemon in auto, default config",
	"heavy": "heavy pinned before the surge",
	"http":  "auto, plain http straight to varnishd",
	"https": "auto, TLS through hitch, PROXY v2",
}

func (rep *surgeReport) write(tb testing.TB, out string) {
	tb.Helper()
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		tb.Fatal(err)
	}
	chart := strings.TrimSuffix(out, filepath.Ext(out)) + ".png"
	rep.chart(tb, chart)
	link := os.Getenv("SURGE_CHART_LINK")
	if link == "" {
		link = filepath.Base(chart)
	}
	k := rep.knobs
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	p("%s", surgeHeading(k.stack))
	p("")
	p("Measured %s with `make bench-surge` (`BenchmarkSurge`, tests/system) at commit %s: %d CPUs, %s; %s, %s.",
		rep.started.UTC().Format("2006-01-02 15:04 UTC"), commit(tb), rep.cpus, cpuModel(), version("varnishd", "-V"), version("apache2", "-v"))
	p("Load average before the run: %.2f (the machine is shared: others' work counts). The run took %s.", rep.loadBefore, rep.elapsed.Round(time.Second))
	p("")
	php, workers := fmt.Sprintf("Apache prefork (%d workers) + mod_php", apacheWorkers), "Apache's MaxRequestWorkers"
	if k.stack == lampstack.FPM {
		php, workers = fmt.Sprintf("Apache event + proxy_fcgi to PHP-FPM (a static pool of %d children on a unix socket)", apacheWorkers), "the pool's pm.max_children"
	}
	p("Debian's WordPress (%d posts and \"Hello world!\", a comment on each, %d subscribers logged in) on %s and a private MariaDB, behind varnishd (`-s malloc,64m`), all on loopback.",
		rep.posts, rep.subscribers, php)
	mc := "`backend.max_connections` is not a config key yet, so none is set"
	if rep.maxConnections > 0 {
		mc = fmt.Sprintf("`backend.max_connections: %d` (%s)", rep.maxConnections, workers)
	}
	p("Each run has a fresh varnishd cache and a fresh `gearshift run` with the default config: only its target (with the instance's name: the daemon reads its Varnish's counters and log, as the default config does the host's one instance), backend and files set, %s.", mc)
	p("Load, from vegeta's open-loop attacker (a constant arrival rate whatever the server does): anonymous requests to the home page and the posts with Zipf popularity (s = %.1f: the home page and three posts take about 73 %%), %.0f %% with a unique `?fbclid=`, %.0f %% with `utm_source`/`utm_medium`/`utm_campaign`; plus %d logged-in users at 1 request/s each, on the same pages with their WordPress cookies.",
		surgeZipf, surgeFbclid*100, surgeUTM*100, rep.subscribers)
	p("A request succeeds with a 200 within %s. Latencies are the time to a 200, a failure counting as the %s timeout.", surgeTimeout, surgeTimeout)
	p("")
	p("**Capacity**: Apache alone serves **%.1f req/s** of the anonymous mix (a closed loop of %d clients for %s). Each run: %s of %d req/s, then **%d req/s (%.4g× capacity) for %s**.",
		rep.capacity, apacheWorkers, k.capacityFor, k.quiet, k.quietRate, rep.rate, k.factor, k.surge)
	p("")
	p("| run | anonymous ok | logged-in ok | anonymous ok, first 10 s | p50 / p99 / max s | same, first 10 s | time to protect | backend requests (first 10 s) | hit ratio | gear at the surge | heavy after |")
	p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|")
	sums := map[string]runSummary{}
	for _, r := range rep.runs {
		s := r.summary()
		sums[r.name] = s
		heavy := s.toHeavy
		if r.name != "auto" {
			heavy = "forced"
		}
		p("| `%s` (%s) | %s of %d | %s of %d | %s | %s | %s | %s | %d (%d) | %.3f | %s | %s |", r.name, runNotes[r.name],
			pct(s.anonOK), s.anonN, pct(s.userOK), s.userN, pct(s.first10OK), lat(s.lat), lat(s.lat10), s.protect,
			s.backend, s.backend10, s.hitRatio, s.gearAtSurge, heavy)
	}
	p("")
	for _, r := range rep.runs {
		anon, anonErr := tally(r.between(r.surgeAt, r.surgeEnd), false)
		user, userErr := tally(r.between(r.surgeAt, r.surgeEnd), true)
		p("- `%s`, the surge's 200s by `X-Cache`: anonymous %s (failures: %s); logged-in %s (failures: %s).", r.name, anon, anonErr, user, userErr)
	}
	p("")
	p("A publish half-way through the surge: a `PURGE` of the home page from the server itself, as a WordPress purge plugin sends it (`profiles.soft_purge: heavy`, the default).")
	p("")
	for _, r := range rep.runs {
		if r.purge != nil {
			p("%s", r.purgeLine())
		}
	}
	p("")
	p("Time to protect: from the surge's start until the per-second p99 stays under 1 s for the rest of the surge. Backend requests: lines of Apache's access log from the surge's start to the last answer. Hit ratio: `X-Cache: HIT` answers over all requests of the surge. The auto run started after waiting (%s at most) for the load average to fall below half a CPU per CPU: %.2f then.",
		k.settle, rep.settled)
	p("")
	a, h := sums["auto"], sums["heavy"]
	p("| goal (issues 27 and 41) | measured | |")
	p("|---|---:|---|")
	p("| auto: anonymous ok ≥ 99.9 %% | %s | %s |", pct(a.anonOK), goal(a.anonOK >= 0.999))
	p("| auto: logged-in ok ≥ 99 %% | %s | %s |", pct(a.userOK), goal(a.userOK >= 0.99))
	p("| auto: time to protect ≤ 5 s | %s | %s |", a.protect, goal(a.protect != "never" && protectSeconds(a.protect) <= 5))
	p("| heavy: hit ratio ≥ 0.98 | %.3f | %s |", h.hitRatio, goal(h.hitRatio >= 0.98))
	p("| heavy: backend requests in the first 10 s ≤ distinct objects asked for (pages, and pages per logged-in user) | %d ≤ %d | %s |", h.backend10, h.distinct10, goal(h.backend10 <= h.distinct10))
	p("| auto: logged-in ok ≥ 99.5 %% (issue 41) | %s | %s |", pct(a.userOK), goal(a.userOK >= 0.995))
	p("| auto: anonymous ok in the first 10 s ≥ 99 %% (issue 41) | %s | %s |", pct(a.first10OK), goal(a.first10OK >= 0.99))
	p("| auto: surge start → heavy ≤ 2 s (issue 41) | %s | %s |", a.toHeavy, goal(strings.HasSuffix(a.toHeavy, " s") && protectSeconds(a.toHeavy) <= 2))
	p("| auto: time to protect ≤ 3 s (issue 41) | %s | %s |", a.protect, goal(a.protect != "never" && protectSeconds(a.protect) <= 3))
	if r := rep.run("auto"); r != nil && r.purge != nil {
		n, failed := r.homeAnswers()
		p("| auto: a PURGE of the home page: anonymous backend fetches of it in the next 10 s ≤ 2, failures 0 (issue 41) | %d, %d of %d | %s |", r.purge.fetches, failed, n, goal(r.purge.fetches <= 2 && failed == 0))
	}
	o := rep.outage.outage()
	p("| outage: anonymous requests for pages seen before answered 200 ≥ 99 %% | %s | %s |", pct(o.seenOK), goal(o.seenOK >= 0.99))
	p("")
	p("**Backend outage.** The daemon in auto (%s in the outage), %d anonymous req/s of the same mix and the %d logged-in users; after %s Apache stops (SIGTERM) and is started again %s later (it answered again %.1f s after it stopped). Load average at the start: %.2f.",
		o.gears, k.outageRate, rep.subscribers, k.outageWarm, k.outage, (rep.outage.outageTo - rep.outage.outageFrom).Seconds(), rep.outageSettled)
	p("")
	p("| during the outage | requests | answered 200 | the 200s' X-Cache | errors |")
	p("|---|---:|---:|---|---|")
	p("| anonymous | %d | %s | %s | %s |", o.anonN, pct(o.anonOK), o.anonCache, o.anonErrors)
	p("| anonymous, pages seen before | %d | %s | | |", o.seenN, pct(o.seenOK))
	p("| logged-in | %d | %s | %s | %s |", o.userN, pct(o.userOK), o.userCache, o.userErrors)
	p("")
	p("![Per second, each run: offered requests, 200s, backend requests; p99 and the gear](%s)", link)
	p("")
	p("Per second, one panel per run: the requests offered (sent that second), the 200s among them, the requests Apache logged; the p99 of the time to a good answer (a failure counts 5 s) and the gear (band at the top). Dashed lines: the surge, or the outage.")
	if rep.session != nil {
		rep.session.write(p, k)
	}
	if err := os.WriteFile(out, []byte(b.String()), 0o644); err != nil {
		tb.Fatal(err)
	}
	tb.Logf("surge: report in %s, chart in %s\n%s", out, chart, b.String())
}

func protectSeconds(s string) float64 {
	var f float64
	fmt.Sscanf(s, "%g", &f)
	return f
}

// outageSummary is what the outage run reports of the requests sent while
// Apache was down.
type outageSummary struct {
	anonN, seenN, userN           int
	anonOK, seenOK, userOK        float64
	anonCache, userCache          string
	anonErrors, userErrors, gears string
}

func (r *surgeRun) outage() outageSummary {
	var o outageSummary
	seen := map[int]bool{}
	for _, h := range r.between(0, r.outageFrom) {
		if !h.user && h.ok() {
			seen[h.page] = true
		}
	}
	during := r.between(r.outageFrom, r.outageTo)
	var seenHits []hit
	for _, h := range during {
		if !h.user && seen[h.page] {
			seenHits = append(seenHits, h)
		}
	}
	o.anonOK, o.anonN = okRatio(during, false)
	o.userOK, o.userN = okRatio(during, true)
	o.seenOK, o.seenN = okRatio(seenHits, false)
	o.anonCache, o.anonErrors = tally(during, false)
	o.userCache, o.userErrors = tally(during, true)
	gears := map[string]bool{}
	for _, g := range r.mon.gears {
		if g.at >= r.outageFrom && g.at < r.outageTo {
			gears[g.gear] = true
		}
	}
	o.gears = strings.Join(slices.Sorted(func(yield func(string) bool) {
		for g := range gears {
			if !yield(g) {
				return
			}
		}
	}), ", ")
	if o.gears == "" {
		o.gears = "gear unknown"
	}
	return o
}

// tally counts the X-Cache values of the 200s and the kinds of failure.
func tally(hs []hit, user bool) (cache, errs string) {
	c, e := map[string]int{}, map[string]int{}
	for _, h := range hs {
		switch {
		case h.user != user:
		case h.ok():
			c[orNone(h.cache)]++
		case h.timeout:
			e["timeout"]++
		case h.code == 0:
			e["no answer"]++
		default:
			e[fmt.Sprint(h.code)]++
		}
	}
	return counts(c), counts(e)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func counts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func commit(tb testing.TB) string {
	root := lampstack.RepoFile(tb, ".")
	out, err := exec.Command("git", "-C", root, "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(out))
	if st, _ := exec.Command("git", "-C", root, "status", "--porcelain").Output(); len(st) > 0 {
		c += " (working tree with changes)"
	}
	return c
}

func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

// version is the first line of a program's version output, trimmed to
// the version: "varnish-7.1.1" of "varnishd (varnish-7.1.1 revision …)",
// "Apache/2.4.71 (Debian)" of "Server version: Apache/2.4.71 (Debian)".
func version(prog string, args ...string) string {
	out, _ := exec.Command(prog, args...).CombinedOutput()
	l, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	l = strings.TrimPrefix(l, "Server version: ")
	if v, ok := strings.CutPrefix(l, "varnishd ("); ok {
		l = strings.Fields(v + " ")[0]
	}
	if l = strings.TrimSpace(l); l == "" {
		return prog + " (version unknown)"
	}
	return l
}
