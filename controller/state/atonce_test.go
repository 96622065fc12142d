package state

import (
	"strings"
	"testing"
	"time"
)

// atOnceSignals add to testSignals a signal that needs no confirmation,
// as the sensor's backend_busy, and a plain one.
var atOnceSignals = MustSet(Builtin, []Signal{
	{Name: "mem_available_pct", Unit: "%", Direction: Falls, Precision: 1, Max: 100},
	{Name: ClientRPS, Unit: "rps", Direction: Rises, Precision: 0},
	{Name: "busy", Unit: "rps", Direction: Rises, Precision: 1, AtOnce: true},
	{Name: "slow", Unit: "rps", Direction: Rises, Precision: 1},
})

func atOnceConfig() Config {
	c := defaultConfig()
	c.Signals = atOnceSignals
	c.Bands[Moderate].Enter["busy"], c.Bands[Moderate].Stay["busy"] = 0.5, 0.1
	c.Bands[Heavy].Enter["busy"], c.Bands[Heavy].Stay["busy"] = 2, 0.5
	c.Bands[Heavy].Enter["slow"], c.Bands[Heavy].Stay["slow"] = 2, 0.5
	return c
}

// values is a quiet reading but for the named signals.
func values(kv map[string]float64) Reading {
	v := map[string]float64{"mem_available_pct": 60}
	for k, x := range kv {
		v[k] = x
	}
	return Reading{Load1: 0.1, CPUs: 2, Values: v}
}

func TestAtOnceEntersOnTheFirstSample(t *testing.T) {
	tests := []struct {
		name    string
		reading Reading
		want    Gear
		reason  string
	}{
		{"heavy's rule on a signal that needs no confirmation", values(map[string]float64{"busy": 3}), Heavy,
			"busy 3.0 >= 2 at once (the backend turns fetches away)"},
		{"moderate's", values(map[string]float64{"busy": 1}), Moderate,
			"busy 1.0 >= 0.5 at once (the backend turns fetches away)"},
		{"a plain signal waits for up_confirm", values(map[string]float64{"slow": 30}), Light,
			"heavy enter rule held 1 of 3 samples (slow 30.0 >= 2)"},
		{"below the threshold", values(map[string]float64{"busy": 0.4}), Light,
			"moderate enter rule not held"},
		{"a quiet machine: no refusal", values(map[string]float64{"busy": 0}), Light,
			"moderate enter rule not held"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := New(atOnceConfig(), defaultFastWindow)
			d := m.Step(t0, tc.reading)
			if d.Gear != tc.want {
				t.Fatalf("gear after one sample = %s (%s), want %s", d.Gear, d.Reason, tc.want)
			}
			if !strings.HasPrefix(d.Reason, tc.reason) {
				t.Errorf("reason %q, want it to begin %q", d.Reason, tc.reason)
			}
			if got := m.Pressing(tc.want); tc.want != Light && !got {
				t.Errorf("Pressing(%s) = false right after entering it at once", tc.want)
			}
		})
	}
}

// The way down keeps its hysteresis: refusals that come and go every
// other sample make one climb and no descent, and heavy is left only
// after down_window without the stay rule and min_dwell.
func TestAtOnceWayDown(t *testing.T) {
	m := New(atOnceConfig(), defaultFastWindow)
	now := t0
	step := func(busy float64) Decision {
		d := m.Step(now, values(map[string]float64{"busy": busy}))
		now = now.Add(time.Second)
		return d
	}
	var transitions int
	var lastBusy time.Time
	for i := range 300 {
		busy := 0.0
		if i%2 == 0 {
			busy, lastBusy = 3, now
		}
		if d := step(busy); d.Changed {
			transitions++
		}
	}
	if g := m.Current().Gear; g != Heavy || transitions != 1 {
		t.Fatalf("refusals every other second for 5 minutes: %s after %d transitions, want heavy after 1", g, transitions)
	}
	// Quiet from now on: heavy holds for down_window (120 s) from the
	// last sample its stay rule held on.
	quietFrom := now
	for m.Current().Gear == Heavy {
		step(0)
		if now.Sub(quietFrom) > 10*time.Minute {
			t.Fatal("heavy never stepped down")
		}
	}
	if held := now.Sub(lastBusy); held < 120*time.Second {
		t.Errorf("heavy stepped down %s after the last refusals, before down_window", held)
	}
	if g := m.Current().Gear; g != Moderate {
		t.Errorf("stepped down to %s, want moderate (one gear at a time)", g)
	}
}

