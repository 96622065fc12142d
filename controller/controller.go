// Package controller is the gearshift daemon's loop: poll → decide →
// apply, keeping every Varnish target on the gear the state machine
// chooses, with its targets, hooks, reload and metrics. It serves the
// control socket's API (package api).
package controller

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/gearshift/gearshift/controller/api"
	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/guest"
	"github.com/gearshift/gearshift/controller/history"
	"github.com/gearshift/gearshift/controller/hooks"
	"github.com/gearshift/gearshift/controller/logging"
	"github.com/gearshift/gearshift/controller/sensor"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/controller/top"
	"github.com/gearshift/gearshift/controller/varnish"
	"github.com/gearshift/gearshift/internal/numfmt"
	"github.com/gearshift/gearshift/profiles"
)

// Sensor reads the server's vitals.
type Sensor interface {
	Sample(ctx context.Context) (sensor.Sample, error)
}

var (
	_ Sensor  = (*sensor.Host)(nil)
	_ api.API = (*Controller)(nil)
)

// BuildFunc renders the profiles of a config.
type BuildFunc func(cfg *config.Config) (profiles.Set, error)

// BuildProfiles is the BuildFunc of the daemon: the config's profiles.
func BuildProfiles(cfg *config.Config) (profiles.Set, error) { return profiles.Build(cfg.Site()) }

// Options configure a Controller.
type Options struct {
	Config *config.Config   // validated; required
	Sensor Sensor           // required
	Dial   varnish.DialFunc // required
	Build  BuildFunc        // required: renders the profiles of Config and of every reload
	// LoadConfig re-reads the config for a reload; nil refuses reloads.
	LoadConfig func() (*config.Config, error)
	Logger     *zap.Logger // zap.NewNop() when nil
	// Now is the wall clock, read only for what is shown (status since,
	// forced_until, the foreign VCL time); time.Now when nil.
	Now func() time.Time
	// Mono is the monotonic clock: the time elapsed since a fixed origin.
	// Every duration (min_dwell, down_window, up_confirm, the EWMA's dt,
	// a force's deadline, backoff) is measured on it, so a jump of the
	// wall clock moves none of them. When nil it is Now's elapsed time
	// since New, which Go measures on the monotonic clock for time.Now.
	Mono func() time.Duration
	// OnChange is called by the loop after every transition, once the gear
	// is applied (systemd STATUS=).
	OnChange func(api.Status)
	// OnReload is called by the loop after a successful reload, with the
	// config now in force (log level).
	OnReload func(*config.Config)
	// Metrics receives the loop's events (transitions, switch times,
	// target errors, reloads) and reads the status at each scrape; nil
	// keeps them private to the controller.
	Metrics *Metrics
	// SyncWait is how long a poll or request waits for the targets to
	// follow before the loop moves on; a target still busy (a slow
	// compile, a hung admin port) finishes in the background and is
	// skipped until then. 0 means 10s; negative waits for every target.
	SyncWait time.Duration
	// Notify, when set, receives the daemon's state in systemd's notify
	// vocabulary: READY=1 once the first poll has finished, RELOADING=1
	// … READY=1 around a reload, WATCHDOG=1 from the loop itself.
	Notify func(state ...string)
	// LogHealth, when set, reports what is wrong with the log file ("":
	// nothing) and the count of failed writes, for api.Status.
	LogHealth func() (problem string, writeErrors uint64)
	// Snapshot reads a target's Varnish log for advice (top.Snapshot when
	// nil).
	Snapshot SnapshotFunc
	// Guest is the daemon's guest-page server (profiles.guest_pages:
	// auto); nil when off. On every shift to heavy its verdicts are
	// forgotten and the guest copies banned, so each page is checked
	// again; the status counts its verdicts.
	Guest *guest.Server
	// GuestError, when set, says what keeps the daemon from answering
	// heavy's guest asks ("": nothing), for api.Status.
	GuestError func() string
	// Refusals counts the requests the profiles refused for a client's
	// budget (profiles.client_budget), read from a Varnish log; nil: none
	// are shown.
	Refusals *top.Refusals
	// Doors counts the requests of the last minute by how their visitor
	// was known, read from a Varnish log; nil: status front_door is null.
	Doors *top.Doors
	// WatchdogInterval is how often the loop sends WATCHDOG=1 (0: never).
	// A loop stuck anywhere stops sending, and systemd restarts it.
	WatchdogInterval time.Duration
}

