package controller

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/history"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/controller/top"
)

// The flight recorder of a daemon with sites writes each site's gear, its
// pin, and the backend requests the allocator decided on, poll by poll.
func TestSitesRecorded(t *testing.T) {
	doors := &top.Doors{}
	dir := filepath.Join(t.TempDir(), "history")
	r := newRig(t, func(cfg *config.Config) {
		threeSites(cfg)
		cfg.History.Dir = dir
	}, func(o *Options) { o.Doors = doors })
	now := time.Now()
	doors.Reading(now)
	for site, n := range map[string]int{"shop": 70, "wiki": 20, "default": 10} {
		for range n {
			doors.AddFetch(now, site)
		}
	}
	r.tick(t)
	r.sensor.set(50)
	r.tick(t)
	g := r.c.machine.Current().Gear
	if _, err := r.request(reqForce, "wiki", state.Heavy); err != nil {
		t.Fatal(err)
	}
	r.tick(t)
	r.c.history.close()

	src, err := history.Open(dir, r.c.signals(), time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := history.Collect(src)
	if err != nil || len(recs) != 3 {
		t.Fatalf("%d records, %v; warnings %v", len(recs), err, src.Warnings())
	}
	first, climbed, pinned := recs[0].Recorded, recs[1].Recorded, recs[2].Recorded
	if len(first.Sites) != 3 || !first.SiteFetches || first.Sites[0].Name != "default" || first.Sites[0].Fetches != 10 ||
		first.Sites[1].Fetches != 70 || first.Sites[2].Fetches != 20 {
		t.Errorf("first record's sites %+v (fetches known %v), want every site with its backend requests", first.Sites, first.SiteFetches)
	}
	if g == state.Lightest || climbed.Gear != g || climbed.SiteGear("shop") != g || climbed.SiteGear("wiki") != state.Lightest ||
		climbed.SiteGear("default") != state.Lightest {
		t.Errorf("the climb recorded as %s with sites %+v, want shop alone in %s", climbed.Gear, climbed.Sites, g)
	}
	for _, s := range pinned.Sites {
		if forced := s.Name == "wiki"; s.Forced != forced {
			t.Errorf("after a pin of wiki, site %+v: forced %v, want %v", s, s.Forced, forced)
		}
	}
	if pinned.SiteGear("wiki") != state.Heavy {
		t.Errorf("wiki pinned heavy recorded as %s", pinned.SiteGear("wiki"))
	}
}
