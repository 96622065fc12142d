package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/gearshift/gearshift/internal/testsupport/golden"
)

const traces = "../../scripts/traces"

// TestSimulateGolden replays the example traces and compares the human
// output with testdata/simulate/*.golden (-update rewrites them).
func TestSimulateGolden(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{"surge", []string{"--trace", traces + "/surge.csv"}},
		{"surge-tuned", []string{"--trace", traces + "/surge.csv", "--config", "testdata/simulate/tuned.yaml"}},
		{"slow-climb", []string{"--trace", traces + "/slow-climb.csv", "--cpus", "2"}},
		{"flapping", []string{"--trace", traces + "/flapping.csv"}},
		{"surge-bounce", []string{"--trace", traces + "/surge-bounce.csv"}},
		{"surge-guarded", []string{"--trace", traces + "/surge-guarded.csv"}},
		{"sadf", []string{"--trace", "testdata/simulate/sadf.csv", "--cpus", "2"}},
		{"memory-squeeze", []string{"--trace", "testdata/simulate/memory-squeeze.csv"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"simulate", "--config", "testdata/simulate/defaults.yaml"}, tc.args...)
			code, stdout, stderr := runMain(t, args...)
			if code != exitOK {
				t.Fatalf("exit code %d, stderr %q", code, stderr)
			}
			golden.Check(t, filepath.Join("simulate", tc.name+".golden"), []byte(stdout))
		})
	}
}

// TestSimulateTrafficGuard replays the two example traces of one surge:
// on the load alone the gear bounces between heavy and moderate while the
// surge lasts; with Varnish's request rate it goes up once and comes down
// once the surge (+5m to +25m) is over. With the guard turned off, the
// second trace bounces too.
func TestSimulateTrafficGuard(t *testing.T) {
	off := filepath.Join(t.TempDir(), "off.yaml")
	if err := os.WriteFile(off, []byte("hysteresis: { down_traffic_ratio: 0 }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A rule on client_rps with no counters to read (a Varnish on another
	// machine): the daemon would refuse it (no source), an offline replay
	// takes the trace's column.
	unsourced := filepath.Join(t.TempDir(), "unsourced.yaml")
	if err := os.WriteFile(unsourced, []byte("varnish: { targets: [ { admin: 192.0.2.10:6082, secret_file: /etc/varnish/secret } ] }\nstates: { heavy: { enter: { load_per_cpu: 1.5, mem_available_pct: 10, client_rps: 100000 }, stay: { load_per_cpu: 1.0, mem_available_pct: 15, client_rps: 90000 } } }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runMain(t, "config", "check", "--config", unsourced); code != exitUsage || !strings.Contains(stderr, "needs varnish.targets[].name to be set") {
		t.Errorf("config check of a client_rps rule without a target name: exit %d, %q; want it refused", code, stderr)
	}
	tests := []struct {
		name, trace, config string
		bounces             bool
	}{
		{"load alone", "surge-bounce.csv", "testdata/simulate/defaults.yaml", true},
		{"with client_rps, a rule on it and no target name", "surge-guarded.csv", unsourced, false},
		{"with client_rps", "surge-guarded.csv", "testdata/simulate/defaults.yaml", false},
		{"with client_rps, guard off", "surge-guarded.csv", off, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runMain(t, "simulate", "--config", tc.config, "--trace", traces+"/"+tc.trace, "--json")
			if code != exitOK {
				t.Fatalf("exit code %d, stderr %q", code, stderr)
			}
			var out struct {
				Transitions []struct {
					Offset   float64 `json:"offset_s"`
					From, To string
				}
			}
			if err := json.Unmarshal([]byte(stdout), &out); err != nil {
				t.Fatal(err)
			}
			heavy, downEarly := 0, 0
			for _, tr := range out.Transitions {
				if tr.To == "heavy" {
					heavy++
				}
				if tr.From == "heavy" && tr.Offset < 25*60 {
					downEarly++
				}
			}
			if tc.bounces && (heavy < 3 || downEarly < 2) {
				t.Errorf("entered heavy %d times, left it %d times during the surge; want a bounce: %+v", heavy, downEarly, out.Transitions)
			}
			if !tc.bounces && (heavy != 1 || downEarly != 0 || len(out.Transitions) != 4) {
				t.Errorf("entered heavy %d times, left it %d times during the surge; want up once, down after: %+v", heavy, downEarly, out.Transitions)
			}
		})
	}
}

// TestSimulateJSON checks the shape of --json
// (docs/signals.md#tuning-thresholds-with-gearshift-simulate).
func TestSimulateJSON(t *testing.T) {
	code, stdout, stderr := runMain(t, "simulate", "--config", "testdata/simulate/defaults.yaml", "--trace", traces+"/surge.csv", "--json")
	if code != exitOK {
		t.Fatalf("exit code %d, stderr %q", code, stderr)
	}
	var out map[string]any
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("not one JSON object: %v\n%s", err, stdout)
	}
	assertKeys(t, "top level", out, "summary", "transitions")
	trs, ok := out["transitions"].([]any)
	if !ok || len(trs) == 0 {
		t.Fatalf("transitions = %v, want a non-empty array", out["transitions"])
	}
	for i, tr := range trs {
		m := tr.(map[string]any)
		assertKeys(t, "transition", m, "from", "offset_s", "reason", "to")
		if _, ok := m["offset_s"].(float64); !ok {
			t.Errorf("transition %d: offset_s %v is not a number", i, m["offset_s"])
		}
		for _, k := range []string{"from", "to", "reason"} {
			if s, ok := m[k].(string); !ok || s == "" {
				t.Errorf("transition %d: %s %v is not a non-empty string", i, k, m[k])
			}
		}
	}
	first := trs[0].(map[string]any)
	if first["offset_s"] != 304.0 || first["from"] != "light" || first["to"] != "moderate" || first["reason"] != "load_per_cpu 1.63 >= 0.70 for 3 samples" {
		t.Errorf("first transition %v", first)
	}
	sum := out["summary"].(map[string]any)
	assertKeys(t, "summary", sum, "samples", "seconds_in", "transitions")
	if sum["samples"] != 751.0 || sum["transitions"] != float64(len(trs)) {
		t.Errorf("summary %v", sum)
	}
	in := sum["seconds_in"].(map[string]any)
	assertKeys(t, "seconds_in", in, "heavy", "light", "moderate")
	var total float64
	for _, v := range in {
		total += v.(float64)
	}
	if total != 1500 {
		t.Errorf("seconds_in adds up to %v, want the trace's 1500s", total)
	}
}

func TestSimulateJSONNoTransitions(t *testing.T) {
	var out, errb bytes.Buffer
	code := Main([]string{"simulate", "--config", "testdata/simulate/defaults.yaml", "--trace", "-", "--json"},
		strings.NewReader("time,load1\n0,0.1\n1,0.1\n"), &out, &errb)
	if code != exitOK {
		t.Fatalf("exit code %d, stderr %q", code, errb.String())
	}
	want := `{
  "transitions": [],
  "summary": {
    "samples": 2,
    "transitions": 0,
    "seconds_in": {
      "heavy": 0,
      "light": 1,
      "moderate": 0
    }
  }
}
`
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
}

func TestSimulateCPUs(t *testing.T) {
	tests := []struct {
		name, csv string
		args      []string
		want      string
	}{
		{"column", "time,load1,cpus\n0,1,4\n1,1,4\n", nil, "2 samples over 1s, 4 CPUs (from the cpus column)."},
		{"column varying", "time,load1,cpus\n0,1,1\n1,1,4\n2,1,\n", []string{"--cpus", "2"}, "3 samples over 2s, 1 to 4 CPUs (from the cpus column)."},
		{"flag", "time,load1\n0,1\n", []string{"--cpus", "3"}, "1 sample over 0s, 3 CPUs (from --cpus)."},
		{"config", "time,load1\n0,1\n", []string{"--config", "testdata/simulate/tuned.yaml"}, "6 CPUs (from the config)."},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			args := append([]string{"simulate", "--config", "testdata/simulate/defaults.yaml", "--trace", "-"}, tc.args...)
			if code := Main(args, strings.NewReader(tc.csv), &out, &errb); code != exitOK {
				t.Fatalf("exit code %d, stderr %q", code, errb.String())
			}
			if first, _, _ := strings.Cut(out.String(), "\n"); !strings.HasSuffix(first, tc.want) {
				t.Errorf("first line %q, want it to end with %q", first, tc.want)
			}
		})
	}
}

