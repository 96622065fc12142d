package apps

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/internal/testsupport/lampstack"
	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
	"github.com/gearshift/gearshift/profiles"
)

// BenchmarkSessionWritesAndHits is issue 29's ban list, measured on the
// session site: what a hostile visitor's session writes cost every later
// visitor of the cache, in heavy with varnish-modules (a session's write
// drops its pages through xkey) and in heavy's Plain twin (0.3's std.ban,
// one ban per write), side by side, each on a varnishd and Apache of its
// own. Each run fills the cache with BANS_PAGES (2000) articles, each
// fetched once (heavy with strip_set_cookies: [PHPSESSID], so that the
// first fetch is stored), then serves them all once as hits (the first
// lookup of an object after a ban is the one that tests it) and for 5 s
// with wrk, then sends BANS_WRITES (20000) POSTs to the comment form, each
// with a session cookie of its own (BANS_CONNS, 16, at a time), then
// serves the pages again the same two ways. MAIN.bans is read before and
// after. Every client is loopback, straight: purge_acl, so no budget
// refuses a write and each one reaches PHP (as a crowd of addresses
// would). The table goes to BANS_OUT (/tmp/gearshift-bench-flood/bans.md).
//
//	go test ./profiles/apps -run '^$' -bench SessionWritesAndHits -benchtime 1x -timeout 20m
func BenchmarkSessionWritesAndHits(b *testing.B) {
	wrk := lampstack.Need(b, "wrk", "wrk")["wrk"]
	k := bansKnobsFromEnv(b)
	var rows []bansRow
	for _, run := range []struct {
		name  string
		plain bool
	}{{"heavy", false}, {"heavy-plain", true}} {
		b.Run(run.name, func(b *testing.B) {
			for range b.N {
				r := bansRun(b, wrk, k, run.plain)
				r.name = run.name
				rows = append(rows, r)
				b.ReportMetric(r.before.pass, "first-pass-before-hits/s")
				b.ReportMetric(r.after.pass, "first-pass-after-hits/s")
				b.ReportMetric(r.after.pass/r.before.pass, "first-pass-after/before")
				b.ReportMetric(r.after.wrk/r.before.wrk, "wrk-after/before")
				b.ReportMetric(float64(r.bansAfter), "bans-after")
				b.ReportMetric(0, "ns/op")
			}
		})
	}
	writeBansReport(b, k, rows)
}

// bansKnobs are the benchmark's sizes, from the environment, so that a
// smoke run can be small.
type bansKnobs struct {
	pages, writes, conns int
	out                  string
}

func bansKnobsFromEnv(tb testing.TB) bansKnobs {
	tb.Helper()
	num := func(name string, def int) int {
		v := os.Getenv(name)
		if v == "" {
			return def
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			tb.Fatalf("%s=%q: want a positive whole number", name, v)
		}
		return n
	}
	k := bansKnobs{pages: num("BANS_PAGES", 2000), writes: num("BANS_WRITES", 20000), conns: num("BANS_CONNS", 16), out: os.Getenv("BANS_OUT")}
	if k.out == "" {
		k.out = "/tmp/gearshift-bench-flood/bans.md"
	}
	return k
}

// hitsMeasure is one measure of the cached pages.
type hitsMeasure struct {
	pass    float64       // hits/s over one pass of every page, 8 at a time
	passFor time.Duration // that pass's time
	notHit  int           // answers of the pass that were not a HIT
	wrk     float64       // req/s of wrk over the same pages for 5 s
}

// bansRow is one profile's run.
type bansRow struct {
	name                  string
	vcl                   string
	before, after         hitsMeasure
	bansBefore, bansAfter int
	writesFor             time.Duration
	writeStatus           map[int]int
}

func bansRun(b *testing.B, wrk string, k bansKnobs, plain bool) bansRow {
	b.Helper()
	s := startSessionSiteWith(b, lampstack.ModPHP, "", 0)
	cfg := s.config()
	cfg.Profiles.StripSetCookies = []string{"PHPSESSID"}
	site := cfg.Site()
	site.NoModules = plain
	text, err := profiles.Render(site, state.Heavy)
	if err != nil {
		b.Fatal(err)
	}
	row := bansRow{vcl: "bans-heavy"}
	if plain {
		row.vcl = "bans-heavy-plain"
	}
	file := filepath.Join(s.v.Dir, row.vcl+".vcl")
	lampstack.WriteFile(b, file, text)
	if out, err := s.v.Adm("vcl.load", row.vcl, file); err != nil {
		b.Fatalf("vcl.load %s: %v\n%s", row.vcl, err, out)
	}
	lampstack.Use(b, s.v, row.vcl)

	pages := make([]string, k.pages)
	for i := range pages {
		pages[i] = fmt.Sprintf("/article.php?id=%d", i+1)
	}
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: k.conns}, Timeout: time.Minute}
	defer c.Transport.(*http.Transport).CloseIdleConnections()
	// The fill: each page once, a MISS that heavy stores.
	fill := eachPage(b, c, s.v, pages, 8)
	if fill.notHit != len(pages) {
		b.Fatalf("filling the cache: %d of %d first fetches were not a MISS or PASS", len(pages)-fill.notHit, len(pages))
	}
	script := wrkPagesScript(b, k.pages)
	measure := func() hitsMeasure {
		m := eachPage(b, c, s.v, pages, 8)
		m.wrk = wrkRate(b, wrk, s.v.URL("/"), script)
		return m
	}
	row.before = measure()
	if row.before.notHit > 0 {
		b.Fatalf("before the writes: %d of %d cached pages were not a HIT", row.before.notHit, len(pages))
	}
	row.bansBefore = s.v.Counter(b, "MAIN.bans")
	start := time.Now()
	row.writeStatus = hostileWrites(b, c, s.v, k.writes, k.conns)
	row.writesFor = time.Since(start)
	row.bansAfter = s.v.Counter(b, "MAIN.bans")
	row.after = measure()
	b.Logf("%s: bans %d -> %d after %d writes in %s; first pass %.0f -> %.0f hits/s (%s -> %s), wrk %.0f -> %.0f req/s; not HIT after: %d",
		row.vcl, row.bansBefore, row.bansAfter, k.writes, row.writesFor.Round(time.Millisecond),
		row.before.pass, row.after.pass, row.before.passFor.Round(time.Millisecond), row.after.passFor.Round(time.Millisecond),
		row.before.wrk, row.after.wrk, row.after.notHit)
	return row
}

