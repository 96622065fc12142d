package report

import (
	"io"
	"math"
	"time"

	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/internal/jsonfmt"
)

// reportJSON is the shape of `gearshift report --json`: snake_case names,
// times in RFC 3339 (UTC), durations in seconds. Request counts are null
// when Varnish's request rates were not recorded.
type reportJSON struct {
	From              string             `json:"from"`
	To                string             `json:"to"`
	Samples           int                `json:"samples"`
	SecondsIn         map[string]float64 `json:"seconds_in"`
	SecondsRecorded   float64            `json:"seconds_recorded"`
	SecondsUnrecorded float64            `json:"seconds_unrecorded"`
	SecondsForced     float64            `json:"seconds_forced"`
	Transitions       []transitionJSON   `json:"transitions"`
	Incidents         []incidentJSON     `json:"incidents"`
	Totals            totalsJSON         `json:"totals"`
	Sites             []siteTimeJSON     `json:"sites,omitempty"` // with sites only
}

type siteTimeJSON struct {
	Site          string             `json:"site"`
	SecondsIn     map[string]float64 `json:"seconds_in"`
	SecondsForced float64            `json:"seconds_forced"`
	Transitions   int                `json:"transitions"`
}

type siteSurgeJSON struct {
	Site         string   `json:"site"`
	Left         string   `json:"left_light"`
	Peak         string   `json:"peak"`
	SecondsAbove float64  `json:"seconds_above_light"`
	BackendShare *float64 `json:"backend_share"` // null when not known
}

type transitionJSON struct {
	Time     string   `json:"time"`
	From     string   `json:"from"`
	To       string   `json:"to"`
	Reason   string   `json:"reason"`
	Forced   bool     `json:"forced"`
	SwitchMS *float64 `json:"switch_ms"`
}

type incidentJSON struct {
	ID             string             `json:"id"`
	Start          string             `json:"start"`
	End            *string            `json:"end"` // null while ongoing
	StartedBefore  bool               `json:"started_before"`
	Ongoing        bool               `json:"ongoing"`
	Interrupted    bool               `json:"interrupted"`
	Seconds        float64            `json:"seconds"`
	Peak           string             `json:"peak"`
	SecondsToHeavy *float64           `json:"seconds_to_heavy"` // null when heavy never came
	PeakSignals    map[string]float64 `json:"peak_signals"`
	Requests       *float64           `json:"requests"`
	BackendReqs    *float64           `json:"backend_requests"`
	WithoutShift   *float64           `json:"backend_without_shift"`
	Saved          *float64           `json:"backend_saved"`
	Sites          *[]siteSurgeJSON   `json:"sites,omitempty"` // with sites only
}

type totalsJSON struct {
	Transitions      int      `json:"transitions"`
	Incidents        int      `json:"incidents"`
	SecondsAbove     float64  `json:"seconds_above_light"`
	Requests         *float64 `json:"requests"`
	BackendRequests  *float64 `json:"backend_requests"`
	BackendSaved     *float64 `json:"backend_saved"`
	IncidentRequests *float64 `json:"incident_requests"`
}

// WriteJSON writes the report as one JSON object (see reportJSON for its
// fields, which are a contract).
func (r *Report) WriteJSON(w io.Writer) error {
	out := reportJSON{
		From: rfc3339(r.From), To: rfc3339(r.To), Samples: r.Samples,
		SecondsIn:         map[string]float64{},
		SecondsRecorded:   seconds(r.To.Sub(r.From) - r.Unrecorded),
		SecondsUnrecorded: seconds(r.Unrecorded),
		SecondsForced:     seconds(r.Forced),
		Transitions:       []transitionJSON{},
		Incidents:         []incidentJSON{},
	}
	for _, st := range state.All {
		out.SecondsIn[st.String()] = seconds(r.TimeIn[st])
	}
	for _, t := range r.Transitions {
		out.Transitions = append(out.Transitions, transitionJSON{
			Time: rfc3339(t.Time), From: t.From.String(), To: t.To.String(), Reason: t.Reason, Forced: t.Forced, SwitchMS: t.SwitchMS,
		})
	}
	var incidentRequests float64
	for _, in := range r.Incidents {
		j := incidentJSON{
			ID: in.ID, Start: rfc3339(in.Start), StartedBefore: in.StartedBefore, Ongoing: in.Ongoing, Interrupted: in.Interrupted,
			Seconds: seconds(in.Duration()), Peak: in.Peak.String(), PeakSignals: in.Worst,
		}
		if j.PeakSignals == nil {
			j.PeakSignals = map[string]float64{}
		}
		if !in.End.IsZero() {
			end := rfc3339(in.End)
			j.End = &end
		}
		if in.Heavy {
			j.SecondsToHeavy = ptr(seconds(in.ToHeavy))
		}
		if r.Traffic {
			j.Requests, j.BackendReqs = ptr(round(in.Requests)), ptr(round(in.Backend))
			j.WithoutShift, j.Saved = ptr(round(in.WithoutShift)), ptr(round(in.Saved()))
		}
		if r.Sites != nil {
			surges := []siteSurgeJSON{}
			for _, sg := range in.Sites {
				surges = append(surges, siteSurgeJSON{Site: sg.Site, Left: rfc3339(sg.Left), Peak: sg.Peak.String(),
					SecondsAbove: seconds(sg.Above), BackendShare: share(sg.Share)})
			}
			j.Sites = &surges
		}
		incidentRequests += in.Requests
		out.Incidents = append(out.Incidents, j)
	}
	out.Totals = totalsJSON{Transitions: len(r.Transitions), Incidents: len(r.Incidents), SecondsAbove: seconds(r.Above())}
	if r.Traffic {
		out.Totals.Requests, out.Totals.BackendRequests = ptr(round(r.Requests)), ptr(round(r.Backend))
		out.Totals.BackendSaved, out.Totals.IncidentRequests = ptr(round(r.Saved())), ptr(round(incidentRequests))
	}
	for _, st := range r.Sites {
		j := siteTimeJSON{Site: st.Site, SecondsIn: map[string]float64{}, SecondsForced: seconds(st.Forced), Transitions: st.Transitions}
		for _, g := range state.All {
			j.SecondsIn[g.String()] = seconds(st.TimeIn[g])
		}
		out.Sites = append(out.Sites, j)
	}
	return jsonfmt.Write(w, out)
}

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// seconds is d in seconds, to the millisecond.
func seconds(d time.Duration) float64 { return d.Round(time.Millisecond).Seconds() }

// round is a number of requests, whole: they are sums of rates over time.
func round(v float64) float64 { return math.Round(v) }

func ptr[T any](v T) *T { return &v }

// share is a share (0–1) to three places; nil stays nil.
func share(v *float64) *float64 {
	if v == nil {
		return nil
	}
	return ptr(math.Round(*v*1000) / 1000)
}
