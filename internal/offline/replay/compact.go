package replay

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/report"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/controller/trace"
)

// History is a history held to be replayed many times. Per record it
// keeps only what the rules read (as the machine derived it), the recorded
// gear and mode, and whether the backend was in distress: weeks at one
// record a second fit in tens of megabytes.
type History struct {
	recs   []rec
	values []float64  // len(names) per record; NaN: unavailable
	names  []string   // the signals the rules read, in the order of the set
	set    *state.Set // names, each read from Reading.Values as it is

	Bounds   Bounds
	limits   []limit    // the signals of the set that mark distress, and their bounds
	Seen     []string   // the signals of the bounds recorded at least once
	Periods  []Distress // in time order
	From, To time.Time
}

type rec struct {
	t        int64 // Unix nanoseconds
	gear     state.Gear
	forced   bool
	distress uint16 // a bit per limit beyond its bound
}

// Distress is one distress period: from its first distress record to its
// last.
type Distress struct {
	Start, End time.Time
	Signals    []string // the signals beyond their bound in the period
}

// Samples is the number of records held.
func (h *History) Samples() int { return len(h.recs) }

// Load reads src, the records of the flight recorder, into a History for
// the rules of cfg, and finds the distress periods under bounds. Each
// record is decided on once under cfg with a Runner, as Compare replays,
// to derive the figures the rules read.
func Load(src trace.Source, cfg *config.Config, set *state.Set, bounds Bounds) (*History, error) {
	h := &History{Bounds: bounds}
	var sigs []state.Signal
	for _, sig := range set.All() {
		guarded := sig.Name == state.ClientRPS || sig.Distress != nil // what the traffic guard reads
		if ruled(cfg, sig.Name) || (guarded && cfg.Hysteresis.DownTrafficRatio > 0) {
			sig.Read = nil // what the machine derived, read as it is
			h.names = append(h.names, sig.Name)
			sigs = append(sigs, sig)
		}
	}
	var err error
	if h.set, err = state.NewSet(sigs); err != nil {
		return nil, err
	}

	limits := bounds.limits(set)
	if len(limits) > 16 {
		return nil, fmt.Errorf("%d signals mark distress, more than a record's 16 bits", len(limits))
	}
	h.limits = limits
	seen := make([]bool, len(limits))
	run := NewRunner(cfg.StateConfig(set), time.Duration(cfg.FastWindow))
	if err := trace.Each(src, func(s trace.Sample) error {
		if s.Recorded == nil {
			return errors.New("a record without its decision (not a history file)")
		}
		d := run.Step(s.Time, s.Reading, s.Recorded.Gear, s.Recorded.Forced)
		r := rec{t: s.Time.UnixNano(), gear: s.Recorded.Gear, forced: s.Recorded.Forced}
		for i, l := range limits {
			if v, ok := d.Signals.Get(l.name); ok {
				seen[i] = true
				if v > l.bound {
					r.distress |= 1 << i
				}
			}
		}
		for _, n := range h.names {
			v, ok := d.Signals.Get(n)
			if !ok {
				v = math.NaN()
			}
			h.values = append(h.values, v)
		}
		if len(h.recs) == 0 {
			h.From = s.Time
		}
		h.recs, h.To = append(h.recs, r), s.Time
		return nil
	}); err != nil {
		return nil, err
	}
	if len(h.recs) == 0 {
		return nil, report.ErrEmpty
	}
	for i, l := range limits {
		if seen[i] {
			h.Seen = append(h.Seen, l.name)
		}
	}
	h.Periods = h.distress()
	return h, nil
}

// ruled tells whether a rule of cfg names the signal.
func ruled(cfg *config.Config, name string) bool {
	for _, b := range cfg.States.Bands() {
		if b == nil {
			continue
		}
		if _, ok := b.Enter[name]; ok {
			return true
		}
		if _, ok := b.Stay[name]; ok {
			return true
		}
	}
	return false
}

// distress finds the distress periods of the records.
func (h *History) distress() []Distress {
	limits := h.limits
	var (
		out  []Distress
		cur  *Distress
		bits uint16
	)
	flush := func() {
		if cur != nil && cur.End.Sub(cur.Start) >= MinDistress {
			for i, l := range limits {
				if bits&(1<<i) != 0 {
					cur.Signals = append(cur.Signals, l.name)
				}
			}
			out = append(out, *cur)
		}
		cur, bits = nil, 0
	}
	for _, r := range h.recs {
		if r.distress == 0 {
			continue
		}
		t := time.Unix(0, r.t)
		if cur != nil && t.Sub(cur.End) > MergeGap {
			flush()
		}
		if cur == nil {
			cur = &Distress{Start: t}
		}
		cur.End, bits = t, bits|r.distress
	}
	flush()
	return out
}

// Outcome is how a set of thresholds did over a history.
type Outcome struct {
	// Delays holds, per distress period, the time from its start to the
	// first record in heavy (0: heavy already); -1 when heavy never came
	// before the period's end (or --within after its start, if later).
	Delays             []time.Duration
	OnTime, Late       int // periods heavy came to within --within, after
	Missed             int // periods heavy never came to
	Lateness           time.Duration
	Outside            [len(state.All)]time.Duration // time in each gear outside the distress periods
	Transitions        int
	TransitionsOutside int
	TimeIn             [len(state.All)]time.Duration
}

