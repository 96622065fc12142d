package controller

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/api"
	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/sensor"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/controller/top"
	"github.com/gearshift/gearshift/internal/testsupport/testenv"
	"github.com/gearshift/gearshift/profiles"
)

// Tests in this file run the loop with the config's sites against a real
// varnishd: the router active, each site's label on its gear.

func threeSites(cfg *config.Config) {
	wikiCookies := []string{"wiki_session"}
	cfg.Sites = []config.Site{
		{Name: "shop", Hosts: []string{"shop.example", "www.shop.example"}},
		{Name: "wiki", Hosts: []string{"*.wiki.example"}, Profiles: config.SiteProfiles{SessionCookies: &wikiCookies}},
	}
}

// labels returns varnishd's site labels and what each points to.
func (r *rig) labels(t *testing.T) map[string]string {
	t.Helper()
	out, err := r.v.Adm("vcl.list", "-j")
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{}
	// {"status": …, "name": "gearshift-site-shop", …, "label": {"name": "gearshift-heavy-…", …}}
	for _, entry := range strings.Split(out, "\"name\": \""+profiles.SiteLabelPrefix)[1:] {
		name, rest, _ := strings.Cut(entry, "\"")
		_, target, ok := strings.Cut(rest, "\"label\": {\n      \"name\": \"")
		if !ok {
			continue
		}
		target, _, _ = strings.Cut(target, "\"")
		labels[name] = target
	}
	return labels
}

// wantSites checks each site's gear in the status and in Varnish.
func (r *rig) wantSites(t *testing.T, want map[string]state.Gear) {
	t.Helper()
	st := r.c.Status()
	labels := r.labels(t)
	for name, g := range want {
		site, ok := st.Site(name)
		if !ok || site.Gear != g.String() {
			t.Errorf("status of site %s = %+v, want gear %s", name, site, g)
		}
		set := r.c.sites.plan.Sets[r.setOf(name)]
		if labels[name] != set[g].Name {
			t.Errorf("label of %s -> %q, want %s's %q", name, labels[name], g, set[g].Name)
		}
	}
	if len(st.Targets) != 1 || !st.Targets[0].InSync || !strings.HasPrefix(st.Targets[0].ActiveVCL, profiles.RouterPrefix) {
		t.Errorf("targets %+v, want the router active, in sync", st.Targets)
	}
}

// reload runs a reload on the test's loop.
func (r *rig) reload() (api.Status, error) {
	resp := r.c.handle(context.Background(), request{kind: reqReload})
	return resp.status, resp.err
}

// request runs one control-socket request on the test's loop.
func (r *rig) request(kind requestKind, site string, g state.Gear) (api.Status, error) {
	resp := r.c.handle(context.Background(), request{kind: kind, site: site, state: g})
	return resp.status, resp.err
}

func (r *rig) setOf(site string) int {
	for _, l := range r.c.sites.plan.Labels {
		if l.Site == site {
			return l.Set
		}
	}
	return -1
}

// Forcing one site moves its label alone; the others stay in the
// machine's gear; the status shows each, and the heaviest as the
// server's; auto --site gives it back to the machine.
func TestSitesForceOne(t *testing.T) {
	r := newRig(t, threeSites)
	r.tick(t)
	r.wantSites(t, map[string]state.Gear{"default": state.Light, "shop": state.Light, "wiki": state.Light})
	if n := len(r.c.sites.plan.Sets); n != 2 {
		t.Errorf("%d sets of profiles, want 2 (wiki has its own session cookies)", n)
	}
	r.cmds.take()

	st, err := r.request(reqForce, "shop", state.Heavy)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.cmds.take(); len(got) != 1 || !strings.HasPrefix(got[0], "label "+profiles.SiteLabel("shop")+" ") {
		t.Errorf("forcing one site sent %q, want one vcl.label", got)
	}
	r.wantSites(t, map[string]state.Gear{"default": state.Light, "shop": state.Heavy, "wiki": state.Light})
	shop, _ := st.Site("shop")
	wiki, _ := st.Site("wiki")
	if st.State != "heavy" || st.Mode != "auto" || shop.Mode != "forced" || wiki.Mode != "auto" || len(shop.Hosts) != 2 {
		t.Errorf("status state %s mode %s, shop %+v, wiki %+v; want heavy auto, shop forced, wiki auto", st.State, st.Mode, shop, wiki)
	}
	if def, _ := st.Site("default"); def.Hosts == nil || len(def.Hosts) != 0 {
		t.Errorf("default's hosts = %#v, want []", def.Hosts)
	}

	// The load rises: every site not pinned follows the machine.
	r.sensor.set(50)
	r.tick(t)
	r.tick(t)
	if g := r.c.machine.Current().Gear; g == state.Light {
		t.Fatalf("machine still light at load 50")
	}
	g := r.c.machine.Current().Gear
	r.wantSites(t, map[string]state.Gear{"default": g, "shop": state.Heavy, "wiki": g})

	if _, err := r.request(reqForce, "nosuch", state.Heavy); !errors.As(err, new(*api.UnknownSiteError)) {
		t.Errorf("Force on an unknown site = %v, want an UnknownSiteError", err)
	}
	if _, err := r.request(reqAuto, "nosuch", 0); !errors.As(err, new(*api.UnknownSiteError)) {
		t.Errorf("Auto on an unknown site = %v, want an UnknownSiteError", err)
	}

	r.sensor.set(0)
	if _, err := r.request(reqAuto, "shop", 0); err != nil {
		t.Fatal(err)
	}
	r.wantSites(t, map[string]state.Gear{"default": g, "shop": g, "wiki": g})
}

