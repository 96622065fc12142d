package profiles

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
)

// TestHostileVisitorsAgainstVarnish tries the profiles as an attacker
// would, from 127.0.0.2 (outside purge_acl and trusted_proxies): headers
// a backend trusts, Apache's status pages, a websocket upgrade with a
// request pipelined behind it.
func TestHostileVisitorsAgainstVarnish(t *testing.T) {
	varnishtest.Binary(t)
	o := newOrigin(t)
	variants := map[string]string{}
	for _, s := range state.All {
		variants[s.String()] = render(t, testConfig(o), s)
	}
	ws := testConfig(o)
	ws.Options.WebsocketPaths = []string{"/ws/"}
	variants["wslight"] = render(t, ws, state.Light)
	g := loadGears(t, variants)

	for _, s := range state.All {
		gear := s.String()
		t.Run(gear+"/headers-the-backend-trusts", func(t *testing.T) {
			t.Parallel()
			u := "/g/" + gear + "/poison"
			forged := "X-Forwarded-Host: evil.example\r\nForwarded: host=evil.example;proto=https\r\nX-Forwarded-Port: 444\r\n" +
				"X-Original-URL: /wp-admin/\r\nX-Rewrite-URL: /wp-admin/\r\nX-Real-IP: 10.9.9.9\r\n" +
				"X-Forwarded-For: 10.9.9.9\r\nX-Forwarded-Proto: https\r\n"
			rawFrom(t, g, "127.0.0.2", gear, "GET "+u+" HTTP/1.1\r\nHost: 127.0.0.1\r\n"+forged)
			for _, h := range []string{"X-Forwarded-Host", "Forwarded", "X-Forwarded-Port", "X-Original-URL", "X-Rewrite-URL", "X-Real-IP", "X-Forwarded-Proto"} {
				if v := o.header(u, h); v != "" {
					t.Errorf("the backend got %s: %q from a visitor", h, v)
				}
			}
			if v := o.header(u, "X-Forwarded-For"); v != "127.0.0.2" {
				t.Errorf("the backend got X-Forwarded-For %q, want the peer alone (127.0.0.2)", v)
			}
			// A trusted proxy's (loopback: a TLS terminator on the host) are kept.
			u += "-trusted"
			rawFrom(t, g, "127.0.0.1", gear, "GET "+u+" HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Forwarded-For: 192.0.2.7\r\nX-Forwarded-Proto: https\r\n")
			if v := o.header(u, "X-Forwarded-For"); v != "192.0.2.7, 127.0.0.1" {
				t.Errorf("through a trusted proxy: X-Forwarded-For %q, want the proxy's list and the peer", v)
			}
			if v := o.header(u, "X-Forwarded-Proto"); v != "https" {
				t.Errorf("through a trusted proxy: X-Forwarded-Proto %q, want https", v)
			}
		})
		t.Run(gear+"/server-status", func(t *testing.T) {
			t.Parallel()
			for _, p := range []string{"/server-status", "/server-status?auto", "//server-status", "/x/../server-status",
				"/server%2Dstatus", "/%73erver-status", "/SERVER-STATUS", "/server-info", "/server-status/"} {
				if r := rawFrom(t, g, "127.0.0.2", gear, "GET "+p+" HTTP/1.1\r\nHost: 127.0.0.1\r\n"); r.status != http.StatusForbidden {
					t.Errorf("GET %s from outside purge_acl: status %d, want 403", p, r.status)
				}
				if r := rawFrom(t, g, "127.0.0.2", gear, "POST "+p+" HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n"); r.status != http.StatusForbidden {
					t.Errorf("POST %s from outside purge_acl: status %d, want 403", p, r.status)
				}
			}
			if r := rawFrom(t, g, "127.0.0.2", gear, "GET /g/"+gear+"/server-status-explained HTTP/1.1\r\nHost: 127.0.0.1\r\n"); r.status != http.StatusOK {
				t.Errorf("a page named like it: status %d, want 200", r.status)
			}
			// Nor from purge_acl: behind a TLS terminator on the same
			// host every visitor is loopback.
			u := "/server-status?auto&g=" + gear
			if r := rawFrom(t, g, "127.0.0.1", gear, "GET "+u+" HTTP/1.1\r\nHost: 127.0.0.1\r\n"); r.status != http.StatusForbidden {
				t.Errorf("GET %s from purge_acl: status %d, want 403", u, r.status)
			}
			wantCount(t, o, u, 0)
		})
	}
	t.Run("light/websocket-not-piped-by-default", func(t *testing.T) {
		t.Parallel()
		testNoPipe(t, g, o, "light", "/g/ws/chat")
	})
	t.Run("wslight/websocket-off-its-paths", func(t *testing.T) {
		t.Parallel()
		testNoPipe(t, g, o, "wslight", "/g/ws/chat")
	})
	t.Run("wslight/websocket-on-its-path", func(t *testing.T) {
		t.Parallel()
		u := "/ws/chat"
		// The client's Connection header (its tokens name hop-by-hop
		// headers for the next hop to drop) is not passed on.
		rawFrom(t, g, "127.0.0.2", "wslight", "GET "+u+" HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: keep-alive, Upgrade\r\n")
		if v := o.header(u, "Upgrade"); v != "websocket" {
			t.Errorf("piped handshake: backend got Upgrade %q, want websocket", v)
		}
		if v := o.header(u, "Connection"); v != "Upgrade, close" {
			t.Errorf("piped handshake: backend got Connection %q, want Varnish's own (Upgrade, close)", v)
		}
	})
}