// outsideShare is the part of a gear's time outside distress that counts
// in cost: all of heavy's, a quarter of moderate's (else a gear that never
// comes back to light would look cheap), none of light's; 0 is none.
var outsideShare [len(state.All)]time.Duration = [...]time.Duration{state.Light: 0, state.Moderate: 4, state.Heavy: 1}

// cost weighs what the thresholds cost outside distress: each gear's time
// there by its share, and a minute per transition.
func (o Outcome) cost() time.Duration {
	c := time.Duration(o.TransitionsOutside) * time.Minute
	for g, div := range outsideShare {
		if div > 0 {
			c += o.Outside[g] / div
		}
	}
	return c
}

// better tells whether o does better than p on the objective: fewer
// periods without heavy on time, fewer missed, less late, then less cost.
func (o Outcome) better(p Outcome) bool {
	switch {
	case o.Late+o.Missed != p.Late+p.Missed:
		return o.Late+o.Missed < p.Late+p.Missed
	case o.Missed != p.Missed:
		return o.Missed < p.Missed
	case o.Lateness != p.Lateness:
		return o.Lateness < p.Lateness
	}
	return o.cost() < p.cost()
}

// cond is one threshold of a rule, on the column col of the values.
type cond struct {
	col   int
	sig   state.Signal
	limit float64
}

// Replay replays the history under the rules and hysteresis of sc (its
// signals are the history's own), with a Runner, and measures the outcome
// against the distress periods. A record on which no threshold holds,
// while the machine idles in light, is passed without a step: the machine
// would not move on it.
func (h *History) Replay(sc state.Config, within time.Duration) Outcome {
	sc.Signals = h.set
	var conds []cond
	for _, b := range sc.Bands {
		for _, r := range []state.Rule{b.Enter, b.Stay} {
			for name, limit := range r {
				if col := slices.Index(h.names, name); col >= 0 {
					sig, _ := h.set.Lookup(name)
					conds = append(conds, cond{col, sig, limit})
				}
			}
		}
	}
	k := len(h.names)
	down := Tail(sc)
	o := Outcome{Delays: slices.Repeat([]time.Duration{-1}, len(h.Periods))}
	run := NewRunner(sc, 0)
	vals := map[string]float64{}
	hot := true
	first := 0 // the first period whose window is not over
	var (
		prevT    time.Time
		prevGear state.Gear
	)
	for i, r := range h.recs {
		t := time.Unix(0, r.t)
		row := h.values[i*k : (i+1)*k]
		quiet := true
		for _, c := range conds {
			if v := row[c.col]; !math.IsNaN(v) && c.sig.Holds(v, c.limit) {
				quiet = false
				break
			}
		}
		gear := state.Lightest
		if run.Idle() && !hot && quiet && !r.forced {
			run.Pass(t)
		} else {
			clear(vals)
			for j, n := range h.names {
				if !math.IsNaN(row[j]) {
					vals[n] = row[j]
				}
			}
			d := run.Step(t, state.Reading{Time: t, CPUs: 1, Values: vals}, r.gear, r.forced)
			gear = d.Gear
			if d.Changed {
				o.Transitions++
				if !h.covered(t, within, down) {
					o.TransitionsOutside++
				}
			}
		}
		hot = !quiet
		if i > 0 && !run.AfterGap() {
			dt := t.Sub(prevT)
			o.TimeIn[prevGear] += dt
			if prevGear != state.Lightest && !h.covered(prevT, within, down) {
				o.Outside[prevGear] += dt
			}
		}
		for first < len(h.Periods) && t.After(h.window(first, within)) {
			first++
		}
		for p := first; gear == state.Heaviest && p < len(h.Periods) && !t.Before(h.Periods[p].Start); p++ {
			if o.Delays[p] < 0 && !t.After(h.window(p, within)) {
				o.Delays[p] = t.Sub(h.Periods[p].Start)
			}
		}
		prevT, prevGear = t, gear
	}
	for _, d := range o.Delays {
		switch {
		case d < 0:
			o.Missed++
		case d > within:
			o.Late++
			o.Lateness += d - within
		default:
			o.OnTime++
		}
	}
	return o
}

// window is the end of the time heavy may come in for period p: its end,
// or within after its start if that is later.
func (h *History) window(p int, within time.Duration) time.Time {
	d := h.Periods[p]
	if w := d.Start.Add(within); w.After(d.End) {
		return w
	}
	return d.End
}

// Tail is how long after a distress period the gear coming down counts
// with the period: heavy's down_window, then the longer of down_window
// and min_dwell for moderate.
func Tail(sc state.Config) time.Duration { return sc.DownWindow + max(sc.DownWindow, sc.MinDwell) }

// covered tells whether t is in or near a distress period: from within
// before its start to down (Tail) after its end.
func (h *History) covered(t time.Time, within, down time.Duration) bool {
	i := sort.Search(len(h.Periods), func(i int) bool { return !h.Periods[i].End.Add(down).Before(t) })
	return i < len(h.Periods) && !t.Before(h.Periods[i].Start.Add(-within))
}
