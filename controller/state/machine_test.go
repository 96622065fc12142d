package state

import (
	"fmt"
	"maps"
	"math"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)

func f(v float64) *float64 { return &v }

// defaultConfig is the defaults docs/signals.md#the-decision gives.
func defaultConfig() Config {
	return Config{
		Bands: [len(All)]Band{
			Moderate: {
				Enter: Rule{"load_per_cpu": 0.7, "mem_available_pct": 20},
				Stay:  Rule{"load_per_cpu": 0.5, "mem_available_pct": 25},
			},
			Heavy: {
				Enter: Rule{"load_per_cpu": 1.5, "mem_available_pct": 10},
				Stay:  Rule{"load_per_cpu": 1.0, "mem_available_pct": 15},
			},
		},
		UpConfirm:  3,
		DownWindow: 120 * time.Second,
		MinDwell:   60 * time.Second,
		Signals:    testSignals,
	}
}

// testSignals are the machine's own signal and, standing in for the
// sources' (which the sensor declares), the ones these tests read.
var testSignals = MustSet(Builtin, []Signal{
	{Name: "mem_available_pct", Unit: "%", Direction: Falls, Precision: 1, Max: 100},
	{Name: "psi_cpu", Unit: "%", Direction: Rises, Precision: 1, Max: 100},
	{Name: "psi_mem", Unit: "%", Direction: Rises, Precision: 1, Max: 100},
	{Name: ClientRPS, Unit: "rps", Direction: Rises, Precision: 0},
})

const defaultFastWindow = 10 * time.Second

// tick is one input of a trace: a reading at an offset from t0.
type tick struct {
	at time.Duration
	r  Reading
}

// host emulates the kernel's figures for a run queue that changes over
// time: Load1 is the kernel's exponential average, updated every 5s.
type host struct {
	cpus  int
	load1 float64
	next  time.Duration // next kernel update
}

// at returns the reading at offset t with runq tasks running or blocked.
func (h *host) at(t time.Duration, runq float64, mem *float64) Reading {
	const decay = 0.9200444146293232 // exp(-5s/60s), the kernel's EXP_1
	for h.next <= t {
		h.load1 = h.load1*decay + runq*(1-decay)
		h.next += 5 * time.Second
	}
	r := Reading{Time: t0.Add(t), Load1: h.load1, RunQueue: runq, CPUs: h.cpus, Values: map[string]float64{}}
	if mem != nil {
		r.Values["mem_available_pct"] = *mem
	}
	return r
}

// gen builds a trace of a host with cpus CPUs sampled every step for total,
// whose run queue per CPU and free memory percentage are functions of time
// (mem may be nil: memory unknown).
func gen(cpus int, step, total time.Duration, perCPU func(time.Duration) float64, mem func(time.Duration) float64) []tick {
	h := &host{cpus: cpus}
	var ts []tick
	for t := time.Duration(0); t <= total; t += step {
		var m *float64
		if mem != nil {
			m = f(mem(t))
		}
		ts = append(ts, tick{t, h.at(t, perCPU(t)*float64(cpus), m)})
	}
	return ts
}

// steps returns a piecewise constant function: values[i] from bounds[i-1] on.
func steps(values []float64, bounds ...time.Duration) func(time.Duration) float64 {
	return func(t time.Duration) float64 {
		for i, b := range bounds {
			if t < b {
				return values[i]
			}
		}
		return values[len(values)-1]
	}
}

func constant(v float64) func(time.Duration) float64 {
	return func(time.Duration) float64 { return v }
}

func replay(m *Machine, ts []tick) []Decision {
	ds := make([]Decision, 0, len(ts))
	for _, tk := range ts {
		ds = append(ds, m.Step(t0.Add(tk.at), tk.r))
	}
	return ds
}

type transition struct {
	at       time.Duration
	from, to Gear
}

func (tr transition) String() string { return fmt.Sprintf("%s %s→%s", tr.at, tr.from, tr.to) }

func transitions(ds []Decision) []transition {
	var trs []transition
	for _, d := range ds {
		if d.Changed {
			trs = append(trs, transition{d.Since.Sub(t0), d.From, d.Gear})
		}
	}
	return trs
}

func path(trs []transition) string {
	if len(trs) == 0 {
		return "(none)"
	}
	var b strings.Builder
	b.WriteString(trs[0].from.String())
	for _, tr := range trs {
		b.WriteString(" → " + tr.to.String())
	}
	return b.String()
}

