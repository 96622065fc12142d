package controller

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/gearshift/gearshift/controller/api"
	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/logging"
	"github.com/gearshift/gearshift/controller/sensor"
	"github.com/gearshift/gearshift/controller/siteplan"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/controller/varnish"
	"github.com/gearshift/gearshift/internal/numfmt"
	"github.com/gearshift/gearshift/profiles"
)

// sites is the loop's view of the config's sites: the profiles each set
// of overrides renders, the router, and each site's gear. Without a
// sites key it holds the default site alone and plan is nil: the targets
// run the gear's profile active, as in 0.4.
type sites struct {
	list    []config.Site
	gears   map[string]*siteGear
	plan    *varnish.Sites // nil without a sites key
	climbed time.Time      // loop clock: when a site last took the machine's gear
	climb   climbMark      // the backend's request rate before that climb
	shifts  []siteShift    // the last followSites's, for the hooks
	fetches map[string]int // the last followSites's backend requests of the last minute by site, nil when unknown
}

// siteShift is one site's gear change.
type siteShift struct {
	site, reason, cause string
	from, to            state.Gear
}

// siteGear is one site's gear, why, and its own pin.
type siteGear struct {
	gear        state.Gear
	since       time.Time // loop clock
	reason      string
	transitions int

	pinned   bool
	pin      state.Gear
	pinUntil time.Time // loop clock; zero: until auto

	own *ownGear // its own machine (sites_own.go); nil while no signal is read for it alone
}

// buildSites renders the profiles of each set of site overrides with
// build, and the router; base is the server's set (the default site's when
// it has no overrides of its own). Without a sites key it renders nothing.
func buildSites(cfg *config.Config, base profiles.Set, build BuildFunc) (*sites, error) {
	s := &sites{list: cfg.SiteList(cfg.Site().Backend.MaxConnections), gears: map[string]*siteGear{}}
	if !cfg.HasSites() {
		return s, nil
	}
	plan := &varnish.Sites{}
	setOf := map[string]int{}
	server := config.OptionsKey(cfg.Profiles)
	for i, ov := range cfg.OverrideSets() {
		set := base
		if config.OptionsKey(ov.Options) != server {
			one := *cfg // its sites too: each profile tells a request's site
			one.Profiles = ov.Options
			var err error
			if set, err = build(&one); err != nil {
				return nil, fmt.Errorf("sites %v: %w", ov.Sites, err)
			}
		}
		plan.Sets = append(plan.Sets, &set)
		for _, name := range ov.Sites {
			setOf[name] = i
		}
	}
	var routes []profiles.Route
	for _, site := range s.list {
		routes = append(routes, profiles.Route{Site: site.Name, Hosts: site.Hosts})
		plan.Labels = append(plan.Labels, varnish.SiteLabel{Site: site.Name, Set: setOf[site.Name]})
	}
	router, err := profiles.Router(routes)
	if err != nil {
		return nil, err
	}
	plan.Router = router
	s.plan = plan
	return s, nil
}

// SitesExport returns what a config with sites boots into
// (profiles.ExportSites), set being the server's profiles (BuildProfiles);
// nil without a sites key.
func SitesExport(cfg *config.Config, set profiles.Set) (*profiles.SitesExport, error) {
	s, err := buildSites(cfg, set, BuildProfiles)
	if err != nil || s.plan == nil {
		return nil, err
	}
	x := &profiles.SitesExport{Sets: s.plan.Sets, Router: s.plan.Router}
	for i, l := range s.plan.Labels {
		x.Sites, x.SetOf = append(x.Sites, l.Site), append(x.SetOf, l.Set)
		x.Routes = append(x.Routes, profiles.Route{Site: l.Site, Hosts: s.list[i].Hosts})
	}
	return x, nil
}

// keep carries the gears and pins of old's sites that s still has: a
// reload leaves the sites it did not change where they were.
func (s *sites) keep(old *sites) {
	for _, site := range s.list {
		if g, ok := old.gears[site.Name]; ok {
			s.gears[site.Name] = g
		}
	}
}

