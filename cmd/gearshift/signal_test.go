package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller"
	"github.com/gearshift/gearshift/controller/api"
	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/sensor"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/internal/offline/health"
	"github.com/gearshift/gearshift/internal/testsupport/golden"
)

// TestTestOnlySignal adds a source that only this test knows, with one
// signal, and sees the signal validated, decided on, shown and replayed: a
// new source is one row in sensor.Sources, with no other file to touch.
func TestTestOnlySignal(t *testing.T) {
	row := &sensor.Source{
		Name: "test", Key: "sensor.test",
		Signals: []state.Signal{{
			Name: "test_queue", Unit: "", Direction: state.Rises, Precision: 0,
			Help:   "Requests waiting, as only this test counts them.",
			Metric: "gearshift_test_queue", Scale: 0.5,
		}},
		On: func(sensor.HostConfig) bool { return true },
	}
	saved := sensor.Sources
	sensor.Sources = append(slices.Clone(saved), row)
	t.Cleanup(func() { sensor.Sources = saved })

	t.Run("validated", func(t *testing.T) {
		_, err := config.ParseSettings([]byte(`
states:
  moderate: { enter: { test_queue: 100 }, stay: { test_queue: 120 } }
  heavy: { enter: { test_queue: 90, test_queu: 1 }, stay: { test_queue: -1 } }
`))
		if err == nil {
			t.Fatal("a config with bad test_queue thresholds validated")
		}
		for _, want := range []string{
			"states.moderate.stay.test_queue: must be <= states.moderate.enter.test_queue (100): a stay rule is looser than its enter rule, got 120",
			"states.heavy.enter.test_queu: unknown key (did you mean test_queue?)",
			"states.heavy.stay.test_queue: must be > 0, got -1",
			"states.heavy.enter.test_queue: must be > states.moderate.enter.test_queue (100), got 90",
		} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error lacks %q:\n%v", want, err)
			}
		}
	})

	cfgDoc := `
states:
  moderate: { enter: { test_queue: 100 }, stay: { test_queue: 80 } }
  heavy: { enter: { test_queue: 400 }, stay: { test_queue: 300 } }
hysteresis: { up_confirm: 3, down_window: 10s, min_dwell: 0s }
`
	cfg, err := config.ParseSettings([]byte(cfgDoc))
	if err != nil {
		t.Fatal(err)
	}
	set, err := cfg.Signals()
	if err != nil {
		t.Fatal(err)
	}

	var d state.Decision
	t.Run("decided on", func(t *testing.T) {
		m := state.New(cfg.StateConfig(set), 0)
		t0 := time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)
		for i := 0; i < 3; i++ {
			d = m.Step(t0.Add(time.Duration(i)*time.Second), state.Reading{Load1: 0.1, CPUs: 1, Values: map[string]float64{"test_queue": 150}})
		}
		if d.Gear != state.Moderate || d.Reason != "test_queue 150 >= 100 for 3 samples" {
			t.Fatalf("decision %+v, want moderate on test_queue", d)
		}
	})

	t.Run("shown", func(t *testing.T) {
		smp := &api.SampleStatus{Time: time.Now(), CPUs: 1, Signals: map[string]*float64{}, Order: set.Names()}
		for _, sig := range set.All() {
			smp.Signals[sig.Name] = d.Signals.Ptr(sig.Name)
		}
		st := &api.Status{State: d.Gear.String(), Mode: "auto", Since: time.Now(), Reason: d.Reason, Sample: smp}

		var text bytes.Buffer
		sc := cfg.StateConfig(set)
		st.WriteText(&text, set, &sc, time.Now())
		if want := "test_queue  150   (moderate >= 100, stays >= 80; heavy >= 400, stays >= 300)\n"; !strings.Contains(text.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, text.String())
		}

		js, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		sampleJS, _, _ := strings.Cut(string(js), `},"targets"`)
		if !strings.HasSuffix(sampleJS, `,"test_queue":150`) || !strings.Contains(sampleJS, `"backend_healthy":null,`) {
			t.Errorf("status JSON lacks test_queue after the other signals: %s", js)
		}
		var back api.Status
		if err := json.Unmarshal(js, &back); err != nil {
			t.Fatal(err)
		}
		if v, ok := back.Sample.Signal("test_queue"); !ok || v != 150 {
			t.Errorf("test_queue read back as %v, %v", v, ok)
		}

		if p := strings.Join(health.Perfdata(st, set, time.Now(), 30*time.Second), " "); !strings.Contains(p, "'test_queue'=150;;;0 ") {
			t.Errorf("perfdata lacks test_queue: %s", p)
		}

		rec := httptest.NewRecorder()
		controller.MetricsHandler(func() api.Status { return *st }, sc).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		body, _ := io.ReadAll(rec.Body)
		if want := "# HELP gearshift_test_queue Requests waiting, as only this test counts them.\n# TYPE gearshift_test_queue gauge\ngearshift_test_queue 75\n"; !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %q:\n%s", want, body)
		}

		y, err := cfg.YAML()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(y), "enter:\n      test_queue: 100\n") {
			t.Errorf("config show lacks the rule:\n%s", y)
		}
	})

	t.Run("replayed", func(t *testing.T) {
		dir := t.TempDir()
		cfgPath := filepath.Join(dir, "gearshift.yaml")
		tracePath := filepath.Join(dir, "trace.csv")
		if err := os.WriteFile(cfgPath, []byte(cfgDoc), 0o644); err != nil {
			t.Fatal(err)
		}
		csv := "time,load1,cpus,test_queue\n0,0.1,1,10\n1,0.1,1,500\n2,0.1,1,500\n3,0.1,1,500\n60,0.1,1,5\n"
		if err := os.WriteFile(tracePath, []byte(csv), 0o644); err != nil {
			t.Fatal(err)
		}
		code, stdout, stderr := runMain(t, "simulate", "--config", cfgPath, "--trace", tracePath)
		if code != exitOK {
			t.Fatalf("exit %d, stderr %q", code, stderr)
		}
		words := strings.Join(strings.Fields(stdout), " ")
		for _, want := range []string{"light → heavy test_queue 500 >= 400 for 3 samples", "heavy → moderate stay rule of heavy not held within 10s (test_queue 5 < 300)"} {
			if !strings.Contains(words, want) {
				t.Errorf("simulate output lacks %q:\n%s", want, stdout)
			}
		}
		code, _, stderr = runMain(t, "simulate", "--config", cfgPath, "--trace", writeFile(t, dir, "bad.csv", "time,load1,test_queue\n0,0.1,-3\n"))
		if code != exitUsage || !strings.Contains(stderr, "column 3 (test_queue): -3 is negative") {
			t.Errorf("a negative test_queue cell: exit %d, stderr %q", code, stderr)
		}
	})
}

