package replay

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/internal/jsonfmt"
	"github.com/gearshift/gearshift/internal/timefmt"
)

// Objective is the objective of the search in one sentence.
const Objective = "heavy within --within of the start of every distress period, then as little heavy time and as few transitions as possible outside them"

// YAML is the suggested states: block, ready to paste into a config; ""
// when there is no suggestion.
func (s *Suggestion) YAML() (string, error) {
	if s.States == nil {
		return "", nil
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(struct {
		States config.States `yaml:"states"`
	}{*s.States}); err != nil {
		return "", fmt.Errorf("write the states block: %w", err)
	}
	return buf.String(), nil
}

// WriteText writes the suggestion for people: the distress found, the
// states: block to paste, and what it would have changed.
func (s *Suggestion) WriteText(w io.Writer) error {
	block, err := s.YAML()
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	s.writeText(bw, block)
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write suggestion: %w", err)
	}
	return nil
}

func (s *Suggestion) writeText(w io.Writer, block string) {
	h := s.h
	fmt.Fprintf(w, "History %s, %s to %s UTC (%s): %d record%s.\n", s.History,
		h.From.UTC().Format(stamp), h.To.UTC().Format(stamp), timefmt.Round(h.To.Sub(h.From)), h.Samples(), plural(h.Samples()))
	fmt.Fprintf(w, "Objective: %s.\n", strings.Replace(Objective, "--within", timefmt.Round(s.Within), 1))
	fmt.Fprintf(w, "Distress: %s; recorded: %s.\n\n", h.describeBounds(), listOr(h.Seen, "none of them"))

	if len(h.Periods) == 0 {
		fmt.Fprintf(w, "No distress in this history: nothing to tune against, no suggestion. The current thresholds (%s) kept %s for %s in all.\n",
			s.ConfigName, state.Heaviest, timefmt.Round(s.Current.TimeIn[state.Heaviest]))
		return
	}
	fmt.Fprintf(w, "Searched %s by %d replay%s.\n", listOr(s.Searched, "no threshold"), s.Replays, plural(s.Replays))
	if s.States == nil {
		fmt.Fprintf(w, "No thresholds tried did better than the current ones (%s): no suggestion.\n\n", s.ConfigName)
	} else {
		fmt.Fprintf(w, "Suggested, to paste in place of the states: block of %s (tune writes no file):\n\n%s\n", s.ConfigName, block)
	}

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head, cols := "\tCURRENT", func(f func(Outcome) string) string { return "\t" + f(s.Current) }
	if s.Best != nil {
		head = "\tCURRENT\tSUGGESTED"
		cols = func(f func(Outcome) string) string { return "\t" + f(s.Current) + "\t" + f(*s.Best) }
	}
	n := len(h.Periods)
	fmt.Fprintln(tw, head)
	top := state.Heaviest
	fmt.Fprintf(tw, "%s within %s%s\n", top, timefmt.Round(s.Within), cols(func(o Outcome) string { return fmt.Sprintf("%d of %d", o.OnTime, n) }))
	fmt.Fprintf(tw, "%s late%s\n", top, cols(func(o Outcome) string { return fmt.Sprintf("%d (%s in all)", o.Late, timefmt.Round(o.Lateness)) }))
	fmt.Fprintf(tw, "%s missed%s\n", top, cols(func(o Outcome) string { return strconv.Itoa(o.Missed) }))
	for g := state.Heaviest; g > state.Lightest; g-- {
		fmt.Fprintf(tw, "%s outside distress%s\n", g, cols(func(o Outcome) string { return timefmt.Round(o.Outside[g]) }))
	}
	fmt.Fprintf(tw, "%s in all%s\n", top, cols(func(o Outcome) string { return timefmt.Round(o.TimeIn[top]) }))
	fmt.Fprintf(tw, "transitions%s\n", cols(func(o Outcome) string { return strconv.Itoa(o.Transitions) }))
	fmt.Fprintf(tw, "transitions outside%s\n", cols(func(o Outcome) string { return strconv.Itoa(o.TransitionsOutside) }))
	tw.Flush()

	fmt.Fprintf(w, "\nDistress periods (%d), and how long after each start heavy came:\n", n)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  START\tLASTED\tSIGNALS%s\n", head)
	for i, p := range h.Periods {
		fmt.Fprintf(tw, "  %s\t%s\t%s%s\n", p.Start.UTC().Format(stamp), timefmt.Round(p.End.Sub(p.Start)), strings.Join(p.Signals, ", "),
			cols(func(o Outcome) string { return delay(o.Delays[i], s.Within) }))
	}
	tw.Flush()
	s.writeSitesText(w)
}

// delay says when heavy came in a distress period.
func delay(d, within time.Duration) string {
	switch {
	case d < 0:
		return "missed"
	case d == 0:
		return "already heavy"
	case d > within:
		return "+" + timefmt.Round(d) + " (late)"
	}
	return "+" + timefmt.Round(d)
}

// describeBounds lists the bounds: "backend_ttfb_ms > 1000, …".
func (h *History) describeBounds() string {
	var ss []string
	for _, l := range h.limits {
		ss = append(ss, fmt.Sprintf("%s > %g", l.name, l.bound))
	}
	return strings.Join(ss, ", ")
}

