package varnish

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/profiles"
)

// Tests in this file hold backend.session_reserve against a real
// varnishd and a slow origin: anonymous visitors' fetches never take the
// connections kept for logged-in users, and one logged-in request still
// gets through while the anonymous ones fill the rest.

// reserveOrigin is a slow backend that counts the requests it holds at
// once, anonymous ones (no Cookie) and a session's apart.
type reserveOrigin struct {
	*httptest.Server
	mu                sync.Mutex
	anon, session     int
	mostAnon, mostAll int
	sessionServed     int
	hold              time.Duration
}

func newReserveOrigin(t *testing.T, hold time.Duration) *reserveOrigin {
	o := &reserveOrigin{hold: hold}
	o.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/slow" { // the backend probe's
			return
		}
		isSession := r.Header.Get("Cookie") != ""
		o.mu.Lock()
		if isSession {
			o.session++
		} else {
			o.anon++
		}
		o.mostAnon = max(o.mostAnon, o.anon)
		o.mostAll = max(o.mostAll, o.anon+o.session)
		o.mu.Unlock()
		time.Sleep(o.hold)
		o.mu.Lock()
		if isSession {
			o.session--
			o.sessionServed++
		} else {
			o.anon--
		}
		o.mu.Unlock()
		w.Header().Set("Cache-Control", "no-store")
		io.WriteString(w, "ok")
	}))
	t.Cleanup(o.Close)
	return o
}

// point sets the config's backend to the origin.
func (o *reserveOrigin) point(cfg *config.Config) {
	host, port, _ := net.SplitHostPort(strings.TrimPrefix(o.URL, "http://"))
	cfg.Backend.Host = host
	cfg.Backend.Port, _ = strconv.Atoi(port)
}

// reserveBurst sends anonymous GETs of /slow to varnish, one per host of
// hosts, and once they are at the backend a logged-in visitor's request
// of host sessionHost. It returns the anonymous answers by status, the
// slowest refusal, and the logged-in request's status.
func reserveBurst(t *testing.T, url func(string) string, hosts []string, sessionHost string) (anon map[int]int, slowest time.Duration, session int) {
	t.Helper()
	anon = map[int]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	get := func(host, path, cookie string) (int, time.Duration) { return getAs(t, url(path), host, cookie) }
	for i, host := range hosts {
		// One after another, as a surge's misses come: Varnish checks a
		// backend's .max_connections before it connects, so fetches
		// begun in the same instant may pass it together.
		time.Sleep(50 * time.Millisecond)
		wg.Go(func() {
			code, took := get(host, fmt.Sprintf("/slow?n=%d", i), "")
			mu.Lock()
			defer mu.Unlock()
			anon[code]++
			if code != http.StatusOK {
				slowest = max(slowest, took)
			}
		})
	}
	// The anonymous requests have reached the backend (it holds each
	// for seconds); then a logged-in visitor asks.
	time.Sleep(400 * time.Millisecond)
	session, _ = get(sessionHost, "/slow?user=1", "PHPSESSID=editor1")
	wg.Wait()
	return anon, slowest, session
}

// wantBurst checks what reserveBurst's sent anonymous requests and its
// logged-in one got: the logged-in request's status, mostAnon anonymous
// requests at the backend at once, answered, the rest refused at once, and
// never more than limit requests at the backend.
func (o *reserveOrigin) wantBurst(t *testing.T, sent int, anon map[int]int, slowest time.Duration, session, wantSession, mostAnon, limit int) {
	t.Helper()
	if session != wantSession {
		t.Errorf("the logged-in request: status %d, want %d", session, wantSession)
	}
	o.mu.Lock()
	most, mostAll := o.mostAnon, o.mostAll
	o.mu.Unlock()
	if most != mostAnon {
		t.Errorf("anonymous requests at the backend at once: %d, want %d", most, mostAnon)
	}
	if mostAll > limit {
		t.Errorf("%d requests at the backend at once, over max_connections %d", mostAll, limit)
	}
	if anon[http.StatusOK] != mostAnon || anon[http.StatusServiceUnavailable] != sent-mostAnon {
		t.Errorf("anonymous answers by status: %v, want %d answered and the rest 503", anon, mostAnon)
	}
	if slowest > time.Second {
		t.Errorf("a refused anonymous request took %s: it waited in a queue", slowest)
	}
}

