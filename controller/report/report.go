// Package report tells what gearshift did over a period of its history:
// the time in each gear, every transition, each incident and what the
// shift spared the backend, as text, JSON and a chart, for
// `gearshift report`, a postmortem and the status page.
package report

import (
	"errors"
	"maps"
	"time"

	"github.com/gearshift/gearshift/controller/history"
	"github.com/gearshift/gearshift/controller/sensor"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/controller/trace"
)

// ErrEmpty is the error of a report of no records.
var ErrEmpty = errors.New("no records in the period")

// Report is what happened over a period of history.
type Report struct {
	Source   string    // where the records came from (the history directory), for the heading
	From, To time.Time // the first record and the last
	Samples  int

	// TimeIn is the time spent in each gear: the gear of a record holds
	// until the next one, except across a gap in the recording (the
	// daemon was stopped), which counts in Unrecorded instead.
	TimeIn     [len(state.All)]time.Duration
	Unrecorded time.Duration
	Forced     time.Duration // of the recorded time, how long the gear was forced

	Transitions []Transition
	Incidents   []Incident

	// Traffic tells whether Varnish's client and backend request rates
	// were recorded; Requests and Backend are their sums over the period.
	Traffic           bool
	Requests, Backend float64

	// Sites is each site's course, in the order the history named them,
	// for a history with sites (trace.SiteColumns); nil without.
	Sites []SiteTime

	set *state.Set
}

// Transition is one change of the recorded gear.
type Transition struct {
	Time     time.Time
	From, To state.Gear
	Reason   string
	Forced   bool
	SwitchMS *float64 // how long the switch took; nil when not recorded
}

// Incident is a climb above light (see history.Incident) as the period
// shows it.
type Incident struct {
	history.Incident
	// StartedBefore: the period opens above light, so the incident began
	// before its first record, and Start is that record's time.
	StartedBefore bool
	// Ongoing: the period ends above light; End is zero.
	Ongoing bool
	// Interrupted: the recording stopped above light (a gap: the daemon
	// or the machine was down); End is the last record before the gap.
	Interrupted bool
	// Last is the incident's last record: End, or the last record of the
	// period while it is ongoing.
	Last time.Time
	// Sites are the sites that left light in the incident, in the order
	// they did; nil in a history without sites.
	Sites []SiteSurge
}

// Duration is the incident's length up to its last record.
func (in *Incident) Duration() time.Duration { return in.Incident.Duration(in.Last) }

// Above is the total time spent above light in the incidents.
func (r *Report) Above() time.Duration {
	var d time.Duration
	for i := range r.Incidents {
		d += r.Incidents[i].Duration()
	}
	return d
}

// Saved sums what the incidents spared the backend (history.Incident.Saved).
func (r *Report) Saved() float64 {
	var v float64
	for _, in := range r.Incidents {
		v += in.Saved()
	}
	return v
}

// Signals is the signal set the report reads records with.
func (r *Report) Signals() *state.Set { return r.set }

// GapMin is the shortest silence between two records that counts as a gap
// in the recording rather than a slow poll.
const GapMin = history.GapMin

// Gap tells whether dt between two records is a gap in the recording:
// longer than GapMin and ten polls (minStep, the shortest step seen so
// far). Replays (internal/offline/replay) count gaps by the same rule.
func Gap(dt, minStep time.Duration) bool { return dt > max(GapMin, 10*minStep) }

// builtin is the set of a nil set: the machine's own signal.
var builtin = state.MustSet(state.Builtin)

// Builder builds a Report record by record, for periods too long to hold
// in memory. Records must come in time order; one not after the previous
// is left out.
type Builder struct {
	r       Report
	tracker *history.Tracker
	prev    *trace.Sample
	minStep time.Duration
	first   *history.Incident // the incident open at the first record
	sites   siteBuilder
}

// NewBuilder returns a builder reading records with the signals of set.
func NewBuilder(set *state.Set) *Builder {
	if set == nil {
		set = builtin
	}
	return &Builder{r: Report{set: set}, tracker: history.NewTracker(set)}
}

