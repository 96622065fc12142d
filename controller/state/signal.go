package state

import (
	"fmt"
	"math"
)

// Direction says which way a signal moves when the server is under more
// pressure. It decides a condition's comparison (>= for Rises, <= for
// Falls) and what "looser" and "stricter" mean for thresholds.
type Direction int

const (
	// Rises: more pressure, higher value (load, pressure stall, request rates).
	Rises Direction = iota + 1
	// Falls: more pressure, lower value (free memory).
	Falls
)

// Signal declares one input the rules can test. Every reader of signals
// (validation, decisions and their reasons, status, check perfdata,
// metrics, simulate's trace columns, the state change log) iterates a Set,
// so a new signal is one Signal in its source's declaration plus the code
// that fills Reading.Values[Name].
type Signal struct {
	Name      string    // rule key, status JSON field, trace column, perfdata label, log field
	Unit      string    // "" (a plain number), "%", "rps", "ms", …
	Direction Direction // Rises or Falls
	Precision int       // decimals in reasons and status text; status JSON has one more
	Help      string    // one line for people (docs, metrics HELP)

	// Source is the config key that configures where the signal comes
	// from ("varnish.targets[].name", "sensor.apache_status", …), "" for a
	// signal that needs none (the host's). A rule on a signal whose source
	// is not configured could never hold, and is refused.
	Source string

	// Min and Max bound the signal's values; a threshold must be above Min
	// and at most Max (math.Inf(1): no upper bound). A trace cell outside
	// [Min, Max] is refused.
	Min, Max float64

	// Read returns the signal's value from the machine's input, false when
	// the input lacks it (the signal is unavailable: no condition on it
	// holds). nil reads Reading.Values[Name].
	Read func(Input) (float64, bool)

	// Metric is the Prometheus gauge that exposes the signal ("" for none),
	// Scale multiplies the value into the metric's unit (0 counts as 1).
	Metric string
	Scale  float64
	// Named: the user named the signal (a Prometheus query's); its metric
	// is gearshift_signal{name="<Name>"}.
	Named bool

	PerfLabel string // check perfdata label; "" is Name
	PerfUOM   string // check perfdata unit of measurement ("%", "ms", "" …)

	// StatusLine is the row of `gearshift status` the value is shown on
	// ("" is Name); signals sharing a row appear side by side, each after
	// its StatusPart ("cpu 12.5%, mem 0.0%"). StatusAbsent is what the row
	// says when none of its signals is available ("" omits the row).
	StatusLine   string
	StatusPart   string
	StatusAbsent string

	// Distress is the value past which the signal says the backend is in
	// distress whatever the rules say (phpfpm_queue above 0: requests wait
	// for PHP); nil for none. While one is past it the traffic guard holds
	// the gear: a step down would send more requests to a backend that
	// already cannot take them.
	Distress *float64

	// AtOnce: an enter condition on the signal that holds enters its gear
	// on that sample, without up_confirm's confirming samples. For a
	// signal that is the backend itself turning work away (fetches
	// refused at its connection limit), which a quiet machine never
	// shows, and that is already an average over a window: waiting three
	// samples would leave the surge's first seconds unprotected. The way
	// down keeps every hysteresis (stay rule, down_window, min_dwell).
	AtOnce bool

	// Backend: the signal tells of the backend's own distress (the
	// requests it gets, refuses or fails, its time to first byte, its
	// busy workers). With sites, a neighbour climbs only on such a signal
	// (OfBackend).
	Backend bool

	// Bound is the bound past which the signal marks the backend in
	// distress in a recorded history, as `gearshift tune` reads one;
	// NoBound (the zero value) for none.
	Bound Bound
}

// OfBackend reports whether s tells of the backend's own distress
// (Backend), or is the user's own (Named): gearshift cannot tell what a
// query measures. The load, the run queue, memory and pressure are the
// whole machine's, and Varnish's own counters its own work: Varnish
// serving a cached surge and the visitors' traffic weigh on them too.
func (s Signal) OfBackend() bool { return s.Backend || s.Named }

// A Bound is one of the bounds of distress `gearshift tune` holds the
// signals of a recorded history to: one of a kind (the busy ratios of
// Apache and of PHP-FPM share one), or AboveZero.
type Bound uint8

const (
	NoBound   Bound = iota // the signal marks no distress
	AboveZero              // any value above 0: requests turned away, or waiting
	TTFBBound              // the backend's time to first byte (tune --distress-ttfb)
	BusyBound              // the share of a pool's workers busy (tune --distress-busy)
	LoadBound              // the machine's load (tune --distress-load)

	Bounds // how many bounds there are
)

