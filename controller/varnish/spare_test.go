package varnish

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/state"
)

// A surge's first second in light: refreshes of stored copies fill the
// anonymous visitors' connections they may take (their visitors get the
// copy), and a page never fetched still gets the connection no refresh
// takes (gearshift_spare) instead of a 503; a second such page while that
// one holds it is refused at once; the anonymous visitors never hold more
// than max_connections less the reserve.
func TestSpareForPagesNeverFetched(t *testing.T) {
	var warm atomic.Bool // until set, every page comes at once
	var mu sync.Mutex
	var held, most int
	fetched := map[string]int{}
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/p") { // the backend probe's
			return
		}
		mu.Lock()
		held++
		most = max(most, held)
		fetched[r.URL.Path]++
		mu.Unlock()
		if warm.Load() {
			time.Sleep(2 * time.Second)
		}
		mu.Lock()
		held--
		mu.Unlock()
		w.Header().Set("Cache-Control", "max-age=60")
		fmt.Fprintf(w, "page %s\n", r.URL.Path)
	}))
	t.Cleanup(origin.Close)
	o := &reserveOrigin{Server: origin}
	r := newRig(t, func(cfg *config.Config) {
		o.point(cfg)
		cfg.Backend.MaxConnections = 8 // reserve auto: 2; anonymous 6, of them 1 spare
		cfg.Profiles.ClientBudget.Rate = 0
	})
	r.sync(t, state.Light)
	get := func(path string) (int, time.Duration) {
		start := time.Now()
		resp, err := (&http.Client{Timeout: 30 * time.Second}).Get(r.v.URL(path))
		if err != nil {
			t.Error(err)
			return 0, 0
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, time.Since(start)
	}
	for i := range 6 { // copies stored (light keeps them for heavy)
		if code, _ := get(fmt.Sprintf("/p%d", i)); code != http.StatusOK {
			t.Fatalf("/p%d: %d", i, code)
		}
	}
	warm.Store(true)

	var wg sync.WaitGroup
	for i := range 6 { // light's refreshes of the copies: 5 fill gearshift_copies, 1 is refused
		time.Sleep(50 * time.Millisecond)
		wg.Go(func() { get(fmt.Sprintf("/p%d", i)) })
	}
	time.Sleep(300 * time.Millisecond)
	never := make(chan int, 1)
	wg.Go(func() { code, _ := get("/p-never"); never <- code })
	time.Sleep(300 * time.Millisecond)
	code, took := get("/p-never-either")
	wg.Wait()

	if got := <-never; got != http.StatusOK {
		t.Errorf("a page never fetched, the refreshes' connections full: %d, want 200 from the spare connection", got)
	}
	if code != http.StatusServiceUnavailable || took > time.Second {
		t.Errorf("a second page never fetched while the spare is held: %d after %s, want a 503 at once", code, took.Round(time.Millisecond))
	}
	mu.Lock()
	defer mu.Unlock()
	if most > 6 {
		t.Errorf("%d anonymous requests at the backend at once, over max_connections 8 less the reserve 2", most)
	}
	if n := fetched["/p-never"]; n != 1 {
		t.Errorf("/p-never reached the backend %d times, want once", n)
	}
}
