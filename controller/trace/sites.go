package trace

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/gearshift/gearshift/controller/state"
)

// SiteColumns are the columns the flight recorder adds after
// RecordedColumns when the config has a sites key (docs/history.md):
// site_gears lists the sites that are not in the lightest gear in auto
// mode, as "blog=GEAR shop=GEAR:forced" (empty: every site in the lightest
// gear, in auto); site_fetches lists each site's backend requests of the
// last minute, as the loop's allocator saw them, for the sites that had
// any: "default=12 blog=840" (empty: not known, or none at all).
var SiteColumns = []string{"site_gears", "site_fetches"}

// Site is one site's part of a record.
type Site struct {
	Name    string
	Gear    state.Gear
	Forced  bool    // pinned: its own pin, or a pin of every site
	Fetches float64 // backend requests of the last minute; 0 when not known (Recorded.SiteFetches)
}

// forcedSuffix marks a pinned site's gear in site_gears.
const forcedSuffix = ":forced"

func init() {
	for _, c := range SiteColumns {
		columns[c] = c
	}
}

// AppendSites appends the two cells of SiteColumns for sites, each
// preceded by a comma: the record's sites and whether their backend
// requests were known.
func AppendSites(b []byte, sites []Site, fetchesKnown bool) []byte {
	b = append(b, ',')
	n := 0
	for _, s := range sites {
		if s.Gear == state.Lightest && !s.Forced {
			continue
		}
		if n > 0 {
			b = append(b, ' ')
		}
		n++
		b = append(append(append(b, s.Name...), '='), s.Gear.String()...)
		if s.Forced {
			b = append(b, forcedSuffix...)
		}
	}
	b = append(b, ',')
	if !fetchesKnown {
		return b
	}
	n = 0
	for _, s := range sites {
		if s.Fetches <= 0 {
			continue
		}
		if n > 0 {
			b = append(b, ' ')
		}
		n++
		b = append(append(b, s.Name...), '=')
		b = strconv.AppendFloat(b, s.Fetches, 'f', -1, 64)
	}
	return b
}

// recordedSites reads the site columns of row into r: r.Sites stays nil
// when the trace has no site_gears column (a history without sites).
func recordedSites(row rowReader, r *Recorded) error {
	if _, ok := row.index["site_gears"]; !ok {
		return nil
	}
	r.Sites = []Site{}
	at := map[string]int{}
	site := func(name string) *Site {
		i, ok := at[name]
		if !ok {
			i = len(r.Sites)
			at[name] = i
			r.Sites = append(r.Sites, Site{Name: name, Gear: state.Lightest})
		}
		return &r.Sites[i]
	}
	fetches := row.text("site_fetches")
	for _, f := range strings.Fields(fetches) {
		name, v, ok := strings.Cut(f, "=")
		n, err := strconv.ParseFloat(v, 64)
		if !ok || name == "" || err != nil || math.IsNaN(n) || n < 0 || math.IsInf(n, 0) {
			return row.errorf("site_fetches", "%q is not SITE=REQUESTS", f)
		}
		site(name).Fetches = n
	}
	r.SiteFetches = fetches != ""
	for _, f := range strings.Fields(row.text("site_gears")) {
		name, g, ok := strings.Cut(f, "=")
		g, forced := strings.CutSuffix(g, forcedSuffix)
		gear, err := state.Parse(g)
		if !ok || name == "" || err != nil {
			return row.errorf("site_gears", "%q is not SITE=GEAR or SITE=GEAR%s", f, forcedSuffix)
		}
		s := site(name)
		s.Gear, s.Forced = gear, forced
	}
	return nil
}

// SiteGear is the gear of the site named name in the record: the
// lightest when the record leaves it out.
func (r *Recorded) SiteGear(name string) state.Gear {
	for _, s := range r.Sites {
		if s.Name == name {
			return s.Gear
		}
	}
	return state.Lightest
}

// String is how a site shows in messages: "blog=GEAR".
func (s Site) String() string { return fmt.Sprintf("%s=%s", s.Name, s.Gear) }
