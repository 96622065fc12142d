package replay

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gearshift/gearshift/controller/sensor"
	"github.com/gearshift/gearshift/controller/siteplan"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/controller/trace"
	"github.com/gearshift/gearshift/internal/timefmt"
)

// SiteCourse is one site over a replayed history with sites: its time in
// each gear and its transitions, as recorded and as replayed.
type SiteCourse struct {
	Site                            string
	Recorded, Candidate             [len(state.All)]time.Duration
	RecordedShifts, CandidateShifts int
}

// Above is the time the site spent above the lightest gear, recorded or
// replayed.
func (c SiteCourse) Above(replayed bool) time.Duration {
	t := c.Recorded
	if replayed {
		t = c.Candidate
	}
	var d time.Duration
	for _, g := range state.All[1:] {
		d += t[g]
	}
	return d
}

// SiteShift is one replayed change of a site's gear.
type SiteShift struct {
	Time     time.Time
	Site     string
	From, To state.Gear
	Reason   string
}

// siteReplay moves the sites of a history with sites as the daemon's
// allocator (siteplan.Plan) would have under the replayed machine, with
// the backend requests recorded at each record: it starts each site in
// its recorded gear, pins a site wherever the record shows it pinned on
// its own (a pin of every site is the machine's, which the Runner
// follows), and counts no time across a gap.
type siteReplay struct {
	courses []*SiteCourse
	cand    []siteplan.Site
	index   map[string]int
	prev    map[string]trace.Site // the last record's sites; nil when it had none
	last    time.Time
	climbed time.Time
	shifts  []SiteShift

	// The backend's requests a second (the recorded backend_rps) over
	// the last siteplan.Escalation, and their mean before the last climb:
	// the daemon counts them in the Varnish log (siteplan.Relieved).
	rates  []timedRate
	before float64
}

type timedRate struct {
	t    time.Time
	rate float64
}

// backendRate is the mean recorded backend_rps over the
// siteplan.Escalation up to t; false when none was recorded.
func (r *siteReplay) backendRate(t time.Time) (float64, bool) {
	i := 0
	for i < len(r.rates) && t.Sub(r.rates[i].t) >= siteplan.Escalation {
		i++
	}
	r.rates = r.rates[i:]
	if len(r.rates) == 0 {
		return 0, false
	}
	sum := 0.0
	for _, x := range r.rates {
		sum += x.rate
	}
	return sum / float64(len(r.rates)), true
}

// pressing tells whether the replayed machine's gear g is still called
// for by the backend's distress (state.Machine.PressingOnBackend).
func (r *Runner) pressing(g state.Gear) bool { return r.m != nil && r.m.PressingOnBackend(g) }

// step follows the record s, on which run decided d.
func (r *siteReplay) step(s trace.Sample, d state.Decision, run *Runner) {
	rec := s.Recorded
	if rec.Sites == nil {
		r.prev = nil
		return
	}
	if r.index == nil {
		r.index = map[string]int{}
	}
	var dt time.Duration
	if r.prev != nil && !run.AfterGap() {
		dt = s.Time.Sub(r.last)
	}
	cur := make(map[string]trace.Site, len(rec.Sites))
	for _, site := range rec.Sites {
		cur[site.Name] = site
	}
	for i, c := range r.courses {
		was, now := gearIn(r.prev, c.Site), gearIn(cur, c.Site)
		c.Recorded[was] += dt
		c.Candidate[r.cand[i].Gear] += dt
		if r.prev != nil && was != now {
			c.RecordedShifts++
		}
	}
	for _, site := range rec.Sites {
		if _, ok := r.index[site.Name]; !ok {
			r.index[site.Name] = len(r.courses)
			r.courses = append(r.courses, &SiteCourse{Site: site.Name})
			r.cand = append(r.cand, siteplan.Site{Name: site.Name, Gear: site.Gear})
		}
	}
	for i := range r.cand {
		site := cur[r.cand[i].Name]
		r.cand[i].Pinned = site.Forced && !rec.Forced
		r.cand[i].Pin, r.cand[i].PinReason = site.Gear, "forced by operator for this site"
	}
	total := rec.SiteFetchTotal()
	if v, ok := s.Reading.Values[sensor.BackendRPS]; ok {
		r.rates = append(r.rates, timedRate{s.Time, v})
	}
	rate, known := r.backendRate(s.Time)
	in := siteplan.Input{Machine: d, Spread: d.Forced,
		Pressing: s.Time.Sub(r.climbed) >= siteplan.Escalation && run.pressing(d.Gear) && !(known && siteplan.Relieved(r.before, rate))}
	if rec.SiteFetches && total > 0 {
		in.Shares = make(map[string]float64, len(cur))
		for name, site := range cur {
			in.Shares[name] = site.Fetches / total
		}
	}
	for _, m := range siteplan.Plan(r.cand, in) {
		i := r.index[m.Site]
		if from := r.cand[i].Gear; from != m.Gear {
			r.shifts = append(r.shifts, SiteShift{Time: s.Time, Site: m.Site, From: from, To: m.Gear, Reason: m.Reason})
			r.courses[i].CandidateShifts++
			r.cand[i].Gear = m.Gear
		}
		if m.Climb {
			r.climbed, r.before = s.Time, 0
			if known {
				r.before = rate
			}
		}
	}
	r.prev, r.last = cur, s.Time
}

