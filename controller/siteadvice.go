package controller

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/gearshift/gearshift/controller/logging"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/internal/timefmt"
)

// A site that the allocator takes out of light again and again is worth
// settings of its own. While such a site is above light the advice names
// it (docs/sites.md, "History, report, simulate and tune").
const (
	// adviceSiteClimbs is how many climbs out of light within
	// adviceSiteWindow make a site one that climbs often.
	adviceSiteClimbs = 3
	adviceSiteWindow = 24 * time.Hour
)

// siteClimb is one climb of a site out of light, on the loop's clock,
// with its share of the backend's requests then (-1: not known).
type siteClimb struct {
	at    time.Time
	share float64
}

// followSites takes the sites' shifts of the last decision, at now on
// the loop's clock, and makes the sites' advice: the sites above light
// now that left light adviceSiteClimbs times or more within
// adviceSiteWindow ("" when none).
func (a *adviser) followSites(now time.Time, s *sites) {
	if s.plan == nil {
		a.sites = ""
		return
	}
	if a.climbs == nil {
		a.climbs = map[string][]siteClimb{}
	}
	shares, total := map[string]float64{}, 0
	for _, n := range s.fetches {
		total += n
	}
	for site, n := range s.fetches {
		if total > 0 {
			shares[site] = float64(n) / float64(total)
		}
	}
	for _, sh := range s.shifts {
		if sh.from != state.Lightest || sh.to == state.Lightest || sh.cause != state.CauseAuto {
			continue
		}
		share, ok := shares[sh.site]
		if !ok {
			share = -1
		}
		a.climbs[sh.site] = append(recent(a.climbs[sh.site], now), siteClimb{at: now, share: share})
	}
	if top, _ := s.heaviest(); top == state.Lightest {
		a.sitesAbove = false
	} else if !a.sitesAbove {
		a.sitesAbove, a.sitesIncident = true, "" // a new climb out of light
	}
	var lines []string
	for _, site := range s.list {
		g := s.gears[site.Name]
		if g == nil || g.gear == state.Lightest {
			continue
		}
		climbs := recent(a.climbs[site.Name], now)
		if len(climbs) < adviceSiteClimbs {
			continue
		}
		lines = append(lines, siteAdviceLine(site.Name, site.MaxConnections, climbs))
	}
	line := strings.Join(lines, "; and ")
	if line != a.sites && line != "" {
		a.log.Info("site climbs often", zap.String(logging.FieldAdvice, line))
	}
	a.sites = line
	if line != "" {
		a.sitesIncident = line
	}
}

// recent is the climbs within adviceSiteWindow before now.
func recent(climbs []siteClimb, now time.Time) []siteClimb {
	i := slices.IndexFunc(climbs, func(c siteClimb) bool { return now.Sub(c.at) < adviceSiteWindow })
	if i < 0 {
		return climbs[:0]
	}
	return climbs[i:]
}

// siteAdviceLine is the advice on a site that climbs often: "site blog
// left light 4 times in 24h, with 71 % of the backend's requests the last
// time — give it a sites[].max_connections below its 50 so its surges
// hold fewer backend connections, or sites[].profiles overrides
// (heavy_min_ttl, drop_query_params, ignore_cookies) so heavy caches more
// of it".
func siteAdviceLine(site string, maxConns int, climbs []siteClimb) string {
	last := climbs[len(climbs)-1]
	share := ""
	if last.share >= 0 {
		share = fmt.Sprintf(", with %.0f %% of the backend's requests the last time", math.Round(100*last.share))
	}
	return fmt.Sprintf("site %s left %s %d times in %s%s — give it a sites[].max_connections below its %d so its surges hold fewer backend connections, or sites[].profiles overrides (heavy_min_ttl, drop_query_params, ignore_cookies) so heavy caches more of it",
		site, state.Lightest, len(climbs), timefmt.Short(adviceSiteWindow), share, maxConns)
}
