package controller

import "time"

// clock is the loop's time: the monotonic clock, read as a time.Time
// that starts at the wall time of New. The state machine and the targets
// run on it; wall tells the time it shows.
func (c *Controller) clock() time.Time { return c.epoch.Add(c.opts.Mono()) }

// wall turns a time of the loop's clock into the wall clock's time for
// display: as long before (or after) the wall clock's now as it is before
// the loop's now.
func (c *Controller) wall(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return c.now().Round(0).Add(t.Sub(c.clock()))
}
