package controller

import (
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/sensor"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/controller/top"
)

// After the site that costs the backend most took the machine's gear, the
// next one takes it only while the backend is in distress (a signal of
// its own holds the gear's enter rule) and still gets half the requests
// it got before that climb: when the climb spared the backend, the
// distress left is the load average's lag, and the neighbour stays.
func TestSitesEscalationNeedsTheBackend(t *testing.T) {
	for _, c := range []struct {
		name                 string
		shopAfter, wikiAfter int  // backend requests a second once shop climbed
		refused              int  // fetches the backend turned away a second before the climb
		loadAlone            bool // the load presses, no signal of the backend
		wikiClimbs           bool
	}{
		{"the climb spared the backend: the neighbour stays", 0, 4, 0, false, false},
		{"the backend as busy as before, by the neighbour now: it climbs", 4, 20, 0, false, true},
		// The machine's load is Varnish's and the visitors' work too: a
		// neighbour's climb would not relieve it.
		{"the neighbour asks most, the load alone presses: it stays", 4, 20, 0, true, false},
		// The climbed site still makes most of what the backend is
		// asked: the distress is its own, a neighbour's climb would
		// not relieve it.
		{"the backend as busy as before, by the climbed site still: the neighbour stays", 20, 4, 0, false, false},
		// A backend at its limit answers as many requests after the
		// climb as before it: what it turned away tells the surge.
		{"the backend full before, its refusals gone: the neighbour stays", 4, 20, 200, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			doors := &top.Doors{}
			r := newRig(t, func(cfg *config.Config) { threeSites(cfg); busyRules(cfg) }, func(o *Options) { o.Doors = doors })
			r.c.doorsNow = r.clock.now
			doors.Reading(r.clock.now())
			shop, wiki := 20, 4
			tick := func() {
				for site, n := range map[string]int{"shop": shop, "wiki": wiki, "default": 1} {
					for range n {
						doors.AddFetch(r.clock.now(), site)
					}
				}
				r.tick(t)
			}
			for range 12 {
				tick()
			}
			r.sensor.set(50)
			if !c.loadAlone {
				r.sensor.values = map[string]float64{sensor.BackendBusy: 50}
			}
			for i := range c.refused * 10 { // over the Escalation before the climb
				doors.AddRefused(r.clock.now().Add(-time.Duration(i%10)*time.Second), "shop")
			}
			tick()
			g := r.c.machine.Current().Gear
			if g == state.Light {
				t.Fatal("the machine stayed light at load 50")
			}
			r.wantSites(t, map[string]state.Gear{"default": state.Light, "shop": g, "wiki": state.Light})
			shop, wiki = c.shopAfter, c.wikiAfter
			for range int(siteEscalation/time.Second) + 3 {
				tick()
			}
			wikiGear := state.Light
			if c.wikiClimbs {
				wikiGear = g
			}
			if r.c.machine.Current().Gear != g || !r.c.machine.Pressing(g) {
				t.Fatalf("the machine is in %s, pressing %v: want still in %s and pressing", r.c.machine.Current().Gear, r.c.machine.Pressing(g), g)
			}
			r.wantSites(t, map[string]state.Gear{"default": state.Light, "shop": g, "wiki": wikiGear})
		})
	}
}
