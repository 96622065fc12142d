package controller

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/gearshift/gearshift/controller/history"
	"github.com/gearshift/gearshift/controller/hooks"
	"github.com/gearshift/gearshift/controller/logging"
	"github.com/gearshift/gearshift/controller/sensor"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/controller/trace"
)

// historyQueue is how many records may wait for the disk; past it records
// are dropped (and counted), so a slow or hung disk never holds up the loop.
const historyQueue = 64

// historyWriter hands the loop's records to the flight recorder on a
// goroutine of its own. Failures are logged with backoff, counted, and
// shown in the status until a record is written again.
type historyWriter struct {
	rec   *history.Recorder
	log   *zap.Logger
	queue chan trace.Sample
	done  chan struct{}

	errors  atomic.Uint64
	mu      sync.Mutex
	problem string // "" while records are written
	fails   int    // failures in a row
}

func newHistoryWriter(opts history.Options, log *zap.Logger) *historyWriter {
	w := &historyWriter{log: log, queue: make(chan trace.Sample, historyQueue), done: make(chan struct{})}
	opts.OnMaintain = func(err error) {
		if err != nil {
			log.Warn("history maintenance", zap.String(logging.FieldPath, opts.Dir), zap.Error(err))
		}
	}
	w.rec = history.NewRecorder(opts)
	go w.run()
	return w
}

// add queues a record; it never blocks.
func (w *historyWriter) add(s trace.Sample) {
	select {
	case w.queue <- s:
	default:
		w.failed(errors.New("the disk is too slow: records dropped while earlier ones wait"))
	}
}

func (w *historyWriter) run() {
	defer close(w.done)
	for s := range w.queue {
		if err := w.rec.Write(s); err != nil {
			w.failed(err)
			continue
		}
		w.mu.Lock()
		fails := w.fails
		w.problem, w.fails = "", 0
		w.mu.Unlock()
		if fails > 0 {
			w.log.Info("history recording again", zap.String(logging.FieldPath, w.rec.Dir()), zap.Int(logging.FieldFailures, fails))
		}
	}
}

func (w *historyWriter) failed(err error) {
	w.errors.Add(1)
	w.mu.Lock()
	w.fails++
	n := w.fails
	w.problem = err.Error()
	w.mu.Unlock()
	if logging.Worthy(n) {
		w.log.Warn("record history (gears still shift)", zap.String(logging.FieldPath, w.rec.Dir()), zap.Error(err),
			zap.Int(logging.FieldFailures, n))
	}
}

// health is what status shows: the problem ("" when none) and the count
// of records lost.
func (w *historyWriter) health() (string, uint64) {
	if w == nil {
		return "", 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.problem, w.errors.Load()
}

// historyCloseWait bounds how long a stopping daemon waits for the
// queued records: a hung disk must not keep it from stopping.
const historyCloseWait = 5 * time.Second

// close writes what is queued and closes the day file, waiting
// historyCloseWait at most.
func (w *historyWriter) close() {
	if w == nil {
		return
	}
	close(w.queue)
	select {
	case <-w.done:
	case <-time.After(historyCloseWait):
		w.log.Warn("stopping without the last history records: the disk does not take them",
			zap.String(logging.FieldPath, w.rec.Dir()), zap.Int(logging.FieldSkipped, len(w.queue)))
		return
	}
	if err := w.rec.Close(); err != nil {
		w.log.Warn("close history", zap.Error(err))
	}
}

// newHistory returns the flight recorder of cfg's history block, nil when
// it is off.
func (c *Controller) newHistory() *historyWriter {
	h := c.cfg.History
	if h.Dir == "" {
		return nil
	}
	return newHistoryWriter(history.Options{
		Dir: h.Dir, Keep: time.Duration(h.Keep), MaxBytes: int64(h.MaxBytes), Signals: c.signals(),
	}, c.log)
}

// record feeds the incident tracker the decision d (taken on sample s, nil
// for an operator's request) and the adviser the sites' shifts and, for a
// sample, hands the record to the flight recorder. It returns the incident in course, or the one d ended.
func (c *Controller) record(s *sensor.Sample, d state.Decision, switchMS float64) (incident *history.Incident, ended bool) {
	at := c.now()
	if s != nil {
		at = s.Time
	}
	c.advice.followSites(c.clock(), c.sites)
	_, over := c.incidents.Add(history.Point{Time: at, Gear: d.Gear, Signals: d.Signals.Values})
	incident = c.incidents.Current()
	if over != nil {
		incident, ended = over, true
	}
	if s == nil || c.history == nil {
		return incident, ended
	}
	load5, load15 := s.Load5, s.Load15
	rec := &trace.Recorded{Gear: d.Gear, Forced: d.Forced, Reason: d.Reason}
	if incident != nil && !ended {
		rec.Incident = incident.ID
	}
	if d.Changed && switchMS >= 0 {
		rec.SwitchMS = &switchMS
	}
	if v := s.Varnish; v != nil {
		rec.Rates = v.Recorded()
	}
	if c.opts.Guest != nil {
		n := float64(c.opts.Guest.Stats().Shared)
		rec.GuestPages = &n
	}
	rec.Sites, rec.SiteFetches = c.recordSites(d)
	c.history.add(trace.Sample{Time: s.Time, Load5: &load5, Load15: &load15, Reading: s.Reading(), Recorded: rec})
	return incident, ended
}

// recordSites is the sites' part of a record under d: each site's gear,
// whether it is pinned, and the backend requests the allocator saw; nil
// without a sites key.
func (c *Controller) recordSites(d state.Decision) ([]trace.Site, bool) {
	if c.sites.plan == nil {
		return nil, false
	}
	out := make([]trace.Site, 0, len(c.sites.list))
	for _, site := range c.sites.list {
		g := c.sites.gear(site.Name, d)
		out = append(out, trace.Site{Name: site.Name, Gear: g.gear, Forced: g.pinned || d.Forced,
			Fetches: float64(c.sites.fetches[site.Name])})
	}
	return out, c.sites.fetches != nil
}

// incidentEnv is what a hook learns of the incident: its id above light,
// and on the step back to light its summary.
func incidentEnv(in *history.Incident, ended bool, now time.Time) []string {
	if in == nil {
		return nil
	}
	env := []string{fmt.Sprintf("%s=%s", hooks.EnvIncident, in.ID)}
	if ended {
		env = append(env, fmt.Sprintf("%s=%s", hooks.EnvSummary, in.Summary(now)))
	}
	return env
}