func listOr(ss []string, none string) string {
	if len(ss) == 0 {
		return none
	}
	return strings.Join(ss, ", ")
}

// suggestionJSON is the shape of `gearshift tune --json`: snake_case
// names, times in RFC 3339 (UTC), durations in seconds. suggested and
// states are null when there is no suggestion.
type suggestionJSON struct {
	History   string         `json:"history"`
	Config    string         `json:"config"`
	From      string         `json:"from"`
	To        string         `json:"to"`
	Samples   int            `json:"samples"`
	Objective string         `json:"objective"`
	WithinS   float64        `json:"within_s"`
	Distress  distressJSON   `json:"distress"`
	Searched  []string       `json:"searched"`
	Replays   int            `json:"replays"`
	Current   outcomeJSON    `json:"current"`
	Suggested *outcomeJSON   `json:"suggested"`
	States    map[string]any `json:"states"`          // gear: enter/stay: signal: threshold
	YAML      string         `json:"yaml"`            // the states: block to paste; "" with no suggestion
	Sites     []tuneSiteJSON `json:"sites,omitempty"` // with sites only
}

type distressJSON struct {
	Bounds   map[string]float64 `json:"bounds"`
	Recorded []string           `json:"recorded"`
	Periods  []periodDistress   `json:"periods"`
}

type periodDistress struct {
	Start   string   `json:"start"`
	End     string   `json:"end"`
	Seconds float64  `json:"seconds"`
	Signals []string `json:"signals"`
}

type outcomeJSON struct {
	OnTime             int                `json:"on_time"`
	Late               int                `json:"late"`
	Missed             int                `json:"missed"`
	SecondsLate        float64            `json:"seconds_late"`
	DelaysS            []*float64         `json:"delays_s"` // per period; null: missed
	SecondsOutside     float64            `json:"seconds_heavy_outside"`
	SecondsModerateOut float64            `json:"seconds_moderate_outside"`
	Transitions        int                `json:"transitions"`
	TransitionsOutside int                `json:"transitions_outside"`
	SecondsIn          map[string]float64 `json:"seconds_in"`
	SecondsOutsideIn   map[string]float64 `json:"seconds_outside"` // per gear, every gear's row
}

func outcome(o Outcome) outcomeJSON {
	out := outcomeJSON{
		OnTime: o.OnTime, Late: o.Late, Missed: o.Missed, SecondsLate: o.Lateness.Seconds(), DelaysS: []*float64{},
		SecondsOutside: o.Outside[state.Heavy].Seconds(), SecondsModerateOut: o.Outside[state.Moderate].Seconds(), // contract: tune --json's keys of 0.3
		Transitions: o.Transitions, TransitionsOutside: o.TransitionsOutside,
		SecondsIn: map[string]float64{}, SecondsOutsideIn: map[string]float64{},
	}
	for _, d := range o.Delays {
		if d < 0 {
			out.DelaysS = append(out.DelaysS, nil)
		} else {
			out.DelaysS = append(out.DelaysS, ptr(d.Seconds()))
		}
	}
	for _, st := range state.All {
		out.SecondsIn[st.String()] = o.TimeIn[st].Seconds()
		out.SecondsOutsideIn[st.String()] = o.Outside[st].Seconds()
	}
	return out
}

// WriteJSON writes the suggestion as one JSON object (see suggestionJSON
// for its fields, which are a contract).
func (s *Suggestion) WriteJSON(w io.Writer) error {
	h := s.h
	block, err := s.YAML()
	if err != nil {
		return err
	}
	out := suggestionJSON{
		History: s.History, Config: s.ConfigName, From: rfc3339(h.From), To: rfc3339(h.To), Samples: h.Samples(),
		Objective: Objective, WithinS: s.Within.Seconds(),
		Distress: distressJSON{Bounds: map[string]float64{}, Recorded: slices.Concat([]string{}, h.Seen), Periods: []periodDistress{}},
		Searched: slices.Concat([]string{}, s.Searched), Replays: s.Replays, Current: outcome(s.Current), YAML: block,
		Sites: tuneSitesJSON(s.Sites),
	}
	for _, l := range h.limits {
		out.Distress.Bounds[l.name] = l.bound
	}
	for _, p := range h.Periods {
		out.Distress.Periods = append(out.Distress.Periods, periodDistress{
			Start: rfc3339(p.Start), End: rfc3339(p.End), Seconds: p.End.Sub(p.Start).Seconds(), Signals: p.Signals,
		})
	}
	if s.Best != nil {
		out.Suggested = ptr(outcome(*s.Best))
		out.States = statesMap(*s.States)
	}
	return jsonfmt.Write(w, out)
}

// statesMap is the states block as JSON writes it: gear, rule, signal.
func statesMap(st config.States) map[string]any {
	out := map[string]any{}
	for g, b := range st.Bands() {
		if b != nil {
			out[state.Gear(g).String()] = map[string]config.Rule{"enter": b.Enter, "stay": b.Stay}
		}
	}
	return out
}
