package profiles

import (
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
)

// TestSoftPurgeAgainstVarnish proves profiles.soft_purge against a real
// varnishd: in a soft gear a PURGE (of a URL or of a tag) leaves the
// anonymous copies of both schemes to be served stale while one fetch
// refreshes them, and drops the sessions' copies at once; a gear that is
// not soft removes them all. In both, a fetch under way when the PURGE
// comes is never served as fresh after it.
func TestSoftPurgeAgainstVarnish(t *testing.T) {
	varnishtest.Binary(t)
	o := newOrigin(t)
	hard := testConfig(o)
	hard.Options.SoftPurge = SoftPurgeNever
	always := testConfig(o)
	always.Options.SoftPurge = SoftPurgeAlways
	plain := testConfig(o)
	plain.NoModules = true
	g := loadGears(t, map[string]string{
		"heavy":          render(t, testConfig(o), state.Heavy),
		"hardheavy":      render(t, hard, state.Heavy),
		"plainheavy":     render(t, plain, state.Heavy),
		"moderate":       render(t, testConfig(o), state.Moderate),
		"alwaysmoderate": render(t, always, state.Moderate),
	})
	https := map[string]string{"X-Forwarded-Proto": "https"}
	purge := func(t *testing.T, gear, path string, header map[string]string) {
		t.Helper()
		if r := g.do(t, req{gear: gear, method: "PURGE", path: path, header: header}); r.status != http.StatusOK {
			t.Fatalf("PURGE %s in %s: status %d %q, want 200", path, gear, r.status, r.body)
		}
	}
	// fill stores the anonymous copy of each scheme and, in heavy, a
	// session's copy.
	fill := func(t *testing.T, gear, u string) {
		t.Helper()
		variants := []req{{}, {header: https}}
		if strings.HasSuffix(gear, "heavy") {
			variants = append(variants, req{cookie: "PHPSESSID=s1"})
		}
		for _, r := range variants {
			r.gear, r.path = gear, u
			g.do(t, r).want(t, "MISS", "")
			g.do(t, r).want(t, "HIT", "")
		}
	}

	t.Run("a soft gear serves the anonymous copies stale and drops the sessions'", func(t *testing.T) {
		for _, tc := range []struct{ gear, u string }{
			{"heavy", "/soft/heavy?cc=no-cache"},
			{"alwaysmoderate", "/soft/moderate?cc=max-age%3D300"},
		} {
			fill(t, tc.gear, tc.u)
			before := o.count(tc.u)
			purge(t, tc.gear, tc.u, nil)
			for _, h := range []map[string]string{nil, https} {
				r := g.do(t, req{gear: tc.gear, path: tc.u, header: h})
				r.want(t, "STALE", "")
				eventually(t, tc.gear+" "+tc.u+" refreshed", func() string {
					r := g.do(t, req{gear: tc.gear, path: tc.u, header: h})
					if x := r.header.Get("X-Cache"); x != "HIT" {
						return "X-Cache " + x
					}
					return ""
				})
			}
			if tc.gear == "heavy" {
				g.do(t, req{gear: tc.gear, path: tc.u, cookie: "PHPSESSID=s1"}).want(t, "MISS", "user=s1")
			}
			if tc.gear == "heavy" {
				wantCount(t, o, tc.u, before+3)
			} else {
				wantCount(t, o, tc.u, before+2) // moderate passes sessions
			}
		}
	})

	t.Run("a gear that is not soft removes every copy", func(t *testing.T) {
		for _, tc := range []struct{ gear, u string }{
			{"hardheavy", "/soft/hardheavy?cc=no-cache"},
			{"moderate", "/soft/hardmoderate?cc=max-age%3D300"},
		} {
			fill(t, tc.gear, tc.u)
			purge(t, tc.gear, tc.u, nil)
			g.do(t, req{gear: tc.gear, path: tc.u}).want(t, "MISS", "")
			g.do(t, req{gear: tc.gear, path: tc.u, header: https}).want(t, "MISS", "")
		}
	})

	t.Run("tags: soft with xkey, a ban without", func(t *testing.T) {
		for _, tc := range []struct{ gear, anon string }{
			{"heavy", "STALE"},
			{"hardheavy", "MISS"},
			{"plainheavy", "MISS"},
		} {
			u := "/soft/tag/" + tc.gear + "?cc=no-cache&xkey=post-7"
			fill(t, tc.gear, u)
			purge(t, tc.gear, "/", map[string]string{"xkey": "post-7"})
			g.do(t, req{gear: tc.gear, path: u}).want(t, tc.anon, "")
			g.do(t, req{gear: tc.gear, path: u, cookie: "PHPSESSID=s1"}).want(t, "MISS", "user=s1")
		}
	})

	// A page whose only validator is a Last-Modified to the second: its
	// refresh after the PURGE asks for it whole, not 304 Not Modified
	// (which would keep the old copy: the publish came within the second).
	t.Run("the refresh after a PURGE is not a 304", func(t *testing.T) {
		u := "/soft/lm?cc=no-cache&lm=1"
		g.do(t, req{gear: "heavy", path: u}).want(t, "MISS", "hit=1")
		purge(t, "heavy", u, nil)
		g.purged(t, req{gear: "heavy", path: u}, "hit=2")
		if h := o.header(u, "If-Modified-Since"); h != "" {
			t.Errorf("the refresh asked If-Modified-Since: %s", h)
		}
	})

	// A fetch under way when the PURGE comes: the backend began the page
	// before the publish, so its answer is the old page. The PURGE waits
	// for it and purges it: it is never a fresh HIT afterwards.
	t.Run("a fetch under way is purged too", func(t *testing.T) {
		for _, tc := range []struct{ gear, after string }{
			{"heavy", "STALE"},
			{"hardheavy", "MISS"},
		} {
			u := "/soft/inflight/" + tc.gear + "?cc=no-cache&sleep=1500ms"
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				g.do(t, req{gear: tc.gear, path: u}).want(t, "MISS", "hit=1")
			}()
			eventually(t, "the fetch began", func() string {
				if o.inflightOf(u) == 0 {
					return "no fetch at the backend yet"
				}
				return ""
			})
			purge(t, tc.gear, u, nil)
			wg.Wait()
			r := g.do(t, req{gear: tc.gear, path: u})
			r.want(t, tc.after, "")
			if r.header.Get("X-Cache") != tc.after {
				out, _ := exec.Command("varnishlog", "-n", g.v.WorkDir, "-d", "-g", "request", "-q", `ReqURL ~ "inflight"`).CombinedOutput()
				t.Logf("%s", out)
			}
			if r.header.Get("X-Cache") == "HIT" {
				t.Errorf("%s: the copy of the fetch begun before the PURGE is served fresh after it: %q", tc.gear, r.body)
			}
		}
	})

	// The case of a publish during a surge: heavy refreshes a stale page
	// in the background, the PURGE comes while that refresh runs.
	t.Run("a refresh in the background under way is purged too", func(t *testing.T) {
		u := "/soft/refresh?cc=no-cache&sleep=1500ms"
		g.do(t, req{gear: "heavy", path: u}).want(t, "MISS", "hit=1")
		purge(t, "heavy", u, nil)
		g.do(t, req{gear: "heavy", path: u}).want(t, "STALE", "hit=1") // the refresh begins
		eventually(t, "the refresh began", func() string {
			if o.inflightOf(u) == 0 {
				return "no refresh at the backend yet"
			}
			return ""
		})
		purge(t, "heavy", u, nil)
		r := g.do(t, req{gear: "heavy", path: u})
		if r.header.Get("X-Cache") != "STALE" || !strings.Contains(r.body, "hit=2") {
			t.Errorf("after the PURGE: X-Cache %s %q, want the refresh begun before it served STALE (hit=2)", r.header.Get("X-Cache"), r.body)
		}
		eventually(t, "a page fetched after the PURGE", func() string {
			r := g.do(t, req{gear: "heavy", path: u})
			if !strings.Contains(r.body, "hit=3") {
				return "X-Cache " + r.header.Get("X-Cache") + " " + strings.TrimSpace(r.body)
			}
			return ""
		})
	})
}

// eventually retries cond (which returns "" when met, else what it saw)
// for up to 10 s.
func eventually(t *testing.T, what string, cond func() string) {
	t.Helper()
	var last string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if last = cond(); last == "" {
			return
		}
	}
	t.Fatalf("%s: not within 10 s; last: %s", what, last)
}

// purged checks the next views of the anonymous page r that a PURGE
// reached, with the default profiles.soft_purge: a gear named heavy… (its
// soft one) serves the old copy stale while one fetch refreshes it, then
// the new copy; the other gears fetch it at once. body is what the new
// copy holds.
func (g *gears) purged(t *testing.T, r req, body string) {
	t.Helper()
	if !strings.HasPrefix(r.gear, "heavy") {
		g.do(t, r).want(t, "MISS", body)
		return
	}
	g.do(t, r).want(t, "STALE", "")
	eventually(t, r.gear+" "+r.path+" refreshed after the PURGE", func() string {
		got := g.do(t, r)
		if x := got.header.Get("X-Cache"); x != "HIT" || !strings.Contains(got.body, body) {
			return "X-Cache " + x + ": " + strings.TrimSpace(got.body)
		}
		return ""
	})
}
