package controller

import (
	"strings"
	"time"

	"github.com/gearshift/gearshift/controller/api"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/internal/numfmt"
)

// Status returns the status as of the last tick or request.
func (c *Controller) Status() api.Status {
	s := *c.snap.Load()
	s.UptimeSeconds = int64(c.clock().Sub(c.started) / time.Second)
	if c.opts.LogHealth != nil {
		s.LogError, s.LogWriteErrors = c.opts.LogHealth()
	}
	s.HistoryError, s.HistoryWriteErrors = c.history.health()
	if c.opts.GuestError != nil {
		s.GuestError = c.opts.GuestError()
	}
	return s
}

// publish records the loop's current state for api.Status and returns it.
func (c *Controller) publish() api.Status {
	d := c.machine.Current()
	s := &api.Status{
		Version:     Version,
		State:       d.Gear.String(),
		Mode:        "auto",
		Since:       c.wall(d.Since),
		Reason:      d.Reason,
		Transitions: d.Transitions,
		Targets:     make([]api.TargetStatus, 0, len(c.targets)),
		ConfigError: c.configErr,
		VarnishMode: c.cfg.Varnish.Mode,
		Advice:      joinAdvice(c.advice.line, c.advice.sites),
	}
	if c.opts.Doors != nil {
		s.FrontDoor = c.opts.Doors.FrontDoor(time.Now()) // the reader counts on the wall clock
	}
	if c.opts.Refusals != nil {
		rs := c.opts.Refusals.Stats(time.Now()) // the reader counts on the wall clock
		s.OverBudget, s.OverBudgetClients = rs.Requests, rs.Clients
		s.Advice = joinAdvice(s.Advice, budgetAdvice(rs, c.cfg.Profiles.ClientBudget))
	}
	if c.opts.Guest != nil {
		gs := c.opts.Guest.Stats()
		s.GuestPages, s.GuestPrivate = gs.Shared, gs.Private
		s.GuestPrivateURLs = make([]string, 0, len(gs.PrivateURLs))
		for _, u := range gs.PrivateURLs {
			// A page's query may hold what its visitor typed (a search,
			// a token): the status names the path alone.
			path, _, _ := strings.Cut(u, "?")
			s.GuestPrivateURLs = append(s.GuestPrivateURLs, path)
		}
	}
	s.Sites = c.siteStatus(d)
	if c.sites.plan != nil {
		// With sites the server is in its heaviest site's gear.
		top, g := c.sites.heaviest()
		s.State = top.String()
		if g != nil && !d.Forced {
			s.Since, s.Reason = c.wall(g.since), g.reason
		}
	}
	if s.Since.IsZero() {
		s.Since = c.wall(c.started)
	}
	if d.Forced {
		s.Mode = "forced"
		if !d.ForcedUntil.IsZero() {
			u := c.wall(d.ForcedUntil)
			s.ForcedUntil = &u
		}
	}
	if c.lastSample != nil {
		ls := c.lastSample
		s.Sample = &api.SampleStatus{
			Time:     ls.Time,
			Load1:    ls.Load1,
			Load5:    ls.Load5,
			Load15:   ls.Load15,
			Runnable: numfmt.Round(ls.Runnable, 2),
			CPUs:     ls.CPUs,
			Signals:  map[string]*float64{},
			Order:    c.signals().Names(),
		}
		for _, sig := range c.signals().All() {
			var p *float64
			if v, ok := d.Signals.Get(sig.Name); ok {
				v = numfmt.Round(v, sig.Precision+1)
				p = &v
			}
			s.Sample.Signals[sig.Name] = p
		}
		if s.Sample.Time.IsZero() {
			s.Sample.Time = d.Signals.Time
		}
	}
	for _, t := range c.targets {
		ts := t.status(c.set[d.Gear], c.cfg.Varnish.Mode, c.sites.plan)
		if at := ts.ForeignVCLAt; at != nil {
			w := c.wall(*at)
			ts.ForeignVCLAt = &w
		}
		s.Targets = append(s.Targets, ts)
	}
	c.snap.Store(s)
	return c.Status()
}

// Rules are the rules in force (the last good reload's), with their
// signal set.
func (c *Controller) Rules() state.Config { return *c.rules.Load() }

// signals are the signal set of the config in use.
func (c *Controller) signals() *state.Set { return c.rules.Load().Signals }