func TestTraces(t *testing.T) {
	const min = time.Minute
	tests := []struct {
		name  string
		trace []tick
		path  string
		check func(t *testing.T, trs []transition, ds []Decision)
	}{
		{
			name:  "spike: quiet, surge, quiet",
			trace: gen(4, time.Second, 30*min, steps([]float64{0.1, 4, 0.1}, 5*min, 8*min), constant(60)),
			// The EWMA crosses moderate's threshold two samples before
			// heavy's, so moderate is confirmed first.
			path: "light → moderate → heavy → moderate → light",
			check: func(t *testing.T, trs []transition, _ []Decision) {
				if up := trs[1].at - 5*min; up > 10*time.Second {
					t.Errorf("reached heavy %s after the surge began, want within 10s", up)
				}
				if trs[2].at < 8*min+120*time.Second {
					t.Errorf("left heavy at %s, before the load had been low for down_window", trs[1].at)
				}
			},
		},
		{
			name:  "slow climb",
			trace: gen(2, time.Second, 40*min, func(t time.Duration) float64 { return 2.5 * t.Minutes() / 40 }, constant(50)),
			path:  "light → moderate → heavy",
			// The run queue crosses 0.7 per CPU at 11m12s and 1.5 at 24m:
			// each shift follows within seconds, not a step early.
			check: func(t *testing.T, trs []transition, ds []Decision) {
				for i, want := range []time.Duration{11*min + 12*time.Second, 24 * min} {
					if lag := trs[i].at - want; lag < 0 || lag > 30*time.Second {
						t.Errorf("%v: %s after the load crossed the threshold, want within 30s", trs[i], lag)
					}
				}
			},
		},
		{
			name: "oscillation around the moderate threshold does not flap",
			trace: gen(2, time.Second, 60*min, func(t time.Duration) float64 {
				if int(t.Seconds())/20%2 == 0 {
					return 0.55
				}
				return 0.95
			}, constant(50)),
			path: "light → moderate",
		},
		{
			name: "oscillation around the heavy threshold does not flap",
			trace: gen(2, time.Second, 60*min, func(t time.Duration) float64 {
				if int(t.Seconds())/45%2 == 0 {
					return 1.1
				}
				return 2
			}, constant(50)),
			path: "light → moderate → heavy",
		},
		{
			// A real 10-minute load cycle: the machine follows it, but every
			// step down waits min_dwell after the previous transition.
			name: "slow cycle across both bands",
			trace: gen(2, time.Second, 60*min, func(t time.Duration) float64 {
				return 1 + 0.9*math.Sin(2*math.Pi*t.Minutes()/10)
			}, constant(50)),
			check: func(t *testing.T, trs []transition, _ []Decision) {
				if len(trs) < 4 {
					t.Errorf("transitions %v: want the machine to follow a 10 min cycle", trs)
				}
				for i := 1; i < len(trs); i++ {
					if gap := trs[i].at - trs[i-1].at; trs[i].to < trs[i].from && gap < time.Minute {
						t.Errorf("%v then %v: %s apart, want at least min_dwell", trs[i-1], trs[i], gap)
					}
				}
			},
		},
		{
			name:  "memory squeeze with low cpu",
			trace: gen(8, 2*time.Second, 30*min, constant(0.05), steps([]float64{40, 18, 8, 40}, 3*min, 6*min, 10*min)),
			path:  "light → moderate → heavy → moderate → light",
			check: func(t *testing.T, trs []transition, ds []Decision) {
				if trs[0].at > 3*min+6*time.Second || trs[1].at > 6*min+6*time.Second {
					t.Errorf("transitions %v: want each step up within 3 samples", trs)
				}
				if r := ds[trs[1].at/(2*time.Second)].Reason; r != "mem_available_pct 8.0 <= 10 for 3 samples" {
					t.Errorf("reason of going heavy = %q", r)
				}
			},
		},
		{
			name:  "memory unknown never triggers a memory rule",
			trace: gen(2, time.Second, 10*min, constant(0.1), nil),
			path:  "(none)",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ds := replay(New(defaultConfig(), defaultFastWindow), tc.trace)
			trs := transitions(ds)
			if tc.path != "" && path(trs) != tc.path {
				t.Fatalf("path %s (%v), want %s", path(trs), trs, tc.path)
			}
			if tc.check != nil {
				tc.check(t, trs, ds)
			}
			if got := ds[len(ds)-1].Transitions; got != len(trs) {
				t.Errorf("Transitions = %d, want %d", got, len(trs))
			}
		})
	}
}

