package config

import (
	"math"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/state"
)

// TestWayDownFollowsLoad1 replays the end of a surge through the default
// rules: the run queue empties at once, Load1 decays as the kernel's
// does (by e^(-5/60) every 5 s). The machine must be back in light once
// Load1 has fallen below heavy's stay rule, plus down_window for the step
// to moderate and min_dwell for the step to light (moderate's stay rule,
// half of heavy's, is passed 60·ln 2 = 42 s later, so its down_window ends
// first): 60·ln(Load1/CPUs) + 120 s + 60 s after the surge.
func TestWayDownFollowsLoad1(t *testing.T) {
	cfg := Default()
	const surgeLoad1 = 16.0
	for _, cpus := range []int{2, 4, 8} {
		set, err := cfg.Signals()
		if err != nil {
			t.Fatal(err)
		}
		m := state.New(cfg.StateConfig(set), time.Duration(cfg.FastWindow))
		t0 := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
		now := t0
		step := func(load1, runq float64) state.Decision {
			d := m.Step(now, state.Reading{Time: now, Load1: load1, RunQueue: runq, CPUs: cpus, Values: map[string]float64{"mem_available_pct": 60}})
			now = now.Add(time.Second)
			return d
		}
		for i := 0; i < 60; i++ {
			step(surgeLoad1, surgeLoad1)
		}
		if st := m.Current().Gear; st != state.Heavy {
			t.Fatalf("%d CPUs: %s after a minute at Load1 %v, want heavy", cpus, st, surgeLoad1)
		}
		end := now
		load1 := surgeLoad1
		var light time.Duration
		for now.Sub(end) < 15*time.Minute {
			since := now.Sub(end)
			if since > 0 && since%(5*time.Second) == 0 {
				load1 *= math.Exp(-5.0 / 60)
			}
			if d := step(load1, 0); d.Gear == state.Light {
				light = since
				break
			}
		}
		want := 60*math.Log(surgeLoad1/float64(cpus)) + time.Duration(cfg.Hysteresis.DownWindow).Seconds() + time.Duration(cfg.Hysteresis.MinDwell).Seconds()
		t.Logf("%d CPUs, Load1 %v at the surge's end: light after %s (expected %.0f s)", cpus, surgeLoad1, light, want)
		// Load1 moves in 5 s steps; polls are 1 s apart.
		if light == 0 || math.Abs(light.Seconds()-want) > 6 {
			t.Errorf("%d CPUs: back in light %s after the surge, want %.0f s (± 6 s)", cpus, light, want)
		}
	}
}
