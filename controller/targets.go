package controller

import (
	"context"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/gearshift/gearshift/controller/api"
	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/logging"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/controller/varnish"
	"github.com/gearshift/gearshift/profiles"
)

// slot is the loop's hold on one Varnish target: the target, and what only
// the loop keeps of it. While busy, a sync goroutine owns the target and
// the result; the loop owns them all otherwise.
type slot struct {
	*varnish.Target
	addr, secretFile string
	log              *zap.Logger

	busy   bool             // a sync is in flight
	shown  api.TargetStatus // the last status published while idle
	result struct {         // of the last sync, read once it ended
		ms       float64
		switched bool
	}
}

// makeTargets returns the targets of cfg, reusing those of old with the
// same address and secret file, and apply, which gives the reused ones
// cfg's settings. A reload calls apply at its commit point only, so that
// one that fails leaves the running targets as they were; new targets get
// them at once.
func (c *Controller) makeTargets(cfg *config.Config, old []*slot) (ts []*slot, apply func()) {
	settings := varnish.SettingsOf(cfg)
	var reused []*slot
	for _, tc := range cfg.Varnish.Targets {
		var t *slot
		for _, o := range old {
			if o.addr == tc.Admin && o.secretFile == tc.SecretFile {
				t = o
				break
			}
		}
		if t == nil {
			t = &slot{
				Target:     varnish.New(tc.Admin, tc.SecretFile, c.opts.Dial, settings, c.metrics.target(tc.Admin), c.log),
				addr:       tc.Admin,
				secretFile: tc.SecretFile,
				log:        c.log.With(zap.String(logging.FieldTarget, tc.Admin)),
			}
		} else {
			reused = append(reused, t)
		}
		ts = append(ts, t)
	}
	return ts, func() {
		for _, t := range reused {
			t.Configure(settings)
		}
	}
}

// status is the target's status, in sync when it runs p (or p's Plain
// twin, on a Varnish without varnish-modules). While the target is busy
// it is the status last shown, out of sync unless that runs p.
func (t *slot) status(p profiles.Profile, mode string, sites *varnish.Sites) api.TargetStatus {
	if sites != nil {
		if !t.busy {
			t.shown = t.SitesStatus(sites)
		}
		return t.shown
	}
	if t.busy {
		// The target's twin is the sync's: either will do.
		plain, _ := p.Plain()
		st := t.shown
		runs := func(name string) bool { return name == p.Name || name == plain.Name }
		if !runs(st.ActiveVCL) && (mode != config.ModeLabel || !runs(st.LabelVCL)) {
			st.InSync = false
			if st.Error == "" {
				st.Error = "busy with an earlier command (slow to answer?): it follows once that ends"
			}
		}
		return st
	}
	t.shown = t.Status(p)
	return t.shown
}

// syncAll syncs every target to want, all at once so that a slow target
// does not hold up the others, and returns the longest switch time in
// milliseconds, or -1 when no target switched. It waits up to wait
// (negative: until all are done); a target still busy then, or busy from
// an earlier call, finishes in the background (see finish) and is synced
// again by the next poll.
func (c *Controller) syncAll(ctx context.Context, want state.Gear, wait time.Duration) float64 {
	now := c.clock()
	set := c.set
	var sites *varnish.Sites
	if c.sites.plan != nil {
		plan := *c.sites.plan
		plan.Labels = slices.Clone(plan.Labels) // the loop moves them on while the sync runs
		sites = &plan
	}
	started := map[*slot]bool{}
	for _, t := range c.targets {
		if t.busy {
			t.log.Debug("target still busy with an earlier sync", zap.String(logging.FieldTo, want.String()))
			continue
		}
		t.busy = true
		started[t] = true
		go func() {
			if sites != nil {
				t.result.ms, t.result.switched = t.SyncSites(ctx, now, sites)
			} else {
				t.result.ms, t.result.switched = t.Sync(ctx, now, &set, want)
			}
			c.synced <- t
		}()
	}
	var timeout <-chan time.Time
	if wait >= 0 {
		timer := time.NewTimer(wait)
		defer timer.Stop()
		timeout = timer.C
	}
	longest := -1.0
	for pending := len(started); pending > 0; {
		select {
		case t := <-c.synced:
			c.finish(t)
			if !started[t] {
				continue
			}
			pending--
			if t.result.switched && t.result.ms > longest {
				longest = t.result.ms
			}
		case <-timeout:
			return longest
		}
	}
	return longest
}

// finish takes back a target whose background sync ended.
func (c *Controller) finish(t *slot) {
	t.busy = false
}

// waitIdle waits until no target has a sync in flight (a stop or a
// reload; their commands are bounded by their own timeouts).
func (c *Controller) waitIdle() {
	for {
		busy := false
		for _, t := range c.targets {
			busy = busy || t.busy
		}
		if !busy {
			return
		}
		c.finish(<-c.synced)
	}
}

// drop closes the targets of from that are not in keep and forgets their
// metric series, but not those of an address a kept target still uses
// (the same admin address with another secret file).
func (c *Controller) drop(from, keep []*slot) {
	for _, t := range from {
		if contains(keep, t) {
			continue
		}
		t.Close()
		shared := false
		for _, k := range keep {
			shared = shared || k.addr == t.addr
		}
		if !shared {
			c.metrics.forget(t.addr)
		}
	}
}

func contains(ts []*slot, t *slot) bool {
	for _, x := range ts {
		if x == t {
			return true
		}
	}
	return false
}
