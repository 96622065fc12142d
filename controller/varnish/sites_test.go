package varnish

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/profiles"
)

// Tests in this file run sites against a real varnishd: the router
// active, a label per site on its gear's profile.

// sitesRig is a rig whose profiles fetch from an origin that names the
// Host it was asked for, and show the gear that answered.
type sitesRig struct {
	*rig
	origin *httptest.Server
	sites  Sites
}

func newSitesRig(t *testing.T) *sitesRig {
	t.Helper()
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		io.WriteString(w, r.Host)
	}))
	t.Cleanup(origin.Close)
	r := newRig(t, func(cfg *config.Config) {
		host, port, _ := net.SplitHostPort(strings.TrimPrefix(origin.URL, "http://"))
		cfg.Backend.Host = host
		cfg.Backend.Port, _ = strconv.Atoi(port)
		cfg.Profiles.ExposeHeaders = true
	})
	return &sitesRig{rig: r, origin: origin}
}

// plan sets the sites' routes and gears (one set of profiles for all).
func (s *sitesRig) plan(t *testing.T, routes []profiles.Route, gears map[string]state.Gear) {
	t.Helper()
	router, err := profiles.Router(routes)
	if err != nil {
		t.Fatal(err)
	}
	s.sites = Sites{Sets: []*profiles.Set{&s.set}, Router: router}
	for _, r := range routes {
		s.sites.Labels = append(s.sites.Labels, SiteLabel{Site: r.Site, Gear: gears[r.Site]})
	}
}

func (s *sitesRig) syncSites(t *testing.T) (float64, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ms, switched := s.t.SyncSites(ctx, s.now, &s.sites)
	s.now = s.now.Add(time.Second)
	if st := s.t.SitesStatus(&s.sites); !st.InSync || st.Error != "" {
		t.Fatalf("status after a sync = %+v, want in sync", st)
	}
	return ms, switched
}

// gearOfHost asks Varnish for / with host as the Host and returns the
// gear that answered.
func (s *sitesRig) gearOfHost(t *testing.T, host string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, s.v.URL("/"), nil)
	req.Host = host
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET / Host %s: %s %q", host, resp.Status, body)
	}
	return resp.Header.Get("X-Gearshift-Profile")
}

