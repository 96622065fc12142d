package trace

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/state"
)

func TestWriteText(t *testing.T) {
	h := Heading{
		Trace: "surge.csv", CPUsFrom: "from --cpus", Config: "embedded defaults", FastWindow: 10 * time.Second,
		Machine: state.Config{UpConfirm: 3, DownWindow: 2 * time.Minute, MinDwell: time.Minute},
	}
	calm := Result{Samples: 1, CPUsMin: 1, CPUsMax: 1, Peak: Extreme{Value: 0.25}}
	calm.TimeIn[state.Light] = 0
	busy := Result{
		Samples: 3720, Duration: time.Hour + 2*time.Minute, CPUsMin: 2, CPUsMax: 4,
		Transitions: []Transition{
			{Offset: 5*time.Minute + 3*time.Second, Sample: Sample{Text: "2026-11-30T03:05:03Z"}, From: state.Light, To: state.Heavy, Reason: "load_per_cpu 1.80 >= 1.50 for 3 samples"},
			{Offset: 40 * time.Minute, Sample: Sample{Text: "2026-11-30T03:40:00Z"}, From: state.Heavy, To: state.Moderate, Reason: "stay rule of heavy not held within 2m"},
		},
		Peak:   Extreme{Value: 2.5, Offset: 20 * time.Minute},
		LowMem: &Extreme{Value: 12.34, Offset: 21 * time.Minute},
	}
	busy.TimeIn[state.Light] = 5*time.Minute + 3*time.Second
	busy.TimeIn[state.Heavy] = 34*time.Minute + 57*time.Second
	busy.TimeIn[state.Moderate] = 22 * time.Minute
	for _, tc := range []struct {
		name string
		res  Result
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
	res := Result{Samples: 4, Transitions: []Transition{{Offset: 90 * time.Second, From: state.Light, To: state.Moderate, Reason: "a < b"}}}
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
	if err := (Result{}).WriteJSON(&empty); err != nil || !strings.Contains(empty.String(), `"transitions": []`) {
		t.Errorf("no transitions: %v %s, want an empty list", err, empty.String())
	}
}

func TestColumns(t *testing.T) {
	cols := strings.Join(Columns(signals), ",")
	if !strings.HasPrefix(cols, "mem_available_pct,psi_cpu,psi_mem") {
		t.Errorf("Columns(signals) = %s, want the raw signals of the table, in its order", cols)
	}
	if strings.Contains(cols, "load_per_cpu") {
		t.Errorf("Columns(signals) = %s: load_per_cpu is derived, not a column", cols)
	}
}