// eachPage GETs every page once, conns at a time, and returns the pass's
// rate and how many answers were not a HIT.
func eachPage(b *testing.B, c *http.Client, v *varnishtest.Varnish, pages []string, conns int) hitsMeasure {
	b.Helper()
	var next, notHit atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < int64(len(pages)); i = next.Add(1) - 1 {
				r, err := c.Get(v.URL(pages[i]))
				if err != nil {
					b.Error(err)
					return
				}
				r.Body.Close()
				if r.StatusCode != http.StatusOK {
					b.Errorf("GET %s: status %d", pages[i], r.StatusCode)
					return
				}
				if r.Header.Get("X-Cache") != "HIT" {
					notHit.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	d := time.Since(start)
	return hitsMeasure{pass: float64(len(pages)) / d.Seconds(), passFor: d, notHit: int(notHit.Load())}
}

// hostileWrites sends n POSTs to the comment form, conns at a time, each
// with a PHPSESSID of its own and no form token (the site refuses them
// with a 403, after PHP has run), and returns the statuses' counts.
func hostileWrites(b *testing.B, c *http.Client, v *varnishtest.Varnish, n, conns int) map[int]int {
	b.Helper()
	var next atomic.Int64
	var mu sync.Mutex
	status := map[int]int{}
	var wg sync.WaitGroup
	body := url.Values{"comment": {"hostile"}}.Encode()
	for w := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				req, _ := http.NewRequest(http.MethodPost, v.URL("/comment.php?id=1"), strings.NewReader(body))
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				req.Header.Set("Cookie", fmt.Sprintf("PHPSESSID=h%02dx%024d", w, i))
				r, err := c.Do(req)
				if err != nil {
					b.Error(err)
					return
				}
				r.Body.Close()
				mu.Lock()
				status[r.StatusCode]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	return status
}

// wrkPagesScript writes a wrk script that cycles each connection through
// /article.php?id=1 … n.
func wrkPagesScript(tb testing.TB, n int) string {
	tb.Helper()
	file := filepath.Join(tb.TempDir(), "pages.lua")
	lampstack.WriteFile(tb, file, fmt.Sprintf(`local i = 0
request = function()
  i = i %% %d + 1
  return wrk.format("GET", "/article.php?id=" .. i)
end
`, n))
	return file
}

var wrkRequestsPerSec = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)

// wrkRate runs wrk for 5 s (2 threads, 8 connections) with script against
// base and returns its req/s.
func wrkRate(tb testing.TB, wrk, base, script string) float64 {
	tb.Helper()
	out, err := exec.Command(wrk, "-t2", "-c8", "-d5s", "-s", script, base).CombinedOutput()
	if err != nil {
		tb.Fatalf("wrk: %v\n%s", err, out)
	}
	if e := regexp.MustCompile(`(Non-2xx or 3xx responses|Socket errors):.*`).Find(out); e != nil {
		tb.Logf("wrk: %s", e)
	}
	m := wrkRequestsPerSec.FindSubmatch(out)
	if m == nil {
		tb.Fatalf("wrk output without Requests/sec:\n%s", out)
	}
	rps, _ := strconv.ParseFloat(string(m[1]), 64)
	return rps
}

func writeBansReport(tb testing.TB, k bansKnobs, rows []bansRow) {
	tb.Helper()
	var w strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&w, format+"\n", a...) }
	p("| heavy | MAIN.bans before → after | %d writes took | first pass over %d hits, before → after | after / before | wrk hits/s, before → after | after / before |", k.writes, k.pages)
	p("|---|---:|---:|---:|---:|---:|---:|")
	for _, r := range rows {
		name := "with varnish-modules (xkey)"
		if strings.HasSuffix(r.name, "plain") {
			name = "Plain twin (0.3's `std.ban`)"
		}
		p("| %s | %d → %d | %.1f s | %.0f → %.0f hits/s (%.2f s → %.2f s) | **%.3f** | %.0f → %.0f | %.3f |",
			name, r.bansBefore, r.bansAfter, r.writesFor.Seconds(),
			r.before.pass, r.after.pass, r.before.passFor.Seconds(), r.after.passFor.Seconds(), r.after.pass/r.before.pass,
			r.before.wrk, r.after.wrk, r.after.wrk/r.before.wrk)
	}
	p("")
	for _, r := range rows {
		p("- `%s`: the writes' statuses %v; answers of the first pass after them that were not a HIT: %d", r.name, r.writeStatus, r.after.notHit)
	}
	if err := os.MkdirAll(filepath.Dir(k.out), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(k.out, []byte(w.String()), 0o644); err != nil {
		tb.Fatal(err)
	}
	tb.Logf("report in %s:\n%s", k.out, w.String())
}