// loaded returns varnishd's VCL programs and its labels (label: target).
func (s *sitesRig) loaded(t *testing.T) (programs []string, labels map[string]string) {
	t.Helper()
	vcls, err := s.cmds.Admin.VCLList(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	labels = map[string]string{}
	for _, v := range vcls {
		if v.Label != "" {
			labels[v.Name] = v.Label
		} else {
			programs = append(programs, v.Name)
		}
	}
	return programs, labels
}

var testRoutes = []profiles.Route{
	{Site: profiles.DefaultSite},
	{Site: "shop", Hosts: []string{"shop.example", "www.shop.example"}},
	{Site: "wiki", Hosts: []string{"*.wiki.example"}},
	{Site: "docs", Hosts: []string{"*.docs.wiki.example", "exact.wiki.example"}},
}

// Each request reaches its site's gear: an exact host beats a glob, a
// narrower glob a wider one, the Host's case and port do not matter, an
// absolute-form target's authority is the Host, and an unclaimed host is
// the default site's.
func TestSitesRouteByHost(t *testing.T) {
	s := newSitesRig(t)
	s.plan(t, testRoutes, map[string]state.Gear{"default": state.Light, "shop": state.Heavy, "wiki": state.Moderate, "docs": state.Heavy})
	s.syncSites(t)
	for host, want := range map[string]string{
		"shop.example":            "heavy",
		"WWW.Shop.Example:8080":   "heavy",
		"shop.example.":           "heavy",
		"a.wiki.example":          "moderate",
		"a.b.wiki.example":        "moderate",
		"wiki.example":            "light", // a glob needs a label before its suffix
		"exact.wiki.example":      "heavy",
		"x.docs.wiki.example":     "heavy",
		"other.example":           "light",
		"shop.example.evil.test":  "light",
		"notshop.example":         "light",
		"x.docs.wiki.example:443": "heavy",
	} {
		if got := s.gearOfHost(t, host); got != want {
			t.Errorf("Host %s: answered by %q, want %q", host, got, want)
		}
	}
	// An absolute-form target goes where its authority says, whatever the
	// Host header: the profile takes the same Host.
	conn, err := net.Dial("tcp", s.v.HTTPAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "GET http://shop.example/ HTTP/1.1\r\nHost: other.example\r\nConnection: close\r\n\r\n")
	raw, _ := io.ReadAll(conn)
	if !strings.Contains(string(raw), "X-Gearshift-Profile: heavy") || !strings.HasSuffix(string(raw), "shop.example") {
		t.Errorf("absolute-form http://shop.example/ with Host other.example:\n%s", raw)
	}

	// Four sites on one set of overrides: three profiles and the router.
	programs, labels := s.loaded(t)
	if len(programs) != 5 { // the boot VCL too
		t.Errorf("loaded programs %v, want the boot VCL, three profiles and the router", programs)
	}
	for _, l := range s.sites.Labels {
		if got, want := labels[profiles.SiteLabel(l.Site)], s.set[l.Gear].Name; got != want {
			t.Errorf("label of %s -> %q, want %q", l.Site, got, want)
		}
	}
}

// Shifting one site is one vcl.label: no compile, no vcl.use, and the
// other sites answer from the gear they were in.
func TestSitesShiftOne(t *testing.T) {
	s := newSitesRig(t)
	gears := map[string]state.Gear{"default": state.Light, "shop": state.Light, "wiki": state.Moderate, "docs": state.Light}
	s.plan(t, testRoutes, gears)
	s.syncSites(t)
	s.cmds.take()

	gears["shop"] = state.Heavy
	s.plan(t, testRoutes, gears)
	ms, switched := s.syncSites(t)
	if !switched || ms <= 0 {
		t.Errorf("SyncSites = %v, %v; want a switch and its time", ms, switched)
	}
	want := []string{"label " + profiles.SiteLabel("shop") + " " + s.set[state.Heavy].Name}
	if got := s.cmds.take(); !slices.Equal(got, want) {
		t.Errorf("commands = %q, want %q", got, want)
	}
	for host, gear := range map[string]string{"shop.example": "heavy", "a.wiki.example": "moderate", "x.docs.wiki.example": "light", "other.example": "light"} {
		if got := s.gearOfHost(t, host); got != gear {
			t.Errorf("Host %s: %q, want %q", host, got, gear)
		}
	}
	// In sync: nothing to do.
	if _, switched := s.syncSites(t); switched {
		t.Error("a sync in sync switched")
	}
	if got := s.cmds.take(); len(got) != 0 {
		t.Errorf("a sync in sync sent %q", got)
	}
}

// A reload that removes a site: its hosts fall to default, its label and
// the old router go; one that removes the last site goes back to the
// gear's profile active (0.4), with nothing of the sites left; and the
// first site comes back without a request failing in between.
func TestSitesReload(t *testing.T) {
	s := newSitesRig(t)
	gears := map[string]state.Gear{"default": state.Moderate, "shop": state.Heavy, "wiki": state.Light, "docs": state.Heavy}
	s.plan(t, testRoutes, gears)
	s.syncSites(t)
	oldRouter := s.sites.Router.Name
	// Requests all along, none of which may fail while the router changes.
	stop, failed := make(chan struct{}), make(chan string, 1)
	done := make(chan int)
	go func() {
		n := 0
		defer func() { done <- n }()
		for hosts := []string{"shop.example", "a.wiki.example", "x.docs.wiki.example", "other.example"}; ; n++ {
			select {
			case <-stop:
				return
			default:
			}
			req, _ := http.NewRequest(http.MethodGet, s.v.URL("/"), nil)
			req.Host = hosts[n%len(hosts)]
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			if err != nil || resp.StatusCode != http.StatusOK {
				select {
				case failed <- fmt.Sprintf("Host %s: %v %v", req.Host, err, resp):
				default:
				}
			}
		}
	}()
	defer func() {
		close(stop)
		if n := <-done; n == 0 {
			t.Error("no request was sent during the reloads")
		}
		select {
		case f := <-failed:
			t.Errorf("a request failed while the router changed: %s", f)
		default:
		}
	}()

	// shop removed: its hosts fall to default; docs removed: its hosts
	// fall to wiki's glob.
	s.plan(t, []profiles.Route{testRoutes[0], testRoutes[2]}, gears)
	s.syncSites(t)
	programs, labels := s.loaded(t)
	if slices.Contains(programs, oldRouter) {
		t.Errorf("old router %s still loaded: %v", oldRouter, programs)
	}
	for _, gone := range []string{"shop", "docs"} {
		if _, ok := labels[profiles.SiteLabel(gone)]; ok {
			t.Errorf("label of removed site %s still loaded: %v", gone, labels)
		}
	}
	for host, gear := range map[string]string{"shop.example": "moderate", "exact.wiki.example": "light", "x.docs.wiki.example": "light"} {
		if got := s.gearOfHost(t, host); got != gear {
			t.Errorf("a removed site's host %s answered by %q, want %q", host, got, gear)
		}
	}

	// No sites: the gear's profile is active, no router, no site label.
	s.sync(t, state.Heavy)
	s.wantActive(t, state.Heavy)
	programs, labels = s.loaded(t)
	for _, p := range programs {
		if strings.HasPrefix(p, profiles.RouterPrefix) {
			t.Errorf("router %s loaded without sites", p)
		}
	}
	if len(labels) != 0 {
		t.Errorf("labels without sites: %v", labels)
	}

	// Sites again.
	s.plan(t, testRoutes, gears)
	s.syncSites(t)
	if got := s.gearOfHost(t, "shop.example"); got != "heavy" {
		t.Errorf("shop after sites came back: %q", got)
	}
}

// A site label moved by someone else is put back, and said so.
func TestSitesForeignLabel(t *testing.T) {
	s := newSitesRig(t)
	s.plan(t, testRoutes, map[string]state.Gear{"default": state.Light, "shop": state.Heavy, "wiki": state.Light, "docs": state.Light})
	s.syncSites(t)
	if _, err := s.v.Adm("vcl.label", profiles.SiteLabel("shop"), s.set[state.Light].Name); err != nil {
		t.Fatal(err)
	}
	// Between two looks at the VCLs a sync trusts what it did; the next
	// look finds the label moved.
	s.now = s.now.Add(sitesRelist)
	s.syncSites(t)
	if got := s.gearOfHost(t, "shop.example"); got != "heavy" {
		t.Errorf("shop after a foreign relabel and a sync: %q, want heavy", got)
	}
	if s.logged("site label changed outside gearshift") != 1 {
		t.Errorf("the foreign relabel was not logged once")
	}
}

// The backend's limits hold over every loaded VCL: with three sites in
// three gears, backend.max_connections bounds them all together (each
// VCL would let that many through on its own), and a site's
// max_connections bounds its own; a request over either is answered at
// once (503: no copy to serve), not queued.
func TestSitesLimitsOverEveryVCL(t *testing.T) {
	var mu sync.Mutex
	inFlight, most := map[string]int{}, map[string]int{}
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/slow" { // the backend probe's
			return
		}
		mu.Lock()
		inFlight[r.Host]++
		inFlight[""]++
		most[r.Host] = max(most[r.Host], inFlight[r.Host])
		most[""] = max(most[""], inFlight[""])
		mu.Unlock()
		time.Sleep(time.Second)
		mu.Lock()
		inFlight[r.Host]--
		inFlight[""]--
		mu.Unlock()
		w.Header().Set("Cache-Control", "no-store")
		io.WriteString(w, r.Host)
	}))
	t.Cleanup(origin.Close)
	routes := []profiles.Route{{Site: profiles.DefaultSite}, {Site: "shop", Hosts: []string{"shop.example"}}, {Site: "wiki", Hosts: []string{"wiki.example"}}}
	r := newRig(t, func(cfg *config.Config) {
		host, port, _ := net.SplitHostPort(strings.TrimPrefix(origin.URL, "http://"))
		cfg.Backend.Host = host
		cfg.Backend.Port, _ = strconv.Atoi(port)
		cfg.Backend.MaxConnections = 4
		cfg.Profiles.StaleIfError = 0
		cfg.Profiles.ClientBudget.Rate = 0 // one client sends it all
		cfg.Sites = []config.Site{{Name: "shop", Hosts: []string{"shop.example"}, MaxConnections: 2}, {Name: "wiki", Hosts: []string{"wiki.example"}}}
	})
	s := &sitesRig{rig: r, origin: origin}
	s.plan(t, routes, map[string]state.Gear{"default": state.Light, "shop": state.Heavy, "wiki": state.Moderate})
	s.syncSites(t)

	burst := func(hosts ...string) (ok, busy int, slowest time.Duration) {
		var wg sync.WaitGroup
		var rmu sync.Mutex
		for i, host := range hosts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req, _ := http.NewRequest(http.MethodGet, s.v.URL(fmt.Sprintf("/slow?n=%d", i)), nil)
				req.Host = host
				start := time.Now()
				resp, err := http.DefaultClient.Do(req)
				took := time.Since(start)
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				rmu.Lock()
				defer rmu.Unlock()
				switch resp.StatusCode {
				case http.StatusOK:
					ok++
				case http.StatusServiceUnavailable:
					busy++
					slowest = max(slowest, took)
				default:
					t.Errorf("Host %s: status %d", host, resp.StatusCode)
				}
			}()
		}
		wg.Wait()
		return ok, busy, slowest
	}

	// One site: its own limit.
	ok, busy, slowest := burst(slices.Repeat([]string{"shop.example"}, 6)...)
	if most["shop.example"] > 2 || ok < 1 || busy < 1 || ok+busy != 6 {
		t.Errorf("shop (max_connections 2): at most %d at the backend at once, %d answered, %d refused", most["shop.example"], ok, busy)
	}
	if slowest > 900*time.Millisecond {
		t.Errorf("a refused request took %s: it waited in a queue", slowest)
	}

	// Three sites in three gears: the server's limit over all of them.
	hosts := append(slices.Repeat([]string{"wiki.example"}, 4), slices.Repeat([]string{"other.example"}, 4)...)
	ok, busy, _ = burst(append(hosts, "shop.example", "shop.example")...)
	if most[""] > 4 || ok < 2 || busy < 1 {
		t.Errorf("three sites in three gears (backend.max_connections 4): at most %d at the backend at once, %d answered, %d refused",
			most[""], ok, busy)
	}
	// The tokens came back: the next request goes through.
	if ok, _, _ := burst("wiki.example"); ok != 1 {
		t.Error("a request after the bursts was refused: a token was not given back")
	}
}

