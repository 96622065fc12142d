package state

import (
	"math"
	"time"
)

// Reading is the raw figures one decision is derived from: the machine's
// input. The sensor builds it from what it reads; simulate from a trace row.
type Reading struct {
	Time     time.Time
	Load1    float64
	RunQueue float64 // tasks running or blocked, fed to the fast EWMA
	CPUs     int     // <= 0 counts as 1
	// Values holds the raw figure of each signal the reader has, by signal
	// name (mem_available_pct, psi_cpu, …); a missing one is unknown.
	Values map[string]float64
}

// EWMA is a time-based exponentially weighted moving average: a sample dt
// after the previous one weighs 1-exp(-dt/window), so irregular sample
// spacing does not change how fast the average follows its input. The zero
// value with a window set is ready to use; the first sample primes it.
type EWMA struct {
	Window time.Duration // <= 0: the average is off and Value reports 0
	value  float64
	last   time.Time
	primed bool
}

// Update feeds x observed at t and returns the new average. A sample not
// after the previous one leaves the average unchanged.
func (e *EWMA) Update(t time.Time, x float64) float64 {
	if e.Window <= 0 {
		e.Reset()
		return 0
	}
	if !e.primed {
		e.value, e.last, e.primed = x, t, true
		return e.value
	}
	dt := t.Sub(e.last)
	if dt <= 0 {
		return e.value
	}
	alpha := 1 - math.Exp(-float64(dt)/float64(e.Window))
	e.value += alpha * (x - e.value)
	e.last = t
	return e.value
}

// Value returns the current average.
func (e *EWMA) Value() float64 { return e.value }

// Reset forgets the history; the next Update primes the average again.
func (e *EWMA) Reset() { e.value, e.last, e.primed = 0, time.Time{}, false }

// derive turns a reading into decision signals (docs/signals.md#the-signals),
// feeding the fast EWMA on the way: load_per_cpu = max(Load1, EWMA(run queue)) / CPUs.
// Each signal of the set is read from the reading; one the reading lacks
// is left out, and no condition holds on it.
func derive(now time.Time, set *Set, r Reading, fast *EWMA) Signals {
	in := Input{Reading: r, Load: r.Load1}
	if fast.Window > 0 {
		in.Load = math.Max(in.Load, fast.Update(now, r.RunQueue))
	} else {
		fast.Reset()
	}
	sig := Signals{Time: r.Time, Values: map[string]float64{}}
	if sig.Time.IsZero() {
		sig.Time = now
	}
	for _, s := range set.All() {
		if v, ok := s.Value(in); ok {
			sig.Values[s.Name] = v
		}
	}
	return sig
}
