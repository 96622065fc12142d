package controller

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/api"
	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
	"github.com/gearshift/gearshift/internal/timefmt"
)

// monoClock is a monotonic clock the test steps; the rig's clock is the
// wall clock, which the test makes jump.
type monoClock struct {
	mu sync.Mutex
	d  time.Duration
}

func (m *monoClock) now() time.Duration  { m.mu.Lock(); defer m.mu.Unlock(); return m.d }
func (m *monoClock) add(d time.Duration) { m.mu.Lock(); m.d += d; m.mu.Unlock() }

// Jumps of the wall clock, backward and forward, move none of the loop's
// durations: no spurious transition, the down window ends on schedule on
// the monotonic clock, and a force for 10m lasts 10m of it. What is shown
// (since, forced_until) follows the wall clock.
func TestWallClockJumps(t *testing.T) {
	mono := &monoClock{}
	r := newRigOn(t, varnishtest.Start(t, varnishtest.Config{}), func(cfg *config.Config) {
		cfg.Hysteresis.MinDwell = timefmt.Duration(30 * time.Second)
		cfg.Hysteresis.DownWindow = timefmt.Duration(60 * time.Second)
	}, func(o *Options) { o.Mono = mono.now })
	// step advances both clocks by d, after jumping the wall clock by jump.
	step := func(jump, d time.Duration) api.Status {
		t.Helper()
		r.clock.add(jump + d)
		mono.add(d)
		return r.tick(t) // the rig's tick moves the wall clock 1s more: jitter
	}
	r.sensor.set(0.1)
	if s := step(0, 0); s.State != "light" {
		t.Fatalf("start: %s", s.State)
	}
	r.sensor.set(1.0) // over moderate's enter (0.7), under heavy's
	up := step(0, 10*time.Second)
	if up.State != "moderate" || up.Transitions != 1 {
		t.Fatalf("load 1.0: %s after %d transitions, want moderate", up.State, up.Transitions)
	}
	r.sensor.set(0.1) // under moderate's stay rule from now on

	// 10s, 20s, … 50s after the stay rule last held: within down_window
	// (60s) however the wall clock jumps.
	for i, jump := range []time.Duration{-time.Hour, 2 * time.Hour, -30 * time.Minute, 24 * time.Hour, -24 * time.Hour} {
		s := step(jump, 10*time.Second)
		if s.State != "moderate" || s.Transitions != 1 {
			t.Fatalf("%ds after the load fell, wall clock jumped %s: %s (%s), want moderate still", 10*(i+1), jump, s.State, s.Reason)
		}
		// since is shown on the wall clock: as long ago as on the loop's.
		if ago := r.clock.now().Sub(s.Since); ago < time.Duration(10*(i+1))*time.Second || ago > time.Duration(10*(i+1))*time.Second+10*time.Second {
			t.Errorf("after a jump of %s: since %s is %s before the wall clock's now", jump, s.Since, ago)
		}
	}
	// 70s: down_window is over on the monotonic clock.
	if s := step(-6*time.Hour, 20*time.Second); s.State != "light" || s.Transitions != 2 {
		t.Fatalf("70s after the load fell: %s (%s), want light: the down window is stuck", s.State, s.Reason)
	}

	// force heavy --for 10m, then jump the wall clock both ways.
	until := r.clock.now().Add(10 * time.Minute)
	if resp := r.c.handle(context.Background(), request{kind: reqForce, state: state.Heavy, until: until}); resp.err != nil || resp.status.State != "heavy" {
		t.Fatalf("force: %+v, %v", resp.status, resp.err)
	}
	for i, jump := range []time.Duration{time.Hour, -3 * time.Hour, 48 * time.Hour} {
		s := step(jump, 3*time.Minute)
		if s.Mode != "forced" || s.State != "heavy" {
			t.Fatalf("%dm into a 10m force, wall clock jumped %s: %s %s (%s), want forced heavy", 3*(i+1), jump, s.Mode, s.State, s.Reason)
		}
		// forced_until is shown on the wall clock, the force's end as far ahead.
		if left := s.ForcedUntil.Sub(r.clock.now()); left > time.Duration(10-3*(i+1))*time.Minute || left < time.Duration(10-3*(i+1))*time.Minute-10*time.Second {
			t.Errorf("after a jump of %s: forced_until %s is %s ahead of the wall clock", jump, s.ForcedUntil, left)
		}
	}
	// 10m of monotonic time: the force has expired, whatever the wall says.
	if s := step(-72*time.Hour, time.Minute); s.Mode != "auto" || !strings.Contains(s.Reason, "force expired") {
		t.Fatalf("10m after force --for 10m: %s %s (%s), want auto", s.Mode, s.State, s.Reason)
	}
}
