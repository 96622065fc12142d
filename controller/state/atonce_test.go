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
