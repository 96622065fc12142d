package controller

import (
	"context"

	"go.uber.org/zap"
)

// GuestBan is the ban that drops every guest copy (heavy stores them with
// X-Gs-Guest: 1).
var GuestBan = []string{"obj.http.X-Gs-Guest", "==", "1"}

// recheckGuests makes every guest page be checked again in the heavy gear
// just entered: the guest server forgets its verdicts and, off the loop,
// each target drops the copies an earlier heavy left, on its own session.
func (c *Controller) recheckGuests(ctx context.Context) {
	c.opts.Guest.Shift()
	for _, t := range c.targets {
		go func() {
			if err := t.Ban(ctx, GuestBan...); err != nil {
				t.log.Warn("guest copies not dropped at the shift to heavy", zap.Error(err))
			}
		}()
	}
}
