package profiles

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
	"github.com/gearshift/gearshift/internal/timefmt"
)

// origin is a test backend. What it answers is driven by the query string:
//
//	cc=V      Cache-Control: V
//	exp=past  Expires in 1981 (what PHP sends); exp=future: in an hour
//	sc=V      Set-Cookie: V
//	sleep=D   answer after D
//	status=N  answer with status N
//	loc=URL   Location: URL
//	fail=N    answer 503 to the first N requests for this URI
//	auth=H    answer 401 unless the request carries header H
//	canon=H   answer 301 to http://H<URI> unless the request's Host is H
//
// The body names the request URI, the hit number and the user: the value of
// PHPSESSID or of a wordpress_logged_in_* cookie, or "anonymous".
type origin struct {
	srv   *httptest.Server
	fail  atomic.Bool  // answer 503 to everything
	delay atomic.Int64 // answer everything after this many nanoseconds

	mu       sync.Mutex
	hits     map[string]int
	inflight map[string]int
	peak     map[string]int
	last     map[string]http.Header // request headers, Host included
}

func newOrigin(tb testing.TB) *origin {
	tb.Helper()
	o := &origin{hits: map[string]int{}, inflight: map[string]int{}, peak: map[string]int{}, last: map[string]http.Header{}}
	o.srv = httptest.NewServer(http.HandlerFunc(o.serve))
	tb.Cleanup(o.srv.Close)
	return o
}

func (o *origin) serve(w http.ResponseWriter, r *http.Request) {
	uri := r.RequestURI // as Varnish sent it
	h := r.Header.Clone()
	h.Set("Host", r.Host)
	o.mu.Lock()
	o.hits[uri]++
	hit := o.hits[uri]
	o.last[uri] = h
	o.inflight[uri]++
	if o.inflight[uri] > o.peak[uri] {
		o.peak[uri] = o.inflight[uri]
	}
	o.mu.Unlock()
	defer func() {
		o.mu.Lock()
		o.inflight[uri]--
		o.mu.Unlock()
	}()

	time.Sleep(time.Duration(o.delay.Load()))
	q := r.URL.Query()
	if d, err := time.ParseDuration(q.Get("sleep")); err == nil {
		time.Sleep(d)
	}
	if n, err := strconv.Atoi(q.Get("fail")); o.fail.Load() || (err == nil && hit <= n) {
		http.Error(w, "backend failing", http.StatusServiceUnavailable)
		return
	}
	if v := q.Get("canon"); v != "" && r.Host != v {
		w.Header().Set("Location", "http://"+v+uri)
		w.WriteHeader(http.StatusMovedPermanently)
		return
	}
	if v := q.Get("auth"); v != "" && r.Header.Get(v) == "" {
		http.Error(w, "rest_not_logged_in", http.StatusUnauthorized)
		return
	}
	if v := q.Get("cc"); v != "" {
		w.Header().Set("Cache-Control", v)
	}
	if v := q.Get("sur"); v != "" {
		w.Header().Set("Surrogate-Control", v)
	}
	switch q.Get("exp") {
	case "past":
		w.Header().Set("Expires", "Thu, 19 Nov 1981 08:52:00 GMT")
	case "future":
		w.Header().Set("Expires", time.Now().Add(time.Hour).UTC().Format(http.TimeFormat))
	}
	for _, v := range q["sc"] {
		w.Header().Add("Set-Cookie", v)
	}
	if hit > 1 {
		// then: what the page answers from its second fetch on, a
		// status or a cookie (a refresh gone wrong).
		switch v := q.Get("then"); v {
		case "":
		case "cookie":
			w.Header().Add("Set-Cookie", "later=1")
		default:
			if s, err := strconv.Atoi(v); err == nil {
				q.Set("status", strconv.Itoa(s))
			}
		}
	}
	if q.Get("lm") != "" {
		// A page that revalidates on its Last-Modified alone, to the
		// second, as MediaWiki's do.
		w.Header().Set("Last-Modified", "Tue, 01 Dec 2026 10:00:00 GMT")
		if r.Header.Get("If-Modified-Since") != "" {
			w.WriteHeader(http.StatusNotModified)
			return
		}
	}
	if v := q.Get("vary"); v != "" {
		w.Header().Set("Vary", v)
	}
	if v := q.Get("xkey"); v != "" {
		w.Header().Set("xkey", v)
	}
	if v := q.Get("skey"); v != "" {
		w.Header().Set("Surrogate-Key", v)
	}
	if v := q.Get("loc"); v != "" {
		w.Header().Set("Location", v)
	}
	status := http.StatusOK
	if s, err := strconv.Atoi(q.Get("status")); err == nil {
		status = s
	}
	w.WriteHeader(status)
	fmt.Fprintf(w, "uri=%s hit=%d user=%s\n", uri, hit, userOf(r))
}

