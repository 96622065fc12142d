package controller

import (
	"time"

	"github.com/gearshift/gearshift/controller/siteplan"
	"github.com/gearshift/gearshift/controller/state"
)

// reliefShare: after a site takes the machine's gear, the next site takes
// it only while the backend still gets at least this share of the
// requests a second it got in the siteplan.Escalation before the climb.
// A heavier gear spares the backend requests and nothing else: when the
// backend's requests fell by half, the distress that remains is the
// signals' own lag (the load average decays over a minute) or not the
// sites' doing, and moving a neighbour would not relieve it
// (docs/sites.md, "Which site shifts").
const reliefShare = siteplan.ReliefShare

// climbMark is the demand on the backend over the siteplan.Escalation
// before a site last climbed (its requests and the fetches it turned
// away, a second), on the wall clock the Varnish log is read on; known is
// false when the log was not read then. A surge the backend refuses
// shows in its refusals, not its requests: a site that climbs on the
// first refusals (backend_busy at once) climbs before its requests rise.
type climbMark struct {
	rate  float64
	known bool
}

// doorsTime is the time on the clock the Varnish log is counted on: the
// reader counts each record at the wall clock's time it reads it.
func (c *Controller) doorsTime() time.Time {
	if c.doorsNow != nil {
		return c.doorsNow()
	}
	return time.Now()
}

// markClimb notes the demand on the backend before a climb at wall.
func (c *Controller) markClimb(wall time.Time) {
	c.sites.climb = climbMark{}
	if c.opts.Doors == nil {
		return
	}
	if n, ok := c.opts.Doors.DemandIn(escalationWindow(wall)); ok {
		c.sites.climb = climbMark{rate: float64(n) / siteplan.Escalation.Seconds(), known: true}
	}
}

// relieved tells whether the demand on the backend over the last
// siteplan.Escalation up to wall fell below reliefShare of the demand
// before the last climb; false when either is not known, or the backend
// had none before it.
func (c *Controller) relieved(wall time.Time) bool {
	m := c.sites.climb
	if !m.known || m.rate == 0 || c.opts.Doors == nil {
		return false
	}
	n, ok := c.opts.Doors.DemandIn(escalationWindow(wall))
	return ok && siteplan.Relieved(m.rate, float64(n)/siteplan.Escalation.Seconds())
}

// climbedAsk tells whether the sites already in gear g (or above it)
// made most of what was asked of the backend over the last
// siteplan.Escalation up to wall (their requests, and the refusals that
// named them): the distress is still theirs, and a neighbour's climb
// would not relieve it. A site that climbed before its surge began (the
// load's doing) then takes the gear its surge calls for, not its
// neighbours. False when the log is not read or nothing was asked.
func (c *Controller) climbedAsk(g state.Gear, wall time.Time) bool {
	if c.opts.Doors == nil || g == state.Lightest {
		return false
	}
	bySite, ok := c.opts.Doors.SiteDemandIn(escalationWindow(wall))
	if !ok {
		return false
	}
	var climbed, all int
	for site, n := range bySite {
		all += n
		if sg, ok := c.sites.gears[site]; ok && sg.gear >= g {
			climbed += n
		}
	}
	return all > 0 && float64(climbed) >= climbedShare*float64(all)
}

// climbedShare is the share of the backend's demand at which the sites
// already climbed are taken to be the distress's cause.
const climbedShare = 0.5

// escalationWindow is the siteplan.Escalation up to wall in whole
// seconds, wall's own (still counting) the last.
func escalationWindow(wall time.Time) (from, to time.Time) {
	to = wall.Truncate(time.Second).Add(time.Second)
	return to.Add(-siteplan.Escalation), to
}
