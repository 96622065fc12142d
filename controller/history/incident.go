package history

import (
	"fmt"
	"time"

	"github.com/gearshift/gearshift/controller/sensor"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/internal/numfmt"
	"github.com/gearshift/gearshift/internal/timefmt"
)

// Incident is one climb above light: from the sample at which the gear
// left light to the one at which it came back.
type Incident struct {
	ID         string    // the start, in UTC: 20261201T031502Z
	Start, End time.Time // End is zero while the incident lasts
	Peak       state.Gear
	ToHeavy    time.Duration // from the start to heavy; 0 when heavy never came
	Heavy      bool          // the gear reached heavy

	// Requests are the client requests Varnish served during the
	// incident, Backend those that reached the backend, both summed from
	// the recorded rates (0 without a target with a name). WithoutShift
	// estimates what the backend would have had in light: Requests times
	// the share of backend requests in light before the incident (1 when
	// no light traffic was seen).
	Requests, Backend, WithoutShift float64

	// Worst is the most extreme value of each signal during the incident.
	Worst map[string]float64
}

// Duration is the incident's length, up to now while it lasts.
func (in *Incident) Duration(now time.Time) time.Duration {
	if !in.End.IsZero() {
		now = in.End
	}
	return now.Sub(in.Start)
}

// Saved is the backend requests the shift spared the backend, by the
// estimate WithoutShift; never below 0.
func (in *Incident) Saved() float64 { return max(0, in.WithoutShift-in.Backend) }

// Summary is one line about an incident, for a hook and the log:
// "incident 20261201T031502Z: 12m30s above light, heavy after 41s,
// 184k requests served, 9.1k reached the backend, about 121k spared".
func (in *Incident) Summary(now time.Time) string {
	s := fmt.Sprintf("incident %s: %s above light", in.ID, timefmt.Short(in.Duration(now).Round(time.Second)))
	if in.Heavy {
		s += ", heavy after " + timefmt.Short(in.ToHeavy.Round(time.Second))
	} else {
		s += ", " + in.Peak.String() + " at most"
	}
	if in.Requests > 0 {
		s += fmt.Sprintf(", %s requests served, %s reached the backend, about %s spared",
			numfmt.Count(in.Requests), numfmt.Count(in.Backend), numfmt.Count(in.Saved()))
	}
	return s
}

// GapMin is the shortest silence between two records that may be a gap
// in the recording (the daemon stopped, the machine was down, the clock
// stepped) rather than a slow poll. The Tracker counts no traffic over
// one; report and replay count no gear in one (report.Gap).
const GapMin = 2 * time.Minute

// Point is what the Tracker learns at each sample: the gear decided and
// the signals read (nil when the poll read none, a forced gear between
// polls).
type Point struct {
	Time    time.Time
	Gear    state.Gear
	Signals map[string]float64
}

// Tracker follows the gear and the traffic sample by sample and keeps the
// incident in course. The daemon feeds it live (for hooks); a report feeds
// it the recorded samples, so both tell the same incidents.
type Tracker struct {
	set  *state.Set
	cur  *Incident
	prev time.Time
	// Light traffic, for the share the backend would have had.
	lightClient, lightBackend float64
}

// NewTracker returns a tracker of the signals of set.
func NewTracker(set *state.Set) *Tracker { return &Tracker{set: set} }

// Current is the incident in course; nil in light.
func (t *Tracker) Current() *Incident { return t.cur }

// Add feeds one point and returns the incident that started at it or the
// one that ended at it (nil for neither).
func (t *Tracker) Add(p Point) (started, ended *Incident) {
	dt := 0.0
	if step := p.Time.Sub(t.prev); !t.prev.IsZero() && step > 0 && step <= GapMin {
		dt = step.Seconds()
	}
	t.prev = p.Time
	client, okc := p.Signals[state.ClientRPS]
	backend, okb := p.Signals[sensor.BackendRPS]
	traffic := okc && okb && dt > 0

	if t.cur == nil && p.Gear > state.Lightest {
		t.cur = &Incident{ID: p.Time.UTC().Format("20060102T150405Z"), Start: p.Time, Worst: map[string]float64{}}
		started = t.cur
	}
	in := t.cur
	if in == nil {
		if traffic {
			t.lightClient += client * dt
			t.lightBackend += backend * dt
		}
		return nil, nil
	}
	if p.Gear > in.Peak {
		in.Peak = p.Gear
	}
	if p.Gear == state.Heaviest && !in.Heavy {
		in.Heavy, in.ToHeavy = true, p.Time.Sub(in.Start)
	}
	for _, sig := range t.set.All() {
		if v, ok := p.Signals[sig.Name]; ok {
			if w, seen := in.Worst[sig.Name]; !seen || sig.Worse(v, w) {
				in.Worst[sig.Name] = v
			}
		}
	}
	if traffic && started == nil {
		share := 1.0
		if t.lightClient > 0 {
			share = min(1, t.lightBackend/t.lightClient)
		}
		in.Requests += client * dt
		in.Backend += backend * dt
		in.WithoutShift += client * dt * share
	}
	if p.Gear == state.Lightest {
		in.End = p.Time
		t.cur = nil
		return nil, in
	}
	return started, nil
}
