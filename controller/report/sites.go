package report

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/controller/trace"
	"github.com/gearshift/gearshift/internal/timefmt"
)

// SiteSurge is one site that left light during an incident: which site
// surged, and when.
type SiteSurge struct {
	Site string
	Left time.Time  // the first record of the incident with the site above light
	Peak state.Gear // the heaviest gear the site reached in the incident
	// Above is how long the site was above light in the incident.
	Above time.Duration
	// Share is the site's share (0–1) of the backend requests of the
	// minute before it left light; nil when they were not known.
	Share *float64
}

// SiteTime is one site's course over the period.
type SiteTime struct {
	Site        string
	TimeIn      [len(state.All)]time.Duration
	Transitions int
	Forced      time.Duration // pinned, by its own pin or one of every site
}

// siteBuilder follows the sites' gears record by record (Builder).
type siteBuilder struct {
	sites   []*SiteTime
	index   map[string]*SiteTime
	prev    map[string]trace.Site   // the sites of the last record; nil when it had none
	surges  map[string][]*SiteSurge // by incident ID
	current string                  // the incident in course, "" in light
}

// site is the course of the site named name, made on first use.
func (b *siteBuilder) site(name string) *SiteTime {
	if b.index == nil {
		b.index, b.surges = map[string]*SiteTime{}, map[string][]*SiteSurge{}
	}
	st := b.index[name]
	if st == nil {
		st = &SiteTime{Site: name}
		b.index[name] = st
		b.sites = append(b.sites, st)
	}
	return st
}

// gear is the gear of the site named name in the last record: the
// lightest when the record left it out.
func (b *siteBuilder) gear(name string) (state.Gear, bool) {
	s, ok := b.prev[name]
	if !ok {
		return state.Lightest, false
	}
	return s.Gear, s.Forced
}

// interval counts dt after the last record in each site's gear and in
// the incident in course.
func (b *siteBuilder) interval(dt time.Duration) {
	if b.prev == nil {
		return
	}
	for _, st := range b.sites {
		g, forced := b.gear(st.Site)
		st.TimeIn[g] += dt
		if forced {
			st.Forced += dt
		}
		if g == state.Lightest || b.current == "" {
			continue
		}
		for _, sg := range b.surges[b.current] {
			if sg.Site == st.Site {
				sg.Above += dt
			}
		}
	}
}

// add follows the record rec at t, with incident the incident in course
// at it ("" in light).
func (b *siteBuilder) add(t time.Time, rec *trace.Recorded, incident string) {
	b.current = incident
	if rec.Sites == nil {
		b.prev = nil
		return
	}
	cur := make(map[string]trace.Site, len(rec.Sites))
	for _, site := range rec.Sites {
		cur[site.Name] = site
		b.site(site.Name)
	}
	if b.prev != nil {
		for _, st := range b.sites {
			was, _ := b.gear(st.Site)
			now := state.Lightest
			if site, ok := cur[st.Site]; ok {
				now = site.Gear
			}
			if was != now {
				st.Transitions++
			}
		}
	}
	b.prev = cur
	if incident == "" {
		return
	}
	total := rec.SiteFetchTotal()
	for _, site := range rec.Sites {
		if site.Gear == state.Lightest {
			continue
		}
		i := slices.IndexFunc(b.surges[incident], func(sg *SiteSurge) bool { return sg.Site == site.Name })
		if i >= 0 {
			b.surges[incident][i].Peak = max(b.surges[incident][i].Peak, site.Gear)
			continue
		}
		sg := &SiteSurge{Site: site.Name, Left: t, Peak: site.Gear}
		if rec.SiteFetches && total > 0 {
			share := site.Fetches / total
			sg.Share = &share
		}
		b.surges[incident] = append(b.surges[incident], sg)
	}
}

// of is the sites that surged in the incident id, in the order they left
// light.
func (b *siteBuilder) of(id string) []SiteSurge {
	var out []SiteSurge
	for _, sg := range b.surges[id] {
		out = append(out, *sg)
	}
	return out
}

// writeSiteText writes, for a history with sites, each site's time above
// light and transitions.
func (r *Report) writeSiteText(w io.Writer) {
	if len(r.Sites) == 0 {
		return
	}
	fmt.Fprintf(w, "Sites (%d):\n", len(r.Sites))
	var quiet []string // always in light, never pinned
	for _, st := range r.Sites {
		var in []string
		for _, g := range state.All[1:] {
			if st.TimeIn[g] > 0 {
				in = append(in, fmt.Sprintf("%s %s", g, timefmt.Round(st.TimeIn[g])))
			}
		}
		if len(in) == 0 && st.Transitions == 0 && st.Forced == 0 {
			quiet = append(quiet, st.Site)
			continue
		}
		above := "always in " + state.Lightest.String()
		if len(in) > 0 {
			above = strings.Join(in, ", ")
		}
		fmt.Fprintf(w, "  %s: %s; %d transition%s", st.Site, above, st.Transitions, plural(st.Transitions))
		if st.Forced > 0 {
			fmt.Fprintf(w, "; %s pinned", timefmt.Round(st.Forced))
		}
		fmt.Fprintln(w, ".")
	}
	if len(quiet) > 0 {
		names := strings.Join(quiet[:min(len(quiet), maxQuietNames)], ", ")
		if len(quiet) > maxQuietNames {
			names += fmt.Sprintf(" and %d more", len(quiet)-maxQuietNames)
		}
		fmt.Fprintf(w, "  always in %s: %s.\n", state.Lightest, names)
	}
	fmt.Fprintln(w)
}

// maxQuietNames bounds the sites always in light the text names.
const maxQuietNames = 10

// siteSurgesText is an incident's sites for the text: "blog left light at
// 03:10:02 (71% of backend requests), heavy at most, 12m above light".
func siteSurgesText(surges []SiteSurge) string {
	var parts []string
	for _, sg := range surges {
		p := fmt.Sprintf("%s left %s at %s", sg.Site, state.Lightest, sg.Left.UTC().Format(time.TimeOnly))
		if sg.Share != nil {
			p += fmt.Sprintf(" (%.0f%% of backend requests)", 100**sg.Share)
		}
		p += fmt.Sprintf(", %s at most, %s above %s", sg.Peak, timefmt.Round(sg.Above), state.Lightest)
		parts = append(parts, p)
	}
	return strings.Join(parts, "; ")
}
