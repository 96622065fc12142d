package state

import (
	"strings"
	"testing"
	"time"
)

// closedLoop replays a surge against a host whose load depends on the gear,
// as a LAMP server's does: every gear passes a share of the requests to
// PHP, and each request per second reaching PHP keeps runnable tasks busy.
// With hide, the readings carry no client_rps (no Varnish traffic signal).
func closedLoop(m *Machine, total time.Duration, rps func(time.Duration) float64, hide bool) []Decision {
	share := [len(All)]float64{Light: 1, Moderate: 0.7, Heavy: 0.06}
	const costPerRPS = 0.012 // runnable tasks per request/s reaching PHP
	h := &host{cpus: 2}
	var ds []Decision
	for t := time.Duration(0); t <= total; t += 2 * time.Second {
		r := rps(t)
		in := h.at(t, r*share[m.Current().Gear]*costPerRPS, f(60))
		if !hide {
			in.Values[ClientRPS] = r
		}
		ds = append(ds, m.Step(t0.Add(t), in))
	}
	return ds
}

func guardConfig(ratio float64) Config {
	c := defaultConfig()
	c.DownTrafficRatio = ratio
	return c
}

func TestTrafficGuardStopsTheBounce(t *testing.T) {
	const min = time.Minute
	surge := func(t time.Duration) float64 {
		if t >= 5*min && t < 25*min {
			return 520
		}
		return 40
	}
	tests := []struct {
		name       string
		ratio      float64
		hideRPS    bool
		wantHeavy  int           // entries into heavy; > 1: at least
		lastDownAt time.Duration // no step down before; 0: not checked
	}{
		{name: "without the guard the gear bounces", ratio: 0, wantHeavy: 5},
		{name: "without a traffic signal the guard is off", ratio: 0.6, hideRPS: true, wantHeavy: 5},
		{name: "with the guard: one up, down once the surge is over", ratio: 0.6, wantHeavy: 1, lastDownAt: 25 * min},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := New(guardConfig(tc.ratio), defaultFastWindow)
			checkBounce(t, transitions(closedLoop(m, 40*min, surge, tc.hideRPS)), tc.wantHeavy, tc.lastDownAt)
		})
	}
}

func checkBounce(t *testing.T, trs []transition, wantHeavy int, lastDownAt time.Duration) {
	t.Helper()
	heavy := 0
	for _, tr := range trs {
		if tr.to == Heavy {
			heavy++
		}
	}
	if wantHeavy > 1 && heavy < wantHeavy || wantHeavy == 1 && heavy != 1 {
		t.Errorf("entered heavy %d times (%v), want %d", heavy, trs, wantHeavy)
	}
	if lastDownAt > 0 {
		for _, tr := range trs {
			if tr.to < tr.from && tr.at < lastDownAt {
				t.Errorf("stepped down at %s (%v), before the surge ended at %s", tr.at, trs, lastDownAt)
			}
		}
		if last := trs[len(trs)-1]; last.to != Light {
			t.Errorf("ended in %s (%v), want light once the surge is over", last.to, trs)
		}
	}
}

// step feeds the machine one reading with the given load per CPU (2 CPUs,
// Load1 as given, fast signal off) and client_rps (< 0: none).
func guardStep(m *Machine, at time.Duration, loadPerCPU, rps float64) Decision {
	r := Reading{Time: t0.Add(at), Load1: 2 * loadPerCPU, CPUs: 2, Values: map[string]float64{"mem_available_pct": 60}}
	if rps >= 0 {
		r.Values[ClientRPS] = rps
	}
	return m.Step(t0.Add(at), r)
}

