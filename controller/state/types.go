// Package state is gearshift's pure three-state machine: samples and time
// in, the gear to be in and a reason out; no clock, no I/O.
package state

import (
	"fmt"
	"time"
)

// State is a caching gear. The order is meaningful: Light < Moderate < Heavy.
type State int

const (
	Light State = iota
	Moderate
	Heavy
)

// All lists the states from lightest to heaviest.
var All = [...]State{Light, Moderate, Heavy}

func (s State) String() string {
	switch s {
	case Light:
		return "light"
	case Moderate:
		return "moderate"
	case Heavy:
		return "heavy"
	}
	return fmt.Sprintf("state(%d)", int(s))
}

// Parse returns the state named s ("light", "moderate" or "heavy").
func Parse(s string) (State, error) {
	for _, st := range All {
		if st.String() == s {
			return st, nil
		}
	}
	return Light, fmt.Errorf("unknown state %q: want light, moderate or heavy", s)
}

// MarshalText implements encoding.TextMarshaler (JSON and YAML use the name).
func (s State) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (s *State) UnmarshalText(b []byte) error {
	st, err := Parse(string(b))
	if err != nil {
		return err
	}
	*s = st
	return nil
}

// Rule holds when any of its configured conditions holds. A nil field is a
// condition that is not configured; a Rule with no field set never holds.
type Rule struct {
	LoadPerCPU      *float64 `yaml:"load_per_cpu,omitempty" json:"load_per_cpu,omitempty"`           // holds when load_per_cpu >= value
	MemAvailablePct *float64 `yaml:"mem_available_pct,omitempty" json:"mem_available_pct,omitempty"` // holds when mem_available_pct <= value
	PSICPU          *float64 `yaml:"psi_cpu,omitempty" json:"psi_cpu,omitempty"`                     // holds when psi_cpu >= value (PSI available)
	PSIMem          *float64 `yaml:"psi_mem,omitempty" json:"psi_mem,omitempty"`                     // holds when psi_mem >= value (PSI available)
}

// Band is the pair of rules of one non-light state: Enter to go up into it,
// Stay to remain in it. Stay is looser than Enter; the gap is the hysteresis.
type Band struct {
	Enter Rule `yaml:"enter" json:"enter"`
	Stay  Rule `yaml:"stay" json:"stay"`
}

// Config is everything the machine needs to decide.
type Config struct {
	Moderate   Band
	Heavy      Band
	UpConfirm  int           // consecutive samples an enter rule must hold (default 3)
	DownWindow time.Duration // the stay rule must not have held for this long to step down (default 120s)
	MinDwell   time.Duration // minimum time between transitions before stepping down (default 60s)
}

// Signals are the derived inputs of one decision (SPEC section 3).
type Signals struct {
	Time            time.Time
	LoadPerCPU      float64
	MemAvailablePct float64  // 100 when the input had no memory figure
	PSICPU          *float64 // nil: no PSI on this kernel
	PSIMem          *float64 // nil: no PSI on this kernel

	memUnknown bool // the input had no memory figure: no memory condition holds
}
