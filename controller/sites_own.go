package controller

import (
	"maps"
	"strings"
	"time"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/sensor"
	"github.com/gearshift/gearshift/controller/siteplan"
	"github.com/gearshift/gearshift/controller/state"
)

// A site's own signals (sensor.Sample.Sites: its phpfpm_pool's, a
// Prometheus query's series labelled with it) move that site alone: a
// state machine of its own runs the server's rules on them, with the
// server's hysteresis, and the site's gear is the heavier of that
// machine's and the one the allocator gives it (docs/sites.md, "Which
// site shifts"). A pin, of the site or of every site, wins.

// ownGear is what a site with signals of its own keeps beside its gear.
type ownGear struct {
	machine *state.Machine
	rules   *state.Config // the loop's rules the machine runs, restricted (ownRules)
	reason  string        // the reason of the machine's last shift, as the site gives it

	// alloc is the gear the allocator gives the site, and why; held says
	// the site's gear is the machine's, above alloc.
	alloc       state.Gear
	allocReason string
	held        bool
	// The allocator's move of this poll, if any.
	moved bool
	move  siteplan.Move
}

// allocated is the gear the allocator last gave g: its gear, unless its own
// machine holds it higher.
func (g *siteGear) allocated() state.Gear {
	if g.own != nil && g.own.held {
		return g.own.alloc
	}
	return g.gear
}

// stepOwn steps the own machine of site on the sample s (nil: a poll
// without one, or an operator's request: nothing is stepped). A site gets
// its machine with the first figure read for it alone, and keeps it while
// the config has sites.
func (c *Controller) stepOwn(now time.Time, site config.Site, g *siteGear, s *sensor.Sample) {
	if c.sites.plan == nil {
		g.own = nil // no sites (a reload removed the last): the machine's gear alone
		return
	}
	if g.own != nil {
		g.own.moved = false
		if !g.own.held {
			g.own.alloc, g.own.allocReason = g.gear, g.reason
		}
	}
	if s == nil {
		return
	}
	values := s.Sites[site.Name]
	if g.own == nil {
		if len(values) == 0 {
			return
		}
		g.own = &ownGear{alloc: g.gear, allocReason: g.reason}
	}
	o := g.own
	if rules := c.rules.Load(); o.machine == nil || o.rules != rules {
		own := ownRules(*rules)
		if o.machine == nil {
			o.machine = state.New(own, 0)
		} else {
			o.machine.SetConfig(own, 0)
		}
		o.rules = rules
	}
	d := o.machine.Step(now, state.Reading{Time: s.Time, Values: maps.Clone(values)})
	if d.Changed {
		o.reason = ownReason(site, d.Reason)
	}
}

// ownReason is the reason of a site's own machine as the site gives it:
// "site shop: phpfpm_queue 3 >= 1 for 3 samples (pool shop)".
func ownReason(site config.Site, reason string) string {
	r := "site " + site.Name + ": " + reason
	if site.PHPFPMPool != "" && strings.Contains(reason, "phpfpm_") {
		r += " (pool " + site.PHPFPMPool + ")"
	}
	return r
}

// ownRules are the rules of a site's own machine: the server's, with the
// conditions on the signals a site may have of its own alone (its pool's,
// the Prometheus queries'); the machine's load and the others are the
// server's, and move the sites through the allocator.
func ownRules(rules state.Config) state.Config {
	own := rules
	for i, b := range rules.Bands {
		own.Bands[i] = state.Band{Enter: ownRule(rules.Signals, b.Enter), Stay: ownRule(rules.Signals, b.Stay)}
	}
	return own
}

func ownRule(set *state.Set, r state.Rule) state.Rule {
	own := state.Rule{}
	for name, limit := range r {
		if ownSignal(set, name) {
			own[name] = limit
		}
	}
	return own
}

// ownSignal tells whether the signal name may be read for a site alone.
func ownSignal(set *state.Set, name string) bool {
	switch name {
	case sensor.PHPFPMQueue, sensor.PHPFPMBusyRatio, sensor.PHPFPMMaxChildrenReached:
		return true
	}
	s, ok := set.Lookup(name)
	return ok && s.Named
}

// settleOwn puts every site with a machine of its own in its gear once the
// allocator has moved: its pin, or every site's, as the allocator said;
// else the heavier of the allocator's gear and its own machine's, with
// the reason of whichever put it there.
func (c *Controller) settleOwn(now time.Time, d state.Decision) {
	for _, site := range c.sites.list {
		g := c.sites.gears[site.Name]
		if g == nil || g.own == nil {
			continue
		}
		o := g.own
		reason, cause := o.allocReason, state.CauseAuto
		if o.moved {
			o.alloc, reason, cause = o.move.Gear, o.move.Reason, o.move.Cause
		}
		if g.pinned || d.Forced || o.machine == nil {
			o.held = false
			c.shiftSite(now, site.Name, g, o.alloc, reason, cause)
			continue
		}
		want := o.alloc
		own := o.machine.Current().Gear
		switch {
		case own > o.alloc:
			want, reason, cause = own, o.reason, state.CauseAuto
		case !o.moved && g.gear != o.alloc:
			// The site comes back to the allocator's gear because its own
			// machine stepped down.
			reason, cause = o.reason, state.CauseAuto
		}
		if o.moved {
			o.allocReason = o.move.Reason
		}
		o.held = own > o.alloc
		c.shiftSite(now, site.Name, g, want, reason, cause)
	}
}

// allot records the allocator's move m for g, which has a machine of its own.
func (o *ownGear) allot(m siteplan.Move) { o.moved, o.move = true, m }