// Add adds one record, which must carry its Recorded decision.
func (b *Builder) Add(s trace.Sample) error {
	if s.Recorded == nil {
		return errors.New("a record without its decision (not a history file)")
	}
	r := &b.r
	prev := b.prev
	if prev != nil && !s.Time.After(prev.Time) {
		return nil
	}
	if prev == nil {
		r.From = s.Time
	} else {
		dt := s.Time.Sub(prev.Time)
		if b.minStep == 0 || dt < b.minStep {
			b.minStep = dt
		}
		if Gap(dt, b.minStep) {
			r.Unrecorded += dt
			if cur := b.tracker.Current(); cur != nil {
				b.end(cur, prev.Time, false, true)
				b.tracker = history.NewTracker(r.set)
			}
		} else {
			r.TimeIn[prev.Recorded.Gear] += dt
			b.sites.interval(dt)
			if prev.Recorded.Forced {
				r.Forced += dt
			}
			// A rate is measured over the poll that ends at its record.
			client, okc := s.Reading.Values[state.ClientRPS]
			backend, okb := s.Reading.Values[sensor.BackendRPS]
			if okc && okb {
				r.Traffic = true
				r.Requests += client * dt.Seconds()
				r.Backend += backend * dt.Seconds()
			}
		}
		if g := prev.Recorded.Gear; g != s.Recorded.Gear {
			r.Transitions = append(r.Transitions, Transition{
				Time: s.Time, From: g, To: s.Recorded.Gear,
				Reason: s.Recorded.Reason, Forced: s.Recorded.Forced, SwitchMS: s.Recorded.SwitchMS,
			})
		}
	}
	r.Samples++
	r.To = s.Time

	started, ended := b.tracker.Add(history.Point{Time: s.Time, Gear: s.Recorded.Gear, Signals: Values(r.set, s.Reading)})
	if started != nil && r.Samples == 1 {
		b.first = started
	}
	incident := ""
	if cur := b.tracker.Current(); cur != nil {
		incident = cur.ID
	}
	b.sites.add(s.Time, s.Recorded, incident)
	if ended != nil {
		b.end(ended, ended.End, false, false)
	}
	b.prev = &s
	return nil
}

// end records in, which ended at last.
func (b *Builder) end(in *history.Incident, last time.Time, ongoing, interrupted bool) {
	b.r.Incidents = append(b.r.Incidents, b.incident(in, last, ongoing, interrupted))
}

// incident is in as the report tells it, with its last record.
func (b *Builder) incident(in *history.Incident, last time.Time, ongoing, interrupted bool) Incident {
	out := Incident{Incident: *in, StartedBefore: in == b.first, Ongoing: ongoing, Interrupted: interrupted, Last: last}
	out.Worst = maps.Clone(in.Worst)
	if b.sites.index != nil {
		out.Sites = b.sites.of(in.ID)
	}
	if interrupted {
		out.End = last
	}
	return out
}

// Report returns the report of the records added; ErrEmpty when there
// were none. An incident still in course is reported as ongoing.
func (b *Builder) Report() (*Report, error) {
	if b.r.Samples == 0 {
		return nil, ErrEmpty
	}
	r := b.r
	r.Incidents = append([]Incident(nil), b.r.Incidents...)
	r.Transitions = append([]Transition(nil), b.r.Transitions...)
	for _, st := range b.sites.sites {
		r.Sites = append(r.Sites, *st)
	}
	if cur := b.tracker.Current(); cur != nil {
		r.Incidents = append(r.Incidents, b.incident(cur, r.To, true, false))
	}
	return &r, nil
}

// New returns the report of samples, records of the flight recorder in
// time order, read with the signals of set.
func New(samples []trace.Sample, set *state.Set) (*Report, error) {
	b := NewBuilder(set)
	for _, s := range samples {
		if err := b.Add(s); err != nil {
			return nil, err
		}
	}
	return b.Report()
}

// Values are the signals of a record: its raw figures and those derived
// from them. load_per_cpu is derived from load1 alone (load1 / CPUs): the
// record does not say what the daemon's fast average of the run queue was,
// so during a sudden climb it can be lower than what the daemon decided on.
func Values(set *state.Set, r state.Reading) map[string]float64 {
	out := maps.Clone(r.Values)
	if out == nil {
		out = map[string]float64{}
	}
	in := state.Input{Reading: r, Load: r.Load1}
	for _, sig := range set.All() {
		if sig.Raw() {
			continue
		}
		if v, ok := sig.Value(in); ok {
			out[sig.Name] = v
		}
	}
	return out
}
