package replay

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/internal/jsonfmt"
	"github.com/gearshift/gearshift/internal/timefmt"
)

// stamp is how the text writes a time; every time is in UTC, as the
// history's days are.
const stamp = "2006-01-02 15:04:05"

// maxTextRows bounds the transitions the text lists; JSON has them all.
const maxTextRows = 100

// Heading is what the comparison says about where it came from.
type Heading struct {
	History    string        // the history directory
	Config     string        // the candidate config's path, or "embedded defaults"
	FastWindow time.Duration // the candidate's fast_window
	Machine    state.Config  // the candidate's rules and hysteresis
	Warnings   []string      // history lines skipped
}

// WriteText writes the comparison for people: the period, the changed
// transitions, and the time in each gear, recorded and replayed.
func (c *Comparison) WriteText(w io.Writer, h Heading) error {
	bw := bufio.NewWriter(w)
	c.writeText(bw, h)
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write comparison: %w", err)
	}
	return nil
}

func (c *Comparison) writeText(w io.Writer, h Heading) {
	fmt.Fprintf(w, "History %s, %s to %s UTC (%s): %d record%s.\n", h.History,
		c.From.UTC().Format(stamp), c.To.UTC().Format(stamp), timefmt.Round(c.To.Sub(c.From)), c.Samples, plural(c.Samples))
	fmt.Fprintf(w, "Replayed under %s: fast_window %s, up_confirm %d, down_window %s, min_dwell %s.\n",
		h.Config, timefmt.Round(h.FastWindow), h.Machine.UpConfirm, timefmt.Round(h.Machine.DownWindow), timefmt.Round(h.Machine.MinDwell))
	fmt.Fprintf(w, "The replay starts in the recorded gear and is forced where the recorded gear was.\n\n")

	var counts []string
	for _, ch := range Changes {
		counts = append(counts, fmt.Sprintf("%d %s", c.Count(ch), ch))
	}
	fmt.Fprintf(w, "Transitions: %s (a recorded and a replayed shift between the same gears within %s are one, moved).\n",
		strings.Join(counts, ", "), timefmt.Round(Tolerance))
	changed := 0
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, p := range c.Pairs {
		if p.Change == Same {
			continue
		}
		if changed++; changed > maxTextRows {
			continue
		}
		if changed == 1 {
			fmt.Fprintln(tw, "  CHANGE\tRECORDED\tREPLAYED\tSHIFT\tBY\tREASON")
		}
		t, reason, by := p.Recorded, "", ""
		if p.Candidate != nil {
			t, reason = p.Candidate, p.Candidate.Reason
		} else {
			reason = "recorded: " + p.Recorded.Reason
		}
		if p.Change == Moved {
			by = signed(p.Shift())
		}
		if t.Forced {
			reason = "forced: " + reason
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s → %s\t%s\t%s\n", p.Change, when(p.Recorded), when(p.Candidate), t.From, t.To, by, reason)
	}
	tw.Flush()
	if changed > maxTextRows {
		fmt.Fprintf(w, "  and %d more (--json lists them all).\n", changed-maxTextRows)
	}
	fmt.Fprintln(w)

	recorded := c.To.Sub(c.From) - c.Unrecorded
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "GEAR\tRECORDED\tSHARE\tREPLAYED\tSHARE\t")
	for _, st := range state.All {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", st, timefmt.Round(c.Recorded.TimeIn[st]), timefmt.Share(c.Recorded.TimeIn[st], recorded),
			timefmt.Round(c.Candidate.TimeIn[st]), timefmt.Share(c.Candidate.TimeIn[st], recorded))
	}
	fmt.Fprintf(tw, "transitions\t%d\t\t%d\t\t\n", len(c.Recorded.Transitions), len(c.Candidate.Transitions))
	tw.Flush()
	if c.Unrecorded > 0 {
		fmt.Fprintf(w, "%s not recorded (the daemon was not running) counts in no gear.\n", timefmt.Round(c.Unrecorded))
	}
	writeSitesText(w, c.Sites, c.SiteShifts)
	if len(c.Forced) > 0 {
		fmt.Fprintf(w, "\nForced by the operator (%d):\n", len(c.Forced))
		for _, p := range c.Forced {
			fmt.Fprintf(w, "  %s to %s (%s): %s\n", p.Start.UTC().Format(stamp), p.End.UTC().Format(stamp), timefmt.Round(p.End.Sub(p.Start)), p.Gear)
		}
	}
	for _, warn := range h.Warnings {
		fmt.Fprintf(w, "Skipped: %s\n", warn)
	}
}

