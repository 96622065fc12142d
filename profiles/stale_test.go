package profiles

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/internal/testsupport/testenv"
	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
	"github.com/gearshift/gearshift/internal/timefmt"
)

// TestStaleIfErrorAgainstVarnish proves stale_if_error, the backend's
// limits and the health probe against a real varnishd: in every gear an
// anonymous page seen before is served from its copy when the backend
// fails, is full, is slow or is sick; a page never seen, and every
// logged-in visitor, get the error.
func TestStaleIfErrorAgainstVarnish(t *testing.T) {
	varnishtest.Binary(t)
	probe := Probe{
		URL:       "/probe",
		Interval:  timefmt.Duration(200 * time.Millisecond),
		Timeout:   timefmt.Duration(150 * time.Millisecond),
		Window:    3,
		Threshold: 2,
	}
	origins := map[string]*origin{}
	variants := map[string]string{}
	for _, s := range state.All {
		o := newOrigin(t)
		cfg := testConfig(o)
		cfg.Backend.Probe = probe
		cfg.Options.HeavyMinTTL = timefmt.Duration(time.Second)
		cfg.Options.HeavyGrace = timefmt.Duration(time.Second)
		origins[s.String()] = o
		variants["stale"+s.String()] = render(t, cfg, s)
	}
	short := newOrigin(t)
	cfg := testConfig(short)
	cfg.Options.HeavyMinTTL = timefmt.Duration(time.Second)
	variants["shortlight"] = render(t, cfg, state.Light)
	busy := newOrigin(t)
	cfg = testConfig(busy)
	cfg.Backend.MaxConnections = 2 // 1 for fetches with a copy to fall back on
	variants["busylight"] = render(t, cfg, state.Light)
	slow := newOrigin(t)
	cfg = testConfig(slow)
	cfg.Backend.FirstByteTimeout = timefmt.Duration(time.Second)
	variants["slowlight"] = render(t, cfg, state.Light)
	g := loadGears(t, variants)

	for _, s := range state.All {
		gear := s.String()
		t.Run(gear+"/backend-fails", func(t *testing.T) {
			t.Parallel()
			testStale(t, g, origins[gear], gear)
		})
	}
	t.Run("light/copy-past-its-ttl", func(t *testing.T) {
		t.Parallel()
		get := func() reply { return g.do(t, req{gear: "shortlight", path: "/g/short/page?cc=max-age%3D1"}) }
		get().want(t, "PASS", "hit=1")
		time.Sleep(1500 * time.Millisecond)
		get().want(t, "PASS", "hit=2") // fetched again and replaced, never served stale
		time.Sleep(1500 * time.Millisecond)
		short.fail.Store(true)
		get().want(t, "STALE", "hit=2")
		if r := get(); r.header.Get("Age") == "" || r.header.Get("Age") == "0" {
			t.Errorf("stale copy has Age %q, want its age in seconds", r.header.Get("Age"))
		}
		// The backend stopped: connections refused.
		short.srv.Close()
		get().want(t, "STALE", "hit=2")
		if r := g.do(t, req{gear: "shortlight", path: "/g/short/never-seen"}); r.status != http.StatusServiceUnavailable {
			t.Errorf("a page never seen, the backend stopped: status %d, want 503", r.status)
		}
	})
	t.Run("light/backend-full", func(t *testing.T) {
		t.Parallel()
		testBusy(t, g, busy)
	})
	t.Run("light/backend-slow", func(t *testing.T) {
		t.Parallel()
		get := func() reply { return g.do(t, req{gear: "slowlight", path: "/g/slow/page"}) }
		get().want(t, "PASS", "hit=1")
		slow.delay.Store(int64(3 * time.Second))
		get().want(t, "STALE", "hit=1") // after first_byte_timeout (1s), not the backend's 3s
		slow.delay.Store(0)
	})
}

