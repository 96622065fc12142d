package system

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
	"gopkg.in/yaml.v3"

	"github.com/gearshift/gearshift/internal/testsupport/lampstack"
	"github.com/gearshift/gearshift/profiles"
)

// BenchmarkFlood is issue 29's flood on Debian's real WordPress, heavy
// pinned with the default config (the surge's stack and daemon, see
// BenchmarkSurge): FLOOD_VISITORS (20) ordinary visitors at one request a
// second each, open loop, on the surge's anonymous mix, from 127.0.0.1
// with an X-Forwarded-For of its own each (as behind a terminator on the
// host: each a client of its own, counted as forwarded, not as a local
// tool), beside the surge's 5 logged-in users at one request a second each
// (their pages are PHP's: what a flood does to the backend shows in
// theirs); and one hostile client at FLOOD_RATE (300) req/s, open loop, from
// 127.0.0.2 (a client with a budget: loopback straight is purge_acl),
// sending random search strings (/?s=<random>), random query strings
// (/?<random>=1) and XML-RPC login attempts (POST /xmlrpc.php), a third
// each, from a process of its own (hostileEnv). Side by side in one run,
// each on a fresh cache warmed with every page once, for FLOOD_FOR (60s):
// without the flood and with it, FLOOD_ROUNDS (3) times in alternate
// order, each kind's requests counted together (the p99 of sub-3 ms hits
// moves by half between single quiet runs on a shared machine); then,
// unless FLOOD_NO_BUDGET=0, once with the flood and
// profiles.client_budget.rate: 0, reloaded into the daemon. The table
// goes to FLOOD_OUT (/tmp/gearshift-bench-flood/flood.md).
//
//	go test -run '^$' -bench '^BenchmarkFlood$' -benchtime 1x -timeout 30m ./tests/system
func BenchmarkFlood(b *testing.B) {
	k := floodKnobsFromEnv(b)
	st := startSurgeStack(b, lampstack.ModPHP)
	for range b.N {
		started, load := time.Now(), surgeLoadavg()
		quiet, flood := &floodRun{}, &floodRun{}
		for i := range k.rounds {
			// Odd rounds flood first: a drift of the machine over the
			// rounds falls on both.
			q := func() { quiet.add(st.floodRun(b, "without the flood", k, 0, false)) }
			f := func() { flood.add(st.floodRun(b, "with the flood", k, k.rate, false)) }
			if i%2 == 1 {
				q, f = f, q
			}
			q()
			f()
		}
		runs := []*floodRun{quiet, flood}
		if k.noBudget {
			runs = append(runs, st.floodRun(b, "with the flood, `client_budget.rate: 0`", k, k.rate, true))
		}
		writeFloodReport(b, k, runs, started, load)
		q, f := quiet.latency(false), flood.latency(false)
		b.ReportMetric(q[1].Seconds()*1000, "quiet-p99-ms")
		b.ReportMetric(f[1].Seconds()*1000, "flood-p99-ms")
		b.ReportMetric(f[1].Seconds()/q[1].Seconds(), "p99-flood/quiet")
		b.ReportMetric(float64(flood.apacheHostile), "hostile-backend-requests")
		b.ReportMetric(float64(flood.budget()), "hostile-budget")
		b.ReportMetric(0, "ns/op")
	}
}

// floodKnobs are the benchmark's durations and rates, from the
// environment, so that a smoke run can be short.
type floodKnobs struct {
	dur      time.Duration // FLOOD_FOR (60s): each run's length
	rate     int           // FLOOD_RATE (300): the hostile client's req/s
	visitors int           // FLOOD_VISITORS (20): ordinary visitors, 1 req/s each
	rounds   int           // FLOOD_ROUNDS (3): runs without and with the flood, in alternate order
	noBudget bool          // FLOOD_NO_BUDGET (1): also the run without a budget
	out      string        // FLOOD_OUT
}

func floodKnobsFromEnv(tb testing.TB) floodKnobs {
	tb.Helper()
	k := floodKnobs{dur: 60 * time.Second, rate: 300, visitors: 20, rounds: 3, noBudget: os.Getenv("FLOOD_NO_BUDGET") != "0", out: os.Getenv("FLOOD_OUT")}
	if v := os.Getenv("FLOOD_FOR"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second {
			tb.Fatalf("FLOOD_FOR=%q: want a duration of 1s or more, such as 60s", v)
		}
		k.dur = d
	}
	for _, n := range []struct {
		name string
		dst  *int
	}{{"FLOOD_RATE", &k.rate}, {"FLOOD_VISITORS", &k.visitors}, {"FLOOD_ROUNDS", &k.rounds}} {
		if v := os.Getenv(n.name); v != "" {
			i, err := strconv.Atoi(v)
			if err != nil || i < 1 {
				tb.Fatalf("%s=%q: want a positive whole number", n.name, v)
			}
			*n.dst = i
		}
	}
	if k.out == "" {
		k.out = "/tmp/gearshift-bench-flood/flood.md"
	}
	return k
}