// has tells whether site is one of the config's sites.
func (s *sites) has(site string) bool {
	return slices.ContainsFunc(s.list, func(x config.Site) bool { return x.Name == site })
}

// gear returns the state of site, made on first use in the gear d is in.
func (s *sites) gear(site string, d state.Decision) *siteGear {
	g := s.gears[site]
	if g == nil {
		g = &siteGear{gear: d.Gear, since: d.Since, reason: d.Reason}
		s.gears[site] = g
	}
	return g
}

// siteEscalation is how long the distress must hold after a site took
// the machine's gear before the next site takes it too.
const siteEscalation = siteplan.Escalation

// followSites moves every site to the gear siteplan.Plan gives it under d,
// the server's decision, at now: the machine's gear for every site while a
// pin of every site holds, or without a sites key. A site with signals of
// its own in the sample s (nil: none this time) is in the heavier of that
// gear and its own machine's (settleOwn).
func (c *Controller) followSites(now time.Time, d state.Decision, s *sensor.Sample) {
	shares, _ := c.siteShares()
	c.sites.shifts = c.sites.shifts[:0]
	in := siteplan.Input{Machine: d, Spread: c.sites.plan == nil || d.Forced, Shares: shares,
		Pressing: now.Sub(c.sites.climbed) >= siteEscalation && c.machine.PressingOnBackend(d.Gear) &&
			!c.relieved(c.doorsTime()) && !c.climbedAsk(d.Gear, c.doorsTime())}
	list := make([]siteplan.Site, 0, len(c.sites.list))
	for _, site := range c.sites.list {
		g := c.sites.gear(site.Name, d)
		if g.pinned && !g.pinUntil.IsZero() && !now.Before(g.pinUntil) {
			g.pinned = false
			c.log.Info("site pin expired", zap.String(logging.FieldSite, site.Name), zap.String(logging.FieldState, g.pin.String()))
		}
		reason := ""
		if g.pinned {
			reason = "forced by operator for this site"
			if !g.pinUntil.IsZero() {
				reason += " until " + c.wall(g.pinUntil).Format(time.RFC3339)
			}
		}
		c.stepOwn(now, site, g, s)
		list = append(list, siteplan.Site{Name: site.Name, Gear: g.allocated(), Pinned: g.pinned, Pin: g.pin, PinReason: reason})
	}
	for _, m := range siteplan.Plan(list, in) {
		if m.Climb {
			c.sites.climbed = now
			c.markClimb(c.doorsTime())
		}
		if g := c.sites.gears[m.Site]; g.own != nil {
			g.own.allot(m)
			continue
		}
		c.shiftSite(now, m.Site, c.sites.gears[m.Site], m.Gear, m.Reason, m.Cause)
	}
	c.settleOwn(now, d)
	if c.sites.plan != nil {
		for i, l := range c.sites.plan.Labels {
			c.sites.plan.Labels[i].Gear = c.sites.gears[l.Site].gear
		}
	}
}

// shiftSite puts site in gear want, for reason, counting and logging a
// shift (cause: state.CauseAuto, CauseForced or CauseExpired).
func (c *Controller) shiftSite(now time.Time, site string, g *siteGear, want state.Gear, reason, cause string) {
	if want != g.gear {
		if c.sites.plan != nil {
			c.log.Info("site shifted", zap.String(logging.FieldSite, site), zap.String(logging.FieldFrom, g.gear.String()),
				zap.String(logging.FieldTo, want.String()), zap.String(logging.FieldReason, reason))
		}
		c.metrics.siteTransition(site, g.gear, want, cause)
		c.sites.shifts = append(c.sites.shifts, siteShift{site: site, reason: reason, cause: cause, from: g.gear, to: want})
		g.gear, g.since, g.transitions = want, now, g.transitions+1
	}
	g.reason = reason
}

