package state

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// randomTrace is a run of irregularly spaced readings: a load that wanders
// around a level which now and then jumps (a surge, a lull), free memory that
// wanders and sometimes drops, PSI that comes and goes.
func randomTrace(rng *rand.Rand, n int) []tick {
	levels := []float64{0.1, 0.4, 0.6, 0.8, 1.2, 1.6, 2.5}
	var (
		ts       = make([]tick, 0, n)
		at       time.Duration
		level    = levels[rng.IntN(len(levels))]
		perCPU   = level
		memLevel = 50.0
		mem      = memLevel
		psi      = 5.0
		cpus     = 1 + rng.IntN(8)
		h        = &host{cpus: cpus}
	)
	for range n {
		at += time.Duration(200+rng.IntN(9800)) * time.Millisecond
		if rng.IntN(60) == 0 {
			level = levels[rng.IntN(len(levels))]
		}
		if rng.IntN(150) == 0 {
			memLevel = []float64{5, 12, 18, 22, 50, 70}[rng.IntN(6)]
		}
		perCPU = math.Max(0, perCPU+0.3*(level-perCPU)+0.08*rng.NormFloat64())
		mem = math.Min(95, math.Max(1, mem+0.3*(memLevel-mem)+rng.NormFloat64()))
		psi = math.Max(0, psi+0.2*(8*perCPU-psi)+2*rng.NormFloat64())
		r := h.at(at, perCPU*float64(cpus), f(mem))
		if rng.IntN(10) > 0 {
			r.Values["psi_cpu"], r.Values["psi_mem"] = psi, psi/3
		}
		ts = append(ts, tick{at, r})
	}
	return ts
}

func randomConfig(rng *rand.Rand) (Config, time.Duration) {
	cfg := defaultConfig()
	cfg.Bands[Moderate].Enter["psi_cpu"], cfg.Bands[Moderate].Stay["psi_cpu"] = 20, 12
	cfg.Bands[Heavy].Enter["psi_mem"], cfg.Bands[Heavy].Stay["psi_mem"] = 10, 5
	cfg.UpConfirm = 1 + rng.IntN(5)
	cfg.DownWindow = time.Duration(rng.IntN(300)) * time.Second
	cfg.MinDwell = time.Duration(rng.IntN(180)) * time.Second
	return cfg, []time.Duration{0, 5 * time.Second, defaultFastWindow, 30 * time.Second}[rng.IntN(4)]
}

// TestProperties replays random traces, with the operator forcing and
// releasing now and then, and checks the rules of docs/signals.md#the-decision
// on every decision the machine took on its own.
func TestProperties(t *testing.T) {
	const traces = 200
	var totalDowns, totalTransitions int
	for seed := range uint64(traces) {
		rng := rand.New(rand.NewPCG(seed, 4))
		cfg, fast := randomConfig(rng)
		m := New(cfg, fast)
		var (
			seen       []Decision // decisions of Step, in order
			lastChange time.Time  // last transition, or release of a force
			lastDown   time.Time
			downs      int
		)
		for i, tk := range randomTrace(rng, 1500) {
			now := t0.Add(tk.at)
			if rng.IntN(400) == 0 { // the operator steps in
				if m.Current().Forced {
					m.Auto(now)
					lastChange = now
				} else {
					var until time.Time
					if rng.IntN(2) == 0 {
						until = now.Add(time.Duration(rng.IntN(600)) * time.Second)
					}
					if d := m.Force(now, All[rng.IntN(3)], until); d.Changed {
						lastChange = now
					}
				}
				continue
			}
			wasForced := m.Current().Forced
			d := m.Step(now, tk.r)
			seen = append(seen, d)
			if wasForced && !d.Forced {
				lastChange = now // the force expired: the dwell clock restarts
			}
			if d.Forced {
				if d.Changed {
					t.Fatalf("seed %d sample %d: a forced state changed on its own: %+v", seed, i, d)
				}
				continue
			}
			if !d.Changed {
				continue
			}
			switch {
			case d.Gear < d.From:
				downs++
				if d.Gear != d.From-1 {
					t.Fatalf("seed %d sample %d: stepped down two states at once: %+v", seed, i, d)
				}
				for j := len(seen) - 1; j >= 0 && now.Sub(seen[j].Signals.Time) < cfg.DownWindow || j == len(seen)-1; j-- {
					if m.band(d.From).Stay.Holds(testSignals, seen[j].Signals) {
						t.Fatalf("seed %d sample %d: left %s at %s although its stay rule held at %s, within down_window %s: %+v",
							seed, i, d.From, now, seen[j].Signals.Time, cfg.DownWindow, d)
					}
				}
				if !lastDown.IsZero() && now.Sub(lastDown) < cfg.MinDwell {
					t.Fatalf("seed %d sample %d: stepped down twice within min_dwell %s (%s, %s)", seed, i, cfg.MinDwell, lastDown, now)
				}
				if now.Sub(lastChange) < cfg.MinDwell {
					t.Fatalf("seed %d sample %d: stepped down %s after the last transition, within min_dwell %s",
						seed, i, now.Sub(lastChange), cfg.MinDwell)
				}
				lastDown = now
			case d.Gear > d.From:
				confirm := max(cfg.UpConfirm, 1)
				if len(seen) < confirm {
					t.Fatalf("seed %d sample %d: went up after %d samples", seed, i, len(seen))
				}
				for _, p := range seen[len(seen)-confirm:] {
					if !m.band(d.Gear).Enter.Holds(testSignals, p.Signals) {
						t.Fatalf("seed %d sample %d: went up to %s without its enter rule holding for %d samples: %+v",
							seed, i, d.Gear, confirm, d)
					}
				}
			}
			lastChange = now
		}
		totalDowns += downs
		totalTransitions += m.Current().Transitions
	}
	t.Logf("%d traces: %d transitions, %d of them down", traces, totalTransitions, totalDowns)
	if totalDowns < traces {
		t.Errorf("only %d steps down in %d traces: the traces do not exercise the down rule", totalDowns, traces)
	}
}