// comparisonJSON is the shape of `gearshift simulate --history --json`:
// snake_case names, times in RFC 3339 (UTC), durations in seconds.
type comparisonJSON struct {
	History           string         `json:"history"`
	Config            string         `json:"config"`
	From              string         `json:"from"`
	To                string         `json:"to"`
	Samples           int            `json:"samples"`
	SecondsUnrecorded float64        `json:"seconds_unrecorded"`
	ToleranceS        float64        `json:"tolerance_s"`
	Changes           map[string]int `json:"changes"`
	Transitions       []pairJSON     `json:"transitions"`
	Recorded          sideJSON       `json:"recorded"`
	Candidate         sideJSON       `json:"candidate"`
	Forced            []periodJSON   `json:"forced"`
	Warnings          []string       `json:"warnings"`
	Sites             *sitesJSON     `json:"sites,omitempty"` // with sites only
}

type pairJSON struct {
	Change          string   `json:"change"`
	From            string   `json:"from"`
	To              string   `json:"to"`
	RecordedAt      *string  `json:"recorded_at"`  // null when added
	CandidateAt     *string  `json:"candidate_at"` // null when removed
	ShiftS          *float64 `json:"shift_s"`      // candidate minus recorded; null unless both
	RecordedReason  string   `json:"recorded_reason"`
	CandidateReason string   `json:"candidate_reason"`
	Forced          bool     `json:"forced"`
}

type sideJSON struct {
	Transitions int                `json:"transitions"`
	SecondsIn   map[string]float64 `json:"seconds_in"`
}

type periodJSON struct {
	Start   string  `json:"start"`
	End     string  `json:"end"`
	Seconds float64 `json:"seconds"`
	Gear    string  `json:"gear"`
}

// WriteJSON writes the comparison as one JSON object (see comparisonJSON
// for its fields, which are a contract).
func (c *Comparison) WriteJSON(w io.Writer, h Heading) error {
	out := comparisonJSON{
		History: h.History, Config: h.Config, From: rfc3339(c.From), To: rfc3339(c.To), Samples: c.Samples,
		SecondsUnrecorded: c.Unrecorded.Seconds(), ToleranceS: Tolerance.Seconds(),
		Changes: map[string]int{}, Transitions: []pairJSON{}, Forced: []periodJSON{}, Warnings: []string{},
		Recorded: side(c.Recorded), Candidate: side(c.Candidate), Sites: sitesToJSON(c.Sites, c.SiteShifts),
	}
	out.Warnings = append(out.Warnings, h.Warnings...)
	for _, ch := range Changes {
		out.Changes[ch.String()] = c.Count(ch)
	}
	for _, p := range c.Pairs {
		pj := pairJSON{Change: p.Change.String()}
		for _, t := range []*Transition{p.Recorded, p.Candidate} {
			if t != nil {
				pj.From, pj.To, pj.Forced = t.From.String(), t.To.String(), pj.Forced || t.Forced
			}
		}
		if t := p.Recorded; t != nil {
			pj.RecordedAt, pj.RecordedReason = ptr(rfc3339(t.Time)), t.Reason
		}
		if t := p.Candidate; t != nil {
			pj.CandidateAt, pj.CandidateReason = ptr(rfc3339(t.Time)), t.Reason
		}
		if p.Recorded != nil && p.Candidate != nil {
			pj.ShiftS = ptr(p.Shift().Seconds())
		}
		out.Transitions = append(out.Transitions, pj)
	}
	for _, p := range c.Forced {
		out.Forced = append(out.Forced, periodJSON{Start: rfc3339(p.Start), End: rfc3339(p.End), Seconds: p.End.Sub(p.Start).Seconds(), Gear: p.Gear.String()})
	}
	return jsonfmt.Write(w, out)
}

func side(s Side) sideJSON {
	out := sideJSON{Transitions: len(s.Transitions), SecondsIn: map[string]float64{}}
	for _, st := range state.All {
		out.SecondsIn[st.String()] = s.TimeIn[st].Seconds()
	}
	return out
}

func when(t *Transition) string {
	if t == nil {
		return "-"
	}
	return t.Time.UTC().Format(stamp)
}

func signed(d time.Duration) string {
	if d < 0 {
		return "-" + timefmt.Round(-d)
	}
	return "+" + timefmt.Round(d)
}

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func ptr[T any](v T) *T { return &v }

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
