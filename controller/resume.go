package controller

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/gearshift/gearshift/controller/logging"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/controller/varnish"
)

// resume starts the machine in the heaviest gear that a reachable target
// already runs one of gearshift's profiles for, so a daemon restarted during
// a surge does not drop Varnish to light until the load is confirmed again.
// It asks every target at once and waits at most the sync wait: a target
// that hangs is left out (the first sync records it), and the connection a
// late answer brings is closed.
func (c *Controller) resume(ctx context.Context, now time.Time) {
	type answer struct {
		t     *slot
		found varnish.Found
		ok    bool
	}
	answers := make(chan answer, len(c.targets))
	for _, t := range c.targets {
		go func() {
			found, err := t.Running(ctx)
			answers <- answer{t, found, err == nil}
		}()
	}
	var deadline <-chan time.Time
	if w := c.opts.SyncWait; w >= 0 {
		timer := time.NewTimer(w)
		defer timer.Stop()
		deadline = timer.C
	}
	found, from := state.Lightest, ""
	pending := len(c.targets)
	order := map[*slot]int{}
	for i, t := range c.targets {
		order[t] = i
	}
	fromIndex := -1
	sites := map[string]state.Gear{} // the heaviest gear each site's label is on
collect:
	for ; pending > 0; pending-- {
		var a answer
		select {
		case a = <-answers:
		case <-deadline:
			break collect
		}
		if !a.ok {
			continue
		}
		a.t.Keep(a.found) // the first sync goes on with its connection
		// The heaviest gear wins; between targets on the same one, the
		// first in the config names it.
		if st, err := state.Parse(a.found.Gear); err == nil && (from == "" || st > found || (st == found && order[a.t] < fromIndex)) {
			found, from, fromIndex = st, a.t.addr, order[a.t]
		}
		for site, gear := range a.found.Sites {
			if st, err := state.Parse(gear); err == nil && c.sites.has(site) && st >= sites[site] {
				sites[site] = st
				if st > found || from == "" {
					found, from, fromIndex = st, a.t.addr, order[a.t]
				}
			}
		}
	}
	if pending > 0 {
		go func(n int) { // late answers: their connections are not used
			for ; n > 0; n-- {
				a := <-answers
				a.found.Close()
			}
		}(pending)
	}
	if from == "" || found == state.Lightest {
		return
	}
	reason := fmt.Sprintf("resumed %s, the gear varnish %s was running at start", found, from)
	d := c.machine.Resume(now, found, reason)
	if c.sites.plan != nil {
		// Each site in the gear its label was on, the machine in the
		// heaviest of them: no site comes down before the rules say so.
		for _, site := range c.sites.list {
			g := c.sites.gear(site.Name, d)
			g.gear, g.since = sites[site.Name], now
			g.reason = fmt.Sprintf("resumed %s, the gear of its label in varnish at start", g.gear)
		}
	}
	c.log.Info("resuming gear", zap.String(logging.FieldTo, found.String()), zap.String(logging.FieldReason, reason))
}
