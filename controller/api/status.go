// Package api is the daemon's control socket: the server, the client, and
// the JSON documents they exchange (docs/operating.md#commands), with the
// status as
// `gearshift status` prints it.
package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"time"
)

// FrontDoor is status front_door: the last minute's requests that came
// straight, told by PROXY protocol, forwarded by a trusted proxy, or
// from a trusted proxy that told nothing (docs/hostile.md).
type FrontDoor struct {
	Direct        int `json:"direct"`
	ProxyProtocol int `json:"proxy_protocol"`
	Forwarded     int `json:"forwarded"`
	Unidentified  int `json:"unidentified"`
}

// UnidentifiedBusy is the least of a minute's requests at which most of
// them unidentified is a warning: fewer are a local tool's.
const UnidentifiedBusy = 60

// MostlyUnidentified tells whether most of a busy minute's requests came
// from a trusted proxy that told nothing of their visitor: behind such a
// terminator every visitor is trusted as local.
func (f *FrontDoor) MostlyUnidentified() bool {
	if f == nil {
		return false
	}
	total := f.Direct + f.ProxyProtocol + f.Forwarded + f.Unidentified
	return total >= UnidentifiedBusy && 2*f.Unidentified > total
}

// UnidentifiedAdvice is what to change when MostlyUnidentified holds.
const UnidentifiedAdvice = "most requests come from a trusted proxy that does not say who the visitor is, so every visitor is trusted as local " +
	"(purges, no client budget): have the TLS terminator speak PROXY protocol to a varnishd -a NAME=ADDR,PROXY listener (hitch), " +
	"or set X-Forwarded-For (nginx, Apache mod_proxy), and set profiles.purge_token_file"

// Status is the body of GET /v1/status and of `gearshift status --json`
// (docs/operating.md#commands). Field names are a public contract.
type Status struct {
	Version      string         `json:"version"`
	State        string         `json:"state"`
	Mode         string         `json:"mode"` // "auto" or "forced"
	ForcedUntil  *time.Time     `json:"forced_until"`
	Since        time.Time      `json:"since"`
	Reason       string         `json:"reason"`
	Transitions  int            `json:"transitions"`
	Sample       *SampleStatus  `json:"sample"`
	Targets      []TargetStatus `json:"targets"`
	ConfigError  string         `json:"config_error"`
	LogError     string         `json:"log_error"`     // "" while logging works
	HistoryError string         `json:"history_error"` // "" while the flight recorder records (or is off)
	// Advice says why a gear above light sends many requests to the
	// backend and what would change it; "" when none is due.
	Advice string `json:"advice"`
	// GuestPages counts the anonymous pages heavy shares because the
	// daemon found them the same for two new visitors
	// (profiles.guest_pages); GuestPrivate those found to differ or to
	// carry their session, GuestPrivateURLs the first few of them.
	GuestPages       int      `json:"guest_pages"`
	GuestPrivate     int      `json:"guest_private"`
	GuestPrivateURLs []string `json:"guest_private_urls"`
	// GuestError says why heavy does not ask the daemon for guest pages
	// although guest_pages is auto (it cannot listen at guest_listen);
	// "" when fine or off.
	GuestError string `json:"guest_error"`
	// OverBudget counts the requests refused for their client's budget
	// (profiles.client_budget) in the last minute, OverBudgetClients the
	// clients with the most of them (at most 5); read from the log of
	// the first target with a name.
	OverBudget        int      `json:"over_budget"`
	OverBudgetClients []string `json:"over_budget_clients"`
	VarnishMode       string   `json:"varnish_mode"` // varnish.mode: "active" or "label"
	UptimeSeconds     int64    `json:"uptime_seconds"`
	// FrontDoor counts the requests of the last minute by how their
	// visitor was known; nil while the Varnish log cannot be read.
	FrontDoor *FrontDoor `json:"front_door"`
	// Sites are the config's sites, the default site first (SPEC 15);
	// State is then the heaviest site's gear.
	Sites []SiteStatus `json:"sites"`

	// LogWriteErrors counts the log lines that could not be written
	// (metrics; not part of the JSON contract).
	LogWriteErrors uint64 `json:"-"`
	// HistoryWriteErrors counts the history records that could not be
	// written (metrics only).
	HistoryWriteErrors uint64 `json:"-"`
}

// SampleStatus is the last sample and the signals derived from it.
type SampleStatus struct {
	Time     time.Time
	Load1    float64
	Load5    float64
	Load15   float64
	Runnable float64
	CPUs     int
	// Signals holds each signal of the daemon's set by name, nil when
	// unavailable. In JSON they follow "cpus" as fields of their own, in
	// Order: "load_per_cpu", "mem_available_pct", "psi_cpu", … (null when
	// unavailable).
	Signals map[string]*float64
	// Order is the order of the signals in JSON: the daemon's signal set's.
	// Signals not in it follow by name. Reading JSON keeps its order.
	Order []string
}

// Signal returns the value of the signal name, false when it is unavailable.
func (s *SampleStatus) Signal(name string) (float64, bool) {
	if p := s.Signals[name]; p != nil {
		return *p, true
	}
	return 0, false
}

// fields are the sample's own figures, in JSON order: what precedes the
// signals.
func (s *SampleStatus) fields() []struct {
	name string
	v    any
} {
	return []struct {
		name string
		v    any
	}{{"time", &s.Time}, {"load1", &s.Load1}, {"load5", &s.Load5}, {"load15", &s.Load15}, {"runnable", &s.Runnable}, {"cpus", &s.CPUs}}
}

// MarshalJSON writes the sample's figures, then every signal in Order, then
// any other signal the sample carries, by name.
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
	for _, f := range s.fields() {
		if err := field(f.name, f.v); err != nil {
			return nil, err
		}
	}
	var extra []string
	for k := range s.Signals {
		if !slices.Contains(s.Order, k) {
			extra = append(extra, k)
		}
	}
	sort.Strings(extra)
	for _, name := range append(slices.Clone(s.Order), extra...) {
		if err := field(name, s.Signals[name]); err != nil {
			return nil, err
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON reads what MarshalJSON writes; every field other than the
// sample's figures is a signal, and Order is the order they come in.
func (s *SampleStatus) UnmarshalJSON(data []byte) error {
	*s = SampleStatus{Signals: map[string]*float64{}}
	own := map[string]any{}
	for _, f := range s.fields() {
		own[f.name] = f.v
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return fmt.Errorf("sample: want an object")
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		k, _ := t.(string)
		if dst, ok := own[k]; ok {
			if err := dec.Decode(dst); err != nil {
				return fmt.Errorf("sample field %s: %w", k, err)
			}
			continue
		}
		var v *float64
		if err := dec.Decode(&v); err != nil {
			return fmt.Errorf("sample field %s: %w", k, err)
		}
		if _, dup := s.Signals[k]; !dup {
			s.Order = append(s.Order, k)
		}
		s.Signals[k] = v
	}
	return nil
}

var (
	_ json.Marshaler   = SampleStatus{}
	_ json.Unmarshaler = (*SampleStatus)(nil)
)

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
