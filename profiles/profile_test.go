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
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/controller/varnishadm/varnishtest"
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
	v := varnishtest.Start(t, varnishtest.Config{})
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

// eventually polls cond for up to 10s.
func eventually(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	tb.Errorf("timed out waiting for %s", what)
}

func render(tb testing.TB, cfg *Site, s state.State) string {
	tb.Helper()
	text, err := Render(*cfg, s)
	if err != nil {
		tb.Fatal(err)
	}
	return text
}

// defaultSite is what the profiles are built from with gearshift's defaults.
func defaultSite() *Site {
	return &Site{Options: DefaultOptions(), Backend: DefaultBackend}
}

func testConfig(o *origin) *Site {
	cfg := defaultSite()
	cfg.Backend = BackendAt("127.0.0.1", o.port())
	return cfg
}

// TestGearsAgainstVarnish proves SPEC section 5 against a real varnishd:
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

// testStripSetCookies: with strip_set_cookies, heavy shares a page whose
// only cookies are the listed ones (PHP's session on every page), no-store
// and all; a response that sets any other cookie, or that heavy would not
// store anyway (private, Vary: *), still goes to its visitor alone, with
// its cookies.
func testStripSetCookies(t *testing.T, g *gears, o *origin) {
	get := func(uri string) reply {
		t.Helper()
		return g.do(t, req{gear: "stripheavy", path: uri})
	}
	u := "/g/stripheavy/home?cc=no-store,no-cache,must-revalidate&exp=past&sc=PHPSESSID%3Ds1%3B+path%3D%2F"
	r := get(u)
	r.want(t, "MISS", "user=anonymous")
	if sc := r.header.Values("Set-Cookie"); len(sc) != 0 {
		t.Errorf("shared response kept Set-Cookie %q", sc)
	}
	get(u).want(t, "HIT", "hit=1")
	wantCount(t, o, u, 1)
	for _, u := range []string{
		"/g/stripheavy/login?cc=no-store&sc=PHPSESSID%3Ds2&sc=csrf%3Dt2",
		"/g/stripheavy/login?cc=no-cache&sc=csrf%3Dt3&sc=PHPSESSID%3Ds3",
		// A webmail's login form: private, so never stored; its listed
		// cookie stays, or the visitor loses the session it logs in with.
		"/g/stripheavy/webmail?cc=private,no-store&sc=PHPSESSID%3Ds4",
		"/g/stripheavy/vary?cc=no-store&vary=*&sc=PHPSESSID%3Ds5",
	} {
		want := setCookies(t, u)
		for i, x := range []string{"MISS", "PASS"} {
			r := get(u)
			r.want(t, x, "user=anonymous")
			if got := r.header.Values("Set-Cookie"); !slices.Equal(got, want) {
				t.Errorf("%s request %d: Set-Cookie %q, want the backend's %q", u, i+1, got, want)
			}
		}
	}
}

// testPassHeadersAddToAuthorization: a custom pass_headers list adds to
// Authorization; a page behind HTTP auth is never cached in heavy, so it
// is never served to a client without the credentials.
func testPassHeadersAddToAuthorization(t *testing.T, g *gears, o *origin) {
	creds := map[string]string{"Authorization": "Basic dTpw"}
	u := "/g/apikeyheavy/members?auth=Authorization"
	r := g.do(t, req{gear: "apikeyheavy", path: u, header: creds})
	r.want(t, "PASS", "hit=1")
	if r.status != http.StatusOK {
		t.Fatalf("status %d with credentials, want 200", r.status)
	}
	g.do(t, req{gear: "apikeyheavy", path: u, header: creds}).want(t, "PASS", "hit=2")
	// Another client, without credentials, gets the backend's 401, not
	// the member's page.
	if r := g.do(t, req{gear: "apikeyheavy", path: u}); r.status != http.StatusUnauthorized || strings.Contains(r.body, "hit=") {
		t.Errorf("a client without credentials got status %d, body %q; want the backend's 401", r.status, r.body)
	}
	wantCount(t, o, u, 3)
	// The listed header is passed too.
	u = "/g/apikeyheavy/api?cc=max-age%3D600"
	key := map[string]string{"X-Api-Key": "k1"}
	g.do(t, req{gear: "apikeyheavy", path: u, header: key}).want(t, "PASS", "")
	g.do(t, req{gear: "apikeyheavy", path: u, header: key}).want(t, "PASS", "")
	wantCount(t, o, u, 2)
}