// A reload keeps the gears and pins of the sites it did not remove; one
// without sites goes back to the gear's profile active.
func TestSitesReloadKeepsGears(t *testing.T) {
	r := newRig(t, threeSites)
	r.tick(t)
	if _, err := r.request(reqForce, "shop", state.Moderate); err != nil {
		t.Fatal(err)
	}
	if _, err := r.request(reqForce, "wiki", state.Heavy); err != nil { // a series of its own
		t.Fatal(err)
	}
	r.next = func() (*config.Config, error) {
		cfg := testConfig(r.v)
		threeSites(cfg)
		cfg.Sites = cfg.Sites[:1] // wiki removed
		return cfg, nil
	}
	if _, err := r.reload(); err != nil {
		t.Fatal(err)
	}
	r.wantSites(t, map[string]state.Gear{"default": state.Light, "shop": state.Moderate})
	if _, ok := r.labels(t)["wiki"]; ok {
		t.Error("the removed site's label is still loaded")
	}
	if st := r.c.Status(); len(st.Sites) != 2 {
		t.Errorf("sites after the reload: %+v", st.Sites)
	}
	if families, err := r.c.metrics.reg.Gather(); err == nil {
		for _, f := range families {
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "site" && l.GetValue() == "wiki" {
						t.Errorf("%s still has a series of the removed site wiki", f.GetName())
					}
				}
			}
		}
	}

	r.next = func() (*config.Config, error) { return testConfig(r.v), nil }
	if _, err := r.reload(); err != nil {
		t.Fatal(err)
	}
	r.wantActive(t, state.Light)
	if labels := r.labels(t); len(labels) != 0 {
		t.Errorf("site labels without sites: %v", labels)
	}
	if st := r.c.Status(); len(st.Sites) != 1 || st.Sites[0].Name != "default" || st.Sites[0].Gear != "light" {
		t.Errorf("sites without a sites key: %+v, want default alone", st.Sites)
	}
}

// The site that costs the backend most takes the machine's gear first;
// the next one only when the distress holds siteEscalation after that;
// all come down with the machine.
func TestSitesWhichShifts(t *testing.T) {
	doors := &top.Doors{}
	r := newRig(t, func(cfg *config.Config) { threeSites(cfg); busyRules(cfg) }, func(o *Options) { o.Doors = doors })
	now := time.Now()
	doors.Reading(now)
	for site, n := range map[string]int{"shop": 70, "wiki": 20, "default": 10} {
		for range n {
			doors.AddFetch(now, site)
		}
	}
	r.tick(t)
	if st := r.c.Status(); st.Sites[1].BackendShare == nil || *st.Sites[1].BackendShare != 0.7 || *st.Sites[1].BackendRPS != 1.17 {
		t.Errorf("shop's share and rate: %+v, want 0.7 and 70/60", st.Sites[1])
	}
	r.sensor.set(50)
	r.tick(t)
	g := r.c.machine.Current().Gear
	if g == state.Light {
		t.Fatal("the machine stayed light at load 50")
	}
	r.wantSites(t, map[string]state.Gear{"default": state.Light, "shop": g, "wiki": state.Light})
	status := r.c.Status()
	shop, _ := status.Site("shop")
	if !strings.HasPrefix(shop.Reason, "site shop: 70 % of backend requests; ") {
		t.Errorf("shop's reason %q", shop.Reason)
	}
	if st := r.c.Status(); st.State != g.String() || st.Reason != shop.Reason {
		t.Errorf("server state %s reason %q, want the heaviest site's", st.State, st.Reason)
	}
	for range 5 {
		r.tick(t)
	}
	r.wantSites(t, map[string]state.Gear{"default": state.Light, "shop": g, "wiki": state.Light})
	// The distress holds and wiki now asks the backend most: it climbs
	// after siteEscalation once the backend is in distress too (while shop
	// made most of what was asked, the distress was shop's; while the
	// load alone pressed, it was the machine's).
	for range 200 {
		doors.AddFetch(time.Now(), "wiki")
	}
	r.clock.add(siteEscalation)
	r.tick(t)
	r.wantSites(t, map[string]state.Gear{"default": state.Light, "shop": g, "wiki": state.Light})
	r.sensor.values = map[string]float64{sensor.BackendBusy: 50}
	r.tick(t)
	r.wantSites(t, map[string]state.Gear{"default": state.Light, "shop": g, "wiki": g})

	r.sensor.set(0)
	r.sensor.values = nil
	for range 10 {
		r.tick(t)
	}
	r.wantSites(t, map[string]state.Gear{"default": state.Light, "shop": state.Light, "wiki": state.Light})
}

