package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/logging"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/controller/varnish"
	"github.com/gearshift/gearshift/profiles"
)

// nextConfig is a config read for a reload, with its profiles rendered
// and its signals built, or why it could not be: the work a reload does
// before it touches the loop's state.
type nextConfig struct {
	cfg     *config.Config
	set     profiles.Set
	sites   *sites
	signals *state.Set
	err     error
}

// prepare reads the config again and renders its profiles. It touches
// nothing of the loop's, so Reload runs it off the loop: a config slow to
// read or render holds up no poll.
func (c *Controller) prepare() *nextConfig {
	if c.opts.LoadConfig == nil {
		return &nextConfig{err: errors.New("reload is not supported by this daemon")}
	}
	cfg, err := c.opts.LoadConfig()
	if err != nil {
		return &nextConfig{err: fmt.Errorf("reload config: %w", err)}
	}
	set, err := c.opts.Build(cfg)
	if err != nil {
		return &nextConfig{err: fmt.Errorf("reload profiles: %w", err)}
	}
	sites, err := buildSites(cfg, set, c.opts.Build)
	if err != nil {
		return &nextConfig{err: fmt.Errorf("reload profiles: %w", err)}
	}
	signals, err := cfg.Signals()
	if err != nil {
		return &nextConfig{err: fmt.Errorf("reload signals: %w", err)}
	}
	return &nextConfig{cfg: cfg, set: set, sites: sites, signals: signals}
}

// reload starts the new config and profiles, then retires the old: the new
// profiles are loaded into every reachable target first; only when all of
// them accept it does the loop switch to the new set (and the next sync
// discards the old profiles). On any error the old set stays in force.
// next is the prepared config (nil: prepare it here, on the loop).
func (c *Controller) reload(ctx context.Context, next *nextConfig) error {
	if next == nil {
		next = c.prepare()
	}
	err := next.err
	if err == nil {
		err = c.tryReload(ctx, next)
	}
	if err != nil {
		c.configErr = err.Error()
		c.metrics.reloaded(false, c.now())
		c.log.Error("reload failed, keeping the running config", zap.Error(err))
		c.publish()
		return err
	}
	return nil
}

func (c *Controller) tryReload(ctx context.Context, next *nextConfig) error {
	cfg, set := next.cfg, next.set
	rules := cfg.StateConfig(next.signals)
	// A target with a sync in flight is not to be touched: wait for it
	// (bounded by its command timeouts).
	c.waitIdle()
	targets, applyTimeouts := c.makeTargets(cfg, c.targets)

	// Start the new: load the new profiles everywhere we can reach, into
	// all targets at once (see syncAll).
	names := make([][]string, len(targets))
	errs := make([]error, len(targets))
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			names[i], errs[i] = t.Preload(ctx, &set)
			if plan := next.sites.plan; plan != nil {
				for _, s := range plan.Sets {
					if errs[i] != nil {
						break
					}
					var more []string
					more, errs[i] = t.Preload(ctx, s)
					names[i] = append(names[i], more...)
				}
			}
		}()
	}
	wg.Wait()
	loaded := map[*slot][]string{}
	var loadErr error
	for i, t := range targets {
		loaded[t] = names[i]
		err := errs[i]
		if err == nil {
			continue
		}
		if varnish.IsCommandError(err) {
			if loadErr == nil {
				loadErr = err
			}
			continue
		}
		// An unreachable target is a runtime fault, not a bad config: it
		// gets the new profiles when it comes back, like on first contact.
		t.Fail(c.clock(), err)
	}
	if loadErr != nil {
		for t, names := range loaded {
			t.Unload(ctx, names)
		}
		// The targets only the refused config named go, and their series
		// with them (unless a running target shares the address).
		c.drop(targets, c.targets)
		return loadErr
	}

	// Switch.
	c.drop(c.targets, targets)
	applyTimeouts()
	next.sites.keep(c.sites)
	for _, site := range c.sites.list {
		if !next.sites.has(site.Name) {
			c.metrics.forgetSite(site.Name) // its series go with it
		}
	}
	c.cfg, c.set, c.sites, c.targets = cfg, set, next.sites, targets
	c.machine.SetConfig(rules, time.Duration(cfg.FastWindow))
	c.configErr = ""
	c.rules.Store(&rules)
	c.metrics.reloaded(true, c.now())
	var profileNames []zap.Field
	for _, p := range set {
		profileNames = append(profileNames, zap.String(p.Gear.String(), p.Name))
	}
	c.log.Info("config reloaded", profileNames...)
	WarnNarrowSessions(c.log, cfg)
	if c.opts.OnReload != nil {
		c.opts.OnReload(cfg)
	}
	// Retire the old: the sync switches to the new profile of the current
	// gear and discards the stale ones.
	d := c.machine.Current()
	d.Changed = false
	c.apply(ctx, d, nil)
	return nil
}

// WarnNarrowSessions says, at start and on each reload, that a config
// listing profiles.session_cookies keeps 0.2's behaviour: a cookie not
// listed is no session, and is stripped in moderate and heavy, which logs
// out the users of any site whose session cookie the list lacks.
func WarnNarrowSessions(log *zap.Logger, cfg *config.Config) {
	if len(cfg.Profiles.SessionCookies) == 0 {
		return
	}
	log.Warn("profiles.session_cookies lists the only cookies that make a session: "+
		"a request with any other cookie is anonymous, and moderate and heavy strip that cookie; "+
		"remove the key to make every cookie not in profiles.ignore_cookies a session",
		zap.Strings(logging.FieldSessionCookies, cfg.Profiles.SessionCookies))
}
