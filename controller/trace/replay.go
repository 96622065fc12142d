package trace

import (
	"errors"
	"io"
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
	Samples          int
	Duration         time.Duration // from the first sample to the last
	CPUsMin, CPUsMax int           // CPU counts the load was divided by
	Transitions      []Transition
	TimeIn           [len(state.All)]time.Duration // time spent in each gear
	Peak             Extreme                       // highest load_per_cpu
	LowMem           *Extreme                      // lowest mem_available_pct; nil when the trace has none
}

// Extreme is the most extreme value of a signal and where it was seen.
type Extreme struct {
	Value  float64
	Offset time.Duration
}

// Source yields the samples of a trace in order, then io.EOF. *Reader is one.
type Source interface {
	Next() (Sample, error)
}

// Samples is a Source of samples already in memory.
func Samples(ss []Sample) Source { return &slice{ss} }

type slice struct{ ss []Sample }

// Each calls fn with every sample of src, in order, and stops at the first
// error of either.
func Each(src Source, fn func(Sample) error) error {
	for {
		s, err := src.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(s); err != nil {
			return err
		}
	}
}

func (s *slice) Next() (Sample, error) {
	if len(s.ss) == 0 {
		return Sample{}, io.EOF
	}
	x := s.ss[0]
	s.ss = s.ss[1:]
	return x, nil
}

// Replay feeds the samples of src, in order, to m, and stops at the first
// error of src. The gear decided at a sample holds until the next one, so
// the last sample adds no time.
func Replay(m *state.Machine, src Source) (Result, error) {
	var (
		res         Result
		first, prev Sample
		gear        state.State
	)
	err := Each(src, func(s Sample) error {
		if res.Samples == 0 {
			first = s
			res.CPUsMin, res.CPUsMax = s.Reading.CPUs, s.Reading.CPUs
		} else {
			res.TimeIn[gear] += s.Time.Sub(prev.Time)
		}
		res.Samples++
		off := s.Time.Sub(first.Time)
		res.Duration = off
		res.CPUsMin, res.CPUsMax = min(res.CPUsMin, s.Reading.CPUs), max(res.CPUsMax, s.Reading.CPUs)

		d := m.Step(s.Time, s.Reading)
		if d.Changed {
			res.Transitions = append(res.Transitions, Transition{Offset: off, Sample: s, From: d.From, To: d.State, Reason: d.Reason})
		}
		if v, _ := d.Signals.Get("load_per_cpu"); res.Samples == 1 || v > res.Peak.Value {
			res.Peak = Extreme{v, off}
		}
		if v, ok := d.Signals.Get("mem_available_pct"); ok && (res.LowMem == nil || v < res.LowMem.Value) {
			res.LowMem = &Extreme{v, off}
		}
		gear, prev = d.State, s
		return nil
	})
	return res, err
}
