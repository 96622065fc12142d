package controller

import (
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/hooks"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/controller/varnish"
)

// A site that leaves light three times within a day is named by the
// advice while it is above light, with what to give it; the hooks keep
// the line until the next climb; a climb a day old no longer counts.
func TestSiteAdvice(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	a := newAdviser(nil, "", zap.New(core))
	s := &sites{
		list:  []config.Site{{Name: "default", MaxConnections: 50}, {Name: "blog", MaxConnections: 50}},
		gears: map[string]*siteGear{"default": {gear: state.Lightest}, "blog": {gear: state.Lightest}},
		plan:  &varnish.Sites{},
	}
	t0 := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
	climb := func(at time.Time, fetches map[string]int) {
		s.fetches = fetches
		s.gears["blog"].gear = state.Heaviest
		s.shifts = []siteShift{{site: "blog", from: state.Lightest, to: state.Heaviest, cause: state.CauseAuto}}
		a.followSites(at, s)
	}
	down := func(at time.Time) {
		s.gears["blog"].gear = state.Lightest
		s.shifts = []siteShift{{site: "blog", from: state.Heaviest, to: state.Lightest, cause: state.CauseAuto}}
		a.followSites(at, s)
	}
	climb(t0, nil)
	down(t0.Add(time.Hour))
	climb(t0.Add(2*time.Hour), map[string]int{"blog": 10, "default": 10})
	if a.sites != "" {
		t.Fatalf("advice after two climbs: %q", a.sites)
	}
	down(t0.Add(3 * time.Hour))
	climb(t0.Add(20*time.Hour), map[string]int{"blog": 71, "default": 29})
	want := "site blog left light 3 times in 24h, with 71 % of the backend's requests the last time — give it a sites[].max_connections below its 50"
	if !strings.HasPrefix(a.sites, want) || logs.FilterMessage("site climbs often").Len() != 1 {
		t.Fatalf("advice after three climbs in a day:\n got %q\nwant %q…; log %v", a.sites, want, logs.All())
	}
	if got := joinAdvice("", a.sites); got != a.sites {
		t.Errorf("the status's advice %q", got)
	}
	down(t0.Add(21 * time.Hour))
	if a.sites != "" {
		t.Errorf("advice in force with every site in light: %q", a.sites)
	}
	if env := a.env(); len(env) != 1 || !strings.HasPrefix(env[0], hooks.EnvAdvice+"=site blog left light 3 times") {
		t.Errorf("the hooks on the way back to light get %q", env)
	}
	// The first two climbs are now more than a day old: two count.
	climb(t0.Add(27*time.Hour), nil)
	if a.sites != "" || a.env() != nil {
		t.Errorf("advice with two climbs in the last day: %q, hooks %q", a.sites, a.env())
	}
	// A pin is the operator's: it is no climb.
	s.shifts = []siteShift{{site: "blog", from: state.Lightest, to: state.Heaviest, cause: state.CauseForced}}
	a.followSites(t0.Add(28*time.Hour), s)
	if n := len(a.climbs["blog"]); n != 2 {
		t.Errorf("%d climbs kept, want 2 (a pin is none)", n)
	}
}
