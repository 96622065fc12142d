package daemon

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/gearshift/gearshift/controller/api"
	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/logging"
	"github.com/gearshift/gearshift/controller/top"
)

// Backoff of a Varnish log reader while the log cannot be read (varnishd
// not up yet, no access to its log).
const (
	logRetryFirst = time.Second
	logRetryMax   = 5 * time.Minute
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
// until ctx ends.
func followRefusals(ctx context.Context, r *top.Refusals, name string, log *zap.Logger) {
	if r == nil {
		return
	}
	followLog(ctx, "cannot read the Varnish log for clients over their budget: status shows none meanwhile", name, log,
		func(ctx context.Context) error { return top.Log{Name: name}.WatchRefusals(ctx, r, time.Now) })
}

// doorsName is the -n name of the Varnish whose log tells the front
// door: the first target with a name, else the default instance's ("").
func doorsName(cfg *config.Config) string {
	name, _ := top.TargetName(cfg.Varnish.Targets, "")
	return name
}

// followDoors reads the front door records of the Varnish named name
// into d until ctx ends, and says in the log, once a minute at most,
// when most of a busy minute's visitors were unidentified.
func followDoors(ctx context.Context, d *top.Doors, name string, log *zap.Logger) {
	go func() {
		tick := time.NewTicker(10 * time.Second)
		defer tick.Stop()
		var said time.Time
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-tick.C:
				if f := d.FrontDoor(now); f.MostlyUnidentified() && now.Sub(said) >= time.Minute {
					said = now
					log.Warn(api.UnidentifiedAdvice, zap.Int("unidentified", f.Unidentified),
						zap.Int("requests", f.Direct+f.ProxyProtocol+f.Forwarded+f.Unidentified))
				}
			}
		}
	}()
	followLog(ctx, "cannot read the Varnish log for the front door: status front_door is null meanwhile", name, log,
		func(ctx context.Context) error { return top.Log{Name: name}.WatchDoors(ctx, d, time.Now) })
}

// followLog runs watch until ctx ends, again with backoff when it stops,
// and says so with msg.
func followLog(ctx context.Context, msg, name string, log *zap.Logger, watch func(context.Context) error) {
	wait := logRetryFirst
	for ctx.Err() == nil {
		start := time.Now()
		err := watch(ctx)
		if ctx.Err() != nil {
			return
		}
		if time.Since(start) > logRetryMax {
			wait = logRetryFirst // it ran for a while: a new failure
		}
		log.Warn(msg, zap.String(logging.FieldTarget, name), zap.Error(err), zap.Duration("retry_in", wait))
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, logRetryMax)
	}
}
