package replay

import (
	"cmp"
	"errors"
	"slices"
	"time"

	"github.com/gearshift/gearshift/controller/report"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/controller/trace"
)

// Tolerance is how far apart a recorded and a replayed transition of the
// same shift (same from and to gears) may be and still be one transition,
// moved; further apart, the recorded one is removed and the replayed one
// added.
const Tolerance = 5 * time.Minute

// Transition is one change of gear, recorded or replayed.
type Transition struct {
	Time     time.Time
	From, To state.Gear
	Reason   string
	Forced   bool // the operator forced it (or released a force)
}

// Change says what the candidate config did to a recorded transition.
type Change int

// Changes, in the order a summary lists them.
const (
	Same    Change = iota // at the same record
	Moved                 // earlier or later, within Tolerance
	Added                 // only in the replay
	Removed               // only in the recording
)

var changeNames = [...]string{Same: "same", Moved: "moved", Added: "added", Removed: "removed"}

// Changes lists every Change, in order.
var Changes = []Change{Same, Moved, Added, Removed}

func (c Change) String() string { return changeNames[c] }

// Pair is a recorded transition and the candidate's matching one: the
// recorded one is nil for an added transition, the replayed one for a
// removed transition.
type Pair struct {
	Change              Change
	Recorded, Candidate *Transition
}

// Shift is how much later the candidate's transition came than the
// recorded one (negative: earlier); 0 unless moved.
func (p Pair) Shift() time.Duration {
	if p.Recorded == nil || p.Candidate == nil {
		return 0
	}
	return p.Candidate.Time.Sub(p.Recorded.Time)
}

// Time is when the pair happened: the recorded transition's time, else
// the candidate's.
func (p Pair) Time() time.Time {
	if p.Recorded != nil {
		return p.Recorded.Time
	}
	return p.Candidate.Time
}

// Side is the course of the gears on one side of a comparison.
type Side struct {
	Transitions []Transition
	TimeIn      [len(state.All)]time.Duration // recorded time spent in each gear
}

// Period is a stretch of the history in one forced gear.
type Period struct {
	Start, End time.Time
	Gear       state.Gear
}

// Comparison is what happened over a history next to what a candidate
// config would have done.
type Comparison struct {
	From, To   time.Time // the first and last records
	Samples    int
	Unrecorded time.Duration // in gaps of the recording (see report.Gap)
	Recorded   Side
	Candidate  Side
	Pairs      []Pair   // every transition of either side, matched, in time order
	Forced     []Period // where the recorded gear was forced, the candidate's too

	// Chart holds at most Options.Chart records spread over the history,
	// each the heaviest of its stretch, and ChartCandidate the candidate's
	// heaviest gear over each; empty when no chart was asked for.
	Chart          []trace.Sample
	ChartCandidate []state.Gear

	// Sites are the sites' courses, recorded and replayed, and the
	// replayed site shifts, for a history with sites (siteReplay).
	Sites      []SiteCourse
	SiteShifts []SiteShift
}

// Count is the number of pairs with the change c.
func (c *Comparison) Count(ch Change) int {
	n := 0
	for _, p := range c.Pairs {
		if p.Change == ch {
			n++
		}
	}
	return n
}

// Options tune a comparison.
type Options struct {
	Chart int // the most records kept for a chart; 0: none
}

