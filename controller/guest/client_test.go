package guest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// hidden is a service on the host that no ask may reach: it counts the
// connections it accepts.
type hidden struct {
	srv   *httptest.Server
	conns atomic.Int64
}

func newHidden(t *testing.T) *hidden {
	t.Helper()
	h := &hidden{}
	h.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "internal")
	}))
	h.srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			h.conns.Add(1)
		}
	}
	h.srv.Start()
	t.Cleanup(h.srv.Close)
	return h
}

// rawAsk sends heavy's ask with the request-target as it is written,
// which Go's client would normalise.
func rawAsk(t *testing.T, addr, target string) *http.Response {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: shop.example\r\nX-Gs-Guest: ask\r\n%s: %s\r\nConnection: close\r\n\r\n",
		target, ClientHeader, newVisitor())
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("answer to %.60q: %v", target, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// No request-target makes a check connect anywhere but the backend, and
// one that is not a path is no ask at all.
func TestTargetsNeverReachAnotherService(t *testing.T) {
	s := newSite(t)
	g, _ := newServer(t, s)
	front := httptest.NewServer(g)
	t.Cleanup(front.Close)
	h := newHidden(t)
	hp := h.srv.Listener.Addr().String()
	long := strings.Repeat("a", 4096)
	for _, tc := range []struct {
		name, target string
		backend      string // the target the backend gets; "": nothing
	}{
		{"opaque", "x:@" + hp + "/p", ""},
		{"absolute", "http://" + hp + "/p", ""},
		{"a path that looks like an authority", "//" + hp + "/p", "//" + hp + "/p"},
		{"user info without a scheme", "@" + hp + "/p", ""},
		{"opaque, to the IPv6 loopback", "x:@[::1]:9/", ""},
		{"opaque, 4 KB", "x:@" + hp + "/" + long, ""},
		{"a path of 4 KB", "/" + long, "/" + long},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(s.requestsSeen())
			conns := h.conns.Load()
			resp := rawAsk(t, front.Listener.Addr().String(), tc.target)
			if resp.Header.Get(Header) == Shared {
				t.Errorf("answered with a shared copy, want a no")
			}
			if n := h.conns.Load() - conns; n != 0 {
				t.Errorf("the service beside the backend got %d connections, want none", n)
			}
			got := s.requestsSeen()[before:]
			switch {
			case tc.backend == "" && len(got) > 0:
				t.Errorf("the backend got %.60q, want no check", got[0].target)
			case tc.backend != "" && len(got) == 0:
				t.Errorf("the backend got nothing, want %.60q", tc.backend)
			case tc.backend != "" && (got[0].target != tc.backend || got[0].host != "shop.example"):
				t.Errorf("the backend got %.60q for %q, want %.60q for shop.example", got[0].target, got[0].host, tc.backend)
			}
		})
	}
}

// The Server's client connects to the backend whatever address a
// request names.
func TestClientDialsOnlyTheBackend(t *testing.T) {
	s := newSite(t)
	g, _ := newServer(t, s)
	h := newHidden(t)
	resp, err := g.client.Get("http://" + h.srv.Listener.Addr().String() + "/article")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if n := h.conns.Load(); n != 0 {
		t.Errorf("a request naming another service: it got %d connections, want none", n)
	}
	if n := s.requests.Load(); n != 1 {
		t.Errorf("a request naming another service: the backend got %d requests, want it", n)
	}
}

// A fetch is the asked path and query at the backend, whatever else the
// ask's URL holds.
func TestFetchIsThePathAtTheBackend(t *testing.T) {
	h := newHidden(t)
	hp := h.srv.Listener.Addr().String()
	for _, tc := range []struct {
		name string
		url  *url.URL
		want string // the target the backend gets
	}{
		{"opaque", &url.URL{Scheme: "x", Opaque: "@" + hp + "/p"}, "/"},
		{"absolute", &url.URL{Scheme: "http", Host: hp, Path: "/article", RawQuery: "a=1"}, "/article?a=1"},
		{"user info", &url.URL{User: url.UserPassword("backend", "1"), Host: hp, Path: "/article"}, "/article"},
		{"escaped path", &url.URL{Path: "/a b/c/d", RawPath: "/a%20b/c%2Fd", RawQuery: "q=%2F"}, "/a%20b/c%2Fd?q=%2F"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSite(t)
			g, _ := newServer(t, s)
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.Host = "shop.example"
			r.URL = tc.url
			conns := h.conns.Load()
			if _, _, err := g.fetch(r.Context(), r); err != nil {
				t.Fatal(err)
			}
			if n := h.conns.Load() - conns; n != 0 {
				t.Fatalf("the service beside the backend got %d connections, want none", n)
			}
			if seen := s.requestsSeen(); len(seen) != 1 || seen[0].target != tc.want || seen[0].host != "shop.example" {
				t.Errorf("the backend got %+v, want %q for shop.example", seen, tc.want)
			}
		})
	}
}

// A check is a new visitor's: the same plain headers for every ask, none
// of the visitor's, so that one visitor's headers do not decide for all.
func TestFetchSendsFixedHeaders(t *testing.T) {
	for _, tc := range []struct {
		name, proto, want string
	}{
		{"https", "https", "https"},
		{"http", "http", "http"},
		{"no X-Forwarded-Proto", "", ""},
		{"upper case", "HTTPS", ""},
		{"a list", "https, http", ""},
		{"another scheme", "gopher", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSite(t)
			g, _ := newServer(t, s)
			resp := askWith(t, g, "/article", func(r *http.Request) {
				r.Header.Set("Accept-Language", "de-CH")
				r.Header.Set("X-Forwarded-For", "198.51.100.9, 203.0.113.4")
				r.Header.Set("Authorization", "Basic YWxpY2U6czNjcmV0")
				r.Header.Set("X-Custom", "1")
				r.Header.Set("Referer", "https://elsewhere.example/")
				r.Header.Set("Accept", "application/json")
				if tc.proto != "" {
					r.Header.Set("X-Forwarded-Proto", tc.proto)
				}
			})
			if resp.Header.Get(Header) != Shared {
				t.Fatalf("%s %q (%s), want shared", Header, resp.Header.Get(Header), resp.Header.Get("X-Gs-Guest-Why"))
			}
			seen := s.requestsSeen()
			if len(seen) != 2 {
				t.Fatalf("%d backend requests, want 2", len(seen))
			}
			for i, r := range seen {
				for name := range r.header {
					switch name {
					case "User-Agent", "Accept", "Accept-Encoding", "X-Forwarded-Proto":
					default:
						t.Errorf("fetch %d carries %s: %q, want the fixed headers alone", i, name, r.header.Values(name))
					}
				}
				if ua := r.header.Get("User-Agent"); ua == "" || ua == "Mozilla/5.0" {
					t.Errorf("fetch %d: User-Agent %q, want gearshift's", i, ua)
				}
				if a := r.header.Get("Accept"); a != "text/html,application/xhtml+xml,*/*;q=0.8" {
					t.Errorf("fetch %d: Accept %q, want a browser's", i, a)
				}
				if p := r.header.Values("X-Forwarded-Proto"); strings.Join(p, ",") != tc.want {
					t.Errorf("fetch %d: X-Forwarded-Proto %q, want %q", i, p, tc.want)
				}
				if r.host != "shop.example" {
					t.Errorf("fetch %d: Host %q, want the ask's", i, r.host)
				}
			}
		})
	}
}
