package controller

import (
	"context"

	"go.uber.org/zap"

	"github.com/gearshift/gearshift/controller/ban"
	"github.com/gearshift/gearshift/controller/logging"
)

// GuestBan is the ban that drops every guest copy (heavy stores them with
// X-Gs-Guest: 1).
var GuestBan = []string{"obj.http.X-Gs-Guest", "==", "1"}

// recheckGuests makes every guest page be checked again in the heavy gear
// just entered: the guest server forgets its verdicts and, off the loop,
// each target drops the copies an earlier heavy left.
func (c *Controller) recheckGuests(ctx context.Context) {
	c.opts.Guest.Shift()
	cfg := c.cfg
	go func() {
		for _, r := range ban.Send(ctx, cfg, GuestBan) {
			if r.Err != nil {
				c.log.Warn("guest copies not dropped at the shift to heavy", zap.String(logging.FieldTarget, r.Target), zap.Error(r.Err))
			}
		}
	}()
}