// getAs GETs url with the Host host and, unless "", the Cookie cookie,
// and returns the status and how long the answer took (0, 0 and an error
// for the test when none came).
func getAs(t *testing.T, url, host, cookie string) (int, time.Duration) {
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Host = host
	if cookie != "" {
		req.Header.Set("Cookie", cookie)
	}
	start := time.Now()
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Error(err)
		return 0, 0
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, time.Since(start)
}

// Without sites: the active gear's profile sends anonymous fetches to a
// backend of max_connections less the reserve; a logged-in visitor's
// request takes one of the reserved connections. With the reserve off,
// the same burst takes every connection and the logged-in visitor is
// refused.
func TestSessionReserveKeepsConnections(t *testing.T) {
	for _, tc := range []struct {
		name        string
		reserve     profiles.Reserve
		wantSession int // the logged-in request's status
		mostAnon    int // anonymous requests at the backend at once, at most
	}{
		{"auto: one of four kept", profiles.ReserveAuto, http.StatusOK, 3},
		{"off: the anonymous take all four", 0, http.StatusServiceUnavailable, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := newReserveOrigin(t, 2*time.Second)
			r := newRig(t, func(cfg *config.Config) {
				o.point(cfg)
				cfg.Backend.MaxConnections = 4
				cfg.Backend.SessionReserve = tc.reserve
				cfg.Profiles.ClientBudget.Rate = 0 // one client sends it all
			})
			r.sync(t, state.Light)

			hosts := strings.Split("a a a a a a", " ")
			anon, slowest, session := reserveBurst(t, r.v.URL, hosts, "a")
			o.wantBurst(t, len(hosts), anon, slowest, session, tc.wantSession, tc.mostAnon, 4)
		})
	}
}

// With sites in different gears (three VCLs answering at once), the
// anonymous visitors' bucket is shared by every VCL: they hold
// max_connections less the reserve over all of them, and a logged-in
// visitor of either site still gets through.
func TestSessionReserveOverEveryVCL(t *testing.T) {
	o := newReserveOrigin(t, 2*time.Second)
	routes := []profiles.Route{{Site: profiles.DefaultSite}, {Site: "shop", Hosts: []string{"shop.example"}}, {Site: "wiki", Hosts: []string{"wiki.example"}}}
	r := newRig(t, func(cfg *config.Config) {
		o.point(cfg)
		cfg.Backend.MaxConnections = 6
		cfg.Backend.SessionReserve = 2
		cfg.Profiles.ClientBudget.Rate = 0
		cfg.Sites = []config.Site{{Name: "shop", Hosts: []string{"shop.example"}, MaxConnections: 6}, {Name: "wiki", Hosts: []string{"wiki.example"}, MaxConnections: 6}}
	})
	s := &sitesRig{rig: r, origin: o.Server}
	s.plan(t, routes, map[string]state.Gear{"default": state.Light, "shop": state.Heavy, "wiki": state.Moderate})
	s.syncSites(t)

	hosts := strings.Split("shop.example wiki.example other.example shop.example wiki.example other.example shop.example wiki.example other.example", " ")
	anon, slowest, session := reserveBurst(t, r.v.URL, hosts, "wiki.example")
	// 4: max_connections 6 less the reserve 2, where each VCL's
	// gearshift_copies would let 4 through, 12 over three.
	o.wantBurst(t, len(hosts), anon, slowest, session, http.StatusOK, 4, 6)
	// The tokens came back: the next anonymous request goes through.
	if anon, _, _ := reserveBurst(t, r.v.URL, []string{"shop.example"}, "shop.example"); anon[http.StatusOK] != 1 {
		t.Errorf("an anonymous request after the burst: %v: a token was not given back", anon)
	}
}
