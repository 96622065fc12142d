package sensor

import (
	"encoding/json"
	"math"
	"testing"
	"time"
)

func TestBusySince(t *testing.T) {
	tests := []struct {
		name      string
		prev, now map[string]uint64
		want      uint64
	}{
		{"each counter's growth", map[string]uint64{"a": 3, "b": 10}, map[string]uint64{"a": 5, "b": 40}, 32},
		{"a VCL loaded since counts whole", map[string]uint64{"a": 3}, map[string]uint64{"a": 3, "b": 7}, 7},
		{"a VCL discarded counts nothing", map[string]uint64{"a": 3, "b": 900}, map[string]uint64{"a": 4}, 1},
		{"no counters", nil, nil, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := busySince(tc.prev, tc.now); got != tc.want {
				t.Errorf("busySince = %d, want %d", got, tc.want)
			}
		})
	}
}

// backend_busy is the refusals of the last fast_window per second of it:
// a surge's first poll shows at once, a blip weighs little, and the
// value falls to 0 a window after the last refusal.
func TestBusyWindow(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 3, 0, 0, 0, time.UTC)
	w := busyWindow{Window: 10 * time.Second}
	steps := []struct {
		sec     int
		refused float64
		want    float64
	}{
		{0, 0, 0},
		{1, 300, 30}, // the surge's first second
		{2, 300, 60}, // and its second
		{5, 0, 60},   // none refused since: the window still holds them
		{11, 0, 30},  // the first second's are out of it
		{12, 0, 0},   // and the second's
		{20, 4, 0.4}, // a blip of four
	}
	for _, s := range steps {
		if got := w.add(t0.Add(time.Duration(s.sec)*time.Second), s.refused, s.refused); math.Abs(got-s.want) > 1e-9 {
			t.Errorf("at %ds after %v refused: backend_busy %v, want %v", s.sec, s.refused, got, s.want)
		}
	}
	if len(w.polls) > 10 {
		t.Errorf("the window keeps %d polls: older ones are not let go", len(w.polls))
	}
	off := busyWindow{}
	if got := off.add(t0, 30, 15); got != 15 {
		t.Errorf("fast_window 0: backend_busy %v, want the poll's own rate 15", got)
	}
}

func TestCounterRatesBusy(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 3, 0, 0, 0, time.UTC)
	var r CounterRates
	c := VarnishCounters{Uptime: 10, Busy: map[string]uint64{"VBE.light.gearshift_copies.busy": 5}}
	if _, err := r.Update(t0, c); err != ErrBaseline {
		t.Fatalf("first reading: %v, want ErrBaseline", err)
	}
	c = VarnishCounters{Uptime: 12, Busy: map[string]uint64{"VBE.light.gearshift_copies.busy": 45, "VBE.heavy.default.busy": 2}}
	rates, err := r.Update(t0.Add(2*time.Second), c)
	if err != nil {
		t.Fatal(err)
	}
	if rates.Busy != 42 || rates.BusyRPS != 21 {
		t.Errorf("Busy %v, BusyRPS %v; want 42 refused, 21 a second", rates.Busy, rates.BusyRPS)
	}
}

// The busy counters of the site's backends count, in every VCL; the
// daemon's guest backend's, the probe's and the spare connections' (a
// refusal there is tried again on gearshift_copies) do not.
func TestParseBusyTheSitesBackends(t *testing.T) {
	values := map[string]json.RawMessage{
		"VBE.gearshift-light-1.default.busy":          json.RawMessage(`{"value": 3}`),
		"VBE.gearshift-light-1.gearshift_copies.busy": json.RawMessage(`{"value": 5}`),
		"VBE.gearshift-heavy-2.gearshift_copies.busy": json.RawMessage(`{"value": 7}`),
		"VBE.gearshift-light-1.gearshift_spare.busy":  json.RawMessage(`{"value": 11}`),
		"VBE.gearshift-heavy-2.gearshift_guest.busy":  json.RawMessage(`{"value": 13}`),
		"VBE.gearshift-light-1.gearshift_probe.busy":  json.RawMessage(`{"value": 17}`),
		"VBE.gearshift-light-1.default.conn":          json.RawMessage(`{"value": 19}`),
	}
	busy := parseBusy(values)
	if len(busy) != 3 || busySince(nil, busy) != 15 {
		t.Errorf("busy counters %v, want default and gearshift_copies of each VCL: 15", busy)
	}
}