// testCommon: what SPEC section 5 promises whatever the gear.
func testCommon(t *testing.T, g *gears, o *origin, gear string) {
	p := "/g/" + gear
	get := func(path string, r req) reply {
		t.Helper()
		r.gear, r.path = gear, path
		return g.do(t, r)
	}

	t.Run("static", func(t *testing.T) {
		u := p + "/static/app.css?ver=1.2&cc=no-cache&sc=tracker%3D1"
		r := get(u, req{cookie: "PHPSESSID=u1; _ga=GA1.2"})
		r.want(t, "MISS", "user=anonymous")
		if sc := r.header.Get("Set-Cookie"); sc != "" {
			t.Errorf("static response kept Set-Cookie %q", sc)
		}
		if c := o.header(u, "Cookie"); c != "" {
			t.Errorf("backend got Cookie %q for a static object", c)
		}
		get(u, req{cookie: "PHPSESSID=u2"}).want(t, "HIT", "user=anonymous")
		get(u, req{}).want(t, "HIT", "")
		wantCount(t, o, u, 1)
		if got := r.header.Get("X-Gearshift-Profile"); got != gear {
			t.Errorf("X-Gearshift-Profile = %q, want %q", got, gear)
		}
		// Upper-case extension, no query string.
		u = p + "/static/LOGO.PNG"
		get(u, req{}).want(t, "MISS", "")
		get(u, req{}).want(t, "HIT", "")
	})

	t.Run("never-cached", func(t *testing.T) {
		cacheable := "cc=max-age%3D600"
		for _, tc := range []struct {
			name string
			r    req
			uri  string
		}{
			{"POST", req{method: http.MethodPost}, p + "/post?" + cacheable},
			{"PUT", req{method: http.MethodPut}, p + "/put?" + cacheable},
			{"Authorization", req{header: map[string]string{"Authorization": "Basic dTpw"}}, p + "/auth?" + cacheable},
			{"Authorization on a static object", req{header: map[string]string{"Authorization": "Basic dTpw"}}, p + "/auth.css?" + cacheable},
			{"wp-admin", req{}, "/wp-admin/index.php?g=" + gear + "&" + cacheable},
			{"wp-login.php", req{}, "/wp-login.php?g=" + gear + "&" + cacheable},
			{"administrator", req{}, "/administrator/?g=" + gear + "&" + cacheable},
			{"user/login", req{}, "/user/login?g=" + gear + "&" + cacheable},
			{"cart", req{}, "/cart/?g=" + gear + "&" + cacheable},
			{"checkout", req{}, "/checkout/?g=" + gear + "&" + cacheable},
			{"my-account", req{}, "/my-account/?g=" + gear + "&" + cacheable},
			{"admin asset", req{}, "/admin/style.css?g=" + gear + "&" + cacheable},
			// Paths that read otherwise than the backend resolves them.
			{"double slash", req{}, "//wp-admin/?g=" + gear + "&" + cacheable},
			{"double slash, session", req{cookie: "PHPSESSID=nc"}, "//wp-admin/?s&g=" + gear + "&" + cacheable},
			{"slashes inside", req{}, "/user///login?g=" + gear + "&" + cacheable},
			{"dot-dot segment", req{}, "/x/../wp-admin/?g=" + gear + "&" + cacheable},
			{"dot-dot segment, static", req{}, "/x/../admin/style.css?g=" + gear + "&" + cacheable},
			{"dot segment", req{}, "/./cart/?g=" + gear + "&" + cacheable},
			{"encoded dots", req{}, "/x/%2e%2E/wp-admin/?g=" + gear + "&" + cacheable},
			{"encoded slash", req{}, "/user%2Flogin?g=" + gear + "&" + cacheable},
			{"encoded letter", req{}, "/wp-%61dmin/?g=" + gear + "&" + cacheable},
		} {
			t.Run(tc.name, func(t *testing.T) {
				get(tc.uri, tc.r).want(t, "PASS", "")
				get(tc.uri, tc.r).want(t, "PASS", "")
				wantCount(t, o, tc.uri, 2)
			})
		}
		// Varnish itself turns http://host/path into /path; other schemes
		// reach VCL and the backend whole.
		q := "?g=" + gear + "&" + cacheable
		for _, tc := range []struct{ target, backend string }{
			{"https://example.com/wp-admin/" + q, ""},
			{"HTTPS://example.com//checkout" + q, ""},
			{"http://example.com//wp-admin/" + q + "&abs", "//wp-admin/" + q + "&abs"},
		} {
			t.Run("absolute form "+tc.target, func(t *testing.T) {
				for i := 0; i < 2; i++ {
					g.raw(t, gear, "GET "+tc.target+" HTTP/1.1\r\nHost: example.com\r\n").want(t, "PASS", "")
				}
				if tc.backend == "" {
					tc.backend = tc.target
				}
				wantCount(t, o, tc.backend, 2)
			})
		}
		t.Run("absolute form without a path", func(t *testing.T) {
			u := "https://example.com?g=" + gear
			if r := g.raw(t, gear, "GET "+u+" HTTP/1.1\r\nHost: example.com\r\n"); r.status != http.StatusOK || !strings.Contains(r.body, "uri="+u) {
				t.Errorf("status %d, body %q", r.status, r.body)
			}
		})
	})

	t.Run("URLs reach the backend as they came", func(t *testing.T) {
		u := p + "//static//odd.png?next=//x/../y"
		get(u, req{}).want(t, "MISS", "")
		get(u, req{}).want(t, "HIT", "")
		wantCount(t, o, u, 1)
		u = p + "/page/?redirect_to=%2Fwp-admin%2F&q=a%2eb"
		get(u, req{cookie: "_ga=1"})
		wantCount(t, o, u, 1)
	})

	t.Run("PURGE and BAN from the ACL", func(t *testing.T) {
		u := p + "/static/purge.png"
		get(u, req{}).want(t, "MISS", "")
		get(u, req{}).want(t, "HIT", "")
		if r := get(u, req{method: "PURGE"}); r.status != http.StatusOK {
			t.Errorf("PURGE status %d, want 200", r.status)
		}
		get(u, req{}).want(t, "MISS", "hit=2")

		if r := get(p+"/static/purge", req{method: "BAN"}); r.status != http.StatusOK {
			t.Errorf("BAN status %d, want 200", r.status)
		}
		get(u, req{}).want(t, "MISS", "hit=3")
		bans, err := g.v.Adm("ban.list")
		if err != nil || !strings.Contains(bans, "obj.http.X-Gs-Host == 127.0.0.1 && obj.http.X-Gs-Url ~ "+p+"/static/purge") {
			t.Errorf("ban.list lacks the BAN (%v):\n%s", err, bans)
		}

		// A ban Varnish refuses, or could not express, is a 400 that
		// says why, and drops nothing.
		get(u, req{}).want(t, "HIT", "hit=3")
		for _, tc := range []struct{ name, request, why string }{
			{"bad regex", "BAN " + p + "/static/(purge HTTP/1.1\r\nHost: example.com\r\n", "Ban refused: "},
			{"no Host", "BAN " + p + "/static/ HTTP/1.0\r\n", "needs a Host"},
			{"empty Host", "BAN " + p + "/static/ HTTP/1.1\r\nHost: \r\n", "needs a Host"},
			{"Host with spaces", "BAN " + p + "/static/ HTTP/1.1\r\nHost: 127.0.0.1 && obj.status != 0\r\n", "needs a Host"},
			{"PURGE without Host", "PURGE " + u + " HTTP/1.0\r\n", "needs a Host"},
		} {
			r := g.raw(t, gear, tc.request)
			if r.status != http.StatusBadRequest || !strings.Contains(r.body, tc.why) {
				t.Errorf("%s: status %d, body %q; want 400 and %q", tc.name, r.status, r.body, tc.why)
			}
		}
		get(u, req{}).want(t, "HIT", "hit=3")
	})

	t.Run("host normalisation", func(t *testing.T) {
		u := p + "/static/host.png"
		get(u, req{host: "WWW.Example.com:8080"}).want(t, "MISS", "")
		if h := o.header(u, "Host"); h != "WWW.Example.com:8080" {
			t.Errorf("backend saw Host %q, want WWW.Example.com:8080 as the client sent it", h)
		}
		get(u, req{host: "example.com"}).want(t, "HIT", "")
		get(u, req{host: "EXAMPLE.COM:80"}).want(t, "HIT", "")
		get(u, req{host: "www.example.com:6081"}).want(t, "HIT", "")
		get(u, req{host: "other.example"}).want(t, "MISS", "")
	})

	t.Run("X-Forwarded-For", func(t *testing.T) {
		u := p + "/xff"
		get(u, req{})
		if xff := o.header(u, "X-Forwarded-For"); xff != "127.0.0.1" {
			t.Errorf("backend saw X-Forwarded-For %q, want 127.0.0.1", xff)
		}
	})

	t.Run("internal headers", func(t *testing.T) {
		u := p + "/static/internal.png"
		r := get(u, req{header: map[string]string{"X-Gs-Session": "forged", "X-Gs-Cache": "HIT"}})
		r.want(t, "MISS", "")
		for _, h := range []string{"X-Gs-Session", "X-Gs-Cache", "X-Gs-Host", "X-Gs-Path"} {
			if v := o.header(u, h); v != "" {
				t.Errorf("backend saw %s: %q", h, v)
			}
		}
		for _, h := range []string{"X-Gs-Url", "X-Gs-Host"} {
			if v := r.header.Get(h); v != "" {
				t.Errorf("client saw %s: %q", h, v)
			}
		}
	})
}