func TestTrafficGuard(t *testing.T) {
	const s = time.Second
	type in struct {
		at         time.Duration
		load, rps  float64
		wantState  Gear
		wantReason string // substring; "" checks nothing
	}
	tests := []struct {
		name  string
		ratio float64
		steps []in
	}{
		{
			name: "holds while the traffic stays, with the reason", ratio: 0.6,
			steps: []in{
				{at: 0, load: 2, rps: 520}, {at: 1 * s, load: 2, rps: 520}, {at: 2 * s, load: 2, rps: 520, wantState: Heavy},
				{at: 300 * s, load: 0.1, rps: 410, wantState: Heavy, wantReason: "stay: client_rps 410 > 0.6 × 520 at entry"},
				// The guard holds heavy as its stay rule would: down_window
				// counts from the last sample it held.
				{at: 400 * s, load: 0.1, rps: 100, wantState: Heavy, wantReason: "held 100s ago, within down_window 120s"},
				{at: 421 * s, load: 0.1, rps: 100, wantState: Moderate},
			},
		},
		{
			name: "at the threshold the guard lets go", ratio: 0.5,
			steps: []in{
				{at: 0, load: 2, rps: 400}, {at: 1 * s, load: 2, rps: 400}, {at: 2 * s, load: 2, rps: 400, wantState: Heavy},
				{at: 300 * s, load: 0.1, rps: 200, wantState: Moderate},
			},
		},
		{
			name: "ratio 0 is off", ratio: 0,
			steps: []in{
				{at: 0, load: 2, rps: 520}, {at: 1 * s, load: 2, rps: 520}, {at: 2 * s, load: 2, rps: 520, wantState: Heavy},
				{at: 300 * s, load: 0.1, rps: 520, wantState: Moderate},
			},
		},
		{
			name: "a gear entered without a traffic signal is not guarded", ratio: 0.6,
			steps: []in{
				{at: 0, load: 2, rps: -1}, {at: 1 * s, load: 2, rps: -1}, {at: 2 * s, load: 2, rps: -1, wantState: Heavy},
				{at: 300 * s, load: 0.1, rps: 520, wantState: Moderate},
			},
		},
		{
			name: "a gear entered without traffic is not guarded", ratio: 0.6,
			steps: []in{
				{at: 0, load: 2, rps: 0}, {at: 1 * s, load: 2, rps: 0}, {at: 2 * s, load: 2, rps: 0, wantState: Heavy},
				{at: 300 * s, load: 0.1, rps: 50, wantState: Moderate},
			},
		},
		{
			name: "a gear entered below the entry-rate floor is not guarded", ratio: 0.6,
			steps: []in{
				{at: 0, load: 2, rps: 0.5}, {at: 1 * s, load: 2, rps: 0.5}, {at: 2 * s, load: 2, rps: 0.5, wantState: Heavy},
				{at: 300 * s, load: 0.1, rps: 3, wantState: Moderate},
			},
		},
		{
			name: "a traffic signal that goes missing lets go", ratio: 0.6,
			steps: []in{
				{at: 0, load: 2, rps: 520}, {at: 1 * s, load: 2, rps: 520}, {at: 2 * s, load: 2, rps: 520, wantState: Heavy},
				{at: 300 * s, load: 0.1, rps: -1, wantState: Moderate},
			},
		},
		{
			name: "moderate keeps the rate it was entered at going up", ratio: 0.6,
			steps: []in{
				{at: 0, load: 1, rps: 300}, {at: 1 * s, load: 1, rps: 300}, {at: 2 * s, load: 1, rps: 300, wantState: Moderate},
				{at: 100 * s, load: 2, rps: 600}, {at: 101 * s, load: 2, rps: 600}, {at: 102 * s, load: 2, rps: 600, wantState: Heavy},
				// 200 is below 0.6 × 600 (heavy) but above 0.6 × 300 (moderate).
				{at: 400 * s, load: 0.1, rps: 200, wantState: Moderate},
				{at: 600 * s, load: 0.1, rps: 200, wantState: Moderate, wantReason: "stay: client_rps 200 > 0.6 × 300 at entry"},
				{at: 650 * s, load: 0.1, rps: 150, wantState: Moderate, wantReason: "held 50s ago, within down_window 120s"},
				{at: 721 * s, load: 0.1, rps: 150, wantState: Light},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := guardConfig(tc.ratio)
			cfg.Bands[Moderate].Stay = Rule{"load_per_cpu": 0.5}
			cfg.Bands[Heavy].Stay = Rule{"load_per_cpu": 1.0}
			m := New(cfg, 0)
			for i, st := range tc.steps {
				d := guardStep(m, st.at, st.load, st.rps)
				if (st.wantState != Light || i == len(tc.steps)-1) && d.Gear != st.wantState {
					t.Fatalf("step %d at %s: %s (%s), want %s", i, st.at, d.Gear, d.Reason, st.wantState)
				}
				if st.wantReason != "" && !strings.Contains(d.Reason, st.wantReason) {
					t.Errorf("step %d: reason %q, want it to contain %q", i, d.Reason, st.wantReason)
				}
			}
		})
	}
}

func TestTrafficGuardAfterResume(t *testing.T) {
	m := New(guardConfig(0.6), 0)
	m.Resume(t0, Heavy, "resumed heavy")
	d := guardStep(m, 200*time.Second, 0.1, 520)
	if d.Gear != Moderate {
		t.Errorf("resumed heavy with no entry rate: %s (%s), want a step down on the load", d.Gear, d.Reason)
	}
}

// A signal past its distress mark holds the gear as the traffic does:
// requests waiting for PHP are no time to send it more.
func TestTrafficGuardHoldsInDistress(t *testing.T) {
	queue := Signal{Name: "phpfpm_queue", Direction: Rises, Distress: new(float64)}
	cfg := guardConfig(0.6)
	cfg.Signals = MustSet(Builtin, testSignals.All()[1:], []Signal{queue})
	cfg.Bands[Heavy].Stay = Rule{"load_per_cpu": 1.0}
	const s = time.Second
	step := func(m *Machine, at time.Duration, load, q float64) Decision {
		r := Reading{Time: t0.Add(at), Load1: 2 * load, CPUs: 2, Values: map[string]float64{"mem_available_pct": 60}}
		if q >= 0 {
			r.Values["phpfpm_queue"] = q
		}
		return m.Step(t0.Add(at), r)
	}
	for _, tc := range []struct {
		name  string
		ratio float64
		queue float64 // after the climb; < 0: unavailable
		want  Gear
		why   string
	}{
		{"a queue holds heavy", 0.6, 3, Heavy, "stay: phpfpm_queue 3 > 0: the backend is in distress"},
		{"no queue lets go", 0.6, 0, Moderate, ""},
		{"an unknown queue lets go", 0.6, -1, Moderate, ""},
		{"the guard off lets go", 0, 3, Moderate, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cfg
			c.DownTrafficRatio = tc.ratio
			m := New(c, 0)
			for i := range 3 {
				step(m, time.Duration(i)*s, 2, 0)
			}
			// Resumed or entered without traffic, the distress half holds all the same.
			d := step(m, 300*s, 0.1, tc.queue)
			if d.Gear != tc.want || !strings.Contains(d.Reason, tc.why) {
				t.Errorf("%s (%s), want %s (%q)", d.Gear, d.Reason, tc.want, tc.why)
			}
		})
	}
}