// testNoPipe: an Upgrade outside websocket_paths is served as HTTP: the
// backend never sees the Upgrade, and a request pipelined behind it goes
// through the profiles like any other (its forged X-Forwarded-For gone).
func testNoPipe(t *testing.T, g *gears, o *origin, gear, u string) {
	second := u + "-pipelined"
	conn := dialFrom(t, g, "127.0.0.2")
	defer conn.Close()
	io.WriteString(conn, "GET "+u+" HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nX-Test-Gear: "+gear+"\r\n\r\n"+
		"GET "+second+" HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Forwarded-For: 10.6.6.6\r\nX-Test-Gear: "+gear+"\r\nConnection: close\r\n\r\n")
	br := bufio.NewReader(conn)
	for i := range 2 {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("response %d: %v", i+1, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("response %d: status %d, want 200 (served as HTTP)", i+1, resp.StatusCode)
		}
	}
	if v := o.header(u, "Upgrade"); v != "" {
		t.Errorf("the backend got Upgrade %q off websocket_paths", v)
	}
	if v := o.header(second, "X-Forwarded-For"); v != "127.0.0.2" {
		t.Errorf("the pipelined request reached the backend with X-Forwarded-For %q, want 127.0.0.2: it went round the profiles", v)
	}
}

func dialFrom(tb testing.TB, g *gears, ip string) net.Conn {
	tb.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	conn, err := d.Dial("tcp", g.v.HTTPAddr)
	if err != nil {
		tb.Fatal(err)
	}
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	return conn
}

// rawFrom sends request (a request line and headers, each ending in CRLF)
// from ip, routed to gear, and reads the reply.
func rawFrom(tb testing.TB, g *gears, ip, gear, request string) reply {
	tb.Helper()
	conn := dialFrom(tb, g, ip)
	defer conn.Close()
	if _, err := io.WriteString(conn, request+"X-Test-Gear: "+gear+"\r\nConnection: close\r\n\r\n"); err != nil {
		tb.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		tb.Fatalf("%q: %v", strings.SplitN(request, "\r\n", 2)[0], err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

func TestIgnoreGlobsExact(t *testing.T) {
	re, err := cookiesRE("ignore_cookies", DefaultIgnoreCookies())
	if err != nil {
		t.Fatal(err)
	}
	m := func(name string) bool { return regexpMatch("^"+re+"$", name) }
	for _, name := range []string{"_ga", "_ga_ABC123", "_gat", "_gat_UA-123-1", "__utma", "__utmt_p", "_hjSession_123", "_hjSessionUser_9", "_pk_id.1.1fff", "_pk_ses.1.1fff", "_gcl_au"} {
		if !m(name) {
			t.Errorf("%s (an analytics cookie) is not ignored", name)
		}
	}
	for _, name := range []string{"_gateway_session", "_gatekeeper", "__utmost", "_hjack", "_pk_session", "_galaxy", "PHPSESSID"} {
		if m(name) {
			t.Errorf("%s (a site's own cookie, perhaps a session) is ignored", name)
		}
	}
}

// regexpMatch matches a VCL regex (PCRE; these use only what RE2 reads
// alike) against s.
func regexpMatch(re, s string) bool { return regexp.MustCompile(re).MatchString(s) }