// gearIn is the gear of site in a record's sites: the lightest when the
// record leaves it out.
func gearIn(sites map[string]trace.Site, site string) state.Gear {
	if s, ok := sites[site]; ok {
		return s.Gear
	}
	return state.Lightest
}

// result is every site's course, in the order the history named them,
// and the replayed shifts; nil for a history without sites.
func (r *siteReplay) result() ([]SiteCourse, []SiteShift) {
	if r.courses == nil {
		return nil, nil
	}
	out := make([]SiteCourse, 0, len(r.courses))
	for _, c := range r.courses {
		out = append(out, *c)
	}
	return out, r.shifts
}

// ReplaySites replays the sites of src's records under cfg and the fast
// window fast, as Compare does; nil for a history without sites.
func ReplaySites(src trace.Source, cfg state.Config, fast time.Duration) ([]SiteCourse, []SiteShift, error) {
	run := NewRunner(cfg, fast)
	var sites siteReplay
	err := trace.Each(src, func(s trace.Sample) error {
		if s.Recorded == nil {
			return fmt.Errorf("a record without its decision (not a history file)")
		}
		sites.step(s, run.Step(s.Time, s.Reading, s.Recorded.Gear, s.Recorded.Forced), run)
		return nil
	})
	courses, shifts := sites.result()
	return courses, shifts, err
}

// writeSitesText writes, for a comparison of a history with sites, each
// site's time above the lightest gear and transitions, recorded and
// replayed, and the replayed shifts (the first maxTextRows).
func writeSitesText(w io.Writer, courses []SiteCourse, shifts []SiteShift) {
	if courses == nil {
		return
	}
	fmt.Fprintf(w, "\nSites (%d), replayed by the daemon's allocator on the recorded backend requests:\n", len(courses))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  SITE\tRECORDED ABOVE %s\tTRANSITIONS\tREPLAYED ABOVE %s\tTRANSITIONS\n", state.Lightest, state.Lightest)
	var quiet []string
	for _, c := range courses {
		if c.Above(false) == 0 && c.Above(true) == 0 && c.RecordedShifts == 0 && c.CandidateShifts == 0 {
			quiet = append(quiet, c.Site)
			continue
		}
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t%d\n", c.Site, timefmt.Round(c.Above(false)), c.RecordedShifts, timefmt.Round(c.Above(true)), c.CandidateShifts)
	}
	tw.Flush()
	writeQuiet(w, quiet, "recorded and replayed")
	if len(shifts) == 0 {
		return
	}
	fmt.Fprintf(w, "Site shifts replayed (%d):\n", len(shifts))
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for i, sh := range shifts {
		if i == maxTextRows {
			tw.Flush()
			fmt.Fprintf(w, "  and %d more (--json lists them all).\n", len(shifts)-maxTextRows)
			return
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s → %s\t%s\n", sh.Time.UTC().Format(stamp), sh.Site, sh.From, sh.To, sh.Reason)
	}
	tw.Flush()
}

// maxQuietNames bounds the sites always in light the text names.
const maxQuietNames = 10

// writeQuiet names, on one line, the sites always in light on every side
// (ten at most, then how many more).
func writeQuiet(w io.Writer, quiet []string, sides string) {
	if len(quiet) == 0 {
		return
	}
	names := strings.Join(quiet[:min(len(quiet), maxQuietNames)], ", ")
	if len(quiet) > maxQuietNames {
		names += fmt.Sprintf(" and %d more", len(quiet)-maxQuietNames)
	}
	fmt.Fprintf(w, "  always in %s, %s: %s.\n", state.Lightest, sides, names)
}

// siteJSON is a site of `simulate --history --json` and `tune --json`.
type siteJSON struct {
	Site      string   `json:"site"`
	Recorded  sideJSON `json:"recorded"`
	Candidate sideJSON `json:"candidate"`
}

type siteShiftJSON struct {
	Time   string `json:"time"`
	Site   string `json:"site"`
	From   string `json:"from"`
	To     string `json:"to"`
	Reason string `json:"reason"`
}

// sitesJSON is the sites' part of `simulate --history --json`.
type sitesJSON struct {
	Sites  []siteJSON      `json:"sites"`
	Shifts []siteShiftJSON `json:"shifts"` // the replayed ones
}

func sitesToJSON(courses []SiteCourse, shifts []SiteShift) *sitesJSON {
	if courses == nil {
		return nil
	}
	out := &sitesJSON{Sites: []siteJSON{}, Shifts: []siteShiftJSON{}}
	for _, c := range courses {
		out.Sites = append(out.Sites, siteJSON{Site: c.Site, Recorded: sideOf(c.Recorded, c.RecordedShifts), Candidate: sideOf(c.Candidate, c.CandidateShifts)})
	}
	for _, sh := range shifts {
		out.Shifts = append(out.Shifts, siteShiftJSON{Time: rfc3339(sh.Time), Site: sh.Site, From: sh.From.String(), To: sh.To.String(), Reason: sh.Reason})
	}
	return out
}

func sideOf(in [len(state.All)]time.Duration, transitions int) sideJSON {
	out := sideJSON{Transitions: transitions, SecondsIn: map[string]float64{}}
	for _, g := range state.All {
		out.SecondsIn[g.String()] = in[g].Seconds()
	}
	return out
}
