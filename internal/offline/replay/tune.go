package replay

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/internal/timefmt"
)

// Defaults of `gearshift tune`.
const (
	DefaultTuneSince = 14 * 24 * time.Hour
	DefaultWithin    = 30 * time.Second
)

// The shape of a distress period: distress records at most MergeGap apart
// are one period, and a period shorter than MinDistress (one slow page, a
// blip) is none.
const (
	MergeGap    = time.Minute
	MinDistress = 10 * time.Second
)

// MaxReplays bounds the replays of a search.
const MaxReplays = 80

// factors are what the search multiplies each enter threshold by (for a
// signal that falls with pressure, divides: below 1 is always more eager).
var factors = []float64{0.5, 0.6, 0.7, 0.8, 0.9, 1, 1.1, 1.25, 1.5}

// Bounds mark the backend in distress: a record is in distress when any
// recorded signal is beyond the bound its row names (state.Signal's
// Bound), by bound; AboveZero's is 0.
type Bounds [state.Bounds]float64

// DefaultBounds are the bounds of distress without flags.
var DefaultBounds = Bounds{state.TTFBBound: 1000, state.BusyBound: 0.9, state.LoadBound: 2}

// limits lists the signals of set that mark distress, in the order of the
// set, each with its bound.
func (b Bounds) limits(set *state.Set) []limit {
	var ls []limit
	for _, sig := range set.All() {
		if sig.Bound != state.NoBound {
			ls = append(ls, limit{sig.Name, b[sig.Bound]})
		}
	}
	return ls
}

// positive tells whether every bound a flag sets is above 0.
func (b Bounds) positive() bool {
	for k := state.AboveZero + 1; k < state.Bounds; k++ {
		if b[k] <= 0 {
			return false
		}
	}
	return true
}

type limit struct {
	name  string
	bound float64
}

// TuneHelp states the objective, for the help of `gearshift tune`.
var TuneHelp = fmt.Sprintf(`Suggest the thresholds of the states: block from the flight recorder's
history (the last --since, from --dir, else the config's history.dir).
It never writes the config: it prints a block to paste.

The objective. A record is in distress when the backend is: backend_ttfb_ms
above --distress-ttfb, apache_busy_ratio or phpfpm_busy_ratio above
--distress-busy, dropped_rps, backend_busy or phpfpm_queue above 0
(requests turned away, fetches refused at the backend's connection limit,
or requests waiting for PHP), or load_per_cpu above --distress-load (a signal counts
only where it was recorded). Distress records at most %s apart make a distress period;
one shorter than %s is none. The goal is heavy on within --within of the
start of every distress period, then as little heavy time and as few
transitions as possible outside them (from --within before a period's start
until the gears could have come down after its end: hysteresis.down_window,
then the longer of down_window and min_dwell): a transition weighs as a
minute of heavy, and moderate time as a quarter of its length.

The search replays the history under the config's hysteresis with candidate
thresholds: each enter threshold of the current rules multiplied by one of
%s (divided, for a signal that falls with pressure), one at a time, keeping
what does better, rounded to two significant digits, each stay threshold kept
in the same ratio to its enter threshold; at most %d replays. A suggestion
does better than the current thresholds on the objective, or none is made.
A history without distress says so and suggests nothing.

A history with sites also tells, per site, its time above light and its
transitions as recorded, under the current thresholds and under the
suggestion, each site moved by the daemon's allocator on the recorded
backend requests; the search weighs the server's gear alone.`, timefmt.Round(MergeGap), timefmt.Round(MinDistress), factorList(), MaxReplays)

func factorList() string {
	var s string
	for i, f := range factors {
		if i > 0 {
			s += ", "
		}
		s += strconv.FormatFloat(f, 'g', -1, 64)
	}
	return s
}

// TuneOptions are what `gearshift tune` is asked.
type TuneOptions struct {
	Dir        string
	Config     *config.Config // the current config: its signals, rules, hysteresis and fast_window
	ConfigName string         // its path, or "embedded defaults"
	Now        time.Time
	Since      time.Duration // 0: DefaultTuneSince
	Within     time.Duration // 0: DefaultWithin
	Bounds     Bounds
	JSON       bool
}

// Tune searches thresholds for the history of the period and writes the
// suggestion to stdout, and the lines of history it had to skip to stderr.
// Errors of the request are *report.UsageError.
func Tune(o TuneOptions, stdout, stderr io.Writer) error {
	if o.Within == 0 {
		o.Within = DefaultWithin
	}
	if o.Within < 0 || !o.Bounds.positive() {
		return usage("--within and the distress bounds must be positive")
	}
	set, err := o.Config.Signals()
	if err != nil {
		return err
	}
	src, from, err := openHistory(o.Dir, set, o.Now, o.Since, DefaultTuneSince)
	if err != nil {
		return err
	}
	defer src.Close()
	h, err := Load(src, o.Config, set, o.Bounds)
	for _, w := range src.Warnings() {
		fmt.Fprintf(stderr, "gearshift: history %s\n", w)
	}
	if err != nil {
		return historyError(o.Dir, from, err)
	}
	res, err := h.Search(o.Config, o.Within)
	if err != nil {
		return err
	}
	res.History, res.ConfigName = o.Dir, o.ConfigName
	if err := res.replaySites(o); err != nil {
		return err
	}
	if o.JSON {
		return res.WriteJSON(stdout)
	}
	return res.WriteText(stdout)
}