// testNoSerialisation: requests for an uncacheable, slow page reach the
// backend in parallel (hit-for-miss), not one after another.
func testNoSerialisation(t *testing.T, g *gears, o *origin, gear string) {
	const n, delay = 8, 1500 * time.Millisecond
	r := req{gear: gear, path: "/g/" + gear + "/slow?sleep=" + delay.String() + "&cc=no-cache,no-store&sc=cart%3Dx"}
	if gear == "heavy" {
		// Heavy caches anonymous pages whatever they say; a session
		// response that sets a cookie is what stays uncacheable.
		r.cookie = "PHPSESSID=slow"
	}
	// The first request of all is alone by design (request coalescing);
	// it leaves the hit-for-miss marker every later request goes past.
	first := g.do(t, r)
	if gear == "light" {
		first.want(t, "PASS", "")
	} else {
		first.want(t, "MISS", "")
	}
	start := time.Now()
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g.do(t, r).want(t, "PASS", "")
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	peak := o.peakOf(r.path)
	t.Logf("%s: %d concurrent requests to a %s uncacheable page: peak backend concurrency %d, %s in all", gear, n, delay, peak, elapsed.Round(time.Millisecond))
	if peak < n {
		t.Errorf("peak backend concurrency %d, want %d: requests were serialised", peak, n)
	}
	if elapsed > 2*delay {
		t.Errorf("%d requests took %s; in parallel they take about %s", n, elapsed, delay)
	}
	wantCount(t, o, r.path, n+1)
}

func testLight(t *testing.T, g *gears, o *origin) {
	for _, tc := range []struct{ name, uri, cookie, first string }{
		// keep_warm stores an anonymous page's first fetch for the other
		// gears (see testKeepWarm); light passes every request.
		{"cacheable page", "/g/light/page?cc=max-age%3D600", "", "PASS"},
		{"page with Expires", "/g/light/expires?exp=future", "", "PASS"},
		{"PHP's page", "/g/light/php?cc=no-cache,must-revalidate&exp=past", "", "PASS"},
		{"session page", "/g/light/session?cc=max-age%3D600", "PHPSESSID=l1", "PASS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g.do(t, req{gear: "light", path: tc.uri, cookie: tc.cookie}).want(t, tc.first, "hit=1")
			g.do(t, req{gear: "light", path: tc.uri, cookie: tc.cookie}).want(t, "PASS", "hit=2")
			g.do(t, req{gear: "light", path: tc.uri, cookie: tc.cookie}).want(t, "PASS", "hit=3")
			wantCount(t, o, tc.uri, 3)
		})
	}
	t.Run("cookies reach the backend", func(t *testing.T) {
		u := "/g/light/cookies"
		g.do(t, req{gear: "light", path: u, cookie: "_ga=1; PHPSESSID=l2"})
		if c := o.header(u, "Cookie"); c != "_ga=1; PHPSESSID=l2" {
			t.Errorf("backend got Cookie %q", c)
		}
	})
}