// A PURGE, BAN or tag purge reaches only the site it was sent to, every
// host of that site; a site with a purge token of its own takes that
// token alone, and the server's token does not do for it.
func TestSitesPurgeScope(t *testing.T) {
	var mu sync.Mutex
	fetches := map[string]int{}
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		fetches[r.Host]++
		mu.Unlock()
		w.Header().Set("Cache-Control", "max-age=600")
		w.Header().Set("xkey", "tag-a")
		io.WriteString(w, r.Host)
	}))
	t.Cleanup(origin.Close)
	dir := t.TempDir()
	token := func(name, value string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(value+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	serverToken, shopToken := "server0token0of0the0whole0host", "shop0token0of0its0own0site0"
	routes := []profiles.Route{{Site: profiles.DefaultSite}, {Site: "shop", Hosts: []string{"shop.example", "www.shop.example"}},
		{Site: "wiki", Hosts: []string{"*.wiki.example"}}}
	r := newRig(t, func(cfg *config.Config) {
		host, port, _ := net.SplitHostPort(strings.TrimPrefix(origin.URL, "http://"))
		cfg.Backend.Host = host
		cfg.Backend.Port, _ = strconv.Atoi(port)
		cfg.Profiles.ExposeHeaders = true
		cfg.Profiles.NormalizeHost = false // www.shop.example is a copy of its own
		cfg.Profiles.PurgeTokenFile = token("server", serverToken)
		cfg.Sites = []config.Site{
			{Name: "shop", Hosts: routes[1].Hosts, PurgeTokenFile: token("shop", shopToken)},
			{Name: "wiki", Hosts: routes[2].Hosts},
		}
	})
	s := &sitesRig{rig: r, origin: origin}
	s.plan(t, routes, map[string]state.Gear{"default": state.Heavy, "shop": state.Heavy, "wiki": state.Heavy})
	s.syncSites(t)

	send := func(method, host, tok string, header ...string) int {
		req, _ := http.NewRequest(method, s.v.URL("/"), nil)
		req.Host = host
		if tok != "" {
			req.Header.Set("X-Purge-Token", tok)
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	hosts := []string{"shop.example", "www.shop.example", "a.wiki.example", "other.example"}
	warm := func() {
		for _, h := range hosts {
			send(http.MethodGet, h, "")
		}
	}
	// cached tells, for each host, whether a GET is served without a fetch.
	cached := func() map[string]bool {
		mu.Lock()
		before := maps.Clone(fetches)
		mu.Unlock()
		for _, h := range hosts {
			send(http.MethodGet, h, "")
		}
		mu.Lock()
		defer mu.Unlock()
		out := map[string]bool{}
		for _, h := range hosts {
			out[h] = fetches[h] == before[h]
		}
		return out
	}
	warm()
	if c := cached(); !c["shop.example"] || !c["other.example"] {
		t.Fatalf("not cached after a first view: %v", c)
	}

	for _, tc := range []struct {
		host, token string
		want        int
	}{
		{"shop.example", serverToken, http.StatusForbidden}, // shop's token alone
		{"a.wiki.example", shopToken, http.StatusForbidden}, // shop's token is not wiki's
		{"other.example", shopToken, http.StatusForbidden},
	} {
		if got := send("PURGE", tc.host, tc.token); got != tc.want {
			t.Errorf("PURGE Host %s with the %s: %d, want %d", tc.host, map[string]string{serverToken: "server's token", shopToken: "shop's token"}[tc.token], got, tc.want)
		}
	}

	if got := send("PURGE", "shop.example", shopToken); got != http.StatusOK {
		t.Fatalf("PURGE / of shop with its token: %d", got)
	}
	want := map[string]bool{"shop.example": false, "www.shop.example": false, "a.wiki.example": true, "other.example": true}
	if c := cached(); !maps.Equal(c, want) {
		t.Errorf("after PURGE / on shop.example, cached %v, want %v (every host of shop, no other site)", c, want)
	}

	warm()
	if got := send("PURGE", "a.wiki.example", serverToken, "xkey", "tag-a"); got != http.StatusOK {
		t.Fatalf("tag PURGE on wiki: %d", got)
	}
	want = map[string]bool{"shop.example": true, "www.shop.example": true, "a.wiki.example": false, "other.example": true}
	if c := cached(); !maps.Equal(c, want) {
		t.Errorf("after a tag PURGE on a.wiki.example, cached %v, want %v (wiki's tag-a alone)", c, want)
	}

	warm()
	if got := send("BAN", "other.example", serverToken); got != http.StatusOK {
		t.Fatalf("BAN / on the default site: %d", got)
	}
	want = map[string]bool{"shop.example": true, "www.shop.example": true, "a.wiki.example": true, "other.example": false}
	if c := cached(); !maps.Equal(c, want) {
		t.Errorf("after BAN / on other.example, cached %v, want %v (the default site alone)", c, want)
	}
}
