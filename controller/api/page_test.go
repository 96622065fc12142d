package api

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/history"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/controller/trace"
)

// pageNow is the page tests' clock: mid-day, so that their hours of
// history stay in one day file.
var pageNow = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func pageStatus() Status {
	return Status{
		Version:     "0.4.0",
		State:       "moderate",
		Mode:        "auto",
		Since:       pageNow.Add(-10 * time.Minute),
		Reason:      "load_per_cpu 0.82 >= 0.70 for 3 samples",
		Transitions: 4,
		Sample: &SampleStatus{
			Time: pageNow.Add(-time.Second), Load1: 1.64, Load5: 1.2, Load15: 0.9, Runnable: 2, CPUs: 2,
			Signals: map[string]*float64{"load_per_cpu": pf64(0.82), "mem_available_pct": pf64(41.3)},
		},
		Targets: []TargetStatus{{
			Admin: "127.0.0.1:6082", Reachable: true, ActiveVCL: "gearshift-moderate-1a2b3c4d",
			InSync: true, LastSwitchMS: 0.41,
		}},
		UptimeSeconds: 3600,
	}
}

// pageRules are the default config's thresholds and signals.
func pageRules(tb testing.TB) state.Config {
	tb.Helper()
	cfg := config.Default()
	set, err := cfg.Signals()
	if err != nil {
		tb.Fatal(err)
	}
	return cfg.StateConfig(set)
}

// span is a stretch of recorded history in one gear.
type span struct {
	gear   state.Gear
	reason string
	for_   time.Duration
}

// recordSpans writes the spans into the history directory dir, one record
// every 10 seconds, the last one just before end, and returns the time of
// the first record.
func recordSpans(tb testing.TB, dir string, set *state.Set, end time.Time, spans ...span) time.Time {
	tb.Helper()
	var total time.Duration
	for _, s := range spans {
		total += s.for_
	}
	start := end.Add(-total)
	rec := history.NewRecorder(history.Options{Dir: dir, Keep: 14 * 24 * time.Hour, Signals: set})
	t := start
	for _, s := range spans {
		for stop := t.Add(s.for_); t.Before(stop); t = t.Add(10 * time.Second) {
			load := 0.3 + float64(s.gear)*0.8
			err := rec.Write(trace.Sample{
				Time:     t,
				Reading:  state.Reading{Time: t, Load1: 2 * load, RunQueue: 2 * load, CPUs: 2, Values: map[string]float64{"mem_available_pct": 40}},
				Recorded: &trace.Recorded{Gear: s.gear, Reason: s.reason},
			})
			if err != nil {
				tb.Fatal(err)
			}
		}
	}
	if err := rec.Close(); err != nil {
		tb.Fatal(err)
	}
	return start
}

type pageFixture struct {
	status Status
	dir    string
	now    time.Time
}

func (f *pageFixture) page(tb testing.TB) *Page {
	rules := pageRules(tb)
	return NewPage(PageOptions{
		Status:     func() Status { return f.status },
		Rules:      func() state.Config { return rules },
		HistoryDir: f.dir,
		Now:        func() time.Time { return f.now },
	})
}