func testModerate(t *testing.T, g *gears, o *origin) {
	get := func(t *testing.T, uri, cookie string) reply {
		t.Helper()
		return g.do(t, req{gear: "moderate", path: uri, cookie: cookie})
	}
	t.Run("max-age honoured", func(t *testing.T) {
		u := "/g/moderate/maxage?cc=public,max-age%3D2"
		get(t, u, "").want(t, "MISS", "hit=1")
		get(t, u, "").want(t, "HIT", "hit=1")
		time.Sleep(2500 * time.Millisecond)
		get(t, u, "") // stale within Varnish's default grace, refreshed behind
		eventually(t, "a refetch once max-age has passed", func() bool { return o.count(u) == 2 })
	})
	for _, tc := range []struct{ name, uri string }{
		{"s-maxage", "/g/moderate/smaxage?cc=s-maxage%3D600"},
		{"Expires", "/g/moderate/expires?exp=future"},
	} {
		t.Run("cached: "+tc.name, func(t *testing.T) {
			get(t, tc.uri, "").want(t, "MISS", "")
			get(t, tc.uri, "").want(t, "HIT", "")
			wantCount(t, o, tc.uri, 1)
		})
	}
	for _, tc := range []struct{ name, uri string }{
		{"no-cache", "/g/moderate/nocache?cc=no-cache,max-age%3D600"},
		{"no-store", "/g/moderate/nostore?cc=no-store,max-age%3D600"},
		{"private", "/g/moderate/private?cc=private,max-age%3D600"},
		{"max-age=0", "/g/moderate/maxage0?cc=max-age%3D0"},
		{"Set-Cookie", "/g/moderate/setcookie?cc=max-age%3D600&sc=a%3Db"},
		{"Expires in 1981", "/g/moderate/php?cc=no-store,no-cache,must-revalidate&exp=past"},
		{"Expires in 1981 alone", "/g/moderate/php?exp=past"},
		{"no freshness information, Set-Cookie", "/g/moderate/nothing?sc=a%3Db"},
		{"no freshness information, 403", "/g/moderate/nothing?status=403"},
		{"no freshness information, 401", "/g/moderate/nothing?status=401"},
		{"no freshness information, 302", "/g/moderate/nothing?status=302&loc=%2Fx"},
		{"no freshness information, Vary: *", "/g/moderate/nothing?cc=public&vary=*"},
	} {
		t.Run("not cached: "+tc.name, func(t *testing.T) {
			get(t, tc.uri, "").want(t, "MISS", "")
			get(t, tc.uri, "").want(t, "PASS", "hit=2")
			wantCount(t, o, tc.uri, 2)
		})
	}
	for _, tc := range []struct{ name, uri string }{
		{"no freshness information", "/g/moderate/heuristic"},
		{"Cache-Control without a lifetime", "/g/moderate/heuristic?cc=public"},
		{"404", "/g/moderate/heuristic?status=404"},
		{"301", "/g/moderate/heuristic?status=301&loc=%2Felsewhere"},
	} {
		t.Run("heuristic freshness: "+tc.name, func(t *testing.T) {
			get(t, tc.uri, "").want(t, "MISS", "")
			get(t, tc.uri, "_ga=1").want(t, "HIT", "")
			wantCount(t, o, tc.uri, 1)
		})
	}
	t.Run("heuristic freshness off", func(t *testing.T) {
		u := "/g/moderate/heuristic-off"
		g.do(t, req{gear: "strictmoderate", path: u}).want(t, "MISS", "")
		g.do(t, req{gear: "strictmoderate", path: u}).want(t, "PASS", "hit=2")
	})
	t.Run("analytics cookies stripped", func(t *testing.T) {
		u := "/g/moderate/anon?cc=max-age%3D600"
		get(t, u, "_ga=GA1.2.3; _gid=x").want(t, "MISS", "user=anonymous")
		if c := o.header(u, "Cookie"); c != "" {
			t.Errorf("backend got Cookie %q for an anonymous request", c)
		}
		get(t, u, "_ga=other; __utma=1").want(t, "HIT", "")
		get(t, u, "").want(t, "HIT", "")
		wantCount(t, o, u, 1)
	})
	for _, cookie := range []string{"PHPSESSID=m1", "_ga=1; wordpress_logged_in_5f3e=admin%7C123", "SESSabc=1", "0123456789abcdef0123456789abcdef=j"} {
		t.Run("session passed: "+cookie, func(t *testing.T) {
			u := "/g/moderate/session?cc=max-age%3D600&c=" + strconv.Itoa(len(cookie)) + cookie[:3]
			get(t, u, cookie).want(t, "PASS", "")
			get(t, u, cookie).want(t, "PASS", "hit=2")
			if c := o.header(u, "Cookie"); c != cookie {
				t.Errorf("backend got Cookie %q, want %q", c, cookie)
			}
		})
	}
}