// defaultSyncWait outlasts a normal profile load, so a healthy target is
// in sync when force answers, and keeps a hung one from stalling polls for
// the 30s a load may take.
const defaultSyncWait = 10 * time.Second

// Controller runs the poll → decide → apply loop. One goroutine (Run, or
// a test calling Tick) owns its state; other goroutines talk to it through
// Force, Auto, Reload and Status.
type Controller struct {
	opts    Options
	log     *zap.Logger
	now     func() time.Time // the wall clock (display)
	epoch   time.Time        // the wall clock at Mono's origin, as New saw it
	started time.Time        // on the loop's clock (see clock)

	// Owned by the loop goroutine.
	cfg         *config.Config
	set         profiles.Set
	sites       *sites           // the config's sites and their gears
	doorsNow    func() time.Time // the clock the Varnish log is counted on; nil: time.Now (tests set it)
	machine     *state.Machine
	targets     []*slot
	lastSample  *sensor.Sample
	sensorFails int
	sourceFails map[string]int // optional sources failing, by source: failures in a row
	resumed     bool           // the first tick looked for a gear to resume
	configErr   string

	hooks     *hooks.Runner // runs hooks.on_change off the loop
	history   *historyWriter
	incidents *history.Tracker
	advice    *adviser
	metrics   *Metrics
	rules     atomic.Pointer[state.Config] // the rules in force, for metrics

	reqs  chan request
	done  chan struct{} // closed when Run returns
	ready chan struct{} // closed when the first poll has finished
	snap  atomic.Pointer[api.Status]

	// synced receives each target whose background sync ended; until the
	// loop receives it the target is busy and the loop leaves it alone.
	synced chan *slot

	// reloading holds a token while a Reload reads the config, so that a
	// storm of SIGHUPs reads it one at a time, in order.
	reloading chan struct{}
}