// TestNoFlapAroundThresholds: a load oscillating across a state's enter and
// stay thresholds, with swings shorter than down_window, shifts up once and
// never back, whatever the period and the sampling jitter.
func TestNoFlapAroundThresholds(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for _, band := range []struct {
		name     string
		low, hi  float64
		settleIn Gear
	}{
		{"moderate", 0.45, 0.9, Moderate},
		{"heavy", 0.95, 1.8, Heavy},
	} {
		for half := 5 * time.Second; half < 120*time.Second; half += 7 * time.Second {
			cfg := defaultConfig()
			m := New(cfg, defaultFastWindow)
			var ds []Decision
			var at time.Duration
			for at < time.Hour {
				at += time.Duration(500+rng.IntN(1500)) * time.Millisecond
				v := band.low
				if (at/half)%2 == 1 {
					v = band.hi
				}
				v += 0.03 * rng.NormFloat64()
				ds = append(ds, m.Step(t0.Add(at), Reading{Load1: v * 2, RunQueue: v * 2, CPUs: 2}))
			}
			trs := transitions(ds)
			for i := 1; i < len(trs); i++ {
				if trs[i].to < trs[i].from {
					t.Errorf("%s, half period %s: stepped down: %v", band.name, half, trs)
					break
				}
			}
			if got := m.Current().Gear; got != band.settleIn {
				t.Errorf("%s, half period %s: ended in %s, want %s (%v)", band.name, half, got, band.settleIn, trs)
			}
			// Every shift up is a real rise, and there is at most one per band.
			if len(trs) > 2 {
				t.Errorf("%s, half period %s: %d transitions %v", band.name, half, len(trs), trs)
			}
		}
	}
}

// TestReaction: on a step from idle to 3 runnable tasks per CPU, the default
// config reaches heavy at least 3x sooner than Load1 alone (fast_window 0).
func TestReaction(t *testing.T) {
	timeToHeavy := func(fast time.Duration) time.Duration {
		m := New(defaultConfig(), fast)
		const cpus = 2
		h := &host{cpus: cpus}
		surge := 5 * time.Minute
		for at := time.Duration(0); at < 30*time.Minute; at += time.Second {
			runq := 0.0
			if at >= surge {
				runq = 3 * cpus
			}
			if d := m.Step(t0.Add(at), h.at(at, runq, f(70))); d.Gear == Heavy {
				return at - surge
			}
		}
		t.Fatalf("fast_window %s: never reached heavy", fast)
		return 0
	}
	fast, slow := timeToHeavy(defaultFastWindow), timeToHeavy(0)
	t.Logf("idle → 3 runnable per CPU: heavy after %s with fast_window 10s, %s with Load1 alone", fast, slow)
	if 3*fast > slow {
		t.Errorf("heavy after %s with the fast signal, %s without: want at least 3x sooner", fast, slow)
	}
}

// TestEWMA: the average depends on elapsed time, not on how many samples
// arrived in it.
func TestEWMA(t *testing.T) {
	want := 1 - math.Exp(-1) // a unit step after one window
	for _, spacing := range [][]time.Duration{
		{10 * time.Second},
		{5 * time.Second, 5 * time.Second},
		{time.Second, 2 * time.Second, 300 * time.Millisecond, 6700 * time.Millisecond},
	} {
		e := EWMA{Window: 10 * time.Second}
		e.Update(t0, 0)
		at := t0
		var got float64
		for _, dt := range spacing {
			at = at.Add(dt)
			got = e.Update(at, 1)
		}
		if math.Abs(got-want) > 1e-12 {
			t.Errorf("spacing %v: %v, want %v", spacing, got, want)
		}
	}
	e := EWMA{Window: 10 * time.Second}
	if got := e.Update(t0, 4); got != 4 {
		t.Errorf("first sample primes: %v", got)
	}
	if got := e.Update(t0, 100); got != 4 {
		t.Errorf("a sample at the same time is ignored: %v", got)
	}
	off := EWMA{}
	if got := off.Update(t0, 5); got != 0 {
		t.Errorf("window 0 is off: %v", got)
	}
}

func TestLoadPerCPU(t *testing.T) {
	tests := []struct {
		name string
		fast time.Duration
		r    Reading
		want float64
	}{
		{"load1 above the run queue", defaultFastWindow, Reading{Load1: 3, RunQueue: 1, CPUs: 2}, 1.5},
		{"run queue above load1", defaultFastWindow, Reading{Load1: 1, RunQueue: 6, CPUs: 2}, 3},
		{"fast_window 0: load1 alone", 0, Reading{Load1: 1, RunQueue: 6, CPUs: 2}, 0.5},
		{"cpus unknown counts as 1", 0, Reading{Load1: 1.2}, 1.2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := New(defaultConfig(), tc.fast).Step(t0, tc.r)
			if d.Signals.Values["load_per_cpu"] != tc.want {
				t.Errorf("load_per_cpu = %v, want %v", d.Signals.Values["load_per_cpu"], tc.want)
			}
		})
	}
}
