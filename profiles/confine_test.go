package profiles

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/internal/testsupport/testenv"
	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
	"github.com/gearshift/gearshift/internal/timefmt"
)

// TestRequestTargetsAgainstVarnish: in every gear, a request-target that
// does not start with "/" is answered 400 by Varnish and never reaches
// the backend; an absolute-form http(s) target (any case) is its path,
// its authority the Host; "x:/wp-admin" cannot skip never_cache.
func TestRequestTargetsAgainstVarnish(t *testing.T) {
	varnishtest.Binary(t)
	o := newOrigin(t)
	variants := map[string]string{}
	for _, s := range state.All {
		variants[s.String()] = render(t, testConfig(o), s)
	}
	g := loadGears(t, variants)
	for _, s := range state.All {
		gear := s.String()
		t.Run(gear, func(t *testing.T) {
			t.Parallel()
			for _, target := range []string{
				"x:@127.0.0.7:9299/g/" + gear + "/secret",
				"@127.0.0.7:9299/g/" + gear + "/secret",
				"x:@[::1]:9/g/" + gear + "/",
				"x:/g/" + gear + "/wp-admin/",
				"evil:1/g/" + gear + "/",
				"ftp://127.0.0.7/g/" + gear + "/",
				"http://u@127.0.0.7/g/" + gear + "/",
				"http://[::1]:9@x/g/" + gear + "/",
				"*",
				strings.Repeat("g", 4096),
			} {
				if r := rawFrom(t, g, "127.0.0.2", gear, "GET "+target+" HTTP/1.1\r\nHost: 127.0.0.1\r\n"); r.status != http.StatusBadRequest {
					t.Errorf("GET %.50q: status %d, want 400", target, r.status)
				}
			}
			// What Varnish's own parser refuses: a NUL, a space (400),
			// a header over its limits (the connection closed).
			for _, request := range []string{
				"GET /g/" + gear + "/a\x00b HTTP/1.1\r\nHost: 127.0.0.1\r\n",
				"GET /g/" + gear + "/a b HTTP/1.1\r\nHost: 127.0.0.1\r\n",
				"GET /g/" + gear + "/big HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + strings.Repeat("b", 64<<10) + "\r\n",
			} {
				conn := dialFrom(t, g, "127.0.0.2")
				io.WriteString(conn, request+"X-Test-Gear: "+gear+"\r\nConnection: close\r\n\r\n")
				resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
				if err == nil && resp.StatusCode != http.StatusBadRequest {
					t.Errorf("%.40q: status %d, want 400 or the connection closed", request, resp.StatusCode)
				}
				conn.Close()
			}
			o.mu.Lock()
			for uri := range o.hits {
				if !strings.HasPrefix(uri, "/") || strings.ContainsAny(uri, "\x00 ") || strings.HasSuffix(uri, "/big") {
					t.Errorf("the backend got the target %.50q", uri)
				}
			}
			o.mu.Unlock()
			for _, tc := range []struct{ target, path, host string }{
				{"http://evil:1/g/" + gear + "/abs", "/g/" + gear + "/abs", "evil:1"},
				{"HTTPS://Example.ORG/g/" + gear + "/abs2?x=1", "/g/" + gear + "/abs2?x=1", "Example.ORG"},
				{"http://example.org?x=2", "/?x=2", "example.org"},
			} {
				if r := rawFrom(t, g, "127.0.0.2", gear, "GET "+tc.target+" HTTP/1.1\r\nHost: 127.0.0.1\r\n"); r.status != http.StatusOK {
					t.Errorf("GET %q: status %d, want 200", tc.target, r.status)
				}
				if h := o.header(tc.path, "Host"); h != tc.host {
					t.Errorf("GET %q: the backend got %s with Host %q, want %q", tc.target, tc.path, h, tc.host)
				}
			}
		})
	}
}

