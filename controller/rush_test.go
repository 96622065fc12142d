package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/sensor"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/controller/top"
	"github.com/gearshift/gearshift/internal/timefmt"
)

// newRushRig is a rig whose loop reads refusals from doors, with the
// default fast_window and backend_busy's default rules (a file's load
// adds them to the default config's).
func newRushRig(t *testing.T, edits ...func(*config.Config)) (*rig, *top.Doors) {
	t.Helper()
	doors := &top.Doors{}
	r := newRig(t, func(cfg *config.Config) {
		for _, edit := range edits {
			edit(cfg)
		}
		cfg.FastWindow = timefmt.Duration(10 * time.Second)
		cfg.Hysteresis.UpConfirm = 3
		cfg.Hysteresis.MinDwell = timefmt.Duration(time.Minute)
		busyRules(cfg)
	}, func(o *Options) { o.Doors = doors })
	r.c.doorsNow = r.clock.now
	return r, doors
}

// busyRules adds backend_busy's rules to cfg's: moderate at 0.5 refusals
// a second, heavy at 2.
func busyRules(cfg *config.Config) {
	cfg.States.Moderate.Enter[sensor.BackendBusy], cfg.States.Moderate.Stay[sensor.BackendBusy] = 0.5, 0.1
	cfg.States.Heavy.Enter[sensor.BackendBusy], cfg.States.Heavy.Stay[sensor.BackendBusy] = 2, 0.5
}

// Refusals the log tells between two polls shift the gear at once, on
// backend_busy's default rules (heavy at 2 a second over fast_window),
// and the next quiet poll keeps it.
func TestRushShiftsBetweenPolls(t *testing.T) {
	r, doors := newRushRig(t)
	r.tick(t)
	r.wantActive(t, state.Light)
	doors.Reading(r.clock.now())
	ctx := context.Background()

	for range 3 {
		doors.AddRefused(r.clock.now(), "")
	}
	select {
	case <-doors.Rush():
	default:
		t.Fatal("refusals counted, and Rush told nothing")
	}
	r.c.rush(ctx)
	r.wantActive(t, state.Light) // 0.3 a second: below moderate's 0.5

	for range 30 {
		doors.AddRefused(r.clock.now(), "")
	}
	r.c.rush(ctx)
	r.wantActive(t, state.Heavy)
	d := r.c.machine.Current()
	if !strings.Contains(d.Reason, "backend_busy 3.3 >= 2 at once") {
		t.Errorf("reason %q, want backend_busy 3.3 >= 2 at once", d.Reason)
	}
	if got := r.c.Status().Transitions; got != 1 {
		t.Errorf("transitions = %d, want 1 (light to heavy)", got)
	}

	r.tick(t)
	r.wantActive(t, state.Heavy)
}

// A rush before the first poll, or with the gear pinned, moves nothing.
func TestRushWaitsForThePollsAndAPin(t *testing.T) {
	r, doors := newRushRig(t)
	doors.Reading(r.clock.now())
	for range 50 {
		doors.AddRefused(r.clock.now(), "")
	}
	ctx := context.Background()
	r.c.rush(ctx)
	if g := r.c.machine.Current().Gear; g != state.Light {
		t.Fatalf("a rush before any poll moved the gear to %s", g)
	}
	r.tick(t)
	if _, err := r.request(reqForce, "", state.Light); err != nil {
		t.Fatal(err)
	}
	r.c.rush(ctx)
	r.wantActive(t, state.Light)
}

// A poll's backend_busy is the log's when the log counted more: the
// requests the sites' shared limits turned away (backend_full) never
// reach a Varnish counter.
func TestPollTakesTheLogsRefusals(t *testing.T) {
	r, doors := newRushRig(t)
	r.sensor.values = map[string]float64{sensor.BackendBusy: 0.1}
	doors.Reading(r.clock.now())
	for range 25 {
		doors.AddRefused(r.clock.now(), "")
	}
	r.tick(t)
	if v, _ := r.c.machine.Current().Signals.Get(sensor.BackendBusy); v != 2.5 {
		t.Errorf("backend_busy = %v, want the log's 2.5 over the counters' 0.1", v)
	}
	r.wantActive(t, state.Heavy)

	// Without the signal read (no local Varnish's counters), the log
	// adds none.
	r2, doors2 := newRushRig(t)
	doors2.Reading(r2.clock.now())
	doors2.AddRefused(r2.clock.now(), "")
	r2.tick(t)
	if _, ok := r2.c.machine.Current().Signals.Get(sensor.BackendBusy); ok {
		t.Error("backend_busy given by the log alone, the counters unread")
	}
}

// With sites, a rush's climb goes to the site whose requests the limits
// turn away, though another made more of the quiet minute's requests:
// the shares count the refusals that name their site.
func TestRushGoesToTheRefusedSite(t *testing.T) {
	r, doors := newRushRig(t, threeSites)
	r.c.doorsNow = r.clock.now
	doors.Reading(r.clock.now())
	for site, n := range map[string]int{"default": 30, "shop": 5, "wiki": 5} {
		for range n {
			doors.AddFetch(r.clock.now(), site)
		}
	}
	r.tick(t)
	for range 40 {
		doors.AddRefused(r.clock.now(), "shop")
	}
	r.c.rush(context.Background())
	r.wantSites(t, map[string]state.Gear{"default": state.Light, "shop": state.Heavy, "wiki": state.Light})
}
