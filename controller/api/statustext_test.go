package api

import (
	"bytes"
	"path/filepath"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/internal/testsupport/golden"
)

func pf64(v float64) *float64 { return &v }

func TestStatusGolden(t *testing.T) {
	now := time.Date(2026, 11, 30, 15, 51, 2, 0, time.UTC)
	since := time.Date(2026, 11, 30, 14, 51, 2, 0, time.UTC)
	until := now.Add(29*time.Minute + 30*time.Second)
	base := func() Status {
		return Status{
			Version:     "0.1.0",
			State:       "moderate",
			Mode:        "auto",
			Since:       since,
			Reason:      "load_per_cpu 0.82 >= 0.70 for 3 samples",
			Transitions: 4,
			Sample: &SampleStatus{
				Time: now.Add(-time.Second), Load1: 1.64, Load5: 1.2, Load15: 0.9, Runnable: 2, CPUs: 2,
				Signals: map[string]*float64{
					"load_per_cpu": pf64(0.82), "mem_available_pct": pf64(41.3), "psi_cpu": pf64(12.5), "psi_mem": pf64(0),
				},
			},
			Targets: []TargetStatus{{
				Admin: "127.0.0.1:6082", Reachable: true, ActiveVCL: "gearshift-moderate-1a2b3c4d",
				InSync: true, LastSwitchMS: 0.41,
			}},
			UptimeSeconds: 3600,
		}
	}
	signals, err := config.Default().Signals()
	if err != nil {
		t.Fatal(err)
	}
	sc := config.Default().StateConfig(signals)
	tests := []struct {
		name   string
		status func() Status
		thresh bool
	}{
		{"auto", base, true},
		{"no-thresholds", base, false},
		{"forced-until", func() Status {
			s := base()
			s.State, s.Mode, s.ForcedUntil = "heavy", "forced", &until
			s.Reason = "forced by operator until 16:20"
			s.GuestPages, s.GuestPrivate, s.GuestPrivateURLs = 12, 1, []string{"shop.example/login.php"}
			return s
		}, true},
		{"forced-no-psi", func() Status {
			s := base()
			s.State, s.Mode = "light", "forced"
			s.Reason = "forced by operator until auto"
			s.Sample.Signals["psi_cpu"], s.Sample.Signals["psi_mem"] = nil, nil
			return s
		}, true},
		{"trouble", func() Status {
			s := base()
			s.ConfigError = "reload config: states.heavy.enter.load_per_cpu: must be > states.moderate.enter.load_per_cpu"
			s.Targets = append(s.Targets,
				TargetStatus{Admin: "10.0.0.2:6082", Error: "connect to varnish admin 10.0.0.2:6082: connection refused"},
				TargetStatus{Admin: "10.0.0.4:6082", Reachable: true, InSync: true, ActiveVCL: "gearshift-moderate-1a2b3c4d", Child: "stopped"},
				TargetStatus{Admin: "10.0.0.3:6082", Reachable: true, ActiveVCL: "boot",
					Error: "load profile gearshift-heavy-0badc0de into 10.0.0.3:6082: vcl.inline on 10.0.0.3:6082: varnish cli status 106: Message from VCC-compiler:\nExpected ';' got 'sub'\n('<vcl.inline>' Line 12 Pos 1)\nRunning VCC-compiler failed, exited with 2\nVCL compilation failed"})
			return s
		}, true},
		{"label-mode", func() Status {
			s := base()
			s.VarnishMode = "label"
			s.Targets[0].LabelVCL, s.Targets[0].ActiveVCL = s.Targets[0].ActiveVCL, "reload_20261130_145000_812"
			s.Targets = append(s.Targets, TargetStatus{Admin: "10.0.0.2:6082", Reachable: true, ActiveVCL: "boot",
				LabelVCL: "gearshift-light-5e6f7a8b", LastSwitchMS: 0.03})
			return s
		}, true},
		{"front-door", func() Status {
			s := base()
			s.FrontDoor = &FrontDoor{Direct: 3, ProxyProtocol: 1200, Forwarded: 40, Unidentified: 2}
			s.GuestError = "cannot listen at profiles.guest_listen 127.0.0.1:6089 (bind: address already in use): heavy fetches guest pages from the backend until it can"
			return s
		}, true},
		{"starting", func() Status {
			s := base()
			s.State, s.Reason, s.Transitions, s.Sample = "light", "starting in light", 0, nil
			s.Since = now.Add(-2 * time.Second)
			s.Targets[0].InSync, s.Targets[0].ActiveVCL, s.Targets[0].LastSwitchMS = false, "boot", 0
			s.UptimeSeconds = 2
			return s
		}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.status()
			var buf bytes.Buffer
			th := &sc
			if !tc.thresh {
				th = nil
			}
			s.WriteText(&buf, signals, th, now)
			golden.Check(t, filepath.Join("status", tc.name+".txt"), buf.Bytes())
		})
	}
}

// With sensor.phpfpm on, its row shows the pool's figures beside the
// thresholds of the default rules it added.
func TestStatusGoldenPHPFPM(t *testing.T) {
	cfg, err := config.ParseSettings([]byte("sensor: { phpfpm: { socket: /run/php/php8.2-fpm-status.sock, listen: /run/php/php8.2-fpm.sock, max_children: 5 } }\n"))
	if err != nil {
		t.Fatal(err)
	}
	signals, err := cfg.Signals()
	if err != nil {
		t.Fatal(err)
	}
	sc := cfg.StateConfig(signals)
	now := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	s := Status{
		Version: "0.1.0", State: "heavy", Mode: "auto", Since: now.Add(-time.Minute), Transitions: 2,
		Reason: "phpfpm_busy_ratio 1.00 >= 0.90 for 3 samples",
		Sample: &SampleStatus{
			Time: now.Add(-time.Second), Load1: 1.1, Load5: 0.6, Load15: 0.3, Runnable: 3, CPUs: 2,
			Signals: map[string]*float64{
				"load_per_cpu": pf64(0.55), "mem_available_pct": pf64(52.1), "psi_cpu": pf64(3.5), "psi_mem": pf64(0),
				"phpfpm_queue": pf64(7), "phpfpm_busy_ratio": pf64(1), "phpfpm_max_children_reached": pf64(0),
			},
		},
		Targets: []TargetStatus{{
			Admin: "127.0.0.1:6082", Reachable: true, ActiveVCL: "gearshift-heavy-1a2b3c4d", InSync: true, LastSwitchMS: 0.38,
		}},
		UptimeSeconds: 600,
	}
	var buf bytes.Buffer
	s.WriteText(&buf, signals, &sc, now)
	golden.Check(t, filepath.Join("status", "phpfpm.txt"), buf.Bytes())
}