// TestVisitorsGsHeadersScrubbed: every X-Gs-* header the profiles use
// on a request is removed from a visitor's, in every gear: none reaches
// the backend (X-Gs-Unstripped once did).
func TestVisitorsGsHeadersScrubbed(t *testing.T) {
	varnishtest.Binary(t)
	o := newOrigin(t)
	variants := map[string]string{}
	names := map[string]bool{}
	for _, s := range state.All {
		text := render(t, testConfig(o), s)
		variants[s.String()] = text
		for _, m := range regexp.MustCompile(`\b(?:req|bereq)\.http\.(X-Gs-[A-Za-z-]+)`).FindAllStringSubmatch(text, -1) {
			names[m[1]] = true
		}
	}
	if !names["X-Gs-Unstripped"] || !names["X-Gs-Guest"] || len(names) < 20 {
		t.Fatalf("found %d X-Gs-* request headers in the profiles: %v", len(names), names)
	}
	var forged strings.Builder
	for n := range names {
		fmt.Fprintf(&forged, "%s: 1\r\n", n)
	}
	g := loadGears(t, variants)
	for _, s := range state.All {
		gear := s.String()
		for _, u := range []string{"/g/" + gear + "/forged", "/g/" + gear + "/forged.css"} {
			rawFrom(t, g, "127.0.0.2", gear, "GET "+u+" HTTP/1.1\r\nHost: 127.0.0.1\r\n"+forged.String())
			var got []string
			o.mu.Lock()
			for name := range o.last[u] {
				if strings.HasPrefix(name, "X-Gs-") {
					got = append(got, name)
				}
			}
			o.mu.Unlock()
			sort.Strings(got)
			if o.count(u) != 1 || len(got) != 0 {
				t.Errorf("%s: %d backend requests, and it got a visitor's %v", u, o.count(u), got)
			}
		}
	}
}

// TestIPv6ClientsPer64: a client's budget counts an IPv6 visitor by its
// /64 (one host holds a whole /64), an IPv4-mapped one by its IPv4
// address.
func TestIPv6ClientsPer64(t *testing.T) {
	varnishtest.Binary(t)
	o := newOrigin(t)
	site := testConfig(o)
	site.Options.ClientBudget = Budget{Rate: 0.1, Burst: 3}
	g := loadGears(t, map[string]string{"moderate": render(t, site, state.Moderate)})
	// From loopback, a trusted proxy: the visitor is the address it got
	// the request from.
	get := func(visitor, u string) int {
		t.Helper()
		return rawFrom(t, g, "127.0.0.1", "moderate", "GET "+u+" HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Forwarded-For: "+visitor+"\r\n").status
	}
	for _, tc := range []struct {
		name           string
		spends, shares string // the second takes the first's budget
		other          string // has a budget of its own
	}{
		{"one /64", "2001:db8:1:2::a", "2001:DB8:1:2:ffff:0:0:b", "2001:db8:1:3::a"},
		{"compressed before the /64", "2001:db8::1", "2001:db8:0:0:1::2", "2001:db8:0:1::1"},
		{"IPv4-mapped", "::ffff:192.0.2.50", "192.0.2.50", "192.0.2.51"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prefix := "/g/moderate/v6/" + strings.ReplaceAll(tc.name, " ", "-")
			for i := range 3 {
				if s := get(tc.spends, fmt.Sprintf("%s/a%d", prefix, i)); s != http.StatusOK {
					t.Fatalf("%s, request %d within its burst: status %d", tc.spends, i, s)
				}
			}
			if s := get(tc.spends, prefix+"/a-over"); s != http.StatusTooManyRequests {
				t.Errorf("%s over its budget: status %d, want 429", tc.spends, s)
			}
			if s := get(tc.shares, prefix+"/b"); s != http.StatusTooManyRequests {
				t.Errorf("%s after %s spent their budget: status %d, want 429 (one client)", tc.shares, tc.spends, s)
			}
			if s := get(tc.other, prefix+"/c"); s != http.StatusOK {
				t.Errorf("%s: status %d, want 200 (a client of its own)", tc.other, s)
			}
		})
	}
}

// TestRedirectNamingTheVisitorsHost: with normalize_host, a redirect that
// names the port or name a visitor sent is never shared with the other
// names of the key (Host: site:31337 must not send every visitor to port
// 31337); one naming the site as the key does is.
func TestRedirectNamingTheVisitorsHost(t *testing.T) {
	varnishtest.Binary(t)
	o := newOrigin(t)
	g := loadGears(t, map[string]string{"heavy": render(t, testConfig(o), state.Heavy), "moderate": render(t, testConfig(o), state.Moderate)})
	for _, gear := range []string{"moderate", "heavy"} {
		for _, tc := range []struct {
			host, loc string
			shared    bool
		}{
			{"example.org:31337", "http://example.org:31337/dir/", false},
			{"EXAMPLE.org:31337", "//example.org:31337/dir/", false},
			{"www.example.org", "http://www.example.org/dir/", false},
			{"example.org", "http://example.org/dir/", true},
			{"example.org:31337", "/dir/", true},
		} {
			u := fmt.Sprintf("/g/%s/redir/%s?status=301&cc=max-age%%3D600&loc=%s", gear, tc.host, tc.loc)
			rawFrom(t, g, "127.0.0.2", gear, "GET "+u+" HTTP/1.1\r\nHost: "+tc.host+"\r\n")
			r := rawFrom(t, g, "127.0.0.2", gear, "GET "+u+" HTTP/1.1\r\nHost: example.org\r\n")
			if hit := r.header.Get("X-Cache") == "HIT"; hit != tc.shared {
				t.Errorf("%s: Location %s for Host %s, then Host example.org: X-Cache %s, want shared=%v",
					gear, tc.loc, tc.host, r.header.Get("X-Cache"), tc.shared)
			}
		}
	}
}

