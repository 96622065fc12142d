// Package controller is the gearshift daemon: the poll → decide → apply loop
// that keeps every Varnish target on the gear the state machine chooses, and
// the control socket that operators and monitoring talk to.
package controller

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/gearshift/gearshift/controller/state"
)

// Status is the body of GET /v1/status and of `gearshift status --json`
// (SPEC section 8). Field names are a public contract.
type Status struct {
	Version       string         `json:"version"`
	State         string         `json:"state"`
	Mode          string         `json:"mode"` // "auto" or "forced"
	ForcedUntil   *time.Time     `json:"forced_until"`
	Since         time.Time      `json:"since"`
	Reason        string         `json:"reason"`
	Transitions   int            `json:"transitions"`
	Sample        *SampleStatus  `json:"sample"`
	Targets       []TargetStatus `json:"targets"`
	ConfigError   string         `json:"config_error"`
	LogError      string         `json:"log_error"`    // "" while logging works
	VarnishMode   string         `json:"varnish_mode"` // varnish.mode: "active" or "label"
	UptimeSeconds int64          `json:"uptime_seconds"`

	// LogWriteErrors counts the log lines that could not be written
	// (metrics; not part of the JSON contract).
	LogWriteErrors uint64 `json:"-"`
}

// SampleStatus is the last sample and the signals derived from it.
type SampleStatus struct {
	Time     time.Time
	Load1    float64
	Load5    float64
	Load15   float64
	Runnable float64
	CPUs     int
	// Signals holds each signal of the table by name, nil when unavailable.
	// In JSON they follow "cpus" as fields of their own, in the order of
	// the table: "load_per_cpu", "mem_available_pct", "psi_cpu", … (null
	// when unavailable).
	Signals map[string]*float64
}

// Signal returns the value of the signal name, false when it is unavailable.
func (s *SampleStatus) Signal(name string) (float64, bool) {
	if p := s.Signals[name]; p != nil {
		return *p, true
	}
	return 0, false
}

// MarshalJSON writes the sample's figures, then every signal of the table
// in its order, then any other signal the sample carries, by name.
func (s SampleStatus) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	field := func(name string, v any) error {
		if b.Len() == 0 {
			b.WriteByte('{')
		} else {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(name)
		val, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("status field %s: %w", name, err)
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(val)
		return nil
	}
	for _, f := range []struct {
		name string
		v    any
	}{{"time", s.Time}, {"load1", s.Load1}, {"load5", s.Load5}, {"load15", s.Load15}, {"runnable", s.Runnable}, {"cpus", s.CPUs}} {
		if err := field(f.name, f.v); err != nil {
			return nil, err
		}
	}
	names := state.SignalNames()
	var extra []string
	for k := range s.Signals {
		if !slices.Contains(names, k) {
			extra = append(extra, k)
		}
	}
	sort.Strings(extra)
	for _, name := range append(names, extra...) {
		if err := field(name, s.Signals[name]); err != nil {
			return nil, err
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON reads what MarshalJSON writes; every field other than the
// sample's figures is a signal.
func (s *SampleStatus) UnmarshalJSON(data []byte) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return err
	}
	*s = SampleStatus{Signals: map[string]*float64{}}
	for k, raw := range fields {
		var dst any
		switch k {
		case "time":
			dst = &s.Time
		case "load1":
			dst = &s.Load1
		case "load5":
			dst = &s.Load5
		case "load15":
			dst = &s.Load15
		case "runnable":
			dst = &s.Runnable
		case "cpus":
			dst = &s.CPUs
		default:
			var v *float64
			if err := json.Unmarshal(raw, &v); err != nil {
				return fmt.Errorf("sample field %s: %w", k, err)
			}
			s.Signals[k] = v
			continue
		}
		if err := json.Unmarshal(raw, dst); err != nil {
			return fmt.Errorf("sample field %s: %w", k, err)
		}
	}
	return nil
}

// TargetStatus is one Varnish instance as the daemon last saw it.
type TargetStatus struct {
	Admin     string `json:"admin"`
	Reachable bool   `json:"reachable"`
	ActiveVCL string `json:"active_vcl"`
	// LabelVCL is the VCL the label gearshift points to (label mode; ""
	// otherwise or while there is no such label).
	LabelVCL     string  `json:"label_vcl"`
	InSync       bool    `json:"in_sync"`
	LastSwitchMS float64 `json:"last_switch_ms"`
	// Child is the state of Varnish's cache child: "running", "stopped"
	// (nothing is served), a passing state, or "" while unknown
	// (unreachable).
	Child string `json:"child"`
	// ForeignVCLAt is when gearshift last found its VCL changed by someone
	// else (the active VCL in active mode, the label in label mode).
	ForeignVCLAt *time.Time `json:"foreign_vcl_at"`
	Error        string     `json:"error"`
}