func testHeavy(t *testing.T, g *gears, o *origin) {
	get := func(t *testing.T, uri, cookie string) reply {
		t.Helper()
		return g.do(t, req{gear: "heavy", path: uri, cookie: cookie})
	}
	t.Run("anonymous cached whatever freshness says", func(t *testing.T) {
		u := "/g/heavy/php?cc=no-cache,must-revalidate,max-age%3D0&exp=past"
		r := get(t, u, "_ga=1")
		r.want(t, "MISS", "user=anonymous")
		if c := o.header(u, "Cookie"); c != "" {
			t.Errorf("backend got Cookie %q for an anonymous request", c)
		}
		get(t, u, "").want(t, "HIT", "user=anonymous")
		get(t, u, "_gid=2; wordpress_test_cookie=WP%20Cookie%20check").want(t, "HIT", "user=anonymous")
		wantCount(t, o, u, 1)
	})
	t.Run("ignored cookies set: stripped and shared", func(t *testing.T) {
		u := "/g/heavy/ab?sc=_ga%3D1%3B+path%3D%2F&sc=wp_lang%3Den_US"
		r := get(t, u, "")
		r.want(t, "MISS", "user=anonymous")
		if sc := r.header.Values("Set-Cookie"); len(sc) != 0 {
			t.Errorf("shared response kept Set-Cookie %q", sc)
		}
		get(t, u, "").want(t, "HIT", "user=anonymous")
		wantCount(t, o, u, 1)
	})
	t.Run("session response that sets a cookie", func(t *testing.T) {
		u := "/g/heavy/login?sc=wordpress_logged_in_x%3Dnew"
		get(t, u, "PHPSESSID=h1").want(t, "MISS", "user=h1")
		r := get(t, u, "PHPSESSID=h1")
		r.want(t, "PASS", "hit=2")
		if r.header.Get("Set-Cookie") == "" {
			t.Error("session response lost its Set-Cookie")
		}
	})
	t.Run("backend errors not cached", func(t *testing.T) {
		// With no copy to serve (stale_if_error), Varnish's 503.
		u := "/g/heavy/error?status=503"
		for range 2 {
			if r := get(t, u, ""); r.status != http.StatusServiceUnavailable {
				t.Errorf("status %d, want 503", r.status)
			}
		}
		wantCount(t, o, u, 2)
	})
	t.Run("PURGE drops every variant", func(t *testing.T) {
		u := "/g/heavy/purge-all?cc=no-cache"
		https := map[string]string{"X-Forwarded-Proto": "https"}
		variants := []req{
			{},
			{cookie: "PHPSESSID=p1"},
			{cookie: "wordpress_logged_in_1=p2"},
			{header: https},
			{cookie: "PHPSESSID=p1", header: https},
		}
		for _, r := range variants {
			r.gear, r.path = "heavy", u
			g.do(t, r).want(t, "MISS", "")
			g.do(t, r).want(t, "HIT", "")
		}
		other := "/g/heavy/purge-all?cc=no-cache&other"
		get(t, other, "PHPSESSID=p1").want(t, "MISS", "")
		if r := g.do(t, req{gear: "heavy", path: u, method: "PURGE"}); r.status != http.StatusOK {
			t.Errorf("PURGE status %d, want 200", r.status)
		}
		for _, r := range variants {
			r.gear, r.path = "heavy", u
			g.do(t, r).want(t, "MISS", "")
		}
		wantCount(t, o, u, 2*len(variants))
		// Not a regex, not a prefix: other URLs stay.
		get(t, other, "PHPSESSID=p1").want(t, "HIT", "")
	})
	t.Run("ignored cookies not in the key", func(t *testing.T) {
		u := "/g/heavy/key?cc=no-cache"
		get(t, u, "PHPSESSID=k1; _ga=1").want(t, "MISS", "user=k1")
		get(t, u, "_ga=2;PHPSESSID=k1").want(t, "HIT", "user=k1")
		get(t, u, "  PHPSESSID=k1 ;; _gid=3").want(t, "HIT", "user=k1")
		if c := o.header(u, "Cookie"); c != "PHPSESSID=k1" {
			t.Errorf("backend got Cookie %q, want the session's without the ignored ones", c)
		}
		// Every other cookie is part of the session.
		get(t, u, "PHPSESSID=k1; theme=dark").want(t, "MISS", "user=k1")
		wantCount(t, o, u, 2)
	})
	t.Run("unknown cookies make a session", func(t *testing.T) {
		u := "/g/heavy/wiki?cc=private,must-revalidate,max-age%3D0"
		get(t, u, "wikidb_session=w1; wikidbUserID=7").want(t, "MISS", "user=w1")
		get(t, u, "wikidb_session=w1; wikidbUserID=7").want(t, "HIT", "user=w1")
		get(t, u, "wikidb_session=w2; wikidbUserID=8").want(t, "MISS", "user=w2")
		get(t, u, "wikidb_session=w1").want(t, "MISS", "user=w1")
		// private: never an anonymous visitor's.
		get(t, u, "").want(t, "MISS", "user=anonymous")
		get(t, u, "_ga=1").want(t, "PASS", "user=anonymous")
	})
	for _, tc := range []struct{ name, uri string }{
		{"no-store, anonymous", "/g/heavy/nostore?cc=no-store"},
		{"no-store, PHP's session page", "/g/heavy/nostore?cc=no-store,no-cache,must-revalidate&exp=past"},
		{"Surrogate-Control: no-store", "/g/heavy/nostore?sur=no-store&cc=max-age%3D600"},
		{"private, anonymous", "/g/heavy/private-anon?cc=private,max-age%3D600"},
		{"Vary: *", "/g/heavy/vary?vary=*"},
	} {
		t.Run("never shared: "+tc.name, func(t *testing.T) {
			get(t, tc.uri, "").want(t, "MISS", "")
			get(t, tc.uri, "").want(t, "PASS", "hit=2")
			wantCount(t, o, tc.uri, 2)
		})
	}
	t.Run("never stored: no-store, whatever the client's headers say", func(t *testing.T) {
		u := "/g/heavy/nostore-forged?cc=no-store"
		forged := map[string]string{"X-Gs-Stripped": "1"}
		g.do(t, req{gear: "heavy", path: u, header: forged}).want(t, "MISS", "")
		g.do(t, req{gear: "heavy", path: u, header: forged}).want(t, "PASS", "hit=2")
		if v := o.header(u, "X-Gs-Stripped"); v != "" {
			t.Errorf("backend saw X-Gs-Stripped: %q", v)
		}
	})
	t.Run("never stored: no-store for a session", func(t *testing.T) {
		u := "/g/heavy/edit?cc=no-store,no-cache"
		get(t, u, "wikidb_session=e1").want(t, "MISS", "user=e1")
		get(t, u, "wikidb_session=e1").want(t, "PASS", "hit=2")
	})
	for _, tc := range []struct{ name, uri string }{
		{"a login form", "/g/heavy/login-form?cc=no-cache&sc=wikidb_session%3Dnew%3B+path%3D%2F%3B+HttpOnly"},
		{"PHP's session_start()", "/g/heavy/start?cc=no-store,no-cache,must-revalidate&exp=past&sc=PHPSESSID%3Dfresh%3B+path%3D%2F"},
		{"an ignored cookie first, a session next", "/g/heavy/mixed?sc=_ga%3D1&sc=cart%3Dc1%3B+Expires%3DWed,+21+Oct+2037+07:28:00+GMT"},
	} {
		t.Run("a response that starts a session: "+tc.name, func(t *testing.T) {
			want := setCookies(t, tc.uri)
			for i, x := range []string{"MISS", "PASS", "PASS"} {
				r := get(t, tc.uri, "")
				r.want(t, x, "user=anonymous")
				if got := r.header.Values("Set-Cookie"); !slices.Equal(got, want) {
					t.Errorf("request %d: Set-Cookie %q, want the backend's %q", i+1, got, want)
				}
			}
		})
	}
	t.Run("same-host redirect to www not cached", func(t *testing.T) {
		u := "/g/heavy/canonical?status=301&loc=http%3A%2F%2Fwww.example.com%2Fg%2Fheavy%2Fcanonical"
		g.do(t, req{gear: "heavy", path: u, host: "example.com"}).want(t, "MISS", "")
		g.do(t, req{gear: "heavy", path: u, host: "www.example.com"}).want(t, "PASS", "")
		u = "/g/heavy/moved?status=301&loc=%2Fg%2Fheavy%2Fnew"
		get(t, u, "").want(t, "MISS", "")
		get(t, u, "").want(t, "HIT", "")
	})
}