// TestRefreshKeepsTheGoodCopy: in heavy, the refresh of an anonymous
// copy answered with a 4xx or a Set-Cookie leaves the copy in place,
// served through its grace, as after a 5xx: no hit-for-miss sends every
// visitor to the backend.
func TestRefreshKeepsTheGoodCopy(t *testing.T) {
	varnishtest.Binary(t)
	o := newOrigin(t)
	site := testConfig(o)
	site.Options.HeavyMinTTL = timefmt.Duration(time.Second)
	g := loadGears(t, map[string]string{"heavy": render(t, site, state.Heavy)})
	for _, then := range []string{"403", "cookie", "404"} {
		u := "/g/heavy/refresh?cc=max-age%3D1&then=" + then
		first := rawFrom(t, g, "127.0.0.2", "heavy", "GET "+u+" HTTP/1.1\r\nHost: 127.0.0.1\r\n")
		if first.status != http.StatusOK {
			t.Fatalf("%s: status %d", u, first.status)
		}
		time.Sleep(1500 * time.Millisecond) // past its TTL: the next view refreshes it
		rawFrom(t, g, "127.0.0.2", "heavy", "GET "+u+" HTTP/1.1\r\nHost: 127.0.0.1\r\n")
		testenv.Eventually(t, u+" refreshed", 10*time.Second, func() bool { return o.count(u) >= 2 })
		time.Sleep(200 * time.Millisecond) // the refresh's answer handled
		for i := range 3 {
			r := rawFrom(t, g, "127.0.0.2", "heavy", "GET "+u+" HTTP/1.1\r\nHost: 127.0.0.1\r\n")
			want := then == "404" // a 404 is an answer heavy may keep
			if got := r.status == http.StatusNotFound; got != want || (!want && r.body != first.body) {
				t.Errorf("then=%s, view %d after the refresh: status %d X-Cache %s body %q; want the good copy kept=%v",
					then, i, r.status, r.header.Get("X-Cache"), r.body, !want)
			}
		}
	}
}

// TestSortQueryKeepsMeaningfulOrder: sort_query shares the page of
// ?b=1&a=2 with ?a=2&b=1, but never one order of a repeated name or of
// an array's brackets with another: the backend would answer each
// differently.
func TestSortQueryKeepsMeaningfulOrder(t *testing.T) {
	varnishtest.Binary(t)
	o := newOrigin(t)
	g := loadGears(t, map[string]string{"heavy": render(t, testConfig(o), state.Heavy)})
	for _, tc := range []struct {
		first, second string
		shared        bool
	}{
		{"b=1&a=2", "a=2&b=1", true},
		{"a=1&a=2", "a=2&a=1", false},
		{"x=0&a=1&y=0&a=2", "x=0&a=2&y=0&a=1", false},
		{"a[]=1&a[]=2", "a[]=2&a[]=1", false},
		{"a%5B%5D=1&a%5B%5D=2", "a%5B%5D=2&a%5B%5D=1", false},
	} {
		base := "/g/heavy/sorted?" + strings.ReplaceAll(tc.first, "=", "") + "&"
		rawFrom(t, g, "127.0.0.2", "heavy", "GET "+base+tc.first+" HTTP/1.1\r\nHost: 127.0.0.1\r\n")
		r := rawFrom(t, g, "127.0.0.2", "heavy", "GET "+base+tc.second+" HTTP/1.1\r\nHost: 127.0.0.1\r\n")
		if hit := r.header.Get("X-Cache") == "HIT"; hit != tc.shared {
			t.Errorf("?%s then ?%s: X-Cache %s, want shared=%v", tc.first, tc.second, r.header.Get("X-Cache"), tc.shared)
		}
	}
	// The purge of gearshift purge reaches the copy Varnish keyed.
	opts := DefaultOptions()
	for _, q := range []string{"a=1&a=2", "b=1&a=2", "a[]=2&a[]=1"} {
		if got, want := opts.CacheURL("/p?"+q), "/p?"+q; (q == "b=1&a=2") == (got == want) {
			t.Errorf("CacheURL(/p?%s) = %s", q, got)
		}
	}
}