// userOf is the user a request's cookies log in: PHP's and WordPress's
// session cookies, and a cookie gearshift does not know by name
// (MediaWiki's <dbname>_session, Laravel's laravel_session).
// setCookies are the Set-Cookie headers the origin sends for uri.
func setCookies(tb testing.TB, uri string) []string {
	u, err := url.Parse(uri)
	if err != nil {
		tb.Fatal(err)
	}
	return u.Query()["sc"]
}

func userOf(r *http.Request) string {
	for _, c := range r.Cookies() {
		if c.Name == "PHPSESSID" || strings.HasPrefix(c.Name, "wordpress_logged_in_") || strings.HasSuffix(c.Name, "_session") {
			return c.Value
		}
	}
	return "anonymous"
}

func (o *origin) count(uri string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.hits[uri]
}

func (o *origin) inflightOf(uri string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.inflight[uri]
}

func (o *origin) peakOf(uri string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.peak[uri]
}

func (o *origin) header(uri, name string) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.last[uri].Get(name)
}

func (o *origin) port() int { return o.srv.Listener.Addr().(*net.TCPAddr).Port }

// gears is a varnishd with several rendered profiles loaded at once, each
// under a label; the X-Test-Gear request header picks the label.
type gears struct {
	v *varnishtest.Varnish
}

// loadGears renders each variant, loads it and routes to it by label.
func loadGears(t *testing.T, variants map[string]string) *gears {
	t.Helper()
	return loadGearsOn(t, varnishtest.Config{}, variants)
}

