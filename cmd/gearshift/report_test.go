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
	"github.com/gearshift/gearshift/controller/sensor"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/controller/trace"
)

// writeSurgeHistory records, in dir, 10 minutes of light from 03:00 UTC on
// 2026-12-01, 5 of moderate, 10 of heavy and 10 of light again, one record
// every 10 seconds, with Varnish's request rates.
func writeSurgeHistory(tb testing.TB, dir string) {
	tb.Helper()
	set, err := config.Default().Signals()
	if err != nil {
		tb.Fatal(err)
	}
	r := history.NewRecorder(history.Options{Dir: dir, Keep: 14 * 24 * time.Hour, Signals: set})
	defer r.Close()
	t0 := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
	for off := time.Duration(0); off <= 35*time.Minute; off += 10 * time.Second {
		gear, load, client, backend := state.Light, 0.4, 100.0, 50.0
		switch {
		case off >= 25*time.Minute:
		case off >= 15*time.Minute:
			gear, load, client, backend = state.Heavy, 5, 1000, 100
		case off >= 10*time.Minute:
			gear, load, client, backend = state.Moderate, 3, 1000, 400
		}
		t := t0.Add(off)
		err := r.Write(trace.Sample{
			Time: t,
			Reading: state.Reading{Time: t, Load1: load, RunQueue: load, CPUs: 2, Values: map[string]float64{
				sensor.MemAvailablePct: 50, state.ClientRPS: client, sensor.BackendRPS: backend,
			}},
			Recorded: &trace.Recorded{Gear: gear, Reason: "load_per_cpu " + gear.String()},
		})
		if err != nil {
			tb.Fatal(err)
		}
	}
}

func TestReportCommand(t *testing.T) {
	dir := t.TempDir()
	writeSurgeHistory(t, dir)
	base := []string{"report", "--config", "testdata/simulate/defaults.yaml", "--dir", dir}
	period := []string{"--from", "2026-12-01T03:00:00Z", "--to", "2026-12-01T04:00:00Z"}

	t.Run("json", func(t *testing.T) {
		code, stdout, stderr := runMain(t, append(base, append(period, "--json")...)...)
		if code != exitOK {
			t.Fatalf("exit %d, stderr %q", code, stderr)
		}
		var out struct {
			Samples     int
			Transitions []struct{ From, To string }
			Incidents   []struct {
				SecondsToHeavy *float64 `json:"seconds_to_heavy"`
				Requests       *float64
				Saved          *float64 `json:"backend_saved"`
			}
		}
		if err := json.Unmarshal([]byte(stdout), &out); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, stdout)
		}
		if out.Samples != 211 || len(out.Transitions) != 3 || len(out.Incidents) != 1 {
			t.Fatalf("%d samples, %d transitions, %d incidents; want 211, 3, 1", out.Samples, len(out.Transitions), len(out.Incidents))
		}
		in := out.Incidents[0]
		if in.SecondsToHeavy == nil || *in.SecondsToHeavy != 300 || in.Requests == nil || *in.Requests != 891000 || *in.Saved != 269000 {
			t.Errorf("incident: to heavy %v, requests %v, saved %v", in.SecondsToHeavy, in.Requests, in.Saved)
		}
	})

	t.Run("svg", func(t *testing.T) {
		svg := filepath.Join(t.TempDir(), "surge.svg")
		code, stdout, stderr := runMain(t, append(base, append(period, "--svg", svg)...)...)
		if code != exitOK {
			t.Fatalf("exit %d, stderr %q", code, stderr)
		}
		if !strings.Contains(stdout, "20261201T031000Z: from 2026-12-01 03:10:00, back in light at 2026-12-01 03:25:00; 15m above light, heavy after 5m.") {
			t.Errorf("the text report lacks the incident:\n%s", stdout)
		}
		b, err := os.ReadFile(svg)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(b), "<svg") || !strings.Contains(string(b), ">moderate</text>") {
			t.Errorf("%s is not the chart: %.80q", svg, b)
		}
	})

	t.Run("since", func(t *testing.T) {
		// A century back from now holds the history whatever the clock says.
		code, stdout, stderr := runMain(t, append(base, "--since", "36500d")...)
		if code != exitOK || !strings.Contains(stdout, "(35m): 211 records from "+dir+".") {
			t.Errorf("exit %d, stderr %q, stdout:\n%s", code, stderr, stdout)
		}
	})

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"since and from", []string{"--since", "1h", "--from", "2026-12-01 03:00"}, "--since and --from/--to exclude each other"},
		{"bad from", []string{"--from", "noon"}, `--from "noon" is neither RFC 3339`},
		{"bad since", []string{"--since", "a while"}, `"a while" is not a duration`},
		{"svg and png", append(period, "--svg", "a.svg", "--png", "a.png"), "--svg and --png exclude each other"},
		{"unknown flag", []string{"--format", "csv"}, "unknown flag: --format"},
		{"an argument", []string{"today"}, `unknown command "today"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runMain(t, append(base, tc.args...)...)
			if code != exitUsage || !strings.Contains(stderr, tc.want) || stdout != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want 2 and %q", code, stdout, stderr, tc.want)
			}
		})
	}
}

func TestReportCommandNoHistory(t *testing.T) {
	dir := t.TempDir()
	code, stdout, stderr := runMain(t, "report", "--config", "testdata/simulate/defaults.yaml", "--dir", dir)
	want := "gearshift: no history in " + dir + " (is history.dir right, and has the daemon run?).\n"
	if code != exitFailure || stderr != want || stdout != "" {
		t.Errorf("exit %d, stdout %q, stderr %q; want 1 and %q", code, stdout, stderr, want)
	}

	writeSurgeHistory(t, dir)
	code, _, stderr = runMain(t, "report", "--config", "testdata/simulate/defaults.yaml", "--dir", dir, "--from", "2026-12-01T05:00:00Z")
	want = "gearshift: no records in " + dir + " from 2026-12-01 05:00:00 UTC on.\n"
	if code != exitFailure || stderr != want {
		t.Errorf("empty period: exit %d, stderr %q; want 1 and %q", code, stderr, want)
	}
}