// TestWebsocketPipeIsAWebsocketAlone: with websocket_paths set, a
// dot-segment path is no websocket path, and a request written behind a
// handshake the backend did not take (no 101) never reaches the backend.
func TestWebsocketPipeIsAWebsocketAlone(t *testing.T) {
	varnishtest.Binary(t)
	o := newOrigin(t)
	ws := testConfig(o)
	ws.Options.WebsocketPaths = []string{"/ws/"}
	g := loadGears(t, map[string]string{"heavy": render(t, ws, state.Heavy)})

	if r := rawFrom(t, g, "127.0.0.2", "heavy", "GET /ws/../server-status HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"); r.status != http.StatusForbidden {
		t.Errorf("a handshake on /ws/../server-status: status %d, want 403 (not piped)", r.status)
	}
	for _, p := range []string{"/ws/%2e%2e/g/heavy/x", "/ws/./x", "/ws/..%2fx"} {
		rawFrom(t, g, "127.0.0.2", "heavy", "GET "+p+" HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n")
		if v := o.header(p, "Upgrade"); v != "" {
			t.Errorf("%s was piped as a websocket (the backend got Upgrade %q)", p, v)
		}
	}

	u, second := "/ws/chat", "/ws/chat-pipelined"
	conn := dialFrom(t, g, "127.0.0.2")
	defer conn.Close()
	io.WriteString(conn, "GET "+u+" HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nX-Test-Gear: heavy\r\n\r\n"+
		"GET "+second+" HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Test-Gear: heavy\r\nConnection: close\r\n\r\n")
	io.Copy(io.Discard, conn) // until the backend closes the pipe
	if o.header(u, "Upgrade") != "websocket" {
		t.Fatalf("the handshake was not piped")
	}
	if n := o.count(second); n != 0 {
		t.Errorf("a request behind a refused handshake reached the backend %d times through the pipe", n)
	}
}

// TestClientInFlightBoundHolds: a client whose requests stay at the
// backend (PHP's session lock) holds no more than half of
// backend.max_connections after a minute: its bucket of requests in
// flight does not refill under it.
func TestClientInFlightBoundHolds(t *testing.T) {
	t.Parallel() // a minute and more of waiting
	varnishtest.Binary(t)
	o := newOrigin(t)
	site := testConfig(o)
	site.Backend.MaxConnections = 4 // two in flight per client
	site.Backend.FirstByteTimeout = timefmt.Duration(2 * time.Minute)
	site.Options.ClientBudget = Budget{Rate: 100, Burst: 100}
	g := loadGears(t, map[string]string{"heavy": render(t, site, state.Heavy)})
	const client = "127.0.0.44"
	get := func(u string) reply {
		return rawFrom(t, g, client, "heavy", "GET "+u+" HTTP/1.1\r\nHost: 127.0.0.1\r\n")
	}
	done := make(chan struct{}, 2)
	for i := range 2 {
		conn := dialFrom(t, g, client)
		conn.SetDeadline(time.Now().Add(3 * time.Minute))
		go func() {
			defer func() { conn.Close(); done <- struct{}{} }()
			fmt.Fprintf(conn, "GET /g/heavy/locked/%d?sleep=75s HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Test-Gear: heavy\r\nConnection: close\r\n\r\n", i)
			io.Copy(io.Discard, conn)
		}()
	}
	testenv.Eventually(t, "two requests at the backend", 10*time.Second, func() bool {
		return o.inflightOf("/g/heavy/locked/0?sleep=75s")+o.inflightOf("/g/heavy/locked/1?sleep=75s") == 2
	})
	time.Sleep(62 * time.Second)
	if r := get("/g/heavy/locked/third"); r.status != http.StatusTooManyRequests {
		t.Errorf("a third request after a minute, two still at the backend: status %d, want 429", r.status)
	}
	if n := o.count("/g/heavy/locked/third"); n != 0 {
		t.Errorf("the third request reached the backend")
	}
	for range 2 {
		<-done
	}
	if r := get("/g/heavy/locked/after"); r.status != http.StatusOK {
		t.Errorf("after the two were answered: status %d, want 200 (tokens back)", r.status)
	}
}
