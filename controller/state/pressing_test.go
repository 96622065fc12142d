package state

import (
	"testing"
	"time"
)

// PressingOnBackend holds only while the gear's enter rule holds on a
// signal of the backend's own distress: the load pressing alone is the
// machine's distress, not the backend's.
func TestPressingOnBackend(t *testing.T) {
	c := atOnceConfig()
	c.Signals = MustSet(Builtin, []Signal{
		{Name: "mem_available_pct", Unit: "%", Direction: Falls, Precision: 1, Max: 100},
		{Name: ClientRPS, Unit: "rps", Direction: Rises, Precision: 0},
		{Name: "busy", Unit: "rps", Direction: Rises, Precision: 1, AtOnce: true, Bound: AboveZero},
		{Name: "slow", Unit: "rps", Direction: Rises, Precision: 1},
	})
	m := New(c, defaultFastWindow)
	loaded := values(nil)
	loaded.Load1 = 10
	var d Decision
	for i := range 3 {
		d = m.Step(t0.Add(time.Duration(i)*time.Second), loaded)
	}
	if d.Gear != Heavy || !m.Pressing(Heavy) {
		t.Fatalf("gear %s, pressing %v after three samples at load 5 a CPU: want heavy, pressing", d.Gear, m.Pressing(Heavy))
	}
	if m.PressingOnBackend(Heavy) {
		t.Error("PressingOnBackend(heavy) on the load alone")
	}
	busy := values(map[string]float64{"busy": 3, "slow": 30})
	busy.Load1 = 10
	m.Step(t0.Add(3*time.Second), busy)
	if !m.PressingOnBackend(Heavy) {
		t.Error("PressingOnBackend(heavy) = false with busy 3 >= 2")
	}
	slow := values(map[string]float64{"slow": 30})
	slow.Load1 = 10
	m.Step(t0.Add(4*time.Second), slow)
	if m.PressingOnBackend(Heavy) {
		t.Error("PressingOnBackend(heavy) on a signal with no bound of distress")
	}
}
