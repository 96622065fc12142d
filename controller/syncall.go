package controller

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/gearshift/gearshift/controller/logging"
	"github.com/gearshift/gearshift/controller/state"
)

// syncAll syncs every target to want, all at once so that a slow target
// does not hold up the others, and returns the longest switch time in
// milliseconds, or -1 when no target switched. It waits up to wait
// (negative: until all are done); a target still busy then, or busy from
// an earlier call, finishes in the background (see finish) and is synced
// again by the next poll.
func (c *Controller) syncAll(ctx context.Context, want state.State, wait time.Duration) float64 {
	now := c.clock()
	set := c.set
	started := map[*target]bool{}
	for _, t := range c.targets {
		if t.busy {
			t.log.Debug("target still busy with an earlier sync", zap.String(logging.FieldTo, want.String()))
			continue
		}
		t.busy = true
		started[t] = true
		go func() {
			t.result.ms, t.result.switched = t.sync(ctx, now, &set, want)
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
func (c *Controller) finish(t *target) {
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