// testIsolation: one user's page is never served to another, nor to an
// anonymous visitor, nor an anonymous page to a user.
func testIsolation(t *testing.T, g *gears, o *origin, cookieName string) {
	u := "/g/heavy/private?c=" + cookieName + "&cc=no-cache,must-revalidate,max-age%3D0"
	get := func(cookie string) reply {
		t.Helper()
		return g.do(t, req{gear: "heavy", path: u, cookie: cookie})
	}
	a, b := cookieName+"=alice", cookieName+"=bob"
	anon := get("")
	anon.want(t, "MISS", "user=anonymous")
	alice := get(a)
	alice.want(t, "MISS", "user=alice\n")
	bob := get(b)
	bob.want(t, "MISS", "user=bob\n")
	get(a).want(t, "HIT", alice.body)
	get(b).want(t, "HIT", bob.body)
	get("").want(t, "HIT", anon.body)
	get("_ga=1").want(t, "HIT", anon.body)
	get("_ga=1; "+a).want(t, "HIT", alice.body)
	for _, forged := range []string{
		cookieName + "=alic", cookieName + "=alice2", cookieName + "=", cookieName + "=alice bob",
		"x" + cookieName + "=alice", cookieName + "x=alice", strings.ToLower(cookieName) + "=alice",
		cookieName + "=bob; " + cookieName + "=alice", cookieName + "=alice; " + cookieName + "=bob",
		"_ga=" + cookieName + "=alice", "_ga=1," + a,
	} {
		if forged == a || forged == b {
			continue
		}
		r := get(forged)
		if r.body == alice.body || r.body == bob.body {
			t.Errorf("Cookie %q got another user's page: %q (X-Cache %s)", forged, r.body, r.header.Get("X-Cache"))
		}
	}
	// Concurrent users hammering the same URL still each see their own.
	var wg sync.WaitGroup
	for i := 0; i < 40; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			who := []string{"alice", "bob", "carol", "anonymous"}[i%4]
			cookie := cookieName + "=" + who
			if who == "anonymous" {
				cookie = ""
			}
			if r := get(cookie); !strings.Contains(r.body, "user="+who+"\n") {
				t.Errorf("%s got %q", who, r.body)
			}
		}(i)
	}
	wg.Wait()
}

// testVariant: a purge ACL that excludes the tester, hidden headers, no
// host normalisation.
func testVariant(t *testing.T, g *gears, o *origin) {
	u := "/g/other/static/x.png"
	r := g.do(t, req{gear: "otherlight", path: u})
	for _, h := range []string{"X-Cache", "X-Gearshift-Profile"} {
		if v := r.header.Get(h); v != "" {
			t.Errorf("expose_headers false, yet %s: %q", h, v)
		}
	}
	for _, m := range []string{"PURGE", "BAN"} {
		if r := g.do(t, req{gear: "otherlight", path: u, method: m}); r.status != http.StatusMethodNotAllowed {
			t.Errorf("%s from outside the ACL: status %d, want 405", m, r.status)
		}
	}
	g.do(t, req{gear: "otherlight", path: u})
	wantCount(t, o, u, 1)
	g.do(t, req{gear: "otherlight", path: u, host: "www.example.com"})
	wantCount(t, o, u, 2)
	if h := o.header(u, "Host"); h != "www.example.com" {
		t.Errorf("backend saw Host %q", h)
	}
}

