// Package replay replays recorded samples through the state machine: a
// CSV trace for `gearshift simulate --trace` (ReplayTrace), and the flight
// recorder's history under another config, compared with what happened,
// for `gearshift simulate --history` and `gearshift tune`.
package replay

import (
	"time"

	"github.com/gearshift/gearshift/controller/report"
	"github.com/gearshift/gearshift/controller/state"
)

// Runner runs a state machine over recorded samples as the daemon would
// have run with its config: it starts in the recorded gear, it is forced
// wherever the recorded gear was forced (the operator would have forced it
// too), and it restarts in its own gear after a Gap.
type Runner struct {
	cfg    state.Config
	fast   time.Duration
	m      *state.Machine
	last   time.Time
	forced bool

	minStep time.Duration // the shortest step between records so far
	gapped  bool          // the last record came after a gap
}

// NewRunner returns a runner deciding with cfg and the fast window fast.
func NewRunner(cfg state.Config, fast time.Duration) *Runner {
	return &Runner{cfg: cfg, fast: fast}
}

// Step decides on the reading r recorded at t, where the daemon was in
// gear, forced or not. The decision is the one that changed the gear at t,
// if any.
func (r *Runner) Step(t time.Time, rd state.Reading, gear state.Gear, forced bool) state.Decision {
	r.begin(t, gear)
	var pinned state.Decision
	switch {
	case forced && (!r.forced || r.m.Current().Gear != gear):
		pinned = r.m.Force(t, gear, time.Time{})
	case !forced && r.forced:
		r.m.Auto(t)
	}
	r.forced = forced
	d := r.m.Step(t, rd)
	if pinned.Changed {
		pinned.Signals = d.Signals
		return pinned
	}
	return d
}

// Pass notes a record at t on which the machine would not have moved (see
// Idle): it is not stepped, but a gap before it is seen. Before the first
// Step it does nothing.
func (r *Runner) Pass(t time.Time) {
	if r.m != nil {
		r.begin(t, state.Lightest)
	}
}

// Idle tells whether the machine is in light in auto mode: then a record
// on which no rule of any gear holds, after one on which no enter rule
// held, changes nothing in it and can be passed.
func (r *Runner) Idle() bool {
	return r.m != nil && !r.forced && r.m.Current().Gear == state.Lightest
}

// AfterGap tells whether the last record came after a gap in the
// recording: the time since the one before counts in no gear.
func (r *Runner) AfterGap() bool { return r.gapped }

// Gear is the gear the machine is in; light before the first record.
func (r *Runner) Gear() state.Gear {
	if r.m == nil {
		return state.Lightest
	}
	return r.m.Current().Gear
}

// begin starts the machine at the first record, in the recorded gear, and
// again after a gap, in its own.
func (r *Runner) begin(t time.Time, gear state.Gear) {
	r.gapped = false
	if r.m == nil {
		r.m = state.New(r.cfg, r.fast)
		r.m.Resume(t, gear, "starting in the recorded gear")
		r.last = t
		return
	}
	dt := t.Sub(r.last)
	if r.minStep == 0 || dt < r.minStep {
		r.minStep = dt
	}
	// A gap (report.Gap: the daemon stopped, the machine was down) counts
	// in no gear, and the machine restarts after it in the gear it was
	// in, as the daemon resumes the gear Varnish runs.
	if report.Gap(dt, r.minStep) {
		r.gapped = true
		cur := r.m.Current().Gear
		r.m = state.New(r.cfg, r.fast)
		r.m.Resume(t, cur, "resuming after a gap in the history")
		r.forced = false
	}
	r.last = t
}