// maxFailuresListed bounds the failures a run's note lists one by one.
const maxFailuresListed = 10

// hostileAddr is the hostile client's address: loopback, yet not in the
// default purge_acl, so that its budget applies.
const hostileAddr = "127.0.0.2"

// hostile is the flooding client's targeter: every request a miss or a
// pass that no cache can absorb.
func (m *surgeMix) hostile() vegeta.Targeter {
	return func(t *vegeta.Target) error {
		r := strconv.FormatUint(rand.Uint64(), 36)
		switch rand.IntN(3) {
		case 0:
			*t = vegeta.Target{Method: http.MethodGet, URL: m.base + "/?s=" + r, Header: m.header("", "")}
		case 1:
			*t = vegeta.Target{Method: http.MethodGet, URL: m.base + "/?" + r + "=1", Header: m.header("", "")}
		default:
			h := m.header("", "")
			h.Set("Content-Type", "text/xml")
			*t = vegeta.Target{Method: http.MethodPost, URL: m.base + "/xmlrpc.php", Header: h, Body: []byte(
				"<?xml version=\"1.0\"?><methodCall><methodName>wp.getUsersBlogs</methodName><params>" +
					"<param><value><string>admin</string></value></param>" +
					"<param><value><string>" + r + "</string></value></param></params></methodCall>")}
		}
		return nil
	}
}

// hostileTransport is transport() dialing from hostileAddr.
func hostileTransport() *http.Transport {
	tr := transport()
	tr.DialContext = (&net.Dialer{KeepAlive: 30 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(hostileAddr)}}).DialContext
	return tr
}

// floodRun is one run's record, or the rounds' of one kind of run
// together (add).
type floodRun struct {
	name              string
	dur               time.Duration // of one round
	rate              int           // the hostile client's req/s; 0: no flood
	budgetCfg         profiles.Budget
	visitors, hostile []hit
	// Requests Apache logged over the run (and its drain), by the
	// visitor's address (%a, the address Varnish served).
	apacheHostile, apacheOthers int
	// The ordinary visitors' p99 of each round.
	p99s []time.Duration
}

// add adds a round's record to r.
func (r *floodRun) add(round *floodRun) {
	r.name, r.dur, r.rate, r.budgetCfg = round.name, round.dur, round.rate, round.budgetCfg
	r.visitors = append(r.visitors, round.visitors...)
	r.hostile = append(r.hostile, round.hostile...)
	r.apacheHostile += round.apacheHostile
	r.apacheOthers += round.apacheOthers
	r.p99s = append(r.p99s, round.latency(false)[1])
}

// rounds is how many runs r holds.
func (r *floodRun) rounds() int { return max(1, len(r.p99s)) }

// budget is what the hostile client's budget lets through over the run's
// rounds: in each (a fresh Varnish), the burst, then the rate.
func (r *floodRun) budget() int {
	if r.budgetCfg.Rate == 0 {
		return 0
	}
	return r.rounds() * (r.budgetCfg.Burst + int(r.budgetCfg.Rate*r.dur.Seconds()))
}

// latency is the p50, p99 and max of the time to a good answer of the
// anonymous visitors, or with user of the logged-in users.
func (r *floodRun) latency(user bool) [3]time.Duration { return r.latencyFrom(user, 0) }

// latencyFrom is latency over the requests sent from the run's start + from.
func (r *floodRun) latencyFrom(user bool, from time.Duration) [3]time.Duration {
	var hs []hit
	for _, h := range r.visitors {
		if h.user == user && h.at >= from {
			hs = append(hs, h)
		}
	}
	return latencies(hs)
}

