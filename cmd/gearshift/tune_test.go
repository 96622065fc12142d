package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gearshift/gearshift/controller/config"
)

// tune finds thresholds that put heavy on within 30 s of both distress
// periods, which the recorded config caught late and missed, prints them
// as a states: block that loads, and leaves the config file alone.
func TestTune(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "history")
	cfgPath := writeReplayConfig(t, dir, replaySlow)
	recordReplayHistory(t, dir, cfgPath, true)
	before, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}

	code, stdout, stderr := runMain(t, "tune", "--config", cfgPath, "--json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	type outcome struct {
		OnTime             int        `json:"on_time"`
		Late               int        `json:"late"`
		Missed             int        `json:"missed"`
		DelaysS            []*float64 `json:"delays_s"`
		SecondsOutside     *float64   `json:"seconds_heavy_outside"`
		TransitionsOutside *int       `json:"transitions_outside"`
	}
	var out struct {
		Samples  int     `json:"samples"`
		WithinS  float64 `json:"within_s"`
		Distress struct {
			Bounds   map[string]float64 `json:"bounds"`
			Recorded []string           `json:"recorded"`
			Periods  []struct {
				Start   string   `json:"start"`
				Signals []string `json:"signals"`
			} `json:"periods"`
		} `json:"distress"`
		Replays   int                                      `json:"replays"`
		Current   outcome                                  `json:"current"`
		Suggested *outcome                                 `json:"suggested"`
		States    map[string]map[string]map[string]float64 `json:"states"`
		YAML      string                                   `json:"yaml"`
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("%v:\n%s", err, stdout)
	}
	if out.Samples != 3600 || out.WithinS != 30 || out.Distress.Bounds["backend_ttfb_ms"] != 1000 || len(out.Distress.Periods) != 2 {
		t.Fatalf("samples %d, within %g, bounds %v, periods %+v", out.Samples, out.WithinS, out.Distress.Bounds, out.Distress.Periods)
	}
	if c := out.Current; c.OnTime != 0 || c.Late != 1 || c.Missed != 1 || len(c.DelaysS) != 2 || c.DelaysS[1] != nil {
		t.Errorf("current %+v: want the first period late, the second missed", c)
	}
	s := out.Suggested
	if s == nil {
		t.Fatalf("no suggestion:\n%s", stdout)
	}
	if s.OnTime != 2 || *s.SecondsOutside > *out.Current.SecondsOutside || *s.TransitionsOutside > *out.Current.TransitionsOutside {
		t.Errorf("suggested %+v, current %+v: want both on time, no more heavy or transitions outside", *s, out.Current)
	}
	ttfb := out.States["heavy"]["enter"]["backend_ttfb_ms"]
	if ttfb <= 100 || ttfb > 2000 {
		t.Errorf("heavy.enter.backend_ttfb_ms %g, want between the healthy 100 and the distress's 2000", ttfb)
	}
	pasted, err := config.ParseSettings([]byte(replayProbe + out.YAML))
	if err != nil {
		t.Fatalf("the suggested block does not load: %v\n%s", err, out.YAML)
	}
	if pasted.States.Heavy.Enter["backend_ttfb_ms"] != ttfb {
		t.Errorf("the block reads %v, the JSON %g", pasted.States.Heavy.Enter, ttfb)
	}

	code, stdout, stderr = runMain(t, "tune", "--config", cfgPath, "--dir", dir, "--since", "2h", "--within", "1m")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"Objective: heavy within 1m of the start", "\nstates:\n  moderate:\n", "heavy within 1m", "CURRENT", "SUGGESTED"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("text lacks %q:\n%s", want, stdout)
		}
	}
	after, err := os.ReadFile(cfgPath)
	if err != nil || string(after) != string(before) {
		t.Errorf("tune changed the config: %v\n%s", err, after)
	}
}

// Bounds set above what the history saw: no distress, no suggestion.
func TestTuneNoDistress(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "history")
	cfgPath := writeReplayConfig(t, dir, replaySlow)
	recordReplayHistory(t, dir, cfgPath, true)

	code, stdout, stderr := runMain(t, "tune", "--config", cfgPath, "--distress-ttfb", "5000", "--distress-load", "3")
	if code != exitOK || !strings.Contains(stdout, "No distress in this history") || strings.Contains(stdout, "states:") {
		t.Errorf("exit %d, stderr %q, stdout:\n%s", code, stderr, stdout)
	}
	code, stdout, _ = runMain(t, "tune", "--config", cfgPath, "--distress-ttfb", "5000", "--distress-load", "3", "--json")
	var out map[string]any
	if err := json.Unmarshal([]byte(stdout), &out); err != nil || code != exitOK {
		t.Fatalf("exit %d, %v:\n%s", code, err, stdout)
	}
	if out["suggested"] != nil || out["states"] != nil || out["yaml"] != "" || out["replays"] != 1.0 {
		t.Errorf("suggested %v, states %v, yaml %q, replays %v: want none after one replay", out["suggested"], out["states"], out["yaml"], out["replays"])
	}
}

func TestTuneErrors(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "history")
	cfgPath := writeReplayConfig(t, dir, replaySlow)
	recordReplayHistory(t, dir, cfgPath, false)
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStderr string
	}{
		{"argument", []string{"now"}, exitUsage, `unknown command "now"`},
		{"negative within", []string{"--within", "-5s"}, exitUsage, "must be positive"},
		{"zero bound", []string{"--distress-load", "0"}, exitUsage, "must be positive"},
		{"bad since", []string{"--since", "a while"}, exitUsage, "--since"},
		{"recording off", []string{"--config", writeReplayConfig(t, "", replayProbe)}, exitUsage, "history.dir is empty"},
		{"no history there", []string{"--dir", filepath.Join(dir, "nope")}, exitFailure, "nope"},
		{"nothing in the period", []string{"--since", "30s"}, exitFailure, "no records in " + dir},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runMain(t, append([]string{"tune", "--config", cfgPath}, tc.args...)...)
			if code != tc.wantCode || !strings.Contains(stderr, tc.wantStderr) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr, tc.wantCode, tc.wantStderr)
			}
		})
	}
}

// The help states the objective.
func TestTuneHelp(t *testing.T) {
	code, stdout, _ := runMain(t, "tune", "--help")
	for _, want := range []string{"The objective", "heavy on within --within", "--distress-load", "never writes the config"} {
		if code != exitOK || !strings.Contains(stdout, want) {
			t.Errorf("exit %d; help lacks %q:\n%s", code, want, stdout)
		}
	}
}