// New returns a controller for opts. It renders the profiles and fails on a
// config error; it contacts no Varnish (the first Tick does).
func New(opts Options) (*Controller, error) {
	if opts.Config == nil || opts.Sensor == nil || opts.Dial == nil || opts.Build == nil {
		return nil, errors.New("controller: Config, Sensor, Dial and Build are required")
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Mono == nil {
		origin, now := opts.Now(), opts.Now
		opts.Mono = func() time.Duration { return now().Sub(origin) }
	}
	if opts.Metrics == nil {
		opts.Metrics = NewMetrics()
	}
	if opts.SyncWait == 0 {
		opts.SyncWait = defaultSyncWait
	}
	set, err := opts.Build(opts.Config)
	if err != nil {
		return nil, fmt.Errorf("render profiles: %w", err)
	}
	sites, err := buildSites(opts.Config, set, opts.Build)
	if err != nil {
		return nil, fmt.Errorf("render profiles: %w", err)
	}
	signals, err := opts.Config.Signals()
	if err != nil {
		return nil, fmt.Errorf("signals: %w", err)
	}
	rules := opts.Config.StateConfig(signals)
	c := &Controller{
		opts:    opts,
		log:     opts.Logger,
		now:     opts.Now,
		cfg:     opts.Config,
		set:     set,
		sites:   sites,
		machine: state.New(rules, time.Duration(opts.Config.FastWindow)),
		reqs:    make(chan request),
		done:    make(chan struct{}),
		ready:   make(chan struct{}),
		// One sync per target is in flight at most; the room lets a
		// sync that outlived its poll end even when no loop receives.
		synced:    make(chan *slot, 1024),
		reloading: make(chan struct{}, 1),
	}
	c.hooks = hooks.New(c.log)
	c.incidents = history.NewTracker(signals)
	if opts.Snapshot == nil {
		opts.Snapshot = top.Snapshot
	}
	c.advice = newAdviser(opts.Snapshot, firstNamed(opts.Config.SensorConfig().Varnish), c.log)
	c.advice.guests = func() bool { return c.cfg.Profiles.Guests() }
	c.metrics = opts.Metrics
	// Round(0): the epoch's own monotonic reading is not the loop's clock.
	c.epoch = opts.Now().Round(0).Add(-opts.Mono())
	c.started = c.clock()
	c.rules.Store(&rules)
	c.history = c.newHistory()
	c.metrics.watch(c.Status, c.Rules)
	c.metrics.reloaded(true, c.now())
	c.targets, _ = c.makeTargets(opts.Config, nil)
	c.publish()
	return c, nil
}

// Run ticks every poll_interval (a PollInterval of 0 disables the ticker:
// only requests are served) until ctx is done, then applies on_exit and
// closes the admin connections. It returns nil on a clean stop.
func (c *Controller) Run(ctx context.Context) error {
	defer close(c.done)
	interval := time.Duration(c.cfg.PollInterval)
	var tick <-chan time.Time
	var ticker *time.Ticker
	if interval > 0 {
		c.Tick(ctx)
		ticker = time.NewTicker(interval)
		defer func() { ticker.Stop() }()
		tick = ticker.C
	}
	close(c.ready)
	c.notify("READY=1", "STATUS=gear "+c.machine.Current().Gear.String())
	var watchdog <-chan time.Time
	if iv := c.opts.WatchdogInterval; iv > 0 {
		wd := time.NewTicker(iv)
		defer wd.Stop()
		watchdog = wd.C
		c.notify("WATCHDOG=1")
	}
	rush := c.rushes()
	var rushAt <-chan time.Time // the look at the refusals, while one is due
	for {
		select {
		case <-ctx.Done():
			c.stop()
			return nil
		case <-rush:
			if rushAt == nil {
				rushAt = time.After(rushDelay)
			}
		case <-rushAt:
			rushAt = nil
			c.rush(ctx)
		case <-watchdog:
			// From the loop, not a goroutine of its own: a loop stuck
			// in a tick or request sends nothing and is restarted.
			c.notify("WATCHDOG=1")
		case <-tick:
			c.Tick(ctx)
		case t := <-c.synced:
			c.finish(t)
			c.publish()
		case r := <-c.advice.results:
			c.advice.done(c.clock(), r)
			c.publish()
		case r := <-c.reqs:
			r.reply <- c.handle(ctx, r)
			if iv := time.Duration(c.cfg.PollInterval); iv != interval && iv > 0 && ticker != nil {
				interval = iv
				ticker.Reset(iv)
			}
		}
	}
}

// Ready is closed once Run's first poll has finished: the sensors read and
// every target tried, a slow or hung one for SyncWait (10s) at most, after
// which status reports it as it is. A daemon is ready when its status
// says something.
func (c *Controller) Ready() <-chan struct{} { return c.ready }

func (c *Controller) notify(state ...string) {
	if c.opts.Notify != nil {
		c.opts.Notify(state...)
	}
}

// Tick runs one poll: sample, decide, apply to every target, record.
// It must not run concurrently with Run.
func (c *Controller) Tick(ctx context.Context) {
	now := c.clock()
	d := c.machine.Current()
	d.Changed = false // already reported
	if !c.resumed {
		c.resumed = true
		c.resume(ctx, now)
	}
	s, err := c.opts.Sensor.Sample(ctx)
	if err != nil {
		c.sensorFails++
		if logging.Worthy(c.sensorFails) {
			c.log.Warn("read sensors", zap.Error(err), zap.Int(logging.FieldFailures, c.sensorFails))
		}
		d = c.machine.Expire(now)
	} else {
		if c.sensorFails > 0 {
			c.log.Info("sensors readable again", zap.Int(logging.FieldFailures, c.sensorFails))
			c.sensorFails = 0
		}
		c.sourceProblems(s.Problems)
		c.mergeLogBusy(&s)
		c.lastSample = &s
		d = c.machine.Step(now, s.Reading())
		c.apply(ctx, d, &s)
		c.advice.step(ctx, now, d, time.Duration(c.cfg.Hysteresis.MinDwell))
		return
	}
	c.apply(ctx, d, nil)
}

// sourceProblems logs the optional sources that failed this sample, with
// backoff, and once more for each that works again.
func (c *Controller) sourceProblems(problems []sensor.Problem) {
	failing := map[string]bool{}
	for _, p := range problems {
		failing[p.Source] = true
		if c.sourceFails == nil {
			c.sourceFails = map[string]int{}
		}
		c.sourceFails[p.Source]++
		if n := c.sourceFails[p.Source]; logging.Worthy(n) {
			c.log.Warn("read source", zap.String(logging.FieldSource, p.Source), zap.Error(p.Err),
				zap.Int(logging.FieldFailures, n))
		}
	}
	for source, n := range c.sourceFails {
		if !failing[source] {
			c.log.Info("source readable again", zap.String(logging.FieldSource, source), zap.Int(logging.FieldFailures, n))
			delete(c.sourceFails, source)
		}
	}
}

// apply makes every target follow d, taken on the sample s (nil for an
// operator's request or a poll without a sample), and records the outcome.
func (c *Controller) apply(ctx context.Context, d state.Decision, s *sensor.Sample) {
	c.followSites(c.clock(), d, s)
	switchMS := c.syncAll(ctx, d.Gear, c.opts.SyncWait)
	incident, ended := c.record(s, d, switchMS)
	if ended {
		c.log.Info("incident over", zap.String(logging.FieldIncident, incident.ID),
			zap.String(logging.FieldSummary, incident.Summary(c.now())))
	}
	if d.Changed {
		c.metrics.transition(d)
		fields := append(signalFields(c.signals(), d.Signals), zap.Bool(logging.FieldForced, d.Forced))
		if switchMS >= 0 {
			fields = append(fields, zap.Float64(logging.FieldSwitchMS, numfmt.Round(switchMS, 3)))
		}
		logging.StateChange(c.log, d.From.String(), d.Gear.String(), d.Reason, fields...)
	} else {
		fields := []zap.Field{zap.String(logging.FieldState, d.Gear.String()), zap.String(logging.FieldReason, d.Reason)}
		if s := c.lastSample; s != nil {
			fields = append(fields, zap.Float64(logging.FieldRunnable, numfmt.Round(s.Runnable, 2)), zap.Float64(logging.FieldLoad1, s.Load1))
		}
		c.log.Debug("no state change", append(fields, signalFields(c.signals(), d.Signals)...)...)
	}
	if d.Changed && d.Gear == state.Heaviest && c.opts.Guest != nil {
		c.recheckGuests(ctx)
	}
	st := c.publish()
	if d.Changed && c.opts.OnChange != nil {
		c.opts.OnChange(st)
	}
	if h := c.cfg.Hooks; len(h.OnChange) > 0 {
		env := append(incidentEnv(incident, ended, c.now()), c.advice.env()...)
		event := func(site string, from, to state.Gear, reason, mode string) {
			c.hooks.Enqueue(hooks.Event{
				Argv:    append([]string(nil), h.OnChange...),
				Timeout: time.Duration(h.Timeout),
				Site:    site,
				From:    from.String(),
				To:      to.String(),
				Reason:  reason,
				Mode:    mode,
				Env:     env,
			})
		}
		// With sites a hook runs for each site that shifted, but for a
		// pin of every site (or its end): one, with no site, as without.
		serverPin := d.Changed && d.Cause != "" && d.Cause != state.CauseAuto
		if d.Changed && (c.sites.plan == nil || serverPin) {
			event("", d.From, d.Gear, d.Reason, st.Mode)
		}
		for _, s := range c.sites.shifts {
			if c.sites.plan == nil || serverPin && s.cause == d.Cause {
				continue
			}
			mode := "auto"
			if s.cause == state.CauseForced || d.Forced {
				mode = "forced"
			}
			event(s.site, s.from, s.to, s.reason, mode)
		}
	}
}

// stop applies on_exit and closes the admin connections.
func (c *Controller) stop() {
	c.waitIdle() // the loop's context is done: in-flight commands end now
	onExit := c.cfg.OnExit
	if onExit != "" && onExit != "keep" {
		st, err := state.Parse(onExit)
		if err != nil {
			c.log.Warn("on_exit: not switching", zap.Error(err))
		} else {
			for _, t := range c.targets {
				t.Retry() // one last try, backoff or not
			}
			c.sites.exit(st)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			ms := c.syncAll(ctx, st, -1)
			cancel()
			fields := []zap.Field{zap.String(logging.FieldTo, st.String())}
			if ms >= 0 {
				fields = append(fields, zap.Float64(logging.FieldSwitchMS, ms))
			}
			c.log.Info("applied on_exit gear", fields...)
		}
	}
	for _, t := range c.targets {
		t.Close()
	}
	c.hooks.Close(hooks.StopGrace)
	c.history.close()
	c.log.Info("stopped", zap.String(logging.FieldState, c.machine.Current().Gear.String()),
		zap.String(logging.FieldOnExit, onExit))
}