// siteShares are the sites' shares of the backend requests of the last
// minute, known only with sites, while the Varnish log is read and the
// backend had requests.
//
// A share counts the requests the sites' limits turned away too (the
// log's backend_full records that name their site): a surge's first
// refusals come before its requests have risen, and a climb on them
// (between polls) must not go to the site that was busiest before it.
func (c *Controller) siteShares() (map[string]float64, bool) {
	fetches, total := c.siteFetches()
	c.sites.fetches = fetches
	if fetches == nil {
		return nil, false
	}
	asked := maps.Clone(fetches)
	if refused, ok := c.opts.Doors.RefusedBySite(c.doorsTime()); ok {
		for _, site := range c.sites.list {
			asked[site.Name] += refused[site.Name]
			total += refused[site.Name]
		}
	}
	if total == 0 {
		return nil, false
	}
	shares := make(map[string]float64, len(asked))
	for site, n := range asked {
		shares[site] = float64(n) / float64(total)
	}
	return shares, true
}

// siteFetches are the backend requests of the last minute by site, and
// their sum; nil while they cannot be read.
func (c *Controller) siteFetches() (map[string]int, int) {
	if c.sites.plan == nil || c.opts.Doors == nil {
		return nil, 0
	}
	fetches, ok := c.opts.Doors.Fetches(c.doorsTime())
	if !ok {
		return nil, 0
	}
	total := 0
	for _, site := range c.sites.list {
		total += fetches[site.Name]
	}
	return fetches, total
}

// exit puts every site in gear g: on_exit leaves them all there.
func (s *sites) exit(g state.Gear) {
	if s.plan == nil {
		return
	}
	for i := range s.plan.Labels {
		s.plan.Labels[i].Gear = g
	}
}

// pinSite pins site to gear g until the deadline (zero: until auto).
func (c *Controller) pinSite(site string, g state.Gear, until time.Time) error {
	if !c.sites.has(site) {
		return &api.UnknownSiteError{Site: site}
	}
	sg := c.sites.gear(site, c.machine.Current())
	sg.pinned, sg.pin, sg.pinUntil = true, g, until
	return nil
}

// unpinSite releases the pin of site ("": of every site).
func (c *Controller) unpinSite(site string) error {
	if site != "" && !c.sites.has(site) {
		return &api.UnknownSiteError{Site: site}
	}
	for name, g := range c.sites.gears {
		if site == "" || name == site {
			g.pinned = false
		}
	}
	return nil
}

// heaviest is the heaviest site's gear and the site that reached it last.
func (s *sites) heaviest() (state.Gear, *siteGear) {
	var top *siteGear
	for _, site := range s.list {
		g := s.gears[site.Name]
		if g != nil && (top == nil || g.gear > top.gear || g.gear == top.gear && g.since.After(top.since)) {
			top = g
		}
	}
	if top == nil {
		return state.Lightest, nil
	}
	return top.gear, top
}

// siteStatus is status sites: a site each, the default site first.
func (c *Controller) siteStatus(d state.Decision) []api.SiteStatus {
	out := make([]api.SiteStatus, 0, len(c.sites.list))
	fetches, total := c.siteFetches()
	for _, site := range c.sites.list {
		g := c.sites.gear(site.Name, d)
		st := api.SiteStatus{
			Name:           site.Name,
			Hosts:          append([]string{}, site.Hosts...),
			Gear:           g.gear.String(),
			Mode:           "auto",
			Since:          c.wall(g.since),
			Reason:         g.reason,
			MaxConnections: site.MaxConnections,
		}
		if g.pinned || d.Forced {
			st.Mode = "forced"
			until := d.ForcedUntil
			if g.pinned {
				until = g.pinUntil
			}
			if !until.IsZero() {
				u := c.wall(until)
				st.ForcedUntil = &u
			}
		}
		if st.Since.IsZero() {
			st.Since = c.wall(c.started)
		}
		if c.opts.Doors != nil && c.sites.plan != nil {
			st.BackendRequests = c.opts.Doors.FetchTotal(site.Name)
		}
		if fetches != nil {
			rps := numfmt.Round(float64(fetches[site.Name])/60, 2)
			share := 0.0
			if total > 0 {
				share = numfmt.Round(float64(fetches[site.Name])/float64(total), 3)
			}
			st.BackendRPS, st.BackendShare = &rps, &share
		}
		out = append(out, st)
	}
	return out
}