func get(tb testing.TB, h http.Handler, method, path string) (*http.Response, string) {
	tb.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	resp := rec.Result()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestPageShowsGearSignalsTargetsAndHistory(t *testing.T) {
	f := &pageFixture{status: pageStatus(), dir: t.TempDir(), now: pageNow}
	recordSpans(t, f.dir, pageRules(t).Signals, pageNow.Add(-time.Minute),
		span{state.Light, "starting in light", time.Hour},
		span{state.Moderate, "load_per_cpu 0.90 >= 0.70 for 3 samples", 30 * time.Minute},
		span{state.Heavy, "load_per_cpu 1.70 >= 1.50 for 3 samples", 20 * time.Minute},
		span{state.Light, "load_per_cpu 0.20 < 0.50 for 60s", time.Hour},
		span{state.Moderate, "load_per_cpu 0.82 >= 0.70 for 3 samples", 9 * time.Minute})
	resp, body := get(t, f.page(t), http.MethodGet, "/")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET / = %s, want 200:\n%s", resp.Status, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("Content-Type = %q", ct)
	}
	for _, want := range []string{
		`<meta http-equiv="refresh" content="10">`,
		`<h1 id="gear" class="gear moderate">MODERATE</h1>`,
		`<td id="reason">load_per_cpu 0.82 &gt;= 0.70 for 3 samples</td>`,
		// The signal against its thresholds, as `gearshift status` has it.
		`0.82   (moderate &gt;= 0.70, stays &gt;= 0.50; heavy &gt;= 1.50, stays &gt;= 1.00)`,
		"127.0.0.1:6082", "gearshift-moderate-1a2b3c4d", "in sync", "0.41 ms",
		`<figure><svg`, "Last 3h",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "<script") {
		t.Errorf("the page has a script:\n%s", body)
	}
	// Newest first: back to moderate, down to light, up to heavy, to moderate.
	rows := regexp.MustCompile(`<td><span class="gear (\w+)">`).FindAllStringSubmatch(body, -1)
	var order []string
	for _, r := range rows {
		order = append(order, r[1])
	}
	if got, want := strings.Join(order, " "), "moderate light heavy moderate"; got != want {
		t.Errorf("transitions to %q, want %q (newest first):\n%s", got, want, body)
	}
	if !strings.Contains(body, "load_per_cpu 1.70 &gt;= 1.50 for 3 samples") {
		t.Errorf("the transition to heavy lacks its reason:\n%s", body)
	}

	resp, head := get(t, f.page(t), http.MethodHead, "/")
	if resp.StatusCode != http.StatusOK || head != "" {
		t.Errorf("HEAD / = %s with %d bytes, want 200 and no body", resp.Status, len(head))
	}
}

func TestPageWithoutHistory(t *testing.T) {
	old := t.TempDir()
	recordSpans(t, old, pageRules(t).Signals, pageNow.Add(-48*time.Hour), span{state.Light, "starting in light", time.Hour})
	for _, tc := range []struct {
		name, dir, want string
	}{
		{"none yet", t.TempDir(), "No history yet: the daemon has recorded nothing in "},
		{"no directory yet", filepath.Join(t.TempDir(), "history"), "No history yet"},
		{"none in the period", old, "No history in the last 3h."},
		{"recorder off", "", "No history: the flight recorder is off (history.dir is empty)."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &pageFixture{status: pageStatus(), dir: tc.dir, now: pageNow}
			resp, body := get(t, f.page(t), http.MethodGet, "/")
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET / = %s, want 200", resp.Status)
			}
			if !strings.Contains(body, `<p class="note" id="chart-note">`+tc.want) {
				t.Errorf("the page lacks %q:\n%s", tc.want, body)
			}
			if strings.Contains(body, "<svg") {
				t.Errorf("a chart without history:\n%s", body)
			}
			if !strings.Contains(body, "No transition in the history of the last 3h.") {
				t.Errorf("the page lacks the empty transitions line:\n%s", body)
			}
			if !strings.Contains(body, "MODERATE") {
				t.Errorf("the page lacks the gear:\n%s", body)
			}
		})
	}
}

func TestPageMethodsAndPaths(t *testing.T) {
	f := &pageFixture{status: pageStatus(), now: pageNow}
	for _, tc := range []struct {
		method, path string
		want         int
	}{
		{http.MethodGet, "/", http.StatusOK},
		{http.MethodHead, "/", http.StatusOK},
		{http.MethodGet, "/index.html", http.StatusNotFound},
		{http.MethodGet, "/metrics", http.StatusNotFound}, // the daemon's mux sends it to the metrics
		{http.MethodPost, "/", http.StatusMethodNotAllowed},
		{http.MethodPut, "/", http.StatusMethodNotAllowed},
		{http.MethodDelete, "/", http.StatusMethodNotAllowed},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			resp, _ := get(t, f.page(t), tc.method, tc.path)
			if resp.StatusCode != tc.want {
				t.Errorf("%s %s = %s, want %d", tc.method, tc.path, resp.Status, tc.want)
			}
			if tc.want == http.StatusMethodNotAllowed && resp.Header.Get("Allow") != "GET, HEAD" {
				t.Errorf("Allow = %q, want GET, HEAD", resp.Header.Get("Allow"))
			}
		})
	}
}

