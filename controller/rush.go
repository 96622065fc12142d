package controller

import (
	"context"
	"maps"
	"time"

	"github.com/gearshift/gearshift/controller/sensor"
)

// The backend turning fetches away is the first sign of a surge that
// Varnish gives, and its log gives it within milliseconds: the daemon's
// log reader (Options.Doors) counts each refusal, and the loop looks at
// rushDelay after the first refusal instead of at its next poll (rush).
// Between polls only backend_busy may climb, on the rules that need no
// confirmation; every other rule and the way down wait for the polls
// (state.Machine.Rush).

// rushDelay is how long the loop lets refusals come before it looks:
// they come in bursts, and the burst's size, not its first record, tells
// moderate's trickle from heavy's flood (a surge at ten times the
// backend's capacity is refused hundreds of times in this much).
const rushDelay = 250 * time.Millisecond

// logBusy is backend_busy as the Varnish log tells it: the fetches turned
// away over fast_window (the poll's interval without one), per second.
// ok is false without a log reader, or while it reads nothing.
func (c *Controller) logBusy() (float64, bool) {
	if c.opts.Doors == nil {
		return 0, false
	}
	window := time.Duration(c.cfg.FastWindow)
	if window <= 0 {
		window = time.Duration(c.cfg.PollInterval)
	}
	return c.opts.Doors.Refused(c.doorsTime(), window)
}

// mergeLogBusy raises the sample's backend_busy to the log's: the log
// also counts the requests the sites' shared limits turned away before
// any fetch (reason backend_full), which no Varnish counter does, and the
// refusals read since the counters were. A sample without backend_busy
// (no local Varnish's counters read) is left as it is.
func (c *Controller) mergeLogBusy(s *sensor.Sample) {
	v, read := s.Values[sensor.BackendBusy]
	if !read {
		return
	}
	if logged, ok := c.logBusy(); ok && logged > v {
		s.Values[sensor.BackendBusy] = logged
	}
}

// rush decides on the refusals the log told since the last poll: a climb
// the backend_busy rules call for is applied now, on the last sample with
// the log's backend_busy.
func (c *Controller) rush(ctx context.Context) {
	if c.lastSample == nil {
		return
	}
	busy, ok := c.logBusy()
	if !ok {
		return
	}
	d := c.machine.Rush(c.clock(), sensor.BackendBusy, busy)
	if !d.Changed {
		return
	}
	s := *c.lastSample
	s.Values = maps.Clone(s.Values)
	s.Values[sensor.BackendBusy] = busy
	c.lastSample = &s
	c.apply(ctx, d, &s)
}

// rushes is the channel rush listens on: nil without a log reader.
func (c *Controller) rushes() <-chan struct{} {
	if c.opts.Doors == nil {
		return nil
	}
	return c.opts.Doors.Rush()
}
