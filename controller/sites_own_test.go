package controller

import (
	"context"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/api"
	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/sensor"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/internal/timefmt"
)

// siteSensor is the rig's fake sensor with figures read for sites alone
// (a site's pool, a Prometheus query's series labelled with the site).
type siteSensor struct {
	*fakeSensor
	mu    sync.Mutex
	sites map[string]map[string]float64
}

func (s *siteSensor) setSite(site string, values map[string]float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sites == nil {
		s.sites = map[string]map[string]float64{}
	}
	s.sites[site] = values
}

func (s *siteSensor) Sample(ctx context.Context) (sensor.Sample, error) {
	smp, err := s.fakeSensor.Sample(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	for site, values := range s.sites {
		for name, v := range maps.Clone(values) {
			smp.SetSite(site, name, v)
		}
	}
	return smp, err
}

// withSiteSensor gives the rig a siteSensor over its fake sensor.
func withSiteSensor(into **siteSensor) func(*Options) {
	return func(o *Options) {
		*into = &siteSensor{fakeSensor: o.Sensor.(*fakeSensor)}
		o.Sensor = *into
	}
}

// shopPool is threeSites with the shop's own PHP-FPM pool, and the
// phpfpm rules of the source's defaults.
func shopPool(cfg *config.Config) {
	threeSites(cfg)
	cfg.Sensor.PHPFPM.Pools = []sensor.PHPFPMPool{{Name: "shop", Socket: "/run/php/shop-status.sock", MaxChildren: 4}}
	cfg.Sites[0].PHPFPMPool = "shop"
	cfg.States.Moderate.Enter[sensor.PHPFPMQueue] = 1
	cfg.States.Moderate.Stay[sensor.PHPFPMQueue] = 1
	cfg.States.Heavy.Enter[sensor.PHPFPMBusyRatio] = 0.9
	cfg.States.Heavy.Stay[sensor.PHPFPMBusyRatio] = 0.7
	// The defaults' hysteresis: three samples up, two minutes down.
	cfg.Hysteresis.UpConfirm = 3
	cfg.Hysteresis.DownWindow = timefmt.Duration(2 * time.Minute)
	cfg.Hysteresis.MinDwell = timefmt.Duration(time.Minute)
}

// A site's own pool moves that site alone: its queue puts the shop in
// moderate and its busy children in heavy while the server's machine and
// the other sites stay light; the way down keeps the server's hysteresis;
// a pin of the site, or of every site, wins over its pool.
func TestSitesOwnPool(t *testing.T) {
	var sens *siteSensor
	r := newRig(t, shopPool, withSiteSensor(&sens))
	r.tick(t)
	r.wantSites(t, map[string]state.Gear{"default": state.Light, "shop": state.Light, "wiki": state.Light})

	sens.setSite("shop", map[string]float64{sensor.PHPFPMQueue: 3, sensor.PHPFPMBusyRatio: 0.5})
	r.tick(t)
	r.tick(t)
	r.wantSites(t, map[string]state.Gear{"default": state.Light, "shop": state.Light, "wiki": state.Light})
	r.tick(t) // up_confirm: the third sample
	r.wantSites(t, map[string]state.Gear{"default": state.Light, "shop": state.Moderate, "wiki": state.Light})
	if g := r.c.machine.Current().Gear; g != state.Light {
		t.Errorf("the server's machine is %s, want light: the shop's pool is the shop's", g)
	}
	st := r.c.Status()
	shop, _ := st.Site("shop")
	if want := "site shop: phpfpm_queue 3 >= 1 for 3 samples (pool shop)"; shop.Reason != want {
		t.Errorf("shop's reason %q, want %q", shop.Reason, want)
	}
	if st.State != "moderate" || st.Reason != shop.Reason {
		t.Errorf("server state %s (%q), want the heaviest site's, the shop's", st.State, st.Reason)
	}

	sens.setSite("shop", map[string]float64{sensor.PHPFPMQueue: 3, sensor.PHPFPMBusyRatio: 1})
	for range 3 {
		r.tick(t)
	}
	r.wantSites(t, map[string]state.Gear{"default": state.Light, "shop": state.Heavy, "wiki": state.Light})

	// Pins win: the shop's own, then every site's.
	if _, err := r.request(reqForce, "shop", state.Light); err != nil {
		t.Fatal(err)
	}
	r.tick(t)
	r.wantSites(t, map[string]state.Gear{"default": state.Light, "shop": state.Light, "wiki": state.Light})
	if _, err := r.request(reqAuto, "shop", 0); err != nil {
		t.Fatal(err)
	}
	r.tick(t)
	r.wantSites(t, map[string]state.Gear{"default": state.Light, "shop": state.Heavy, "wiki": state.Light})
	if _, err := r.request(reqForce, "", state.Moderate); err != nil {
		t.Fatal(err)
	}
	r.tick(t)
	r.wantSites(t, map[string]state.Gear{"default": state.Moderate, "shop": state.Moderate, "wiki": state.Moderate})
	if _, err := r.request(reqAuto, "", 0); err != nil {
		t.Fatal(err)
	}
	r.tick(t)
	if shop := r.site(t, "shop"); shop.Gear != "heavy" {
		t.Errorf("shop after the pin of every site: %+v, want heavy again (its pool)", shop)
	}

	// The pool calms: the shop keeps heavy for down_window, as the
	// server would, then comes down; the others never moved for it.
	sens.setSite("shop", map[string]float64{sensor.PHPFPMQueue: 0, sensor.PHPFPMBusyRatio: 0})
	r.tick(t)
	if shop := r.site(t, "shop"); shop.Gear != "heavy" {
		t.Errorf("shop one poll after its pool calmed: %s, want heavy (down_window)", shop.Gear)
	}
	for range 3 {
		r.clock.add(3 * time.Minute)
		r.tick(t)
	}
	r.wantSites(t, map[string]state.Gear{"default": state.Light, "shop": state.Light, "wiki": state.Light})
	if shop := r.site(t, "shop"); !strings.HasPrefix(shop.Reason, "site shop: stay rule of moderate not held") || !strings.HasSuffix(shop.Reason, "(pool shop)") {
		t.Errorf("shop's reason on the way down %q", shop.Reason)
	}
}

// With its pool in distress and the machine climbing for the server's
// load, a site is in the heavier of the two gears; when the machine comes
// down the site stays where its pool holds it.
func TestSitesOwnPoolAndMachine(t *testing.T) {
	var sens *siteSensor
	r := newRig(t, shopPool, withSiteSensor(&sens))
	r.tick(t)
	sens.setSite("shop", map[string]float64{sensor.PHPFPMQueue: 2, sensor.PHPFPMBusyRatio: 0.5})
	r.sensor.set(50) // no backend share known: every site climbs with the machine
	for range 3 {
		r.tick(t)
	}
	g := r.c.machine.Current().Gear
	if g != state.Heavy {
		t.Fatalf("machine %s at load 50, want heavy", g)
	}
	r.wantSites(t, map[string]state.Gear{"default": state.Heavy, "shop": state.Heavy, "wiki": state.Heavy})

	r.sensor.set(0)
	for range 4 {
		r.clock.add(3 * time.Minute)
		r.tick(t)
	}
	if g := r.c.machine.Current().Gear; g != state.Light {
		t.Fatalf("machine %s after the load went, want light", g)
	}
	r.wantSites(t, map[string]state.Gear{"default": state.Light, "shop": state.Moderate, "wiki": state.Light})
	if shop := r.site(t, "shop"); !strings.HasSuffix(shop.Reason, "(pool shop)") {
		t.Errorf("shop held by its pool, reason %q", shop.Reason)
	}
}

// site is the status of one site.
func (r *rig) site(t *testing.T, name string) api.SiteStatus {
	t.Helper()
	st := r.c.Status()
	s, ok := st.Site(name)
	if !ok {
		t.Fatalf("no site %s in the status", name)
	}
	return s
}

// A Prometheus signal answered per site (a fleet's fleet_site_gear) moves
// each site on its own number through the site's own machine; the
// server's machine never sees it.
func TestSitesOwnPrometheusSignal(t *testing.T) {
	var sens *siteSensor
	r := newRig(t, func(cfg *config.Config) {
		threeSites(cfg)
		cfg.Sensor.Prometheus.URL = "http://127.0.0.1:9"
		cfg.Sensor.Prometheus.Signals = map[string]string{"fleet_site_gear": "max by (site) (gearshift_site_gear_level * gearshift_site_forced)"}
		cfg.States.Heavy.Enter["fleet_site_gear"] = 2
		cfg.States.Heavy.Stay["fleet_site_gear"] = 2
	}, withSiteSensor(&sens))
	r.tick(t)
	sens.setSite("wiki", map[string]float64{"fleet_site_gear": 2})
	sens.setSite("shop", map[string]float64{"fleet_site_gear": 0})
	r.tick(t)
	r.wantSites(t, map[string]state.Gear{"default": state.Light, "shop": state.Light, "wiki": state.Heavy})
	if g := r.c.machine.Current().Gear; g != state.Light {
		t.Errorf("the server's machine is %s, want light", g)
	}
	if wiki := r.site(t, "wiki"); wiki.Reason != "site wiki: fleet_site_gear 2.00 >= 2.00 for 1 samples" {
		t.Errorf("wiki's reason %q", wiki.Reason)
	}
	sens.setSite("wiki", map[string]float64{"fleet_site_gear": 0})
	for range 3 {
		r.clock.add(time.Minute)
		r.tick(t)
	}
	r.wantSites(t, map[string]state.Gear{"default": state.Light, "shop": state.Light, "wiki": state.Light})
}