func TestPageEscapes(t *testing.T) {
	const hostile = `<script>alert("gear")</script><img src=x onerror=alert(1)>`
	f := &pageFixture{status: pageStatus(), dir: t.TempDir(), now: pageNow}
	f.status.Reason = hostile
	f.status.ConfigError = hostile
	f.status.HistoryError = hostile
	f.status.Advice = hostile
	f.status.Targets = append(f.status.Targets, TargetStatus{Admin: "10.0.0.2:6082", Error: hostile})
	recordSpans(t, f.dir, pageRules(t).Signals, pageNow.Add(-time.Minute),
		span{state.Light, "starting in light", time.Hour},
		span{state.Heavy, hostile, time.Hour})
	_, body := get(t, f.page(t), http.MethodGet, "/")
	for _, bad := range []string{"<script", "<img"} {
		if strings.Contains(body, bad) {
			t.Errorf("the page carries %q unescaped:\n%s", bad, body)
		}
	}
	if n := strings.Count(body, "&lt;script&gt;alert(&#34;gear&#34;)&lt;/script&gt;"); n < 6 {
		t.Errorf("the hostile text is shown escaped %d times, want 6 (reason, config, history, advice, target, transition):\n%s", n, body)
	}
}

func TestPageShowsProblems(t *testing.T) {
	f := &pageFixture{status: pageStatus(), now: pageNow}
	f.status.HistoryError = "write history /var/lib/gearshift/history/2026-12-01.csv: no space left on device"
	f.status.ConfigError = "reload config: states.heavy: bad"
	f.status.Advice = "heavy for 4m but 62 % of requests reach the backend: 41 % session (cookie _my_tracker)"
	f.status.Mode = "forced"
	until := pageNow.Add(30 * time.Minute)
	f.status.ForcedUntil = &until
	f.status.Targets = []TargetStatus{{Admin: "10.0.0.2:6082", Error: "connect: connection refused"}}
	f.status.GuestPages, f.status.GuestPrivate = 12, 3
	f.status.GuestPrivateURLs = []string{"shop.example/login.php", "shop.example/meta.php"}
	_, body := get(t, f.page(t), http.MethodGet, "/")
	for _, want := range []string{
		`id="history-error"`, "no space left on device",
		`id="config-error"`, "states.heavy: bad",
		`id="advice"`, "41 % session (cookie _my_tracker)",
		"forced by the operator until 12:30:00 (30m00s left)",
		"UNREACHABLE", "connect: connection refused",
		`id="guests"`, "12 shared, 3 found private (shop.example/login.php, shop.example/meta.php, …)",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q:\n%s", want, body)
		}
	}
}

// A refresh storm reads the history once per CacheFor.
func TestPageCachesHistory(t *testing.T) {
	f := &pageFixture{status: pageStatus(), dir: t.TempDir(), now: pageNow}
	set := pageRules(t).Signals
	recordSpans(t, f.dir, set, pageNow.Add(-time.Hour), span{state.Light, "starting in light", time.Hour})
	p := f.page(t)
	if _, body := get(t, p, http.MethodGet, "/"); !strings.Contains(body, "<svg") {
		t.Fatalf("no chart:\n%s", body)
	}
	// History appears that the cached read has not seen.
	if err := os.RemoveAll(f.dir); err != nil {
		t.Fatal(err)
	}
	recordSpans(t, f.dir, set, pageNow.Add(-time.Minute), span{state.Light, "starting in light", time.Hour},
		span{state.Heavy, "load_per_cpu 1.70 >= 1.50 for 3 samples", 50 * time.Minute})
	f.now = pageNow.Add(PageCacheFor - time.Second)
	if _, body := get(t, p, http.MethodGet, "/"); strings.Contains(body, "load_per_cpu 1.70") {
		t.Errorf("the history was read again within %s:\n%s", PageCacheFor, body)
	}
	f.now = pageNow.Add(PageCacheFor)
	if _, body := get(t, p, http.MethodGet, "/"); !strings.Contains(body, "load_per_cpu 1.70") {
		t.Errorf("the history was not read again after %s:\n%s", PageCacheFor, body)
	}
}