// at is a sample at offset sec from t0 with the given load per CPU on 1 CPU.
func at(sec int, loadPerCPU float64) (time.Time, Reading) {
	now := t0.Add(time.Duration(sec) * time.Second)
	return now, Reading{Time: now, Load1: loadPerCPU, RunQueue: loadPerCPU, CPUs: 1, Values: map[string]float64{"mem_available_pct": 80}}
}

// feed steps m once a second from sec from to sec to (inclusive).
func feed(m *Machine, from, to int, loadPerCPU float64) Decision {
	var d Decision
	for s := from; s <= to; s++ {
		d = m.Step(at(s, loadPerCPU))
	}
	return d
}

func TestForced(t *testing.T) {
	t.Run("with expiry", func(t *testing.T) {
		m := New(defaultConfig(), 0)
		feed(m, 0, 59, 0.1)
		until := t0.Add(10 * time.Minute)
		d := m.Force(t0.Add(60*time.Second), Heavy, until)
		if !d.Changed || d.Gear != Heavy || !d.Forced || !d.ForcedUntil.Equal(until) || d.Reason != "forced by operator until 03:10" {
			t.Fatalf("Force = %+v", d)
		}
		d = feed(m, 61, 599, 0.1)
		if d.Gear != Heavy || !d.Forced || d.Changed {
			t.Fatalf("before the deadline: %+v", d)
		}
		d = m.Step(at(600, 0.1))
		if d.Gear != Heavy || d.Forced || !d.ForcedUntil.IsZero() || d.Changed {
			t.Fatalf("at the deadline: %+v", d)
		}
		if !strings.HasPrefix(d.Reason, "force expired at 03:10, resuming from heavy; ") {
			t.Errorf("reason at the deadline = %q", d.Reason)
		}
		// The stay rule of heavy never held: the dwell clock, reset at the
		// deadline, is what keeps it in heavy for min_dwell.
		var downAt int
		for s := 601; s < 900 && downAt == 0; s++ {
			if d = m.Step(at(s, 0.1)); d.Changed {
				downAt = s
			}
		}
		if downAt != 660 || d.Gear != Moderate {
			t.Fatalf("stepped to %s at %ds, want moderate at 660s (deadline + min_dwell)", d.Gear, downAt)
		}
		if d.Transitions != 2 {
			t.Errorf("Transitions = %d, want 2", d.Transitions)
		}
	})

	t.Run("without expiry", func(t *testing.T) {
		m := New(defaultConfig(), 0)
		feed(m, 0, 9, 0.1)
		d := m.Force(t0.Add(10*time.Second), Moderate, time.Time{})
		if d.Gear != Moderate || !d.Forced || !d.ForcedUntil.IsZero() || d.Reason != "forced by operator until auto" {
			t.Fatalf("Force = %+v", d)
		}
		d = feed(m, 11, 7200, 3)
		if d.Gear != Moderate || !d.Forced || d.Transitions != 1 {
			t.Fatalf("two hours of surge later: %+v", d)
		}
		d = m.Auto(t0.Add(7200 * time.Second))
		if d.Gear != Moderate || d.Forced || d.Changed || d.Reason != "released by operator, resuming from moderate" {
			t.Fatalf("Auto = %+v", d)
		}
		d = m.Step(at(7201, 3))
		if d.Gear != Heavy || !d.Changed || !strings.HasPrefix(d.Reason, "load_per_cpu 3.00 >= 1.50 for ") {
			t.Fatalf("after auto under a surge: %+v", d)
		}
	})

	t.Run("released under high load", func(t *testing.T) {
		m := New(defaultConfig(), defaultFastWindow)
		m.Force(t0, Light, t0.Add(5*time.Minute))
		d := feed(m, 0, 299, 2)
		if d.Gear != Light || !d.Forced {
			t.Fatalf("while forced: %+v", d)
		}
		d = m.Step(at(300, 2))
		if d.Gear != Heavy || !d.Changed || d.Forced {
			t.Fatalf("at the deadline: %+v", d)
		}
		if want := "force expired at 03:05, resuming from light; load_per_cpu 2.00 >= 1.50 for 301 samples"; d.Reason != want {
			t.Errorf("reason = %q, want %q", d.Reason, want)
		}
	})

	t.Run("release steps down only after min_dwell", func(t *testing.T) {
		m := New(defaultConfig(), 0)
		feed(m, 0, 400, 2) // heavy since 2s
		m.Force(t0.Add(401*time.Second), Heavy, time.Time{})
		feed(m, 401, 1000, 0.1)
		m.Auto(t0.Add(1000 * time.Second))
		for s := 1001; s < 1060; s++ {
			if d := m.Step(at(s, 0.1)); d.Changed {
				t.Fatalf("stepped down at %ds, within min_dwell of the release: %+v", s, d)
			}
		}
		if d := m.Step(at(1060, 0.1)); d.Gear != Moderate {
			t.Fatalf("at release + min_dwell: %+v", d)
		}
	})

	t.Run("auto when not forced", func(t *testing.T) {
		m := New(defaultConfig(), 0)
		feed(m, 0, 5, 2)
		d := m.Auto(t0.Add(6 * time.Second))
		if d.Gear != Heavy || d.Changed || d.Forced {
			t.Fatalf("Auto = %+v", d)
		}
	})
}