func assertKeys(tb testing.TB, what string, m map[string]any, want ...string) {
	tb.Helper()
	var got []string
	for k := range m {
		got = append(got, k)
	}
	sort.Strings(got)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		tb.Errorf("%s keys %v, want %v", what, got, want)
	}
}

func TestSimulateErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bad := write("bad.csv", "time,load1\n0,1\n1,high\n")
	badCfg := write("bad.yaml", "hysteresis: { min_dwell: soon }\n")
	noSecret := write("nosecret.yaml", "varnish: { targets: [ { admin: 127.0.0.1:6082, secret_file: "+dir+"/missing } ] }\n")
	good := write("good.csv", "time,load1,extra\n0,1,x\n")
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStderr string
	}{
		{"bad row", []string{"--trace", bad}, exitUsage,
			"gearshift: trace " + bad + ", line 3, column 2 (load1): \"high\" is not a number.\n"},
		{"missing file", []string{"--trace", dir + "/nope.csv"}, exitUsage,
			"gearshift: open trace: open " + dir + "/nope.csv: no such file or directory.\n"},
		{"no --trace", nil, exitUsage, "gearshift: required flag(s) \"trace\" not set.\n"},
		{"argument", []string{"--trace", good, "extra"}, exitUsage, "gearshift: unknown command \"extra\" for \"gearshift simulate\".\n"},
		{"negative cpus", []string{"--trace", good, "--cpus", "-1"}, exitUsage, "gearshift: --cpus -1: must be 0 (detect) or more.\n"},
		{"bad config", []string{"--trace", good, "--config", badCfg}, exitUsage,
			"gearshift: config " + badCfg + ": hysteresis.min_dwell: \"soon\" is not a duration (use e.g. 90s, 2m, 1h) (line 1).\n"},
		{"config for another machine", []string{"--trace", good, "--config", noSecret}, exitOK,
			"gearshift: trace " + good + ", line 1, column 3: ignoring unknown column \"extra\"\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"simulate", "--config", "testdata/simulate/defaults.yaml"}, tc.args...)
			code, _, stderr := runMain(t, args...)
			if code != tc.wantCode {
				t.Errorf("exit code %d, want %d", code, tc.wantCode)
			}
			if stderr != tc.wantStderr {
				t.Errorf("stderr\n got %q\nwant %q", stderr, tc.wantStderr)
			}
		})
	}
}