// floodRun runs the ordinary visitors, and the hostile client at rate
// unless it is 0, for k.dur on a fresh cache and daemon in heavy; with
// noBudget, the daemon reloads its config with client_budget.rate: 0
// first.
func (st *surgeStack) floodRun(tb testing.TB, name string, k floodKnobs, rate int, noBudget bool) *floodRun {
	tb.Helper()
	d := st.fresh(tb, "heavy")
	r := &floodRun{name: name, dur: k.dur, rate: rate, budgetCfg: d.cfg.Profiles.ClientBudget}
	if noBudget {
		st.reloadWithoutBudget(tb, d)
		r.budgetCfg = profiles.Budget{}
	}
	st.warm(tb)
	log := lampstack.AccessLog(st.apache.Dir)
	offset := fileSize(tb, log)
	tb.Logf("flood: run %s: %d visitors at 1 req/s, hostile client at %d req/s, for %s; load average %.2f", name, k.visitors, rate, k.dur, surgeLoadavg())
	visitors := newLoad(st.mix, nil)
	// Each ordinary visitor its own address in X-Forwarded-For (the load
	// comes from 127.0.0.1, a trusted proxy): a client of its own, as the
	// logged-in users are; the hostile client connects from hostileAddr.
	visitors.attack(visitors.attacker(32, 0), st.mix.crowdOf(k.visitors).anonymous(), vegeta.ConstantPacer{Freq: k.visitors, Per: time.Second}, k.dur, false)
	visitors.attack(visitors.attacker(8, 0), st.mix.users(st.cookies), vegeta.ConstantPacer{Freq: len(st.cookies), Per: time.Second}, k.dur, true)
	var hostile *hostileProcess
	if rate > 0 {
		hostile = startHostile(tb, st.mix, rate, k.dur)
	}
	r.visitors = visitors.wait()
	visitors.tr.CloseIdleConnections()
	if hostile != nil {
		r.hostile = hostile.wait(tb)
	}
	st.drain()
	r.apacheHostile, r.apacheOthers = apacheByAddr(tb, log, offset, hostileAddr)
	l := r.latency(false)
	tb.Logf("flood: run %s: visitors p50 %s p99 %s; hostile %d sent, %d 429, %d reached Apache (budget %d)",
		name, l[0], l[1], len(r.hostile), r.count(429), r.apacheHostile, r.budget())
	return r
}