func TestReasons(t *testing.T) {
	m := New(defaultConfig(), 0)
	want := []struct {
		load   float64
		reason string
	}{
		{0.2, "moderate enter rule not held (load_per_cpu 0.20 < 0.70, mem_available_pct 80.0 > 20)"},
		{1.82, "heavy enter rule held 1 of 3 samples (load_per_cpu 1.82 >= 1.50)"},
		{1.82, "heavy enter rule held 2 of 3 samples (load_per_cpu 1.82 >= 1.50)"},
		{1.82, "load_per_cpu 1.82 >= 1.50 for 3 samples"},
		{0.9, "stay rule of heavy held 1s ago, within down_window 120s"},
	}
	for i, w := range want {
		if d := m.Step(at(i, w.load)); d.Reason != w.reason {
			t.Errorf("sample %d: reason %q, want %q", i, d.Reason, w.reason)
		}
	}
	feed(m, 5, 122, 0.9)
	if d := m.Step(at(123, 0.9)); d.Gear != Moderate || d.Reason != "stay rule of heavy not held within 120s (load_per_cpu 0.90 < 1.00, mem_available_pct 80.0 > 15)" {
		t.Errorf("down: %+v", d)
	}
	if d := m.Step(at(124, 0.6)); d.Reason != "stay rule of moderate holds (load_per_cpu 0.60 >= 0.50)" {
		t.Errorf("stay: %q", d.Reason)
	}
	if d := m.Step(at(125, 1.6)); d.Reason != "stay rule of moderate holds (load_per_cpu 1.60 >= 0.50); heavy enter rule held 1 of 3 samples (load_per_cpu 1.60 >= 1.50)" {
		t.Errorf("pending: %q", d.Reason)
	}
}

func TestDownNeedsMinDwell(t *testing.T) {
	cfg := defaultConfig()
	cfg.DownWindow = 10 * time.Second
	cfg.MinDwell = 60 * time.Second
	m := New(cfg, 0)
	feed(m, 0, 4, 2) // heavy at 2s
	d := m.Step(at(20, 0.1))
	if d.Gear != Heavy || d.Reason != "stay rule of heavy not held, but only 18s of min_dwell 60s passed" {
		t.Fatalf("%+v", d)
	}
	if d = feed(m, 21, 62, 0.1); d.Gear != Moderate || d.Since != t0.Add(62*time.Second) {
		t.Fatalf("%+v", d)
	}
	// One step at a time: moderate's own window and dwell start over.
	if d = feed(m, 63, 121, 0.1); d.Gear != Moderate {
		t.Fatalf("%+v", d)
	}
	if d = m.Step(at(122, 0.1)); d.Gear != Light {
		t.Fatalf("%+v", d)
	}
}

func TestUpJumpsToHighest(t *testing.T) {
	m := New(defaultConfig(), 0)
	d := feed(m, 0, 2, 5)
	if d.Gear != Heavy || d.From != Light || d.Transitions != 1 {
		t.Fatalf("%+v", d)
	}
}

