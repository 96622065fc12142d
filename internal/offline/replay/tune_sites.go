package replay

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/internal/timefmt"
)

// TuneSite is what one site of a history with sites did, and what the
// current and the suggested thresholds would have done to it through the
// daemon's allocator on the recorded backend requests. The search itself
// weighs the server's gear alone: these figures show its price per site.
type TuneSite struct {
	Site      string
	Recorded  SiteSide
	Current   SiteSide
	Suggested *SiteSide // nil without a suggestion
}

// SiteSide is a site's time in each gear and its transitions.
type SiteSide struct {
	TimeIn      [len(state.All)]time.Duration
	Transitions int
}

// Above is the time above the lightest gear.
func (s SiteSide) Above() time.Duration {
	var d time.Duration
	for _, g := range state.All[1:] {
		d += s.TimeIn[g]
	}
	return d
}

// replaySites fills s.Sites for a history with sites: the history of o
// replayed once under the current thresholds and, with a suggestion,
// once under it. A history without sites is read once and left so.
func (s *Suggestion) replaySites(o TuneOptions) error {
	set, err := o.Config.Signals()
	if err != nil {
		return err
	}
	replay := func(cfg *config.Config) ([]SiteCourse, error) {
		src, from, err := openHistory(o.Dir, set, o.Now, o.Since, DefaultTuneSince)
		if err != nil {
			return nil, err
		}
		defer src.Close()
		courses, _, err := ReplaySites(src, cfg.StateConfig(set), time.Duration(cfg.FastWindow))
		if err != nil {
			return nil, historyError(o.Dir, from, err)
		}
		return courses, nil
	}
	current, err := replay(o.Config)
	if err != nil || current == nil {
		return err
	}
	var suggested []SiteCourse
	if s.States != nil {
		c := *o.Config
		c.States = *s.States
		if suggested, err = replay(&c); err != nil {
			return err
		}
	}
	for i, c := range current {
		ts := TuneSite{Site: c.Site, Recorded: SiteSide{c.Recorded, c.RecordedShifts}, Current: SiteSide{c.Candidate, c.CandidateShifts}}
		if i < len(suggested) {
			ts.Suggested = &SiteSide{suggested[i].Candidate, suggested[i].CandidateShifts}
		}
		s.Sites = append(s.Sites, ts)
	}
	return nil
}

// writeSitesText writes each site's time above the lightest gear and
// transitions, recorded, under the current thresholds and the suggested.
func (s *Suggestion) writeSitesText(w io.Writer) {
	if len(s.Sites) == 0 {
		return
	}
	fmt.Fprintf(w, "\nSites (%d), each through the daemon's allocator on the recorded backend requests (the search weighs the server's gear, not the sites'):\n", len(s.Sites))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := fmt.Sprintf("  SITE\tRECORDED ABOVE %s\tCURRENT", state.Lightest)
	if s.Best != nil {
		head += "\tSUGGESTED"
	}
	fmt.Fprintln(tw, head)
	side := func(x SiteSide) string {
		return fmt.Sprintf("%s, %d transition%s", timefmt.Round(x.Above()), x.Transitions, plural(x.Transitions))
	}
	var quiet []string
	for _, site := range s.Sites {
		if site.Recorded.Transitions == 0 && site.Current.Transitions == 0 && (site.Suggested == nil || site.Suggested.Transitions == 0) &&
			site.Recorded.Above() == 0 && site.Current.Above() == 0 && (site.Suggested == nil || site.Suggested.Above() == 0) {
			quiet = append(quiet, site.Site)
			continue
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s", site.Site, side(site.Recorded), side(site.Current))
		if site.Suggested != nil {
			fmt.Fprintf(tw, "\t%s", side(*site.Suggested))
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	writeQuiet(w, quiet, "recorded and replayed")
}

// tuneSiteJSON is a site of `tune --json`.
type tuneSiteJSON struct {
	Site      string    `json:"site"`
	Recorded  sideJSON  `json:"recorded"`
	Current   sideJSON  `json:"current"`
	Suggested *sideJSON `json:"suggested"` // null without a suggestion
}

func tuneSitesJSON(sites []TuneSite) []tuneSiteJSON {
	var out []tuneSiteJSON
	for _, s := range sites {
		j := tuneSiteJSON{Site: s.Site, Recorded: sideOf(s.Recorded.TimeIn, s.Recorded.Transitions), Current: sideOf(s.Current.TimeIn, s.Current.Transitions)}
		if s.Suggested != nil {
			j.Suggested = ptr(sideOf(s.Suggested.TimeIn, s.Suggested.Transitions))
		}
		out = append(out, j)
	}
	return out
}