// pageSites are three sites: the default one, a shop that takes heavy for
// the server, and a wiki pinned to light whose requests are not counted.
func pageSites() []SiteStatus {
	until := pageNow.Add(30 * time.Minute)
	return []SiteStatus{
		{Name: config.DefaultSite, Hosts: []string{}, Gear: "light", Mode: "auto", Since: pageNow.Add(-2 * time.Hour),
			Reason: "starting in light", BackendRPS: pf64(4.2), BackendShare: pf64(0.21), MaxConnections: 8},
		{Name: "shop", Hosts: []string{"shop.example", "*.shop.example"}, Gear: "heavy", Mode: "auto", Since: pageNow.Add(-5 * time.Minute),
			Reason: "site shop: 71 % of backend requests; load_per_cpu 2.1 >= 1.5", BackendRPS: pf64(14.26), BackendShare: pf64(0.7134), MaxConnections: 8},
		{Name: "wiki", Hosts: []string{"wiki.example"}, Gear: "light", Mode: "forced", ForcedUntil: &until, Since: pageNow.Add(-time.Hour),
			Reason: "forced by operator"},
	}
}

func TestPageShowsSites(t *testing.T) {
	for _, tc := range []struct {
		name  string
		sites []SiteStatus
		table bool
	}{
		{"no sites key", nil, false},
		{"the default site alone", pageSites()[:1], false},
		{"three sites", pageSites(), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &pageFixture{status: pageStatus(), now: pageNow}
			f.status.Sites = tc.sites
			_, body := get(t, f.page(t), http.MethodGet, "/")
			if !tc.table {
				// Exactly the page of a server without sites.
				f.status.Sites = nil
				if _, without := get(t, f.page(t), http.MethodGet, "/"); body != without {
					t.Errorf("the page differs from the one without sites:\n%s", body)
				}
				if strings.Contains(body, `id="sites"`) {
					t.Errorf("a sites table for the default site alone:\n%s", body)
				}
				return
			}
			table := regexp.MustCompile(`(?s)<table id="sites">.*?</table>`).FindString(body)
			if table == "" {
				t.Fatalf("the page has no sites table:\n%s", body)
			}
			rows := regexp.MustCompile(`<tr><th>([a-z0-9-]+)</th><td`).FindAllStringSubmatch(table, -1)
			var names []string
			for _, r := range rows {
				names = append(names, r[1])
			}
			if got, want := strings.Join(names, " "), "default shop wiki"; got != want {
				t.Errorf("site rows %q, want %q:\n%s", got, want, table)
			}
			for _, want := range []string{
				`<tr><th>default</th><td class="mono">every other host</td><td><span class="gear light">light</span></td><td>auto</td>` +
					`<td class="num">10:00 (2h00m ago)</td><td class="num">21%</td><td class="num">4.2</td><td class="num">8</td><td>starting in light</td></tr>`,
				`<tr><th>shop</th><td class="mono">shop.example, *.shop.example</td><td><span class="gear heavy">heavy</span></td><td>auto</td>` +
					`<td class="num">11:55 (5m00s ago)</td><td class="num">71.3%</td><td class="num">14.3</td><td class="num">8</td>` +
					`<td>site shop: 71 % of backend requests; load_per_cpu 2.1 &gt;= 1.5</td></tr>`,
				// Unknown requests are a dash; a site without a limit of its own says so.
				`<tr><th>wiki</th><td class="mono">wiki.example</td><td><span class="gear light">light</span></td><td>forced until 12:30</td>` +
					`<td class="num">11:00 (1h00m ago)</td><td class="num">–</td><td class="num">–</td><td class="num">no site limit</td><td>forced by operator</td></tr>`,
			} {
				if !strings.Contains(table, want) {
					t.Errorf("the sites table lacks\n%s\n in:\n%s", want, table)
				}
			}
		})
	}
}

// A site's hosts and reason are text: a config's or a log's bytes never
// become markup.
func TestPageEscapesSites(t *testing.T) {
	const hostile = `<script>alert("site")</script>`
	f := &pageFixture{status: pageStatus(), now: pageNow}
	f.status.Sites = pageSites()
	f.status.Sites[1].Reason = hostile
	f.status.Sites[2].Hosts = []string{`<b onmouseover=alert(1)>wiki.example`}
	_, body := get(t, f.page(t), http.MethodGet, "/")
	for _, bad := range []string{"<script", "<b "} {
		if strings.Contains(body, bad) {
			t.Errorf("the page carries %q unescaped:\n%s", bad, body)
		}
	}
	for _, want := range []string{
		"<td>&lt;script&gt;alert(&#34;site&#34;)&lt;/script&gt;</td>",
		`<td class="mono">&lt;b onmouseover=alert(1)&gt;wiki.example</td>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks the escaped %q:\n%s", want, body)
		}
	}
}