func TestPSIRules(t *testing.T) {
	cfg := defaultConfig()
	cfg.Bands[Moderate].Enter["psi_cpu"] = 20
	cfg.Bands[Moderate].Stay["psi_cpu"] = 10
	m := New(cfg, 0)
	noPSI := Reading{Load1: 0.1, CPUs: 1}
	for s := 0; s < 10; s++ {
		if d := m.Step(t0.Add(time.Duration(s)*time.Second), noPSI); d.Gear != Light {
			t.Fatalf("without PSI: %+v", d)
		}
	}
	withPSI := Reading{Load1: 0.1, CPUs: 1, Values: map[string]float64{"psi_cpu": 25, "psi_mem": 0}}
	var d Decision
	for s := 10; s < 13; s++ {
		d = m.Step(t0.Add(time.Duration(s)*time.Second), withPSI)
	}
	if d.Gear != Moderate || d.Reason != "psi_cpu 25.0 >= 20 for 3 samples" {
		t.Fatalf("%+v", d)
	}
	if v, ok := d.Signals.Get("psi_cpu"); !ok || v != 25 || d.Signals.Ptr("psi_mem") == nil {
		t.Errorf("signals %+v", d.Signals)
	}
}

func TestSetConfigKeepsStateAndHistory(t *testing.T) {
	m := New(defaultConfig(), 0)
	feed(m, 0, 10, 2)
	feed(m, 11, 20, 0.1)
	cfg := defaultConfig()
	cfg.Bands[Heavy].Enter["load_per_cpu"], cfg.Bands[Heavy].Stay["load_per_cpu"] = 3, 2.5
	m.SetConfig(cfg, 0)
	if d := m.Current(); d.Gear != Heavy || d.Transitions != 1 {
		t.Fatalf("after SetConfig: %+v", d)
	}
	// The stay rule of heavy held at 10s: no step down before 130s.
	if d := feed(m, 21, 129, 0.1); d.Gear != Heavy {
		t.Fatalf("%+v", d)
	}
	if d := m.Step(at(130, 0.1)); d.Gear != Moderate {
		t.Fatalf("%+v", d)
	}
}

func TestStepReadsEveryTableSignal(t *testing.T) {
	m := New(defaultConfig(), defaultFastWindow)
	r := Reading{
		Time: t0, Load1: 1, RunQueue: 4, CPUs: 2,
		Values: map[string]float64{"mem_available_pct": 25, "psi_cpu": 12.5, "psi_mem": 0.5},
	}
	d := m.Step(t0, r)
	sig := d.Signals
	// The first sample primes the EWMA: max(1, 4) / 2.
	want := map[string]float64{"load_per_cpu": 2, "mem_available_pct": 25, "psi_cpu": 12.5, "psi_mem": 0.5}
	if !maps.Equal(sig.Values, want) || !sig.Time.Equal(t0) {
		t.Errorf("signals %+v, want %v", sig, want)
	}
	if d.Gear != Light || !d.Since.Equal(t0) {
		t.Errorf("first decision %+v", d)
	}
	d = m.Step(t0.Add(time.Second), Reading{Load1: 0.5, CPUs: 0})
	if _, ok := d.Signals.Get("mem_available_pct"); ok || d.Signals.Ptr("psi_cpu") != nil || !d.Signals.Time.Equal(t0.Add(time.Second)) {
		t.Errorf("signals without memory, PSI or time %+v", d.Signals)
	}
}

func TestCurrentBeforeAnyStep(t *testing.T) {
	d := New(defaultConfig(), 0).Current()
	if d.Gear != Light || d.Forced || d.Changed || d.Reason == "" {
		t.Errorf("Current = %+v", d)
	}
}

func TestReasonWithoutMemory(t *testing.T) {
	m := New(defaultConfig(), 0)
	d := m.Step(t0, Reading{Load1: 0.2, CPUs: 1})
	if d.Reason != "moderate enter rule not held (load_per_cpu 0.20 < 0.70)" {
		t.Errorf("reason %q: an unknown memory figure should not be quoted", d.Reason)
	}
	cfg := defaultConfig()
	cfg.Bands[Moderate].Enter = Rule{"psi_cpu": 20}
	d = New(cfg, 0).Step(t0, Reading{Load1: 0.2, CPUs: 1})
	if d.Reason != "moderate enter rule not held (psi_cpu unavailable)" {
		t.Errorf("reason %q", d.Reason)
	}
}

