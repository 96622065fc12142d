package daemon

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/logging"
	"github.com/gearshift/gearshift/controller/top"
)

// Backoff of the refusals' reader while the Varnish log cannot be read
// (varnishd not up yet, no access to its log).
const (
	refusalRetryFirst = time.Second
	refusalRetryMax   = 5 * time.Minute
)

// newRefusals returns the counter of the requests the profiles refuse for
// a client's budget, and the -n name of the Varnish whose log it is read
// from (the first target with a name, as advice reads); nil without one
// or without a budget.
func newRefusals(cfg *config.Config) (*top.Refusals, string) {
	name, err := top.TargetName(cfg.Varnish.Targets, "")
	if err != nil || cfg.Profiles.ClientBudget.Rate <= 0 {
		return nil, ""
	}
	return &top.Refusals{}, name
}

// followRefusals reads the refusals of the Varnish named name into r
// until ctx ends, again with backoff when varnishlog stops, and says so.
func followRefusals(ctx context.Context, r *top.Refusals, name string, log *zap.Logger) {
	if r == nil {
		return
	}
	wait := refusalRetryFirst
	for ctx.Err() == nil {
		start := time.Now()
		err := top.Log{Name: name}.WatchRefusals(ctx, r, time.Now)
		if ctx.Err() != nil {
			return
		}
		if time.Since(start) > refusalRetryMax {
			wait = refusalRetryFirst // it ran for a while: a new failure
		}
		log.Warn("cannot read the Varnish log for clients over their budget: status shows none meanwhile",
			zap.String(logging.FieldTarget, name), zap.Error(err), zap.Duration("retry_in", wait))
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, refusalRetryMax)
	}
}
