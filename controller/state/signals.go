package state

import (
	"math"
	"time"

	"github.com/gearshift/gearshift/controller/sensor"
)

// Reading is the raw figures one decision is derived from. Step builds it
// from a sensor.Sample; StepReading takes it directly, for callers (such as
// simulate) whose inputs a Sample cannot express: a fractional run queue, or
// a memory figure that is unknown.
type Reading struct {
	Time            time.Time
	Load1           float64
	RunQueue        float64  // tasks running or blocked, fed to the fast EWMA
	CPUs            int      // <= 0 counts as 1
	MemAvailablePct *float64 // nil: unknown
	PSICPU          *float64 // cpu "some avg10"; nil: no PSI
	PSIMem          *float64 // memory "some avg10"; nil: no PSI
}

// ReadingOf returns the reading of a sensor sample.
func ReadingOf(s sensor.Sample) Reading {
	r := Reading{
		Time:     s.Time,
		Load1:    s.Load1,
		RunQueue: float64(s.Runnable),
		CPUs:     s.CPUs,
	}
	if s.MemTotal > 0 {
		pct := 100 * float64(s.MemAvailable) / float64(s.MemTotal)
		r.MemAvailablePct = &pct
	}
	if s.PSI != nil {
		c, m := s.PSI.CPUSome, s.PSI.MemorySome
		r.PSICPU, r.PSIMem = &c, &m
	}
	return r
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

// derive turns a reading into decision signals (SPEC section 3), feeding the
// fast EWMA on the way: load_per_cpu = max(Load1, EWMA(run queue)) / CPUs.
// An unknown memory figure shows as 100% available and no memory condition
// holds on it.
func derive(now time.Time, r Reading, fast *EWMA) Signals {
	cpus := r.CPUs
	if cpus <= 0 {
		cpus = 1
	}
	load := r.Load1
	if fast.Window > 0 {
		load = math.Max(load, fast.Update(now, r.RunQueue))
	} else {
		fast.Reset()
	}
	sig := Signals{
		Time:            r.Time,
		LoadPerCPU:      load / float64(cpus),
		MemAvailablePct: 100,
		PSICPU:          copyF(r.PSICPU),
		PSIMem:          copyF(r.PSIMem),
	}
	if sig.Time.IsZero() {
		sig.Time = now
	}
	if r.MemAvailablePct != nil {
		sig.MemAvailablePct = *r.MemAvailablePct
	} else {
		sig.memUnknown = true
	}
	return sig
}

func copyF(p *float64) *float64 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
