package profiles

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gearshift/gearshift/internal/testsupport/testenv"
)

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
	t.Run("PURGE reaches every variant", func(t *testing.T) {
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
			if r.cookie == "" {
				// profiles.soft_purge (heavy by default): the anonymous
				// copies are served stale while one fetch refreshes them.
				g.do(t, r).want(t, "STALE", "")
			} else {
				g.do(t, r).want(t, "MISS", "")
			}
		}
		eventually(t, "every variant fetched again", func() string {
			if n := o.count(u); n != 2*len(variants) {
				return fmt.Sprintf("%d backend fetches of %s, want %d", n, u, 2*len(variants))
			}
			return ""
		})
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
	get(anon, "").want(t, "STALE", "hit=1")
	// The origin counts a request as it arrives: wait for Varnish to hold
	// the refreshed object, not for the count, before the backend fails.
	testenv.Eventually(t, "a background refresh once the minimum TTL has passed", 10*time.Second, func() bool {
		return o.count(anon) == 2 && strings.Contains(get(anon, "").body, "hit=2")
	})

	o.fail.Store(true)
	time.Sleep(2500 * time.Millisecond)
	get(anon, "").want(t, "STALE", "hit=2")
	get(sess, "PHPSESSID=g1").want(t, "HIT", "user=g1")
	testenv.Eventually(t, "the failing refresh", 10*time.Second, func() bool { return o.count(anon) == 3 })
	get(anon, "").want(t, "STALE", "hit=2")

	o.srv.Close()
	time.Sleep(2500 * time.Millisecond)
	get(anon, "").want(t, "STALE", "hit=2")
	get(sess, "PHPSESSID=g1").want(t, "HIT", "user=g1")
	get(anon, "").want(t, "STALE", "hit=2")
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
