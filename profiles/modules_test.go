package profiles

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/controller/varnishadm"
	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
)

// sessionWrites sends n POSTs, each with a session cookie of its own (a
// visitor's random one), to gear, 8 at a time.
func sessionWrites(tb testing.TB, g *gears, gear string, n int) {
	tb.Helper()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 8 {
				r := g.do(tb, req{gear: gear, method: http.MethodPost, path: "/g/" + gear + "/write", cookie: fmt.Sprintf("PHPSESSID=hostile%d", i)})
				if r.status != http.StatusOK {
					tb.Errorf("POST %d: status %d", i, r.status)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestVarnishModulesAgainstVarnish: with varnish-modules, a session's
// write drops its pages through xkey and adds no ban, so no visitor can
// grow the ban list; the Plain twin still bans. Tags from the backend
// purge by xkey header; PURGE needs the token when there is one, and
// never comes through a proxy without it.
func TestVarnishModulesAgainstVarnish(t *testing.T) {
	varnishtest.Binary(t)
	o := newOrigin(t)
	plain := testConfig(o)
	plain.NoModules = true
	tok := testConfig(o)
	tok.PurgeToken = "s3cret-purge-token-0123"
	g := loadGears(t, map[string]string{
		"heavy":      render(t, testConfig(o), state.Heavy),
		"heavyplain": render(t, plain, state.Heavy),
		"heavytok":   render(t, tok, state.Heavy),
	})

	// Not parallel: they count the one ban list.
	t.Run("session-writes-add-no-ban", func(t *testing.T) {
		// An object older than the writes: Varnish keeps every ban
		// younger than the oldest object until its lurker has tested it.
		g.do(t, req{gear: "heavy", path: "/g/heavy/old"}).want(t, "MISS", "")
		before := g.v.Counter(t, "MAIN.bans")
		sessionWrites(t, g, "heavy", 20000)
		if n := g.v.Counter(t, "MAIN.bans"); n > before+5 {
			t.Errorf("20000 session writes grew the ban list from %d to %d bans", before, n)
		}
		// The same writes through the Plain twin: one ban each (0.3).
		before = g.v.Counter(t, "MAIN.bans")
		sessionWrites(t, g, "heavyplain", 200)
		if n := g.v.Counter(t, "MAIN.bans"); n < before+200 {
			t.Errorf("without xkey, 200 session writes made %d bans, want one each", n-before)
		}
	})
	for _, gear := range []string{"heavy", "heavyplain"} {
		t.Run(gear+"/own-write", func(t *testing.T) {
			u := "/g/" + gear + "/own?cc=no-cache"
			alice, bob := "wordpress_logged_in_x=alice", "wordpress_logged_in_x=bob"
			get := func(cookie string) reply { return g.do(t, req{gear: gear, path: u, cookie: cookie}) }
			get(alice).want(t, "MISS", "user=alice")
			get(bob).want(t, "MISS", "user=bob")
			get(alice).want(t, "HIT", "user=alice")
			g.do(t, req{gear: gear, method: http.MethodPost, path: "/g/" + gear + "/comment", cookie: alice}).want(t, "PASS", "user=alice")
			get(alice).want(t, "MISS", "user=alice")
			get(bob).want(t, "HIT", "user=bob")
		})
		t.Run(gear+"/purge-by-tag", func(t *testing.T) {
			a := "/g/" + gear + "/product?xkey=product-42+cat-7"
			b := "/g/" + gear + "/other?skey=product-43"
			c := "/g/" + gear + "/surrogate?skey=product-42"
			for _, u := range []string{a, b, c} {
				g.do(t, req{gear: gear, path: u}).want(t, "MISS", "")
				r := g.do(t, req{gear: gear, path: u})
				r.want(t, "HIT", "")
				if v := r.header.Get("xkey"); v != "" {
					t.Errorf("%s: a visitor got the tags %q", u, v)
				}
			}
			if r := g.do(t, req{gear: gear, method: "PURGE", path: "/", header: map[string]string{"xkey": "product-42"}}); r.status != http.StatusOK {
				t.Fatalf("PURGE xkey: product-42: status %d %q", r.status, r.body)
			}
			// heavy's soft purge through xkey; a ban (hard) without it.
			after := map[string]string{"heavy": "STALE", "heavyplain": "MISS"}[gear]
			g.do(t, req{gear: gear, path: a}).want(t, after, "")
			g.do(t, req{gear: gear, path: c}).want(t, after, "")
			g.do(t, req{gear: gear, path: b}).want(t, "HIT", "")
			if r := g.do(t, req{gear: gear, method: "PURGE", path: "/", header: map[string]string{"xkey": "product-42; ban req.url ~ ."}}); r.status != http.StatusBadRequest {
				t.Errorf("PURGE with a tag list that is not one: status %d, want 400", r.status)
			}
		})
	}
	t.Run("purge-through-a-proxy", func(t *testing.T) {
		// No purge_token_file: from purge_acl, straight, a PURGE works;
		// forwarded by a same-host proxy (a visitor of the TLS
		// terminator), refused.
		u := "/g/heavy/proxied"
		g.do(t, req{gear: "heavy", path: u}).want(t, "MISS", "")
		for _, m := range []string{"PURGE", "BAN"} {
			if r := g.do(t, req{gear: "heavy", method: m, path: u, header: map[string]string{"X-Forwarded-For": "198.51.100.7"}}); r.status != http.StatusForbidden {
				t.Errorf("%s through a proxy: status %d, want 403", m, r.status)
			}
		}
		g.do(t, req{gear: "heavy", path: u}).want(t, "HIT", "")
		if r := g.do(t, req{gear: "heavy", method: "PURGE", path: u}); r.status != http.StatusOK {
			t.Errorf("PURGE from purge_acl: status %d, want 200", r.status)
		}
		g.do(t, req{gear: "heavy", path: u}).want(t, "STALE", "")
	})
	t.Run("purge-token", func(t *testing.T) {
		u := "/g/heavytok/page"
		g.do(t, req{gear: "heavytok", path: u}).want(t, "MISS", "")
		for _, h := range []map[string]string{nil, {"X-Purge-Token": "wrong"}, {"X-Purge-Token": tok.PurgeToken + "x"}, {"xkey": "anything"}} {
			for _, m := range []string{"PURGE", "BAN"} {
				if r := g.do(t, req{gear: "heavytok", method: m, path: u, header: h}); r.status != http.StatusForbidden {
					t.Errorf("%s with %v: status %d, want 403", m, h, r.status)
				}
			}
		}
		g.do(t, req{gear: "heavytok", path: u}).want(t, "HIT", "")
		if r := g.do(t, req{gear: "heavytok", method: "PURGE", path: u, header: map[string]string{"X-Purge-Token": tok.PurgeToken}}); r.status != http.StatusOK {
			t.Errorf("PURGE with the token: status %d, want 200", r.status)
		}
		g.do(t, req{gear: "heavytok", path: u}).want(t, "STALE", "")
		// The token reaches no backend, on any request.
		v := "/g/heavytok/carried"
		g.do(t, req{gear: "heavytok", path: v, header: map[string]string{"X-Purge-Token": tok.PurgeToken}})
		if h := o.header(v, "X-Purge-Token"); h != "" {
			t.Errorf("the backend got X-Purge-Token %q", h)
		}
	})
}

// TestPlainTwinWithoutModules: a Varnish whose vmod_path has no
// varnish-modules refuses the full profiles with the message
// MissingModules knows, and compiles every Plain twin.
func TestPlainTwinWithoutModules(t *testing.T) {
	varnishtest.Binary(t)
	v := varnishtest.Start(t, varnishtest.Config{Params: []string{varnishtest.WithoutModules(t)}})
	c, err := varnishadm.NewFromFile(v.AdminAddr, v.SecretFile)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.LoadTimeout = time.Minute
	set, err := Build(*defaultSite())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, p := range set {
		err := c.VCLInline(ctx, "full_"+p.Gear.String(), p.VCL, "cold")
		if !MissingModules(err) {
			t.Errorf("%s with varnish-modules on a Varnish without them: %v, want the compiler's missing VMOD", p.Gear, err)
		}
		pl, ok := p.Plain()
		if !ok || strings.Contains(pl.VCL, "import xkey") || pl.Name == p.Name {
			t.Fatalf("%s: no Plain twin without xkey (ok %v)", p.Gear, ok)
		}
		if err := c.VCLInline(ctx, "plain_"+p.Gear.String(), pl.VCL, "cold"); err != nil {
			t.Errorf("%s's Plain twin: %v", p.Gear, err)
		}
	}
}

// TestClientBudgetAgainstVarnish: in moderate and heavy, a client's
// misses and passes beyond profiles.client_budget never reach the
// backend: it gets a stored copy when one is left, else 429 with
// Retry-After. Hits cost nothing; a client behind a trusted proxy is
// counted by its own address; purge_acl has no budget; light has none.
func TestClientBudgetAgainstVarnish(t *testing.T) {
	varnishtest.Binary(t)
	o := newOrigin(t)
	site := testConfig(o)
	site.Options.ClientBudget = Budget{Rate: 1, Burst: 5}
	g := loadGears(t, map[string]string{
		"light":    render(t, site, state.Light),
		"moderate": render(t, site, state.Moderate),
		"heavy":    render(t, site, state.Heavy),
	})
	get := func(from, gear, u, extra string) reply {
		t.Helper()
		return rawFrom(t, g, from, gear, "GET "+u+" HTTP/1.1\r\nHost: 127.0.0.1\r\n"+extra)
	}
	// spend sends distinct misses from a client until it is refused; it
	// returns how many reached the backend.
	spend := func(from, gear, prefix, extra string) int {
		t.Helper()
		reached := 0
		for i := range 40 {
			u := fmt.Sprintf("%s/%d", prefix, i)
			r := get(from, gear, u, extra)
			if r.status == http.StatusTooManyRequests {
				if ra := r.header.Get("Retry-After"); ra != "1" {
					t.Errorf("429 with Retry-After %q, want 1 (a token a second)", ra)
				}
				if o.count(u) != 0 {
					t.Errorf("%s: refused, yet the backend got it", u)
				}
				continue
			}
			if r.status != http.StatusOK {
				t.Fatalf("%s: status %d", u, r.status)
			}
			reached++
		}
		return reached
	}
	for i, gear := range []string{"moderate", "heavy"} {
		t.Run(gear, func(t *testing.T) {
			t.Parallel()
			me, other := fmt.Sprintf("127.0.0.%d", 10+i), fmt.Sprintf("127.0.0.%d", 20+i)
			proxied := fmt.Sprintf("192.0.2.%d", 10+i)
			hit := "/g/" + gear + "/b/cached?cc=max-age=600"
			stale := "/g/" + gear + "/b/stale?cc=max-age=1,stale-while-revalidate=0"
			for _, u := range []string{hit, stale} {
				get("127.0.0.1", gear, u, "") // purge_acl: no budget spent
			}
			start := time.Now()
			n := spend(me, gear, "/g/"+gear+"/b/miss", "")
			// 5 at once, then one a second.
			if most := 5 + int(time.Since(start).Seconds()) + 1; n < 5 || n > most {
				t.Errorf("over 40 misses, %d reached the backend, want 5 to %d", n, most)
			}
			if r := get(me, gear, hit, ""); r.status != http.StatusOK || r.header.Get("X-Cache") != "HIT" {
				t.Errorf("a hit over budget: status %d X-Cache %q, want 200 HIT (a hit costs nothing)", r.status, r.header.Get("X-Cache"))
			}
			if gear == "moderate" {
				time.Sleep(1100 * time.Millisecond) // its TTL gone: a refresh would be a miss
				spend(me, gear, "/g/"+gear+"/b/more", "")
				if r := get(me, gear, stale, ""); r.status != http.StatusOK || r.header.Get("X-Cache") != "STALE" {
					t.Errorf("an expired page over budget: status %d X-Cache %q, want its stored copy (200 STALE)", r.status, r.header.Get("X-Cache"))
				}
			}
			// Another client has a budget of its own.
			if r := get(other, gear, "/g/"+gear+"/b/other", ""); r.status != http.StatusOK {
				t.Errorf("another client: status %d, want 200", r.status)
			}
			// Behind a trusted proxy (loopback): each visitor by the
			// address the proxy got it from, whatever it wrote itself.
			a := spend("127.0.0.1", gear, "/g/"+gear+"/b/proxied-a", "X-Forwarded-For: 10.0.0.1, "+proxied+"\r\n")
			if a > 5+3 {
				t.Errorf("a visitor behind the proxy: %d of 40 misses reached the backend", a)
			}
			if r := get("127.0.0.1", gear, "/g/"+gear+"/b/proxied-b", "X-Forwarded-For: "+proxied+", 198.51.100.9\r\n"); r.status != http.StatusOK {
				t.Errorf("another visitor behind the proxy: status %d, want 200", r.status)
			}
			// Straight from purge_acl (a local script): no budget.
			if n := spend("127.0.0.1", gear, "/g/"+gear+"/b/local", ""); n != 40 {
				t.Errorf("purge_acl: %d of 40 misses reached the backend, want all", n)
			}
		})
	}
	t.Run("light", func(t *testing.T) {
		t.Parallel()
		if n := spend("127.0.0.5", "light", "/g/light/b/miss", ""); n != 40 {
			t.Errorf("light: %d of 40 reached the backend, want all (no budget in light)", n)
		}
	})
}

// TestClientInFlightAgainstVarnish: in heavy, one client holds at most
// half of backend.max_connections at the backend at once, whatever its
// budget; the rest get 429 at once and never reach the backend; another
// client's requests go through meanwhile; each answer gives its token
// back, so the client's next requests go through one after another.
func TestClientInFlightAgainstVarnish(t *testing.T) {
	varnishtest.Binary(t)
	o := newOrigin(t)
	site := testConfig(o)
	site.Backend.MaxConnections = 4 // two in flight per client
	site.Options.ClientBudget = Budget{Rate: 100, Burst: 100}
	g := loadGears(t, map[string]string{"heavy": render(t, site, state.Heavy)})
	get := func(from, u string) reply {
		t.Helper()
		return rawFrom(t, g, from, "heavy", "GET "+u+" HTTP/1.1\r\nHost: 127.0.0.1\r\n")
	}

	const client, other = "127.0.0.40", "127.0.0.41"
	const slow = 6
	replies := make(chan reply, slow)
	for i := range slow {
		go func() { replies <- get(client, fmt.Sprintf("/g/heavy/f/slow/%d?sleep=1500ms", i)) }()
	}
	time.Sleep(500 * time.Millisecond) // all six sent; two at the backend
	if r := get(other, "/g/heavy/f/other"); r.status != http.StatusOK {
		t.Errorf("another client while the first holds its share: status %d, want 200", r.status)
	}
	statuses := map[int]int{}
	for range slow {
		r := <-replies
		statuses[r.status]++
		if r.status == http.StatusTooManyRequests && r.header.Get("Retry-After") == "" {
			t.Errorf("429 without Retry-After")
		}
	}
	reached := 0
	for i := range slow {
		reached += o.count(fmt.Sprintf("/g/heavy/f/slow/%d?sleep=1500ms", i))
	}
	if statuses[http.StatusOK] != 2 || statuses[http.StatusTooManyRequests] != slow-2 || reached != 2 {
		t.Errorf("%d slow misses at once from one client: statuses %v, %d reached the backend; want 2 answered and %d refused with 429",
			slow, statuses, reached, slow-2)
	}
	// The two answers gave their tokens back: one request after another
	// goes through, many more than the bucket refills in the time.
	for i := range 10 {
		if r := get(client, fmt.Sprintf("/g/heavy/f/after/%d", i)); r.status != http.StatusOK {
			t.Fatalf("request %d after the slow ones were answered: status %d, want 200 (tokens given back)", i, r.status)
		}
	}
}