func testStale(t *testing.T, g *gears, o *origin, gear string) {
	label := "stale" + gear
	get := func(path, cookie string) reply {
		t.Helper()
		return g.do(t, req{gear: label, path: path, cookie: cookie})
	}
	// A copy past its TTL and past the grace the backend and heavy_grace
	// give it (swr=0: moderate's own rule would not serve it either).
	seen := "/g/stale/" + gear + "/seen?cc=max-age%3D1%2C+stale-while-revalidate%3D0"
	first := "MISS"
	if gear == "light" {
		first = "PASS"
	}
	get(seen, "").want(t, first, "hit=1")
	waitProbe(t, g, label, "healthy")
	if ua := o.header("/probe", "User-Agent"); ua != "gearshift-probe" {
		t.Errorf("the probe's User-Agent is %q, want gearshift-probe (for access logs to leave out)", ua)
	}
	time.Sleep(2500 * time.Millisecond)

	o.fail.Store(true)
	// Before the probe has noticed: the failed fetch's copy.
	r := get(seen, "")
	r.want(t, "STALE", "hit=1")
	if r.status != http.StatusOK {
		t.Errorf("stale copy: status %d, want 200", r.status)
	}
	if r := get("/g/stale/"+gear+"/never-seen", ""); r.status != http.StatusServiceUnavailable {
		t.Errorf("page never seen: status %d, want 503", r.status)
	}
	if r := get(seen, "PHPSESSID=s1"); r.status != http.StatusServiceUnavailable || strings.Contains(r.body, "hit=1") {
		t.Errorf("logged-in visitor: status %d body %q, want the backend's 503, never the anonymous copy", r.status, r.body)
	}

	// Hung, and the probe finds it sick: the copy once the probe's
	// timeout has passed, not first_byte_timeout (30s).
	o.fail.Store(false)
	o.delay.Store(int64(5 * time.Second))
	waitProbe(t, g, label, "sick")
	r = g.do(t, req{gear: label, path: seen, within: 3 * time.Second})
	if r.status != http.StatusOK || !strings.Contains(r.body, "hit=1") {
		t.Errorf("with the backend hung and sick: status %d body %q, want the copy", r.status, r.body)
	}
	o.delay.Store(0)
	waitProbe(t, g, label, "healthy")
	testenv.Eventually(t, "a fresh page once the backend is back", 10*time.Second, func() bool {
		r := get(seen, "")
		return r.status == http.StatusOK && !strings.Contains(r.body, "hit=1")
	})
}

// testBusy: fetches with a copy to fall back on take at most three
// quarters of backend.max_connections (here 1 of 2); over that, such a
// page gets its copy at once instead of waiting in a queue, while a page
// with no copy and a logged-in visitor still reach the backend.
func testBusy(t *testing.T, g *gears, o *origin) {
	get := func(path, cookie string) reply {
		t.Helper()
		return g.do(t, req{gear: "busylight", path: path, cookie: cookie})
	}
	page, hog := "/g/busy/page", "/g/busy/hog"
	get(page, "").want(t, "PASS", "hit=1")
	get(hog, "").want(t, "PASS", "hit=1")
	o.delay.Store(int64(2 * time.Second))
	done := make(chan reply, 1)
	go func() { done <- g.do(t, req{gear: "busylight", path: hog}) }()
	testenv.Eventually(t, "the copies' one connection taken", 10*time.Second, func() bool { return o.inflightOf(hog) == 1 })
	get(page, "").want(t, "STALE", "hit=1")
	select {
	case <-done:
		t.Error("the slow request ended before the stale copy was served: the limit did not hold")
	default:
	}
	// The rest of the limit: a page with no copy, a logged-in visitor.
	if r := get("/g/busy/never-seen", ""); r.status != http.StatusOK {
		t.Errorf("a page with no copy beside the busy copies: status %d, want 200", r.status)
	}
	if r := get(page, "PHPSESSID=b1"); r.status != http.StatusOK || !strings.Contains(r.body, "user=b1") {
		t.Errorf("a logged-in visitor beside the busy copies: status %d body %q, want the page", r.status, r.body)
	}
	o.delay.Store(0)
	<-done
}

// waitProbe waits for the probe of label's VCL to report state (healthy
// or sick) in backend.list.
func waitProbe(t *testing.T, g *gears, label, state string) {
	t.Helper()
	testenv.Eventually(t, label+"'s probe "+state, 10*time.Second, func() bool {
		out, err := g.v.Adm("backend.list", "v_"+label+".gearshift_probe")
		return err == nil && strings.Contains(strings.ToLower(out), state)
	})
}