// Compare replays the records of src (the flight recorder's, with their
// recorded decisions) under cfg and the fast window fast, with a Runner,
// and matches the replayed transitions with the recorded ones. It reads
// src once, keeping only the transitions and the chart's records.
func Compare(src trace.Source, cfg state.Config, fast time.Duration, opts Options) (*Comparison, error) {
	c := &Comparison{}
	run := NewRunner(cfg, fast)
	th := thinner{max: opts.Chart}
	var (
		prev       trace.Sample
		cand       state.Gear
		forcedFrom *Period
		sites      siteReplay
	)
	if err := trace.Each(src, func(s trace.Sample) error {
		rec := s.Recorded
		if rec == nil {
			return errors.New("a record without its decision (not a history file)")
		}
		d := run.Step(s.Time, s.Reading, rec.Gear, rec.Forced)
		sites.step(s, d, run)
		if c.Samples == 0 {
			c.From = s.Time
		} else {
			dt := s.Time.Sub(prev.Time)
			if run.AfterGap() {
				c.Unrecorded += dt
			} else {
				c.Recorded.TimeIn[prev.Recorded.Gear] += dt
				c.Candidate.TimeIn[cand] += dt
			}
			if g := prev.Recorded.Gear; g != rec.Gear {
				c.Recorded.Transitions = append(c.Recorded.Transitions, Transition{Time: s.Time, From: g, To: rec.Gear, Reason: rec.Reason, Forced: rec.Forced || prev.Recorded.Forced})
			}
		}
		if d.Changed {
			c.Candidate.Transitions = append(c.Candidate.Transitions, Transition{Time: s.Time, From: d.From, To: d.Gear, Reason: d.Reason, Forced: d.Cause != state.CauseAuto})
		}
		if forcedFrom != nil && (!rec.Forced || rec.Gear != forcedFrom.Gear) {
			forcedFrom.End = s.Time
			c.Forced = append(c.Forced, *forcedFrom)
			forcedFrom = nil
		}
		if rec.Forced && forcedFrom == nil {
			forcedFrom = &Period{Start: s.Time, Gear: rec.Gear}
		}
		cand = d.Gear
		th.add(s, cand)
		c.Samples++
		c.To, prev = s.Time, s
		return nil
	}); err != nil {
		return nil, err
	}
	if c.Samples == 0 {
		return nil, report.ErrEmpty
	}
	if forcedFrom != nil {
		forcedFrom.End = c.To
		c.Forced = append(c.Forced, *forcedFrom)
	}
	c.Pairs = Match(c.Recorded.Transitions, c.Candidate.Transitions, Tolerance)
	c.Chart, c.ChartCandidate = th.points()
	c.Sites, c.SiteShifts = sites.result()
	return c, nil
}

// Match pairs each recorded transition with the replayed transition of the
// same shift closest to it in time, within tol, closest pairs first; the
// rest are removed (recorded only) or added (replayed only). Both lists are
// in time order; so are the pairs.
func Match(recorded, replayed []Transition, tol time.Duration) []Pair {
	type near struct {
		i, j int
		d    time.Duration
	}
	var cands []near
	lo := 0
	for i, r := range recorded {
		for lo < len(replayed) && replayed[lo].Time.Before(r.Time.Add(-tol)) {
			lo++
		}
		for j := lo; j < len(replayed) && !replayed[j].Time.After(r.Time.Add(tol)); j++ {
			if replayed[j].From == r.From && replayed[j].To == r.To {
				cands = append(cands, near{i, j, (replayed[j].Time.Sub(r.Time)).Abs()})
			}
		}
	}
	slices.SortStableFunc(cands, func(a, b near) int { return cmp.Compare(a.d, b.d) })
	recPair := make([]int, len(recorded))
	repUsed := make([]bool, len(replayed))
	for i := range recPair {
		recPair[i] = -1
	}
	for _, n := range cands {
		if recPair[n.i] < 0 && !repUsed[n.j] {
			recPair[n.i], repUsed[n.j] = n.j, true
		}
	}
	var pairs []Pair
	for i := range recorded {
		p := Pair{Change: Removed, Recorded: &recorded[i]}
		if j := recPair[i]; j >= 0 {
			p.Candidate, p.Change = &replayed[j], Moved
			if replayed[j].Time.Equal(recorded[i].Time) {
				p.Change = Same
			}
		}
		pairs = append(pairs, p)
	}
	for j := range replayed {
		if !repUsed[j] {
			pairs = append(pairs, Pair{Change: Added, Candidate: &replayed[j]})
		}
	}
	slices.SortStableFunc(pairs, func(a, b Pair) int { return a.Time().Compare(b.Time()) })
	return pairs
}