// testGrace: heavy's minimum TTL holds exactly, and stale objects are
// served while the backend fails or is gone.
func testGrace(t *testing.T, g *gears, o *origin) {
	get := func(uri, cookie string) reply {
		t.Helper()
		return g.do(t, req{gear: "shortheavy", path: uri, cookie: cookie})
	}
	anon := "/g/grace/anon?cc=no-cache&exp=past"
	sess := "/g/grace/session?cc=private"
	get(anon, "").want(t, "MISS", "hit=1")
	get(sess, "PHPSESSID=g1").want(t, "MISS", "user=g1")
	time.Sleep(time.Second)
	get(anon, "").want(t, "HIT", "hit=1")
	get(sess, "PHPSESSID=g1").want(t, "HIT", "user=g1")
	wantCount(t, o, anon, 1)

	time.Sleep(1500 * time.Millisecond) // past the 2s minimum TTL
	get(anon, "").want(t, "HIT", "hit=1")
	// The origin counts a request as it arrives: wait for Varnish to hold
	// the refreshed object, not for the count, before the backend fails.
	eventually(t, "a background refresh once the minimum TTL has passed", func() bool {
		return o.count(anon) == 2 && strings.Contains(get(anon, "").body, "hit=2")
	})

	o.fail.Store(true)
	time.Sleep(2500 * time.Millisecond)
	get(anon, "").want(t, "HIT", "hit=2")
	get(sess, "PHPSESSID=g1").want(t, "HIT", "user=g1")
	eventually(t, "the failing refresh", func() bool { return o.count(anon) == 3 })
	get(anon, "").want(t, "HIT", "hit=2")

	o.srv.Close()
	time.Sleep(2500 * time.Millisecond)
	get(anon, "").want(t, "HIT", "hit=2")
	get(sess, "PHPSESSID=g1").want(t, "HIT", "user=g1")
	get(anon, "").want(t, "HIT", "hit=2")
	if r := get("/g/grace/never-seen", ""); r.status != http.StatusServiceUnavailable {
		t.Errorf("uncached page with the backend down: status %d, want 503", r.status)
	}
}

// testShiftDown: what only heavy would cache is not served by the lighter
// gears once the daemon shifts down; the backend's rules apply again at once.
func testShiftDown(t *testing.T, g *gears, o *origin) {
	get := func(gear, uri string) reply {
		t.Helper()
		return g.do(t, req{gear: gear, path: uri})
	}
	u := "/g/shift/php?cc=no-cache,must-revalidate&exp=past"
	get("heavy", u).want(t, "MISS", "hit=1")
	r := get("heavy", u)
	r.want(t, "HIT", "hit=1")
	if v := r.header.Get("X-Gs-Gear"); v != "" {
		t.Errorf("client saw X-Gs-Gear: %q", v)
	}
	get("moderate", u).want(t, "MISS", "hit=2")
	get("moderate", u).want(t, "PASS", "hit=3")
	get("light", u).want(t, "PASS", "hit=4")
	// What moderate fetched is kept warm for heavy (keep_warm): heavy
	// serves it from its first request.
	get("heavy", u).want(t, "HIT", "hit=2")

	u = "/g/shift/cacheable?cc=max-age%3D600"
	get("heavy", u).want(t, "MISS", "hit=1")
	get("moderate", u).want(t, "MISS", "hit=2")
	get("moderate", u).want(t, "HIT", "hit=2")
	get("heavy", u).want(t, "HIT", "hit=2")
}

// testErrorMarker: in heavy, a 5xx with no stale copy behind it is not
// cached, and leaves a marker short enough that requests for the URL are
// coalesced again within seconds, page or static object.
func testErrorMarker(t *testing.T, g *gears, o *origin) {
	const n = 6
	for _, u := range []string{"/g/heavy/surge?fail=2&sleep=300ms", "/g/heavy/surge.js?fail=2&sleep=300ms"} {
		get := func() reply {
			t.Helper()
			return g.do(t, req{gear: "heavy", path: u})
		}
		if r := get(); r.status != http.StatusServiceUnavailable {
			t.Errorf("%s: status %d, want the backend's 503", u, r.status)
		}
		// Not cached as content: the next request goes to the backend.
		r := get()
		r.want(t, "PASS", "")
		if r.status != http.StatusServiceUnavailable {
			t.Errorf("%s: status %d, want the backend's 503", u, r.status)
		}
		wantCount(t, o, u, 2)
	}
	time.Sleep(5500 * time.Millisecond) // past the marker
	for _, u := range []string{"/g/heavy/surge?fail=2&sleep=300ms", "/g/heavy/surge.js?fail=2&sleep=300ms"} {
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := g.do(t, req{gear: "heavy", path: u})
				if r.status != http.StatusOK || !strings.Contains(r.body, "hit=3") {
					t.Errorf("%s: status %d, body %q; want the one refetch (hit=3)", u, r.status, r.body)
				}
			}()
		}
		wg.Wait()
		if peak := o.peakOf(u); peak != 1 {
			t.Errorf("%s: peak backend concurrency %d, want 1: requests were not coalesced", u, peak)
		}
		wantCount(t, o, u, 3)
		g.do(t, req{gear: "heavy", path: u}).want(t, "HIT", "hit=3")
	}
}

// testClientHost: normalize_host changes the cache key only; the backend
// sees the Host the client sent, so a site that insists on its own
// host:port does not redirect to the URL it was asked for, forever.
func testClientHost(t *testing.T, g *gears, o *origin, gear string) {
	const site = "127.0.0.1:8081"
	u := "/g/" + gear + "/canonical-port?canon=" + site
	r := g.do(t, req{gear: gear, path: u, host: site})
	if r.status != http.StatusOK {
		t.Fatalf("GET http://%s%s: status %d, Location %q; want 200 (backend saw Host %q)", site, u, r.status, r.header.Get("Location"), o.header(u, "Host"))
	}
	if h := o.header(u, "Host"); h != site {
		t.Errorf("backend saw Host %q, want %q as the client sent it", h, site)
	}
	// A page asked for first without the port (the same cache key): the
	// site's redirect reaches that client, and is never served to the
	// clients that ask with the port.
	u += "&first=noport"
	r = g.do(t, req{gear: gear, path: u, host: "127.0.0.1"})
	if r.status != http.StatusMovedPermanently || r.header.Get("Location") != "http://"+site+u {
		t.Errorf("GET without the port: status %d, Location %q; want the site's 301 to http://%s%s", r.status, r.header.Get("Location"), site, u)
	}
	for i := 0; i < 2; i++ {
		if r := g.do(t, req{gear: gear, path: u, host: site}); r.status != http.StatusOK {
			t.Errorf("GET http://%s%s after the redirect: status %d, Location %q; want 200", site, u, r.status, r.header.Get("Location"))
		}
	}
}