// A hook runs for each site that shifts, told its site; a pin of every
// site runs it once, with no site. The site's metrics follow.
func TestSitesHooksAndMetrics(t *testing.T) {
	out := filepath.Join(t.TempDir(), "events")
	r := newRig(t, func(cfg *config.Config) {
		threeSites(cfg)
		cfg.Hooks.OnChange = []string{hookScript(t, "site.sh"), out}
	})
	r.tick(t)
	if _, err := r.request(reqForce, "shop", state.Heavy); err != nil {
		t.Fatal(err)
	}
	if _, err := r.request(reqForce, "", state.Moderate); err != nil {
		t.Fatal(err)
	}
	want := []string{"shop|light|heavy|forced", "|light|moderate|forced"}
	var lines []string
	testenv.Eventually(t, "two hook runs", time.Minute, func() bool {
		b, _ := os.ReadFile(out)
		lines = strings.Split(strings.TrimSpace(string(b)), "\n")
		return len(lines) == len(want) && r.logged("hook ran") == len(want)
	})
	if !slices.Equal(lines, want) {
		t.Errorf("hooks saw %q, want %q", lines, want)
	}
	r.wantSites(t, map[string]state.Gear{"default": state.Moderate, "shop": state.Heavy, "wiki": state.Moderate})
	if _, err := r.request(reqAuto, "", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := r.request(reqForce, "shop", state.Heavy); err != nil {
		t.Fatal(err)
	}

	families, err := r.c.metrics.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			labels := ""
			for _, l := range m.GetLabel() {
				labels += l.GetName() + "=" + l.GetValue() + ","
			}
			found[f.GetName()+"{"+labels+"}"] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	for series, v := range map[string]float64{
		"gearshift_site_gear_level{site=shop,}":                                            2,
		"gearshift_site_gear_level{site=wiki,}":                                            1,
		"gearshift_site_forced{site=shop,}":                                                1,
		"gearshift_site_forced{site=wiki,}":                                                0,
		"gearshift_site_transitions_total{cause=forced,from=light,site=shop,to=heavy,}":    1,
		"gearshift_site_transitions_total{cause=forced,from=light,site=wiki,to=moderate,}": 1,
	} {
		if got, ok := found[series]; !ok || got != v {
			t.Errorf("%s = %v (%v), want %v", series, got, ok, v)
		}
	}
}

// A daemon restarted while a site is in heavy resumes each site in the
// gear its label is on, and the machine in the heaviest of them.
func TestSitesResume(t *testing.T) {
	r := newRig(t, threeSites)
	r.tick(t)
	if _, err := r.request(reqForce, "shop", state.Heavy); err != nil {
		t.Fatal(err)
	}
	again := newRigOn(t, r.v, threeSites)
	again.tick(t)
	again.wantSites(t, map[string]state.Gear{"default": state.Light, "shop": state.Heavy, "wiki": state.Light})
	status := again.c.Status()
	shop, _ := status.Site("shop")
	if shop.Mode != "auto" || !strings.HasPrefix(shop.Reason, "resumed heavy") {
		t.Errorf("shop after a restart: %+v, want heavy resumed, in auto", shop)
	}
	if g := again.c.machine.Current().Gear; g != state.Heavy {
		t.Errorf("machine resumed %s, want heavy", g)
	}
}
