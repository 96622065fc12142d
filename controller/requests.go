package controller

import (
	"context"
	"time"

	"github.com/gearshift/gearshift/controller/api"
	"github.com/gearshift/gearshift/controller/sdnotify"
	"github.com/gearshift/gearshift/controller/state"
)

type requestKind int

const (
	reqForce requestKind = iota
	reqAuto
	reqReload
)

type request struct {
	kind  requestKind
	site  string // reqForce, reqAuto: one site; "": every site
	state state.Gear
	until time.Time
	next  *nextConfig // reqReload: the config read off the loop
	reply chan response
}

type response struct {
	status api.Status
	err    error
}

func (c *Controller) handle(ctx context.Context, r request) response {
	now := c.clock()
	switch r.kind {
	case reqForce:
		var until time.Time
		if !r.until.IsZero() {
			// The deadline's distance, measured as time.Now measures it
			// (monotonic), then kept on the loop's clock.
			until = now.Add(r.until.Sub(c.now()))
		}
		if r.site != "" {
			if err := c.pinSite(r.site, r.state, until); err != nil {
				return response{status: c.Status(), err: err}
			}
			d := c.machine.Current()
			d.Changed = false
			c.apply(ctx, d, nil)
			break
		}
		d := c.machine.Force(now, r.state, until)
		c.apply(ctx, d, nil)
	case reqAuto:
		if err := c.unpinSite(r.site); err != nil {
			return response{status: c.Status(), err: err}
		}
		d := c.machine.Current()
		d.Changed = false
		if r.site == "" {
			d = c.machine.Auto(now)
		}
		c.apply(ctx, d, nil)
	case reqReload:
		c.notify(sdnotify.Reloading()...)
		err := c.reload(ctx, r.next)
		c.notify("READY=1", "STATUS=gear "+c.machine.Current().Gear.String())
		if err != nil {
			return response{status: c.Status(), err: err}
		}
	}
	return response{status: c.Status()}
}

func (c *Controller) call(ctx context.Context, r request) (api.Status, error) {
	r.reply = make(chan response, 1)
	select {
	case c.reqs <- r:
	case <-c.done:
		return api.Status{}, api.ErrStopped
	case <-ctx.Done():
		return api.Status{}, ctx.Err()
	}
	select {
	case resp := <-r.reply:
		return resp.status, resp.err
	case <-ctx.Done():
		return api.Status{}, ctx.Err()
	}
}

// Force pins gear g on site (every site when "") until the deadline (zero:
// until Auto) and returns the status once the gear is applied.
func (c *Controller) Force(ctx context.Context, site string, g state.Gear, until time.Time) (api.Status, error) {
	return c.call(ctx, request{kind: reqForce, site: site, state: g, until: until})
}

// Auto releases the pin of site, or every pin when site is "".
func (c *Controller) Auto(ctx context.Context, site string) (api.Status, error) {
	return c.call(ctx, request{kind: reqAuto, site: site})
}

// Reload re-reads the config and profiles. The new profiles are loaded into
// every reachable target before any switch; on error the old config and
// profiles stay in force and the error shows in api.Status.ConfigError.
// The config is read and its profiles rendered in the caller's goroutine,
// one reload at a time: the loop polls on meanwhile, and takes the result
// only to load it into Varnish and switch.
func (c *Controller) Reload(ctx context.Context) (api.Status, error) {
	select {
	case c.reloading <- struct{}{}:
		defer func() { <-c.reloading }()
	case <-c.done:
		return api.Status{}, api.ErrStopped
	case <-ctx.Done():
		return api.Status{}, ctx.Err()
	}
	return c.call(ctx, request{kind: reqReload, next: c.prepare()})
}