// A rush between two samples enters a gear only on a rule that needs no
// confirmation, and counts for nothing else.
func TestRush(t *testing.T) {
	started := func() *Machine {
		m := New(atOnceConfig(), defaultFastWindow)
		m.Step(t0, values(nil))
		return m
	}
	t.Run("refusals enter heavy between samples", func(t *testing.T) {
		m := started()
		d := m.Rush(t0.Add(100*time.Millisecond), "busy", 3)
		if d.Gear != Heavy || !d.Changed || d.Cause != CauseAuto {
			t.Fatalf("rush with busy 3: %s changed=%v cause=%s, want heavy, changed, auto", d.Gear, d.Changed, d.Cause)
		}
		if want := "busy 3.0 >= 2 at once (the backend turns fetches away)"; d.Reason != want {
			t.Errorf("reason %q, want %q", d.Reason, want)
		}
		if v, _ := d.Signals.Get("mem_available_pct"); v != 60 {
			t.Errorf("the other signals: mem_available_pct %v, want the last sample's 60", v)
		}
		if !m.Pressing(Heavy) {
			t.Error("Pressing(heavy) = false right after a rush into it")
		}
		// A quiet sample next: heavy stays (min_dwell, down_window).
		if d := m.Step(t0.Add(time.Second), values(nil)); d.Gear != Heavy {
			t.Errorf("the sample after the rush: %s, want heavy kept by the hysteresis", d.Gear)
		}
	})
	t.Run("moderate's rule, and nothing below a threshold", func(t *testing.T) {
		m := started()
		if d := m.Rush(t0, "busy", 0.4); d.Changed || d.Gear != Light {
			t.Fatalf("rush with busy 0.4: %s changed=%v, want light unchanged", d.Gear, d.Changed)
		}
		if d := m.Rush(t0, "busy", 1); d.Gear != Moderate {
			t.Fatalf("rush with busy 1: %s, want moderate", d.Gear)
		}
		if d := m.Rush(t0, "busy", 0.2); d.Changed || d.Gear != Moderate {
			t.Errorf("rush with busy 0.2 in moderate: %s changed=%v, want moderate kept (a rush never steps down)", d.Gear, d.Changed)
		}
	})
	t.Run("a plain signal is not confirmed by rushes", func(t *testing.T) {
		m := started()
		for range 5 {
			if d := m.Rush(t0, "slow", 30); d.Changed {
				t.Fatalf("rush on a plain signal moved to %s", d.Gear)
			}
		}
		if d := m.Step(t0.Add(time.Second), values(map[string]float64{"slow": 30})); d.Gear != Light {
			t.Errorf("one sample after five rushes: %s (%s), want light: up_confirm counts samples", d.Gear, d.Reason)
		}
	})
	t.Run("a force holds, and a machine that never stepped waits", func(t *testing.T) {
		m := started()
		m.Force(t0, Light, time.Time{})
		if d := m.Rush(t0, "busy", 30); d.Gear != Light || d.Changed {
			t.Errorf("forced light: rush gave %s", d.Gear)
		}
		fresh := New(atOnceConfig(), defaultFastWindow)
		if d := fresh.Rush(t0, "busy", 30); d.Gear != Light || d.Changed {
			t.Errorf("before any sample: rush gave %s", d.Gear)
		}
	})
}