// Input is what a signal is read from: a reading, and what the machine
// derives from the readings so far.
type Input struct {
	Reading
	// Load is max(Load1, EWMA(RunQueue)), or Load1 when the fast window is off.
	Load float64
}

// Value reads s from in (see Signal.Read).
func (s Signal) Value(in Input) (float64, bool) {
	if s.Read != nil {
		return s.Read(in)
	}
	v, ok := in.Values[s.Name]
	return v, ok
}

// Raw tells whether the signal is a figure of the reading itself
// (Reading.Values[Name], a trace column) rather than derived by the machine.
func (s Signal) Raw() bool { return s.Read == nil }

// Op is the comparison under which a condition on s holds: ">=" or "<=".
func (s Signal) Op() string {
	if s.Direction == Falls {
		return "<="
	}
	return ">="
}

// Worse tells whether a is a value of more pressure than b.
func (s Signal) Worse(a, b float64) bool {
	if s.Direction == Falls {
		return a < b
	}
	return a > b
}

// Holds tells whether a value v meets the threshold limit.
func (s Signal) Holds(v, limit float64) bool {
	if s.Direction == Falls {
		return v <= limit
	}
	return v >= limit
}

// Format prints a value of the signal to its precision, with its unit
// when that is "%": "0.82", "41.3%".
func (s Signal) Format(v float64) string {
	str := fmt.Sprintf("%.*f", s.Precision, v)
	if s.Unit == "%" {
		str += "%"
	}
	return str
}

// FormatLimit prints a threshold as it was most likely written: 1.50 next
// to a two-decimal load, 20 rather than 20.0 for a percentage.
func (s Signal) FormatLimit(v float64) string {
	if s.Precision >= 2 {
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%g", v)
}

// Label is the signal's check perfdata label.
func (s Signal) Label() string {
	if s.PerfLabel != "" {
		return s.PerfLabel
	}
	return s.Name
}

// Line is the signal's row in `gearshift status`.
func (s Signal) Line() string {
	if s.StatusLine != "" {
		return s.StatusLine
	}
	return s.Name
}

// MetricValue is v in the unit of the signal's metric.
func (s Signal) MetricValue(v float64) float64 {
	if s.Scale == 0 {
		return v
	}
	return v * s.Scale
}

// Bounded tells whether the signal has a finite upper bound.
func (s Signal) Bounded() bool { return !math.IsInf(s.Max, 1) }

// Set is the signals one daemon, or one replay, knows: the machine's own
// (Builtin), then those of each source, in that order, which is the order
// of status, perfdata, metrics and reasons. It is a value: built once by
// NewSet from the config and handed to whoever reads signals; nothing
// changes it afterwards, so readers need no lock.
type Set struct {
	list  []Signal
	index map[string]int
}

// NewSet returns the set of the signals of each group, in order. It fails on
// a signal without a name or direction, or on a name given twice.
func NewSet(groups ...[]Signal) (*Set, error) {
	set := &Set{index: map[string]int{}}
	for _, g := range groups {
		for _, s := range g {
			if s.Name == "" || (s.Direction != Rises && s.Direction != Falls) {
				return nil, fmt.Errorf("signal %q needs a name and a direction", s.Name)
			}
			if _, dup := set.index[s.Name]; dup {
				return nil, fmt.Errorf("signal %q is declared twice", s.Name)
			}
			if s.Max == 0 {
				s.Max = math.Inf(1)
			}
			set.index[s.Name] = len(set.list)
			set.list = append(set.list, s)
		}
	}
	return set, nil
}

// MustSet is NewSet for sets written in the code, which cannot be wrong
// at run time: it panics on an error.
func MustSet(groups ...[]Signal) *Set {
	set, err := NewSet(groups...)
	if err != nil {
		panic("state: " + err.Error())
	}
	return set
}

// All returns the signals in their order (none for a nil set). The slice
// is the set's own: read it, never change it.
func (s *Set) All() []Signal {
	if s == nil {
		return nil
	}
	return s.list
}

// Lookup returns the signal named name.
func (s *Set) Lookup(name string) (Signal, bool) {
	if s == nil {
		return Signal{}, false
	}
	i, ok := s.index[name]
	if !ok {
		return Signal{}, false
	}
	return s.list[i], true
}

// Len is the number of signals in the set.
func (s *Set) Len() int { return len(s.All()) }

// Names returns the names of the signals in their order.
func (s *Set) Names() []string {
	var ns []string
	for _, sig := range s.All() {
		ns = append(ns, sig.Name)
	}
	return ns
}
