package trace

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/gearshift/gearshift/controller/state"
)

// SiteColumns are the columns the flight recorder adds after
// RecordedColumns when the config has a sites key (docs/history.md):
// site_gears lists the sites that are not in the lightest gear in auto
// mode, as "blog=GEAR shop=GEAR:forced" (empty: every site in the lightest
// gear, in auto); site_fetches lists each site's backend requests of the
// last minute, as the loop's allocator saw them, for the MaxSiteFetches
// sites that had the most (in the config's order), and "*=N", the sum over
// every site, when some were left out: "default=12 blog=840" (empty: not
// known, or none at all).
var SiteColumns = []string{"site_gears", "site_fetches"}

// MaxSiteFetches bounds the sites a record's site_fetches lists: the
// allocator moves the sites with the most backend requests first, and 300
// sites' counts every second would be most of the history's bytes.
const MaxSiteFetches = 32

// allSites is the name of the sum over every site in site_fetches: not a
// site's name ([a-z0-9-]).
const allSites = "*"

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
	// The sites listed: every one that had backend requests, or the
	// MaxSiteFetches that had the most (the first in order on a tie).
	var busy []int
	total := 0.0
	for i, s := range sites {
		if s.Fetches > 0 {
			busy = append(busy, i)
			total += s.Fetches
		}
	}
	cut := len(busy) > MaxSiteFetches
	if cut {
		slices.SortStableFunc(busy, func(x, y int) int { return cmp.Compare(sites[y].Fetches, sites[x].Fetches) })
		busy = busy[:MaxSiteFetches]
		slices.Sort(busy)
	}
	for n, i := range busy {
		if n > 0 {
			b = append(b, ' ')
		}
		b = append(append(b, sites[i].Name...), '=')
		b = strconv.AppendFloat(b, sites[i].Fetches, 'f', -1, 64)
	}
	if cut {
		b = append(append(b, ' '), allSites+"="...)
		b = strconv.AppendFloat(b, total, 'f', -1, 64)
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
		if name == allSites {
			r.SiteFetchesAll = n
			continue
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

// SiteFetchTotal is the backend requests of the last minute over every
// site: the sum the record gives when it left sites out, else the sum of
// those it lists.
func (r *Recorded) SiteFetchTotal() float64 {
	if r.SiteFetchesAll > 0 {
		return r.SiteFetchesAll
	}
	total := 0.0
	for _, s := range r.Sites {
		total += s.Fetches
	}
	return total
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