// loadGearsOn is loadGears on a varnishd started with cfg.
func loadGearsOn(t *testing.T, cfg varnishtest.Config, variants map[string]string) *gears {
	t.Helper()
	v := varnishtest.Start(t, cfg)
	var router strings.Builder
	router.WriteString("vcl 4.1;\nbackend default none;\nsub vcl_recv {\n")
	for label, text := range variants {
		file := filepath.Join(v.Dir, label+".vcl")
		if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		name := "v_" + label
		if out, err := v.Adm("vcl.load", name, file); err != nil {
			t.Fatalf("load %s: %v\n%s", label, err, out)
		}
		if _, err := v.Adm("vcl.label", "l_"+label, name); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&router, "    if (req.http.X-Test-Gear == %q) { return (vcl(l_%s)); }\n", label, label)
	}
	router.WriteString("    return (synth(404, \"no such gear\"));\n}\n")
	file := filepath.Join(v.Dir, "router.vcl")
	if err := os.WriteFile(file, []byte(router.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := v.Adm("vcl.load", "router", file); err != nil {
		t.Fatalf("load router: %v\n%s", err, out)
	}
	if _, err := v.Adm("vcl.use", "router"); err != nil {
		t.Fatal(err)
	}
	return &gears{v: v}
}

type reply struct {
	status int
	header http.Header
	body   string
}

// req describes one request to Varnish.
type req struct {
	gear   string
	method string
	path   string
	host   string
	cookie string
	header map[string]string
	within time.Duration // the reply must come within this; 0: the client's timeout
}

var client = &http.Client{
	Timeout:       30 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	Transport:     &http.Transport{MaxIdleConnsPerHost: 64},
}

func (g *gears) do(tb testing.TB, r req) reply {
	tb.Helper()
	if r.method == "" {
		r.method = http.MethodGet
	}
	ctx := context.Background()
	if r.within > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.within)
		defer cancel()
	}
	hr, err := http.NewRequestWithContext(ctx, r.method, g.v.URL(r.path), nil)
	if err != nil {
		tb.Fatal(err)
	}
	hr.Header.Set("X-Test-Gear", r.gear)
	if r.host != "" {
		hr.Host = r.host
	}
	if r.cookie != "" {
		hr.Header.Set("Cookie", r.cookie)
	}
	for k, v := range r.header {
		hr.Header.Set(k, v)
	}
	resp, err := client.Do(hr)
	if err != nil {
		tb.Fatalf("%s %s: %v", r.method, r.path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// raw sends request (a request line and headers, each ending in CRLF) as
// it is, for what net/http refuses to send, routed to gear.
func (g *gears) raw(tb testing.TB, gear, request string) reply {
	tb.Helper()
	conn, err := net.DialTimeout("tcp", g.v.HTTPAddr, 5*time.Second)
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(conn, request+"X-Test-Gear: "+gear+"\r\nConnection: close\r\n\r\n"); err != nil {
		tb.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		tb.Fatalf("%q: %v", request, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// want checks a reply's X-Cache and, when body is not "", that the body
// contains it.
func (rp reply) want(tb testing.TB, xcache, body string) {
	tb.Helper()
	if got := rp.header.Get("X-Cache"); got != xcache {
		tb.Errorf("X-Cache = %q, want %q (status %d, body %q)", got, xcache, rp.status, rp.body)
	}
	if body != "" && !strings.Contains(rp.body, body) {
		tb.Errorf("body = %q, want it to contain %q", rp.body, body)
	}
}

func wantCount(tb testing.TB, o *origin, uri string, n int) {
	tb.Helper()
	if got := o.count(uri); got != n {
		tb.Errorf("backend hits for %s = %d, want %d", uri, got, n)
	}
}

func render(tb testing.TB, cfg *Site, s state.Gear) string {
	tb.Helper()
	text, err := Render(*cfg, s)
	if err != nil {
		tb.Fatal(err)
	}
	return text
}

// defaultSite is what the profiles are built from with gearshift's defaults.
func defaultSite() *Site {
	return &Site{Options: DefaultOptions(), Backend: DefaultBackend, GuestSecret: RedactedGuestSecret}
}

func testConfig(o *origin) *Site {
	cfg := defaultSite()
	cfg.Backend = BackendAt("127.0.0.1", o.port())
	return cfg
}

// TestGearsAgainstVarnish proves docs/gears.md#what-is-never-shared-and-why against a real varnishd:
// every gear with the default config, plus variants for what defaults
// cannot show (a purge ACL that excludes the tester, hidden headers, short
// heavy TTLs, a backend that goes away).
func TestGearsAgainstVarnish(t *testing.T) {
	varnishtest.Binary(t)
	o := newOrigin(t)
	down := newOrigin(t) // stopped by the grace test

	cfg := testConfig(o)
	other := testConfig(o)
	other.Options.PurgeACL = []string{"192.0.2.0/24"}
	other.Options.ExposeHeaders = false
	other.Options.NormalizeHost = false
	strict := testConfig(o)
	strict.Options.ModerateHeuristicTTL = 0
	apikey := testConfig(o)
	apikey.Options.PassHeaders = []string{"X-Api-Key"}
	short := testConfig(down)
	short.Options.HeavyMinTTL = timefmt.Duration(2 * time.Second)
	short.Options.HeavySessionTTL = timefmt.Duration(2 * time.Second)
	short.Options.HeavyGrace = timefmt.Duration(10 * time.Minute)
	strip := testConfig(o)
	strip.Options.StripSetCookies = []string{"PHPSESSID"}

	g := loadGears(t, map[string]string{
		"light":          render(t, cfg, state.Light),
		"moderate":       render(t, cfg, state.Moderate),
		"heavy":          render(t, cfg, state.Heavy),
		"otherlight":     render(t, other, state.Light),
		"strictmoderate": render(t, strict, state.Moderate),
		"shortheavy":     render(t, short, state.Heavy),
		"apikeyheavy":    render(t, apikey, state.Heavy),
		"stripheavy":     render(t, strip, state.Heavy),
	})

	for _, s := range state.All {
		gear := s.String()
		t.Run(gear+"/common", func(t *testing.T) {
			t.Parallel()
			testCommon(t, g, o, gear)
		})
		t.Run(gear+"/no-serialisation", func(t *testing.T) {
			t.Parallel()
			testNoSerialisation(t, g, o, gear)
		})
		t.Run(gear+"/no-redirect-loop-on-a-non-standard-port", func(t *testing.T) {
			t.Parallel()
			testClientHost(t, g, o, gear)
		})
	}
	t.Run("heavy/own-write-shows-at-once", func(t *testing.T) { t.Parallel(); testOwnWrite(t, g, o) })
	t.Run("heavy/logout-drops-the-session-pages", func(t *testing.T) { t.Parallel(); testLogout(t, g, o) })
	t.Run("heavy/401-not-cached-for-the-session", func(t *testing.T) { t.Parallel(); test401(t, g, o) })
	t.Run("light", func(t *testing.T) { t.Parallel(); testLight(t, g, o) })
	t.Run("moderate", func(t *testing.T) { t.Parallel(); testModerate(t, g, o) })
	t.Run("heavy", func(t *testing.T) { t.Parallel(); testHeavy(t, g, o) })
	for _, name := range []string{"PHPSESSID", "wordpress_logged_in_0123abcd", "wikidb_session"} {
		t.Run("heavy/isolation/"+name, func(t *testing.T) { t.Parallel(); testIsolation(t, g, o, name) })
	}
	t.Run("shifting down from heavy", func(t *testing.T) { t.Parallel(); testShiftDown(t, g, o) })
	t.Run("variant", func(t *testing.T) { t.Parallel(); testVariant(t, g, o) })
	t.Run("heavy/min-ttl-and-grace", func(t *testing.T) { t.Parallel(); testGrace(t, g, down) })
	t.Run("heavy/5xx-marker", func(t *testing.T) { t.Parallel(); testErrorMarker(t, g, o) })
	t.Run("heavy/custom-pass_headers-still-pass-Authorization", func(t *testing.T) { t.Parallel(); testPassHeadersAddToAuthorization(t, g, o) })
	t.Run("heavy/strip_set_cookies", func(t *testing.T) { t.Parallel(); testStripSetCookies(t, g, o) })
	for _, s := range state.All {
		gear := s.String()
		t.Run(gear+"/query", func(t *testing.T) { t.Parallel(); testQuery(t, g, o, gear) })
	}
	t.Run("keep_warm", func(t *testing.T) { t.Parallel(); testKeepWarm(t, g, o) })
}
