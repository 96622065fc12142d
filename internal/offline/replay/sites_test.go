package replay

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/history"
	"github.com/gearshift/gearshift/controller/sensor"
	"github.com/gearshift/gearshift/controller/siteplan"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/controller/trace"
)

// sitesFixture is the recorder's file of a surge on blog, its neighbour
// shop climbing after it (controller/report's TestSitesFixture).
var sitesFixture = filepath.Join("..", "..", "..", "controller", "report", "testdata", "sites")

// TestCompareSites: simulate --history replays each site through the
// daemon's allocator: blog, with 80 % of the backend's requests, takes
// the replayed machine's gear first; its neighbours stay light, for the
// record's distress is the load's alone (a neighbour climbs on the
// backend's); the recorded courses are the record's.
func TestCompareSites(t *testing.T) {
	cfg := config.Default()
	set, err := cfg.Signals()
	if err != nil {
		t.Fatal(err)
	}
	src, err := history.Open(sitesFixture, set, time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := Compare(src, cfg.StateConfig(set), time.Duration(cfg.FastWindow), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Sites) != 3 || c.Sites[1].Site != "blog" {
		t.Fatalf("sites %+v, want default, blog, shop", c.Sites)
	}
	blog, shop := c.Sites[1], c.Sites[2]
	if blog.Above(false) != 15*time.Minute || blog.RecordedShifts != 3 || shop.Above(false) != 5*time.Minute || shop.RecordedShifts != 2 {
		t.Errorf("recorded: blog %v above light in %d shifts, shop %v in %d; want 15m in 3, 5m in 2",
			blog.Above(false), blog.RecordedShifts, shop.Above(false), shop.RecordedShifts)
	}
	if len(c.SiteShifts) < 2 {
		t.Fatalf("replayed site shifts %+v", c.SiteShifts)
	}
	first, second := c.SiteShifts[0], c.SiteShifts[1]
	if first.Site != "blog" || first.From != state.Lightest || !strings.HasPrefix(first.Reason, "site blog: 80 % of backend requests; ") {
		t.Errorf("first replayed shift %+v, want blog's climb for its 80 %%", first)
	}
	if second.Site != "blog" {
		t.Errorf("second replayed shift %+v, want blog's: no neighbour climbs on the load alone", second)
	}
	for _, s := range c.SiteShifts {
		if s.Site != "blog" {
			t.Errorf("replayed shift %+v: a neighbour climbed on the load alone", s)
		}
	}
	for _, s := range c.Sites {
		if s.Candidate[state.Lightest]+s.Above(true) != c.Recorded.TimeIn[state.Lightest]+c.Recorded.TimeIn[state.Moderate]+c.Recorded.TimeIn[state.Heavy] {
			t.Errorf("site %s: replayed time %v does not add up to the recorded period", s.Site, s.Candidate)
		}
	}
}

// TestReplaySitesPinned: a site pinned on its own in the record stays in
// its pin in the replay while the machine is light, and its neighbours
// stay light; a history without sites replays no site.
func TestReplaySitesPinned(t *testing.T) {
	cfg := config.Default()
	set, err := cfg.Signals()
	if err != nil {
		t.Fatal(err)
	}
	var samples []trace.Sample
	for i := range 30 {
		rec := &trace.Recorded{Gear: state.Lightest, Sites: []trace.Site{{Name: "default"}, {Name: "shop", Gear: state.Heaviest, Forced: i >= 10}}}
		if i < 10 {
			rec.Sites[1].Gear = state.Lightest
		}
		samples = append(samples, trace.Sample{Time: at(i), Reading: state.Reading{Time: at(i), Load1: 0.2, RunQueue: 0.2, CPUs: 2}, Recorded: rec})
	}
	courses, shifts, err := ReplaySites(trace.Samples(samples), cfg.StateConfig(set), time.Duration(cfg.FastWindow))
	if err != nil {
		t.Fatal(err)
	}
	if len(courses) != 2 || courses[1].Candidate[state.Heaviest] != 19*time.Second || courses[0].Above(true) != 0 {
		t.Errorf("courses %+v, want shop pinned for 19 s, default light", courses)
	}
	if len(shifts) != 1 || shifts[0].Site != "shop" || shifts[0].To != state.Heaviest || shifts[0].Reason != "forced by operator for this site" {
		t.Errorf("shifts %+v, want shop pinned once", shifts)
	}

	for i := range samples {
		samples[i].Recorded.Sites = nil
	}
	if courses, shifts, err := ReplaySites(trace.Samples(samples), cfg.StateConfig(set), 0); err != nil || courses != nil || shifts != nil {
		t.Errorf("without sites: %v, %v, %v", courses, shifts, err)
	}
}

// TestReplaySitesRelief: after blog climbs, the next site climbs only
// while the backend is in distress (the recorded backend_busy) and still
// gets half the requests it got before (the recorded backend_rps), as the
// daemon's escalation does.
func TestReplaySitesRelief(t *testing.T) {
	cfg := config.Default()
	cfg.States.Moderate.Enter[sensor.BackendBusy], cfg.States.Heavy.Enter[sensor.BackendBusy] = 5, 20
	set, err := cfg.Signals()
	if err != nil {
		t.Fatal(err)
	}
	busy := 50.0
	replay := func(after float64) []SiteShift {
		var samples []trace.Sample
		for i := range 120 {
			rps := 100.0
			if i >= 3 { // blog has climbed (at once on backend_busy, or on the load's third record)
				rps = after
			}
			rec := &trace.Recorded{Gear: state.Lightest, SiteFetches: true, Sites: []trace.Site{
				{Name: "default", Fetches: 5}, {Name: "blog", Fetches: 80}, {Name: "shop", Fetches: 15}}}
			samples = append(samples, trace.Sample{Time: at(i), Recorded: rec, Reading: state.Reading{Time: at(i), Load1: 2.4, RunQueue: 2.4, CPUs: 2,
				Values: map[string]float64{sensor.BackendRPS: rps, sensor.BackendBusy: busy}}})
		}
		_, shifts, err := ReplaySites(trace.Samples(samples), cfg.StateConfig(set), time.Duration(cfg.FastWindow))
		if err != nil {
			t.Fatal(err)
		}
		return shifts
	}
	relieved := replay(30)
	if len(relieved) != 1 || relieved[0].Site != "blog" {
		t.Errorf("the backend relieved after blog's climb: shifts %+v, want blog's alone", relieved)
	}
	pressed := replay(80)
	if len(pressed) < 2 || pressed[0].Site != "blog" || pressed[1].Site != "shop" || pressed[1].Time.Sub(pressed[0].Time) < siteplan.Escalation {
		t.Errorf("the backend not relieved: shifts %+v, want blog's then shop's, %s later at least", pressed, siteplan.Escalation)
	}
	busy = 0
	if loadAlone := replay(80); len(loadAlone) != 1 || loadAlone[0].Site != "blog" {
		t.Errorf("the backend not relieved, the load alone pressing: shifts %+v, want blog's alone", loadAlone)
	}
}

// TestWriteSitesText: a site that moved on either side has a row; the
// sites always in light share one line.
func TestWriteSitesText(t *testing.T) {
	courses := []SiteCourse{{Site: "default"}, {Site: "blog", CandidateShifts: 2}}
	courses[1].Candidate[state.Heaviest] = time.Minute
	for i := range 12 {
		courses = append(courses, SiteCourse{Site: fmt.Sprintf("s%d", i)})
	}
	var b strings.Builder
	writeSitesText(&b, courses, nil)
	out := b.String()
	if !strings.Contains(out, "  blog  0s                    0            1m                    2\n") ||
		!strings.Contains(out, "  always in light, recorded and replayed: default, s0, s1, s2, s3, s4, s5, s6, s7, s8 and 3 more.\n") {
		t.Errorf("text:\n%s", out)
	}
}
