// Package state is gearshift's pure three-state machine: samples and time
// in, the gear to be in and a reason out; no clock, no I/O.
package state

import (
	"encoding"
	"fmt"
	"maps"
	"strings"
	"time"
)

// Gear is a caching gear, the machine's state. The order is meaningful:
// Light < Moderate < Heavy.
type Gear int

const (
	Light Gear = iota
	Moderate
	Heavy
)

// All lists the gears from lightest to heaviest.
var All = [...]Gear{Light, Moderate, Heavy}

var names = [len(All)]string{Light: "light", Moderate: "moderate", Heavy: "heavy"}

func (g Gear) String() string {
	if g >= 0 && int(g) < len(names) && names[g] != "" {
		return names[g]
	}
	return fmt.Sprintf("gear(%d)", int(g))
}

// Lightest is the first gear of All: the gear of a quiet server.
const Lightest = Gear(0)

// Heaviest is the last gear of All.
const Heaviest = Gear(len(All) - 1)

// Valid tells whether g is one of All.
func (g Gear) Valid() bool { return g >= Light && g <= Heaviest }

// Names returns the names of the gears, lightest first.
func Names() []string {
	ns := make([]string, len(All))
	for i, g := range All {
		ns[i] = g.String()
	}
	return ns
}

// OneOf lists the gear names for a message: "light, moderate or heavy"
// (conj "or"), or "light|moderate|heavy" (conj "|").
func OneOf(conj string) string {
	ns := Names()
	if conj == "|" {
		return strings.Join(ns, "|")
	}
	return strings.Join(ns[:len(ns)-1], ", ") + " " + conj + " " + ns[len(ns)-1]
}

// Parse returns the gear named s ("light", "moderate" or "heavy").
func Parse(s string) (Gear, error) {
	for _, g := range All {
		if g.String() == s {
			return g, nil
		}
	}
	return Light, fmt.Errorf("unknown state %q: want %s", s, OneOf("or"))
}

var (
	_ encoding.TextMarshaler   = Gear(0)
	_ encoding.TextUnmarshaler = (*Gear)(nil)
)

// MarshalText implements encoding.TextMarshaler (JSON and YAML use the name).
func (g Gear) MarshalText() ([]byte, error) { return []byte(g.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (g *Gear) UnmarshalText(b []byte) error {
	parsed, err := Parse(string(b))
	if err != nil {
		return err
	}
	*g = parsed
	return nil
}

// Rule holds when any of its conditions holds: a map from signal name to
// threshold, the condition holding when the signal is at least as bad as
// the threshold (>= for a signal that rises with pressure, <= for one that
// falls). A rule with no condition never holds; a condition on a signal
// that is unavailable, or not in the set, does not hold.
type Rule map[string]float64

// Band is the pair of rules of one non-light state: Enter to go up into it,
// Stay to remain in it. Stay is looser than Enter; the gap is the hysteresis.
type Band struct {
	Enter Rule
	Stay  Rule
}

// Config is everything the machine needs to decide.
type Config struct {
	Bands      [len(All)]Band // by state; Light's is not used (light is where the machine falls back to)
	UpConfirm  int            // consecutive samples an enter rule must hold (default 3)
	DownWindow time.Duration  // the stay rule must not have held for this long to step down (default 120s)
	MinDwell   time.Duration  // minimum time between transitions before stepping down (default 60s)
	// DownTrafficRatio is the traffic guard: no step down from a gear while
	// client_rps is above this fraction of the rate at which the gear was
	// entered (default 0.6). 0 turns it off; so does a missing client_rps.
	DownTrafficRatio float64
	// Signals are the signals the rules may name and the machine derives
	// (nil: Builtin alone). The config builds the set once; see NewSet.
	Signals *Set
}

// clone copies the rules, so that the caller's maps stay the caller's.
func (c Config) clone() Config {
	for i, b := range c.Bands {
		c.Bands[i] = Band{Enter: maps.Clone(b.Enter), Stay: maps.Clone(b.Stay)}
	}
	if c.Signals == nil {
		c.Signals = builtinSet
	}
	return c
}

// Signals are the derived inputs of one decision (docs/signals.md#the-signals),
// by signal name; a signal missing from Values is unavailable.
type Signals struct {
	Time   time.Time
	Values map[string]float64
}

// Get returns the value of the signal name, false when it is unavailable.
func (s Signals) Get(name string) (float64, bool) {
	v, ok := s.Values[name]
	return v, ok
}

// Ptr returns the value of the signal name, nil when it is unavailable.
func (s Signals) Ptr(name string) *float64 {
	v, ok := s.Values[name]
	if !ok {
		return nil
	}
	return &v
}
