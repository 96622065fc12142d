package trace

import (
	"time"

	"github.com/gearshift/gearshift/controller/state"
)

// Transition is one change of gear during a replay.
type Transition struct {
	Offset   time.Duration // since the first sample
	Sample   Sample
	From, To state.State
	Reason   string
}

// Result is the outcome of a replay.
type Result struct {
	Samples     int
	Duration    time.Duration // from the first sample to the last
	Transitions []Transition
	TimeIn      [len(state.All)]time.Duration // time spent in each gear
	Peak        Extreme                       // highest load_per_cpu
	LowMem      *Extreme                      // lowest mem_available_pct; nil when the trace has none
}

// Extreme is the most extreme value of a signal and where it was seen.
type Extreme struct {
	Value  float64
	Offset time.Duration
}

// Replay feeds the samples, in order, to m. The gear decided at a sample
// holds until the next one, so the last sample adds no time.
func Replay(m *state.Machine, samples []Sample) Result {
	var res Result
	if len(samples) == 0 {
		return res
	}
	start := samples[0].Time
	res.Samples = len(samples)
	res.Duration = samples[len(samples)-1].Time.Sub(start)
	var prev state.State
	for i, s := range samples {
		off := s.Time.Sub(start)
		if i > 0 {
			res.TimeIn[prev] += s.Time.Sub(samples[i-1].Time)
		}
		d := m.StepReading(s.Time, s.Reading)
		if d.Changed {
			res.Transitions = append(res.Transitions, Transition{Offset: off, Sample: s, From: d.From, To: d.State, Reason: d.Reason})
		}
		if i == 0 || d.Signals.LoadPerCPU > res.Peak.Value {
			res.Peak = Extreme{d.Signals.LoadPerCPU, off}
		}
		if s.Reading.MemAvailablePct != nil && (res.LowMem == nil || d.Signals.MemAvailablePct < res.LowMem.Value) {
			res.LowMem = &Extreme{d.Signals.MemAvailablePct, off}
		}
		prev = d.State
	}
	return res
}