// reloadWithoutBudget sets profiles.client_budget.rate: 0 in the daemon's
// config and reloads it, as an operator would, and waits until heavy runs
// the new profile.
func (st *surgeStack) reloadWithoutBudget(tb testing.TB, d *runningDaemon) {
	tb.Helper()
	before, err := d.status()
	if err != nil {
		tb.Fatal(err)
	}
	text, err := os.ReadFile(d.configPath)
	if err != nil {
		tb.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(text, &doc); err != nil {
		tb.Fatal(err)
	}
	p, _ := doc["profiles"].(map[string]any)
	cb, _ := p["client_budget"].(map[string]any)
	if cb == nil {
		tb.Fatalf("%s has no profiles.client_budget", d.configPath)
	}
	cb["rate"] = 0
	edited, err := yaml.Marshal(doc)
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(d.configPath, edited, 0o644); err != nil {
		tb.Fatal(err)
	}
	if out, errOut, code := d.gs("reload"); code != exitOK {
		tb.Fatalf("reload without a budget: exit %d\n%s%s", code, out, errOut)
	}
	d.eventually("heavy without a budget in use", time.Minute, func() error {
		s, err := d.status()
		if err != nil {
			return err
		}
		if err := inSync(s, "heavy"); err != nil {
			return err
		}
		for i, t := range s.Targets {
			if i < len(before.Targets) && t.ActiveVCL == before.Targets[i].ActiveVCL {
				return fmt.Errorf("target %s still on %s", t.Admin, t.ActiveVCL)
			}
		}
		return nil
	})
}

// warm fetches every page of the mix once through Varnish, so that a run
// starts on the cache a site that has been browsed has.
func (st *surgeStack) warm(tb testing.TB) {
	tb.Helper()
	c := &http.Client{Transport: transport(), Timeout: surgeTimeout}
	defer c.CloseIdleConnections()
	for _, p := range st.mix.pages {
		r, err := c.Get(st.mix.base + p)
		if err != nil {
			tb.Fatalf("warming %s: %v", p, err)
		}
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
		if r.StatusCode != http.StatusOK {
			tb.Fatalf("warming %s: status %d", p, r.StatusCode)
		}
	}
}

func fileSize(tb testing.TB, file string) int64 {
	tb.Helper()
	fi, err := os.Stat(file)
	if err != nil {
		tb.Fatal(err)
	}
	return fi.Size()
}

// apacheByAddr counts the lines of Apache's access log after offset whose
// first field (%a) is addr, and the others.
func apacheByAddr(tb testing.TB, file string, offset int64, addr string) (of, others int) {
	tb.Helper()
	f, err := os.Open(file)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		tb.Fatal(err)
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if a, _, _ := strings.Cut(sc.Text(), " "); a == addr {
			of++
		} else {
			others++
		}
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return of, others
}

// count is the hostile client's answers with status code.
func (r *floodRun) count(code uint16) int {
	n := 0
	for _, h := range r.hostile {
		if h.code == code {
			n++
		}
	}
	return n
}

// hostileFetched is the hostile client's answers that Varnish had to
// fetch or pass: neither refused (429) nor served from the cache.
func (r *floodRun) hostileFetched() int {
	n := 0
	for _, h := range r.hostile {
		if h.code != 0 && h.code != http.StatusTooManyRequests && h.cache != "HIT" && h.cache != "STALE" {
			n++
		}
	}
	return n
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f", d.Seconds()*1000) }

func writeFloodReport(tb testing.TB, k floodKnobs, runs []*floodRun, started time.Time, load float64) {
	tb.Helper()
	var w strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&w, format+"\n", a...) }
	p("Run %s UTC, %d CPUs, load average %.2f at the start; %d visitors at 1 req/s each, the hostile client at %d req/s, %s per run; %d rounds of the runs without and with the flood, in alternate order, their requests counted together.",
		started.UTC().Format("2006-01-02 15:04"), runtime.NumCPU(), load, k.visitors, k.rate, k.dur, k.rounds)
	p("")
	p("| run | visitors' requests | ok | p50 / p99 / max ms | p99 / without the flood | p99 ms after the first 10 s | visitors' 200s by X-Cache | logged-in: ok, p50 / p99 ms | hostile sent | 429 | fetched (not 429, HIT or STALE) | Apache logged from it | its budget | Apache logged from others |")
	p("|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|")
	base := runs[0].latency(false)[1]
	for _, r := range runs {
		l, u := r.latency(false), r.latency(true)
		okr, n := okRatio(r.visitors, false)
		uok, _ := okRatio(r.visitors, true)
		cache, errs := tally(r.visitors, false)
		if errs != "" && errs != "none" {
			cache += "; failures " + errs
		}
		cache += fmt.Sprintf(" | %s, %s / %s", pct(uok), ms(u[0]), ms(u[1]))
		budget := "none"
		if r.rate > 0 && r.budgetCfg.Rate > 0 {
			budget = fmt.Sprintf("%d (%d + %g/s × %s)", r.budget(), r.budgetCfg.Burst, r.budgetCfg.Rate, r.dur)
			if n := r.rounds(); n > 1 {
				budget = fmt.Sprintf("%d (%d × (%d + %g/s × %s))", r.budget(), n, r.budgetCfg.Burst, r.budgetCfg.Rate, r.dur)
			}
		}
		hostile := "– | – | – | – | –"
		if r.rate > 0 {
			hostile = fmt.Sprintf("%d | %d | %d | %d | %s", len(r.hostile), r.count(429), r.hostileFetched(), r.apacheHostile, budget)
		}
		p("| %s | %d | %s | %s / %s / %s | %.2f× | %s | %s | %s | %d |", r.name, n, pct(okr), ms(l[0]), ms(l[1]), ms(l[2]),
			l[1].Seconds()/base.Seconds(), ms(r.latencyFrom(false, 10*time.Second)[1]), cache, hostile, r.apacheOthers)
	}
	p("")
	for _, r := range runs {
		if len(r.p99s) > 1 {
			each := make([]string, len(r.p99s))
			for i, d := range r.p99s {
				each[i] = ms(d)
			}
			p("- %s: the ordinary visitors' p99 of each round: %s ms", r.name, strings.Join(each, ", "))
		}
	}
	for _, r := range runs {
		if r.rate == 0 {
			continue
		}
		c := map[string]int{}
		for _, h := range r.hostile {
			c[fmt.Sprintf("%d %s", h.code, orNone(h.cache))]++
		}
		p("- %s: the hostile client's answers by status and X-Cache: %s", r.name, counts(c))
	}
	for _, r := range runs {
		var at []string
		for _, h := range r.visitors {
			if !h.ok() {
				who := "a visitor"
				if h.user {
					who = "a logged-in user"
				}
				at = append(at, fmt.Sprintf("%s %d at +%.1fs", who, h.code, h.at.Seconds()))
			}
		}
		if len(at) > 0 {
			_, ue := tally(r.visitors, true)
			if n := len(at) - maxFailuresListed; n > 0 {
				at = append(at[:maxFailuresListed], fmt.Sprintf("and %d more", n))
			}
			p("- %s: failures (status 0: no answer within %s): logged-in users' %s; %s", r.name, surgeTimeout, ue, strings.Join(at, ", "))
		}
	}
	if err := os.MkdirAll(filepath.Dir(k.out), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(k.out, []byte(w.String()), 0o644); err != nil {
		tb.Fatal(err)
	}
	tb.Logf("report in %s:\n%s", k.out, w.String())
}
