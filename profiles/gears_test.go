package profiles

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gearshift/gearshift/internal/testsupport/testenv"
)

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

// testCommon: what docs/gears.md#what-is-never-shared-and-why promises whatever the gear.
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
		// An absolute-form http(s) target (any case) is its path, its
		// authority the Host: never_cache judges the path.
		q := "?g=" + gear + "&" + cacheable
		for _, tc := range []struct{ target, backend string }{
			{"https://example.com/wp-admin/" + q, "/wp-admin/" + q},
			{"HTTPS://example.com//checkout" + q + "&abs", "//checkout" + q + "&abs"},
			{"http://example.com//wp-admin/" + q + "&abs", "//wp-admin/" + q + "&abs"},
		} {
			t.Run("absolute form "+tc.target, func(t *testing.T) {
				for i := 0; i < 2; i++ {
					g.raw(t, gear, "GET "+tc.target+" HTTP/1.1\r\nHost: example.com\r\n").want(t, "PASS", "")
				}
				wantCount(t, o, tc.backend, 2)
			})
		}
		t.Run("absolute form without a path", func(t *testing.T) {
			u := "https://example.com?g=" + gear
			if r := g.raw(t, gear, "GET "+u+" HTTP/1.1\r\nHost: example.com\r\n"); r.status != http.StatusOK || !strings.Contains(r.body, "uri=/?g="+gear) {
				t.Errorf("status %d, body %q; want the backend's answer for /?g=%s", r.status, r.body, gear)
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
		g.purged(t, req{gear: gear, path: u}, "hit=2")

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
			{"Host with spaces", "BAN " + p + "/static/ HTTP/1.1\r\nHost: 127.0.0.1 && obj.status != 0\r\n", "A Host header holds"},
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
		testenv.Eventually(t, "a refetch once max-age has passed", 10*time.Second, func() bool { return o.count(u) == 2 })
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
