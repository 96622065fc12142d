// Package controller is the gearshift daemon: the poll → decide → apply loop
// that keeps every Varnish target on the gear the state machine chooses, and
// the control socket that operators and monitoring talk to.
package controller

import "time"

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
	UptimeSeconds int64          `json:"uptime_seconds"`
}

// SampleStatus is the last sample and the signals derived from it.
type SampleStatus struct {
	Time            time.Time `json:"time"`
	Load1           float64   `json:"load1"`
	Load5           float64   `json:"load5"`
	Load15          float64   `json:"load15"`
	Runnable        int       `json:"runnable"`
	CPUs            int       `json:"cpus"`
	LoadPerCPU      float64   `json:"load_per_cpu"`
	MemAvailablePct float64   `json:"mem_available_pct"`
	PSICPU          *float64  `json:"psi_cpu"` // null without PSI
	PSIMem          *float64  `json:"psi_mem"` // null without PSI
}

// TargetStatus is one Varnish instance as the daemon last saw it.
type TargetStatus struct {
	Admin        string  `json:"admin"`
	Reachable    bool    `json:"reachable"`
	ActiveVCL    string  `json:"active_vcl"`
	InSync       bool    `json:"in_sync"`
	LastSwitchMS float64 `json:"last_switch_ms"`
	Error        string  `json:"error"`
}