func TestExpireWithoutSample(t *testing.T) {
	m := New(defaultConfig(), 0)
	feed(m, 0, 9, 0.1)
	until := t0.Add(5 * time.Minute)
	m.Force(t0.Add(10*time.Second), Heavy, until)
	if d := m.Expire(t0.Add(299 * time.Second)); !d.Forced || d.Changed || d.Gear != Heavy {
		t.Fatalf("Expire before the deadline = %+v, want still forced heavy", d)
	}
	d := m.Expire(t0.Add(300 * time.Second))
	if d.Forced || d.Gear != Heavy || d.Changed || !d.ForcedUntil.IsZero() {
		t.Fatalf("Expire at the deadline = %+v, want auto, resuming from heavy", d)
	}
	if d.Reason != "force expired at 03:05, resuming from heavy" {
		t.Errorf("reason = %q", d.Reason)
	}
	// The dwell clock restarted at the deadline: no step down before min_dwell.
	if d := feed(m, 301, 359, 0.1); d.Gear != Heavy {
		t.Fatalf("stepped down within min_dwell of the release: %+v", d)
	}
	if d := m.Step(at(360, 0.1)); d.Gear != Moderate || !d.Changed {
		t.Fatalf("at deadline + min_dwell = %+v, want moderate", d)
	}

	unpinned := New(defaultConfig(), 0)
	feed(unpinned, 0, 9, 0.1)
	if d := unpinned.Expire(t0.Add(10 * time.Second)); d.Changed || d.Forced || d.Gear != Light {
		t.Fatalf("Expire on an unforced machine = %+v, want nothing done", d)
	}
	untilAuto := New(defaultConfig(), 0)
	untilAuto.Force(t0, Moderate, time.Time{})
	if d := untilAuto.Expire(t0.Add(24 * time.Hour)); !d.Forced {
		t.Fatalf("Expire released a force without deadline: %+v", d)
	}
}

func TestResume(t *testing.T) {
	m := New(defaultConfig(), 0)
	d := m.Resume(t0, Heavy, "resumed")
	if d.Gear != Heavy || d.Changed || d.Forced || d.Transitions != 0 || !d.Since.Equal(t0) || d.Reason != "resumed" {
		t.Fatalf("Resume = %+v", d)
	}
	// Quiet load: heavy holds for min_dwell from the resume, then one step.
	if d := feed(m, 1, 59, 0.1); d.Gear != Heavy {
		t.Fatalf("stepped down within min_dwell of the resume: %+v", d)
	}
	if d := m.Step(at(60, 0.1)); d.Gear != Moderate || !d.Changed || d.Transitions != 1 {
		t.Fatalf("at min_dwell = %+v, want heavy → moderate", d)
	}
	// Only a fresh machine resumes.
	if d := m.Resume(t0.Add(61*time.Second), Heavy, "again"); d.Gear != Moderate || d.Reason == "again" {
		t.Fatalf("Resume after a step = %+v, want it ignored", d)
	}
}

func TestTransitionCause(t *testing.T) {
	tests := []struct {
		name string
		run  func(m *Machine) Decision // the decision whose transition is checked
		from Gear
		to   Gear
		want string
	}{
		{"rules step up", func(m *Machine) Decision {
			feed(m, 0, 9, 0.1)
			return feed(m, 10, 12, 2)
		}, Light, Heavy, CauseAuto},
		{"operator forces", func(m *Machine) Decision {
			feed(m, 0, 9, 0.1)
			return m.Force(t0.Add(10*time.Second), Moderate, time.Time{})
		}, Light, Moderate, CauseForced},
		{"force deadline passes under load", func(m *Machine) Decision {
			feed(m, 0, 9, 0.1)
			m.Force(t0.Add(10*time.Second), Light, t0.Add(20*time.Second))
			feed(m, 11, 19, 2) // heavy's enter rule holds while pinned to light
			return m.Step(at(20, 2))
		}, Light, Heavy, CauseExpired},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := tc.run(New(defaultConfig(), 0))
			if !d.Changed || d.From != tc.from || d.Gear != tc.to || d.Cause != tc.want {
				t.Errorf("decision = %s→%s changed %v cause %q, want %s→%s cause %q", d.From, d.Gear, d.Changed, d.Cause, tc.from, tc.to, tc.want)
			}
		})
	}
}
