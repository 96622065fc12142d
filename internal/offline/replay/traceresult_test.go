package replay

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/sensor"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/controller/trace"
)

func TestReplayTrace(t *testing.T) {
	csv := "time,load1,runnable,cpus\n" +
		"0,0.1,0,1\n10,0.1,0,1\n" + // light
		"20,2,2,1\n30,2,2,1\n40,2,2,1\n" + // heavy from 40s
		"400,0.1,0,1\n"
	tr, err := trace.Parse(strings.NewReader(csv), traceSignals, 1, "")
	if err != nil {
		t.Fatal(err)
	}
	cfg := state.Config{
		Bands: [len(state.All)]state.Band{
			state.Moderate: {Enter: state.Rule{"load_per_cpu": 0.7}, Stay: state.Rule{"load_per_cpu": 0.5}},
			state.Heavy:    {Enter: state.Rule{"load_per_cpu": 1.5}, Stay: state.Rule{"load_per_cpu": 1}},
		},
		UpConfirm: 3, DownWindow: 120 * time.Second, MinDwell: 60 * time.Second,
	}
	res, err := ReplayTrace(state.New(cfg, 0), trace.Samples(tr.Samples))
	if err != nil {
		t.Fatal(err)
	}
	if res.Samples != 6 || res.Duration != 400*time.Second || res.CPUsMin != 1 || res.CPUsMax != 1 {
		t.Errorf("samples %d over %s", res.Samples, res.Duration)
	}
	if len(res.Transitions) != 2 {
		t.Fatalf("transitions %+v", res.Transitions)
	}
	up, down := res.Transitions[0], res.Transitions[1]
	if up.Offset != 40*time.Second || up.From != state.Light || up.To != state.Heavy || up.Reason != "load_per_cpu 2.00 >= 1.50 for 3 samples" || up.Sample.Line != 6 {
		t.Errorf("up %+v", up)
	}
	if down.Offset != 400*time.Second || down.To != state.Moderate {
		t.Errorf("down %+v", down)
	}
	if want := [len(state.All)]time.Duration{state.Light: 40 * time.Second, state.Heavy: 360 * time.Second}; res.TimeIn != want {
		t.Errorf("time in %v, want %v", res.TimeIn, want)
	}
	if res.Peak.Value != 2 || res.Peak.Offset != 20*time.Second || res.LowMem != nil {
		t.Errorf("peak %+v, low mem %+v", res.Peak, res.LowMem)
	}
}

func TestReplayTraceStopsAtABadRow(t *testing.T) {
	rd, err := trace.NewReader(strings.NewReader("time,load1\n0,1\n1,1\n2,x\n3,1\n"), traceSignals, 1, "")
	if err != nil {
		t.Fatal(err)
	}
	res, err := ReplayTrace(state.New(state.Config{UpConfirm: 1}, 0), rd)
	if err == nil || err.Error() != `line 4, column 2 (load1): "x" is not a number` {
		t.Errorf("error %v", err)
	}
	if res.Samples != 2 {
		t.Errorf("replayed %d samples before the bad row, want 2", res.Samples)
	}
}