// testOwnWrite: a session's write (any method but GET/HEAD) drops that
// session's cached pages, so the next GET shows the write; other sessions'
// and anonymous copies stay.
func testOwnWrite(t *testing.T, g *gears, o *origin) {
	u := "/g/heavy/own-write/post-1?cc=no-cache"
	get := func(cookie string) reply {
		t.Helper()
		return g.do(t, req{gear: "heavy", path: u, cookie: cookie})
	}
	alice, bob := "wordpress_logged_in_ow=alice", "wordpress_logged_in_ow=bob"
	get(alice).want(t, "MISS", "hit=1")
	get(bob).want(t, "MISS", "hit=2")
	get("").want(t, "MISS", "hit=3")
	get(alice).want(t, "HIT", "hit=1")
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		g.do(t, req{gear: "heavy", method: m, path: "/g/heavy/own-write/comments-post?m=" + m, cookie: "_ga=1; " + alice}).want(t, "PASS", "user=alice")
		r := get(alice)
		r.want(t, "MISS", "user=alice")
		if strings.Contains(r.body, "hit=1\n") {
			t.Errorf("after a %s of the session, its cached page came back: %q", m, r.body)
		}
		get(alice).want(t, "HIT", "user=alice")
	}
	get(bob).want(t, "HIT", "hit=2")
	get("").want(t, "HIT", "hit=3")
}

// testLogout: a session's never_cache request (wp-login.php?action=logout)
// drops that session's cached pages: the old cookie replayed gets a fresh
// page, not the one cached while it was logged in.
func testLogout(t *testing.T, g *gears, o *origin) {
	u := "/g/heavy/logout/home?cc=private"
	sess := "PHPSESSID=lo1; wordpress_logged_in_lo=admin"
	g.do(t, req{gear: "heavy", path: u, cookie: sess}).want(t, "MISS", "hit=1")
	g.do(t, req{gear: "heavy", path: u, cookie: sess}).want(t, "HIT", "hit=1")
	g.do(t, req{gear: "heavy", path: "/wp-login.php?action=logout&g=heavy-logout", cookie: sess}).want(t, "PASS", "")
	g.do(t, req{gear: "heavy", path: u, cookie: sess}).want(t, "MISS", "hit=2")
	wantCount(t, o, u, 2)
}

// test401: heavy forces a TTL only on statuses HTTP lets a cache keep, and
// a request with a pass_headers header (X-WP-Nonce) is passed, so a 401
// without the nonce is not what the request with it gets.
func test401(t *testing.T, g *gears, o *origin) {
	u := "/g/heavy/wp-json/wp/v2/users/me?auth=X-WP-Nonce"
	for _, cookie := range []string{"wordpress_logged_in_401=admin", ""} {
		for i := 0; i < 2; i++ {
			r := g.do(t, req{gear: "heavy", path: u, cookie: cookie})
			if r.status != http.StatusUnauthorized || r.header.Get("X-Cache") == "HIT" {
				t.Errorf("cookie %q, request %d without a nonce: status %d, X-Cache %s; want an uncached 401", cookie, i+1, r.status, r.header.Get("X-Cache"))
			}
		}
	}
	wantCount(t, o, u, 4)
	r := g.do(t, req{gear: "heavy", path: u, cookie: "wordpress_logged_in_401=admin", header: map[string]string{"X-WP-Nonce": "abc"}})
	if r.status != http.StatusOK {
		t.Errorf("with X-WP-Nonce: status %d, X-Cache %s; want the backend's 200", r.status, r.header.Get("X-Cache"))
	}
	r.want(t, "PASS", "user=admin")
	// A session page cached without the header is not what a request
	// with one gets: pass_headers are passed, in every gear.
	for _, gear := range []string{"light", "moderate", "heavy"} {
		for _, h := range []string{"X-WP-Nonce", "X-CSRF-Token", "Authorization"} {
			u := "/g/" + gear + "/wp-json/wp/v2/posts/1?cc=max-age%3D600&h=" + h
			g.do(t, req{gear: gear, path: u, cookie: "wordpress_logged_in_401=admin"})
			g.do(t, req{gear: gear, path: u, cookie: "wordpress_logged_in_401=admin", header: map[string]string{h: "abc"}}).want(t, "PASS", "hit=2")
			g.do(t, req{gear: gear, path: u, header: map[string]string{h: "abc"}}).want(t, "PASS", "hit=3")
		}
	}
	for _, st := range []int{401, 403, 400, 405, 409, 429} {
		u := "/g/heavy/status?status=" + strconv.Itoa(st)
		g.do(t, req{gear: "heavy", path: u})
		g.do(t, req{gear: "heavy", path: u}).want(t, "PASS", "")
		wantCount(t, o, u, 2)
	}
	for _, st := range []int{200, 404, 410} {
		u := "/g/heavy/status?cc=no-cache&status=" + strconv.Itoa(st)
		g.do(t, req{gear: "heavy", path: u}).want(t, "MISS", "")
		g.do(t, req{gear: "heavy", path: u}).want(t, "HIT", "")
	}
}
