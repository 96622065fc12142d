package varnish

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/profiles"
)

// Tests in this file hold a surge's first second in light against a real
// varnishd: refreshes of stored copies fill the connections they may take
// (their visitors get the copy when refused), and a page never fetched
// still gets one of the connections no refresh takes, instead of a 503.

// spareOrigin answers /p… pages with a minute's freshness, at once until
// slow is set, then in two seconds; it counts them at once, at most, and
// by path.
type spareOrigin struct {
	*httptest.Server
	slow    atomic.Bool
	mu      sync.Mutex
	held    int
	most    int
	fetched map[string]int
}

func newSpareOrigin(t *testing.T) *spareOrigin {
	o := &spareOrigin{fetched: map[string]int{}}
	o.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/p") { // the backend probe's
			return
		}
		o.mu.Lock()
		o.held++
		o.most = max(o.most, o.held)
		o.fetched[r.URL.Path]++
		o.mu.Unlock()
		if o.slow.Load() {
			time.Sleep(2 * time.Second)
		}
		o.mu.Lock()
		o.held--
		o.mu.Unlock()
		w.Header().Set("Cache-Control", "max-age=60")
		fmt.Fprintf(w, "page %s\n", r.URL.Path)
	}))
	t.Cleanup(o.Close)
	return o
}

// surge stores copies of n pages on host, then, the origin slow, sends
// their n refreshes one after another, then a page never fetched, then
// another while the first is at the backend. It returns the two never
// fetched pages' statuses and how long the second took.
func (o *spareOrigin) surge(t *testing.T, url func(string) string, host string, n int) (never, either int, took time.Duration) {
	t.Helper()
	get := func(path string) (int, time.Duration) { return getAs(t, url(path), host, "") }
	for i := range n { // copies stored (light keeps them for heavy)
		if code, _ := get(fmt.Sprintf("/p%d", i)); code != http.StatusOK {
			t.Fatalf("/p%d: %d", i, code)
		}
	}
	o.slow.Store(true)
	var wg sync.WaitGroup
	for i := range n {
		time.Sleep(50 * time.Millisecond)
		wg.Go(func() { get(fmt.Sprintf("/p%d", i)) })
	}
	time.Sleep(300 * time.Millisecond)
	first := make(chan int, 1)
	wg.Go(func() { code, _ := get("/p-never"); first <- code })
	time.Sleep(300 * time.Millisecond)
	either, took = get("/p-never-either")
	wg.Wait()
	return <-first, either, took
}

// Without sites, with backend.session_reserve: max_connections 8 keeps 2
// for sessions, and of the anonymous 6 one is spare (gearshift_spare):
// six refreshes take the other 5, the page never fetched the spare one.
func TestSpareForPagesNeverFetched(t *testing.T) {
	o := newSpareOrigin(t)
	r := newRig(t, func(cfg *config.Config) {
		(&reserveOrigin{Server: o.Server}).point(cfg)
		cfg.Backend.MaxConnections = 8
		cfg.Profiles.ClientBudget.Rate = 0
	})
	r.sync(t, state.Light)
	never, either, took := o.surge(t, r.v.URL, "example.com", 6)
	o.wantSpare(t, never, either, took, 6)
}

// With sites: the site's max_connections 8 over every VCL, of which a
// refresh holds 6 at most (a vsthrottle bucket of its own); eight
// refreshes, and the page never fetched still gets through.
func TestSiteSpareForPagesNeverFetched(t *testing.T) {
	o := newSpareOrigin(t)
	routes := []profiles.Route{{Site: profiles.DefaultSite}, {Site: "shop", Hosts: []string{"shop.example"}, MaxConnections: 8}}
	r := newRig(t, func(cfg *config.Config) {
		(&reserveOrigin{Server: o.Server}).point(cfg)
		cfg.Backend.MaxConnections = 16
		cfg.Profiles.ClientBudget.Rate = 0
		cfg.Sites = []config.Site{{Name: "shop", Hosts: []string{"shop.example"}, MaxConnections: 8}}
	})
	s := &sitesRig{rig: r, origin: o.Server}
	s.plan(t, routes, map[string]state.Gear{"default": state.Light, "shop": state.Light})
	s.syncSites(t)
	never, either, took := o.surge(t, r.v.URL, "shop.example", 8)
	o.wantSpare(t, never, either, took, 8)
}

func (o *spareOrigin) wantSpare(t *testing.T, never, either int, took time.Duration, most int) {
	t.Helper()
	if never != http.StatusOK {
		t.Errorf("a page never fetched, the refreshes' connections full: %d, want 200 from a spare connection", never)
	}
	if either != http.StatusOK && took > time.Second {
		t.Errorf("a second page never fetched: %d after %s, want a 200 or a 503 at once", either, took.Round(time.Millisecond))
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.most > most {
		t.Errorf("%d anonymous requests at the backend at once, over the %d they may hold", o.most, most)
	}
	if n := o.fetched["/p-never"]; n != 1 {
		t.Errorf("/p-never reached the backend %d times, want once", n)
	}
}
