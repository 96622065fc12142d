package state

import (
	"testing"
	"time"
)

// PressingOnBackend holds only while the gear's enter rule holds on a
// signal of the backend's own distress, or a user's own: the load, or
// Varnish's own counters, pressing alone is not the backend's distress.
func TestPressingOnBackend(t *testing.T) {
	c := atOnceConfig()
	c.Signals = MustSet(Builtin, []Signal{
		{Name: "mem_available_pct", Unit: "%", Direction: Falls, Precision: 1, Max: 100},
		{Name: ClientRPS, Unit: "rps", Direction: Rises, Precision: 0},
		{Name: "busy", Unit: "rps", Direction: Rises, Precision: 1, AtOnce: true, Bound: AboveZero, Backend: true},
		{Name: "slow", Unit: "rps", Direction: Rises, Precision: 1},
		{Name: "ttfb", Unit: "ms", Direction: Rises, Precision: 0, Bound: TTFBBound, Backend: true},
		{Name: "dropped", Unit: "rps", Direction: Rises, Precision: 1, Bound: AboveZero},
		{Name: "query", Direction: Rises, Precision: 1, Named: true},
	})
	c.Bands[Heavy].Enter["ttfb"], c.Bands[Heavy].Enter["dropped"], c.Bands[Heavy].Enter["query"] = 1000, 1, 5
	for _, tc := range []struct {
		name   string
		values map[string]float64
		want   bool
	}{
		{"the load alone", nil, false},
		{"a backend signal that needs no confirmation", map[string]float64{"busy": 3}, true},
		{"a backend signal that needs confirmation", map[string]float64{"ttfb": 2500}, true},
		{"a user's own query", map[string]float64{"query": 9}, true},
		{"Varnish's own distress", map[string]float64{"dropped": 4}, false},
		{"a signal of no one's distress", map[string]float64{"slow": 30}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := New(c, defaultFastWindow)
			r := values(tc.values)
			r.Load1 = 10 // 5 a CPU: heavy on the load, for up_confirm samples
			var d Decision
			for i := range 3 {
				d = m.Step(t0.Add(time.Duration(i)*time.Second), r)
			}
			if d.Gear != Heavy || !m.Pressing(Heavy) {
				t.Fatalf("gear %s, pressing %v after three samples: want heavy, pressing", d.Gear, m.Pressing(Heavy))
			}
			if got := m.PressingOnBackend(Heavy); got != tc.want {
				t.Errorf("PressingOnBackend(heavy) = %v, want %v", got, tc.want)
			}
		})
	}
}
