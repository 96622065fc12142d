package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/history"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/controller/trace"
)

// Rules of the replay tests: the probe on, and heavy's rule on the
// backend's time to first byte too high to hold (slow) or low enough (quick).
const (
	replayProbe = "sensor: { probe: { url: 'http://127.0.0.1:8080/' } }\n"
	replaySlow  = replayProbe + "states: { heavy: { enter: { load_per_cpu: 1.5, mem_available_pct: 10, backend_ttfb_ms: 3000 }, stay: { load_per_cpu: 1.0, mem_available_pct: 15, backend_ttfb_ms: 1500 } } }\n"
	replayQuick = replayProbe + "states: { heavy: { enter: { load_per_cpu: 1.5, mem_available_pct: 10, backend_ttfb_ms: 800 }, stay: { load_per_cpu: 1.0, mem_available_pct: 15, backend_ttfb_ms: 400 } } }\n"
)

// replayVitals is an hour of vitals, one record a second: the backend in
// distress (2 s to first byte) from +600s to +900s with the load up only
// from +700s; with ttfb set, a second distress of two minutes without load
// from +2000s.
func replayVitals(i int, ttfb bool) (lpc, ms float64) {
	lpc, ms = 0.2, 100
	if ttfb && (i >= 600 && i < 900 || i >= 2000 && i < 2120) {
		ms = 2000
	}
	if i >= 700 && i < 900 {
		lpc = 2
	}
	return lpc, ms
}

// writeReplayConfig writes a config whose history.dir is dir, and returns
// its path.
func writeReplayConfig(tb testing.TB, dir, yaml string) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "gearshift.yaml")
	if err := os.WriteFile(path, []byte(yaml+"history: { dir: '"+dir+"' }\n"), 0o644); err != nil {
		tb.Fatal(err)
	}
	return path
}

// recordReplayHistory records an hour ending a minute ago in dir, decided
// as the daemon would under the config at cfgPath, and returns the first
// record's time.
func recordReplayHistory(tb testing.TB, dir, cfgPath string, ttfb bool) time.Time {
	tb.Helper()
	cfg, err := config.Load(cfgPath)
	if err != nil {
		cfg, err = config.Offline(err)
	}
	if err != nil {
		tb.Fatal(err)
	}
	set, err := cfg.Signals()
	if err != nil {
		tb.Fatal(err)
	}
	rec := history.NewRecorder(history.Options{Dir: dir, Keep: 30 * 24 * time.Hour, Signals: set})
	m := state.New(cfg.StateConfig(set), time.Duration(cfg.FastWindow))
	const n = 3600
	t0 := time.Now().Add(-(n + 60) * time.Second).Truncate(time.Second)
	for i := range n {
		t := t0.Add(time.Duration(i) * time.Second)
		lpc, ms := replayVitals(i, ttfb)
		r := state.Reading{Time: t, Load1: 2 * lpc, RunQueue: 2 * lpc, CPUs: 2, Values: map[string]float64{"mem_available_pct": 50, "backend_ttfb_ms": ms}}
		d := m.Step(t, r)
		if err := rec.Write(trace.Sample{Time: t, Reading: r, Recorded: &trace.Recorded{Gear: d.Gear, Reason: d.Reason}}); err != nil {
			tb.Fatal(err)
		}
	}
	if err := rec.Close(); err != nil {
		tb.Fatal(err)
	}
	return t0
}

