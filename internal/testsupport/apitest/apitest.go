// Package apitest holds the status documents the tests of check and its
// judgement start from.
package apitest

import (
	"time"

	"github.com/gearshift/gearshift/controller/api"
)

// Now is the time the documents are read at.
var Now = time.Date(2026, 11, 30, 15, 4, 5, 0, time.UTC)

// F64 returns a pointer to v, as a status's signals hold them.
func F64(v float64) *float64 { return &v }

// HealthyStatus is a daemon in moderate, in sync, with a fresh sample as
// of Now.
func HealthyStatus() *api.Status {
	return &api.Status{
		Version: "0.1.0", State: "moderate", Mode: "auto",
		Since:       Now.Add(-12*time.Minute - 3*time.Second),
		Reason:      "load_per_cpu 0.82 >= 0.70 for 3 samples",
		Transitions: 4,
		Sample: &api.SampleStatus{
			Time: Now.Add(-400 * time.Millisecond), Load1: 1.64, Load5: 1.2, Load15: 0.9, Runnable: 2,
			CPUs: 2, Signals: map[string]*float64{
				"load_per_cpu": F64(0.82), "mem_available_pct": F64(41.3), "psi_cpu": F64(12.5), "psi_mem": F64(0),
			},
		},
		Targets: []api.TargetStatus{{
			Admin: "127.0.0.1:6082", Reachable: true, ActiveVCL: "gearshift-moderate-1a2b3c4d", InSync: true, LastSwitchMS: 0.41, Child: "running",
		}},
		UptimeSeconds: 3600,
	}
}