func writeFile(tb testing.TB, dir, name, text string) string {
	tb.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		tb.Fatal(err)
	}
	return p
}

// TestDocsSignals checks the docs' table of signals against the signal set
// the code builds (-update rewrites it).
func TestDocsSignals(t *testing.T) {
	const path = "../../docs/signals.md"
	const begin, end = "<!-- signals: generated from controller/sensor; go test ./cmd/gearshift -run DocsSignals -update -->\n", "<!-- /signals -->\n"
	var b strings.Builder
	b.WriteString("| signal | unit | condition | trace column | perfdata | metric | what it is |\n|---|---|---|---|---|---|---|\n")
	for _, s := range config.Default().ShownSignals().All() {
		unit, column, metric := s.Unit, "—", "—"
		if unit == "" {
			unit = "—"
		}
		if s.Raw() {
			column = "`" + s.Name + "`"
		}
		if s.Metric != "" {
			metric = "`" + s.Metric + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | `%s %s X` | %s | `%s` | %s | %s |\n", s.Name, unit, s.Name, s.Op(), column, s.Label(), metric, s.Help)
	}
	golden.CheckBlock(t, path, begin, end, "table of signals", b.String())
}

// A signal named in the config is a trace column like the built-in ones:
// simulate replays a recorded db_threads_running with the recipe's rules,
// offline, without asking any Prometheus.
func TestNamedSignalReplayed(t *testing.T) {
	dir := t.TempDir()
	cfgPath := writeFile(t, dir, "fleet.yaml", `
sensor:
  prometheus:
    url: http://192.0.2.1:9090
    signals: { db_threads_running: 'max(mysql_global_status_threads_running)' }
states:
  heavy: { enter: { load_per_cpu: 1.5, db_threads_running: 20 }, stay: { load_per_cpu: 1, db_threads_running: 10 } }
hysteresis: { down_window: 10s, min_dwell: 0s }
`)
	trace := writeFile(t, dir, "trace.csv", "time,load1,cpus,db_threads_running\n0,0.1,2,1\n1,0.1,2,41\n2,0.1,2,41\n3,0.1,2,41\n30,0.1,2,1\n")
	code, stdout, stderr := runMain(t, "simulate", "--config", cfgPath, "--trace", trace)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	words := strings.Join(strings.Fields(stdout), " ")
	for _, want := range []string{"light → heavy db_threads_running 41.00 >= 20.00 for 3 samples", "heavy → moderate"} {
		if !strings.Contains(words, want) {
			t.Errorf("simulate output lacks %q:\n%s", want, stdout)
		}
	}
}