func TestWriteText(t *testing.T) {
	h := TraceHeading{
		Trace: "surge.csv", CPUsFrom: "from --cpus", Config: "embedded defaults", FastWindow: 10 * time.Second,
		Machine: state.Config{UpConfirm: 3, DownWindow: 2 * time.Minute, MinDwell: time.Minute},
	}
	calm := TraceResult{Samples: 1, CPUsMin: 1, CPUsMax: 1, Peak: Extreme{Value: 0.25}}
	calm.TimeIn[state.Light] = 0
	busy := TraceResult{
		Samples: 3720, Duration: time.Hour + 2*time.Minute, CPUsMin: 2, CPUsMax: 4,
		Transitions: []TraceShift{
			{Offset: 5*time.Minute + 3*time.Second, Sample: trace.Sample{Text: "2026-11-30T03:05:03Z"}, From: state.Light, To: state.Heavy, Reason: "load_per_cpu 1.80 >= 1.50 for 3 samples"},
			{Offset: 40 * time.Minute, Sample: trace.Sample{Text: "2026-11-30T03:40:00Z"}, From: state.Heavy, To: state.Moderate, Reason: "stay rule of heavy not held within 2m"},
		},
		Peak:   Extreme{Value: 2.5, Offset: 20 * time.Minute},
		LowMem: &Extreme{Value: 12.34, Offset: 21 * time.Minute},
	}
	busy.TimeIn[state.Light] = 5*time.Minute + 3*time.Second
	busy.TimeIn[state.Heavy] = 34*time.Minute + 57*time.Second
	busy.TimeIn[state.Moderate] = 22 * time.Minute
	for _, tc := range []struct {
		name string
		res  TraceResult
		want []string
		not  []string
	}{
		{"calm", calm, []string{
			"Trace surge.csv: 1 sample over 0s, 1 CPU (from --cpus).\n",
			"Config: embedded defaults; fast_window 10s, up_confirm 3, down_window 2m, min_dwell 1m.\n\n",
			"No transitions: light throughout.\n\n",
			"GEAR      TIME   SHARE\nlight       0s       -\n",
			"total       0s  0 transitions\n",
			"\nPeak load_per_cpu 0.25 at +0:00:00.\n",
		}, []string{"OFFSET", "lowest mem_available_pct"}},
		{"busy", busy, []string{
			"Trace surge.csv: 3720 samples over 1h2m, 2 to 4 CPUs (from --cpus).\n",
			"OFFSET    TIME                  SHIFT             REASON\n",
			"+0:05:03  2026-11-30T03:05:03Z  light → heavy     load_per_cpu 1.80 >= 1.50 for 3 samples\n",
			"+0:40:00  2026-11-30T03:40:00Z  heavy → moderate  stay rule of heavy not held within 2m\n",
			"GEAR        TIME   SHARE\nlight       5m3s    8.1%\nmoderate     22m   35.5%\nheavy     34m57s   56.4%\ntotal       1h2m  2 transitions\n",
			"\nPeak load_per_cpu 2.50 at +0:20:00; lowest mem_available_pct 12.3 at +0:21:00.\n",
		}, []string{"No transitions"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			tc.res.WriteText(&b, h)
			for _, w := range tc.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("report lacks %q:\n%s", w, b.String())
				}
			}
			for _, n := range tc.not {
				if strings.Contains(b.String(), n) {
					t.Errorf("report has %q:\n%s", n, b.String())
				}
			}
		})
	}
}

func TestWriteJSON(t *testing.T) {
	res := TraceResult{Samples: 4, Transitions: []TraceShift{{Offset: 90 * time.Second, From: state.Light, To: state.Moderate, Reason: "a < b"}}}
	res.TimeIn[state.Light], res.TimeIn[state.Moderate] = 90*time.Second, 30*time.Second
	var b bytes.Buffer
	if err := res.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `"reason": "a < b"`) {
		t.Errorf("the reason is HTML-escaped or missing:\n%s", b.String())
	}
	var got struct {
		Transitions []struct {
			OffsetS  float64 `json:"offset_s"`
			From, To string
		}
		Summary struct {
			Samples, Transitions int
			SecondsIn            map[string]float64 `json:"seconds_in"`
		}
	}
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Transitions) != 1 || got.Transitions[0].OffsetS != 90 || got.Transitions[0].To != "moderate" {
		t.Errorf("transitions = %+v", got.Transitions)
	}
	want := map[string]float64{"light": 90, "moderate": 30, "heavy": 0}
	if got.Summary.Samples != 4 || got.Summary.Transitions != 1 || len(got.Summary.SecondsIn) != len(want) {
		t.Errorf("summary = %+v", got.Summary)
	}
	for k, v := range want {
		if got.Summary.SecondsIn[k] != v {
			t.Errorf("seconds_in[%s] = %v, want %v", k, got.Summary.SecondsIn[k], v)
		}
	}

	var empty bytes.Buffer
	if err := (TraceResult{}).WriteJSON(&empty); err != nil || !strings.Contains(empty.String(), `"transitions": []`) {
		t.Errorf("no transitions: %v %s, want an empty list", err, empty.String())
	}
}

// traceSignals are the daemon's signals with no optional source
// configured: every source's signal is a column a trace may have.
var traceSignals = func() *state.Set {
	set, err := sensor.Signals(sensor.HostConfig{})
	if err != nil {
		panic(err)
	}
	return set
}()