func TestSimulateHistory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "history")
	t0 := recordReplayHistory(t, dir, writeReplayConfig(t, dir, replaySlow), true)
	candidate := writeReplayConfig(t, dir, replayQuick)

	code, stdout, stderr := runMain(t, "simulate", "--history", "--config", candidate, "--json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var out struct {
		History     string         `json:"history"`
		Config      string         `json:"config"`
		Samples     int            `json:"samples"`
		Changes     map[string]int `json:"changes"`
		Transitions []struct {
			Change      string   `json:"change"`
			From        string   `json:"from"`
			To          string   `json:"to"`
			RecordedAt  *string  `json:"recorded_at"`
			CandidateAt *string  `json:"candidate_at"`
			ShiftS      *float64 `json:"shift_s"`
		} `json:"transitions"`
		Recorded struct {
			SecondsIn map[string]float64 `json:"seconds_in"`
		} `json:"recorded"`
		Candidate struct {
			SecondsIn map[string]float64 `json:"seconds_in"`
		} `json:"candidate"`
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("%v:\n%s", err, stdout)
	}
	if out.History != dir || out.Config != candidate || out.Samples != 3600 {
		t.Errorf("history %q, config %q, %d samples", out.History, out.Config, out.Samples)
	}
	// The recorded climb to heavy came with the load at +702s; the
	// candidate's with the distress at +602s; the second distress is
	// the candidate's alone.
	var moved, added bool
	for _, tr := range out.Transitions {
		if tr.Change == "moved" && tr.From == "light" && tr.To == "heavy" && tr.ShiftS != nil && *tr.ShiftS == -100 &&
			*tr.RecordedAt == t0.Add(702*time.Second).UTC().Format(time.RFC3339) {
			moved = true
		}
		if tr.Change == "added" && tr.To == "heavy" && tr.RecordedAt == nil &&
			*tr.CandidateAt == t0.Add(2002*time.Second).UTC().Format(time.RFC3339) {
			added = true
		}
	}
	if !moved || !added || out.Changes["removed"] != 0 {
		t.Errorf("want light → heavy moved by -100 s and one added, none removed:\n%s", stdout)
	}
	if more := out.Candidate.SecondsIn["heavy"] - out.Recorded.SecondsIn["heavy"]; more <= 100 {
		t.Errorf("candidate heavy for %g s more, want more than the 100 s of the first distress", more)
	}

	// Text, from --dir, and a chart.
	svg := filepath.Join(t.TempDir(), "replay.svg")
	code, stdout, stderr = runMain(t, "simulate", "--history", "--since", "2h", "--dir", dir, "--config", candidate, "--svg", svg)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"Replayed under " + candidate, "1 moved", "light → heavy", "GEAR", "REPLAYED"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("text lacks %q:\n%s", want, stdout)
		}
	}
	b, err := os.ReadFile(svg)
	if err != nil || !strings.HasPrefix(string(b), "<svg") || !strings.Contains(string(b), "candidate") {
		t.Errorf("chart %s: %v, %.80q", svg, err, b)
	}
}

func TestSimulateHistoryErrors(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "history")
	cfg := writeReplayConfig(t, dir, replaySlow)
	recordReplayHistory(t, dir, cfg, false)
	off := writeReplayConfig(t, "", replayProbe)
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStderr string
	}{
		{"trace and history", []string{"--history", "--trace", "x.csv"}, exitUsage, "--trace and --history exclude each other"},
		{"since without history", []string{"--trace", "x.csv", "--since", "1h"}, exitUsage, "--since goes with --history"},
		{"svg without history", []string{"--trace", "x.csv", "--svg", "x.svg"}, exitUsage, "--svg goes with --history"},
		{"neither", nil, exitUsage, `required flag(s) "trace" not set`},
		{"svg and png", []string{"--history", "--svg", "a.svg", "--png", "a.png"}, exitUsage, "--svg and --png exclude each other"},
		{"bad since", []string{"--history", "--since", "soon"}, exitUsage, "--since"},
		{"recording off", []string{"--history", "--config", off}, exitUsage, "history.dir is empty"},
		{"no history there", []string{"--history", "--dir", filepath.Join(dir, "nope")}, exitFailure, "nope"},
		{"nothing in the period", []string{"--history", "--dir", dir, "--since", "30s"}, exitFailure, "no records in " + dir},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"simulate", "--config", cfg}, tc.args...)
			code, stdout, stderr := runMain(t, args...)
			if code != tc.wantCode || !strings.Contains(stderr, tc.wantStderr) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr, tc.wantCode, tc.wantStderr)
			}
			if code != exitOK && stdout != "" && !strings.Contains(stdout, "Usage:") {
				t.Errorf("stdout %q", stdout)
			}
		})
	}
}
