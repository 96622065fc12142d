package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/history"
	"github.com/gearshift/gearshift/controller/sensor"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/controller/trace"
	"github.com/gearshift/gearshift/internal/testsupport/golden"
)

// testSet is every source's signals, as a config without a source set
// reads a history with.
var testSet = func() *state.Set {
	set, err := sensor.Signals(sensor.HostConfig{})
	if err != nil {
		panic(err)
	}
	return set
}()

// t0 is the start of the synthetic surge.
var t0 = time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)

// phase is a stretch of the synthetic history: from its offset on, each
// record (one every 10 seconds) has these figures.
type phase struct {
	from                 time.Duration
	gear                 state.Gear
	load1, mem           float64
	client, backend, hit float64
	reason               string
}

// surge is light for 10 minutes, then moderate for 5 and heavy for 10,
// then light again for 10 minutes; 2 CPUs.
var surge = []phase{
	{0, state.Light, 0.4, 60, 100, 50, 0.5, "load_per_cpu 0.20 < 0.70"},
	{10 * time.Minute, state.Moderate, 3, 50, 1000, 400, 0.6, "load_per_cpu 1.50 >= 0.70 for 3 samples"},
	{15 * time.Minute, state.Heavy, 5, 30, 1000, 100, 0.9, "load_per_cpu 2.50 >= 1.50 for 3 samples"},
	{25 * time.Minute, state.Light, 0.5, 55, 100, 50, 0.5, "load_per_cpu 0.25 < 0.40 for 2m"},
}

const surgeEnd = 35 * time.Minute

// writeHistory records phases (up to end) with the flight recorder into
// dir, one record every 10 seconds from start.
func writeHistory(tb testing.TB, dir string, start time.Time, phases []phase, end time.Duration) {
	tb.Helper()
	r := history.NewRecorder(history.Options{Dir: dir, Keep: 14 * 24 * time.Hour, Signals: testSet})
	defer r.Close()
	for off, i := time.Duration(0), 0; off <= end; off += 10 * time.Second {
		for i+1 < len(phases) && off >= phases[i+1].from {
			i++
		}
		p := phases[i]
		t := start.Add(off)
		hit := p.client - p.backend
		s := trace.Sample{
			Time: t,
			Reading: state.Reading{Time: t, Load1: p.load1, RunQueue: p.load1, CPUs: 2, Values: map[string]float64{
				sensor.MemAvailablePct: p.mem, state.ClientRPS: p.client, sensor.BackendRPS: p.backend,
				sensor.HitRatio: p.hit, sensor.DroppedRPS: 0,
			}},
			Recorded: &trace.Recorded{Gear: p.gear, Reason: p.reason, Rates: map[string]float64{"hit_rps": hit}},
		}
		if err := r.Write(s); err != nil {
			tb.Fatal(err)
		}
	}
}

// read returns the records of dir.
func read(tb testing.TB, dir string) []trace.Sample {
	tb.Helper()
	src, err := history.Open(dir, testSet, time.Time{}, time.Time{})
	if err != nil {
		tb.Fatal(err)
	}
	samples, err := history.Collect(src)
	if err != nil {
		tb.Fatal(err)
	}
	if w := src.Warnings(); len(w) > 0 {
		tb.Fatalf("warnings reading the history: %v", w)
	}
	return samples
}

func surgeSamples(tb testing.TB) []trace.Sample {
	tb.Helper()
	dir := tb.TempDir()
	writeHistory(tb, dir, t0, surge, surgeEnd)
	return read(tb, dir)
}

func TestReport(t *testing.T) {
	r, err := New(surgeSamples(t), testSet)
	if err != nil {
		t.Fatal(err)
	}
	if r.Samples != 211 || !r.From.Equal(t0) || !r.To.Equal(t0.Add(surgeEnd)) {
		t.Errorf("%d samples from %s to %s, want 211 from %s to %s", r.Samples, r.From, r.To, t0, t0.Add(surgeEnd))
	}
	if want := [len(state.All)]time.Duration{state.Light: 20 * time.Minute, state.Moderate: 5 * time.Minute, state.Heavy: 10 * time.Minute}; r.TimeIn != want || r.Unrecorded != 0 {
		t.Errorf("time in gears %v, unrecorded %v; want %v and 0", r.TimeIn, r.Unrecorded, want)
	}
	var shifts []string
	for _, tr := range r.Transitions {
		shifts = append(shifts, tr.Time.Sub(t0).String()+" "+tr.From.String()+">"+tr.To.String()+" "+tr.Reason)
	}
	want := "10m0s light>moderate load_per_cpu 1.50 >= 0.70 for 3 samples|15m0s moderate>heavy load_per_cpu 2.50 >= 1.50 for 3 samples|25m0s heavy>light load_per_cpu 0.25 < 0.40 for 2m"
	if got := strings.Join(shifts, "|"); got != want {
		t.Errorf("transitions\n got %s\nwant %s", got, want)
	}
	if len(r.Incidents) != 1 {
		t.Fatalf("%d incidents, want 1", len(r.Incidents))
	}
	in := r.Incidents[0]
	if in.ID != "20261201T031000Z" || in.ToHeavy != 5*time.Minute || in.Duration() != 15*time.Minute || in.Peak != state.Heavy ||
		in.StartedBefore || in.Ongoing || in.Interrupted {
		t.Errorf("incident %+v", in)
	}
	// The tracker counts each record's rates over the 10 s before it,
	// from the record after the start: 29 moderate, 60 heavy and the
	// light one that ends it. Light sent half the requests to the backend.
	if in.Requests != 891_000 || in.Backend != 176_500 || in.WithoutShift != 445_500 || in.Saved() != 269_000 {
		t.Errorf("requests %v, backend %v, without the shift %v, saved %v", in.Requests, in.Backend, in.WithoutShift, in.Saved())
	}
	if in.Worst["load_per_cpu"] != 2.5 || in.Worst[sensor.MemAvailablePct] != 30 || in.Worst[sensor.HitRatio] != 0.5 {
		t.Errorf("worst %v", in.Worst)
	}
	if !r.Traffic || r.Requests != 1_020_000 || r.Backend != 240_000 {
		t.Errorf("traffic %v: %v requests, %v to the backend; want 1020000 and 240000", r.Traffic, r.Requests, r.Backend)
	}
}

// TestReportEdges covers the periods that do not hold a whole incident,
// and a recording with a gap.
func TestReportEdges(t *testing.T) {
	tests := []struct {
		name   string
		phases []phase
		end    time.Duration
		check  func(t *testing.T, r *Report)
	}{
		{"opens above light", surge[2:], 20 * time.Minute, func(t *testing.T, r *Report) {
			if len(r.Incidents) != 1 || !r.Incidents[0].StartedBefore || r.Incidents[0].Ongoing || r.Incidents[0].Duration() != 10*time.Minute {
				t.Errorf("incidents %+v, want one started before the period, 10m long", r.Incidents)
			}
		}},
		{"ends above light", surge[:3], 20 * time.Minute, func(t *testing.T, r *Report) {
			if len(r.Incidents) != 1 || !r.Incidents[0].Ongoing || !r.Incidents[0].End.IsZero() || r.Incidents[0].Duration() != 10*time.Minute {
				t.Errorf("incidents %+v, want one ongoing for 10m", r.Incidents)
			}
		}},
		{"light throughout", surge[:1], 5 * time.Minute, func(t *testing.T, r *Report) {
			if len(r.Incidents) != 0 || len(r.Transitions) != 0 || r.TimeIn[state.Light] != 5*time.Minute {
				t.Errorf("incidents %v, transitions %v, light %v", r.Incidents, r.Transitions, r.TimeIn[state.Light])
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			phases := append([]phase(nil), tc.phases...)
			base := phases[0].from
			for i := range phases {
				phases[i].from -= base
			}
			writeHistory(t, dir, t0, phases, tc.end)
			r, err := New(read(t, dir), testSet)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, r)
		})
	}

	t.Run("gap", func(t *testing.T) {
		dir := t.TempDir()
		writeHistory(t, dir, t0, surge[:2], 12*time.Minute)                       // stopped in moderate
		writeHistory(t, dir, t0.Add(time.Hour), []phase{surge[3]}, 5*time.Minute) // back an hour later, light
		r, err := New(read(t, dir), testSet)
		if err != nil {
			t.Fatal(err)
		}
		if r.Unrecorded != 48*time.Minute || r.TimeIn[state.Moderate] != 2*time.Minute || r.TimeIn[state.Light] != 15*time.Minute {
			t.Errorf("unrecorded %v, time in %v", r.Unrecorded, r.TimeIn)
		}
		if len(r.Incidents) != 1 || !r.Incidents[0].Interrupted || r.Incidents[0].Duration() != 2*time.Minute {
			t.Errorf("incidents %+v, want one interrupted after 2m", r.Incidents)
		}
	})

	if _, err := New(nil, testSet); !errors.Is(err, ErrEmpty) {
		t.Errorf("report of no samples: %v, want ErrEmpty", err)
	}
}

func TestWriteText(t *testing.T) {
	r, err := New(surgeSamples(t), testSet)
	if err != nil {
		t.Fatal(err)
	}
	r.Source = "/var/lib/gearshift/history"
	var b bytes.Buffer
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"2026-12-01 03:00:00 to 2026-12-01 03:35:00 UTC (35m): 211 records from /var/lib/gearshift/history.",
		"moderate    5m   14.3%",
		"2026-12-01 03:15:00  moderate → heavy  load_per_cpu 2.50 >= 1.50 for 3 samples",
		"20261201T031000Z: from 2026-12-01 03:10:00, back in light at 2026-12-01 03:25:00; 15m above light, heavy after 5m.",
		"891k requests served, 176k reached the backend, about 446k would have without the shift: 269k spared (60%).",
		"Totals: 3 transitions, 1 incident, 15m above light.\nRequests: 1.0M served, 240k reached the backend (24%); the shifts spared it about 269k.\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
	golden.Check(t, "surge.txt", b.Bytes())
	// docs/history.md shows the same report.
	golden.CheckBlock(t, "../../docs/history.md", docBegin, docEnd, "sample report", "```\n$ gearshift report --from \"2026-12-01 03:00\" --to \"2026-12-01 04:00\"\n"+out+"```\n")
}

const docBegin, docEnd = "<!-- report: generated from controller/report; go test ./controller/report -run WriteText -update -->\n", "<!-- /report -->\n"

func TestWriteJSON(t *testing.T) {
	r, err := New(surgeSamples(t), testSet)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := r.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var out struct {
		From, To          string
		Samples           int
		SecondsIn         map[string]float64 `json:"seconds_in"`
		SecondsRecorded   float64            `json:"seconds_recorded"`
		SecondsUnrecorded float64            `json:"seconds_unrecorded"`
		SecondsForced     float64            `json:"seconds_forced"`
		Transitions       []struct {
			Time, From, To, Reason string
			Forced                 bool
			SwitchMS               *float64 `json:"switch_ms"`
		}
		Incidents []struct {
			ID             string
			Start          string
			End            *string
			StartedBefore  bool `json:"started_before"`
			Ongoing        bool
			Interrupted    bool
			Seconds        float64
			Peak           string
			SecondsToHeavy *float64           `json:"seconds_to_heavy"`
			PeakSignals    map[string]float64 `json:"peak_signals"`
			Requests       *float64
			Backend        *float64 `json:"backend_requests"`
			WithoutShift   *float64 `json:"backend_without_shift"`
			Saved          *float64 `json:"backend_saved"`
		}
		Totals map[string]any
	}
	dec := json.NewDecoder(&b)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil {
		t.Fatalf("decode: %v\n%s", err, b.String())
	}
	if out.From != "2026-12-01T03:00:00Z" || out.To != "2026-12-01T03:35:00Z" || out.Samples != 211 || out.SecondsRecorded != 2100 ||
		out.SecondsIn["light"] != 1200 || out.SecondsIn["moderate"] != 300 || out.SecondsIn["heavy"] != 600 {
		t.Errorf("period %s to %s, %d samples, seconds in %v", out.From, out.To, out.Samples, out.SecondsIn)
	}
	if len(out.Transitions) != 3 || out.Transitions[1].Time != "2026-12-01T03:15:00Z" || out.Transitions[1].To != "heavy" {
		t.Errorf("transitions %+v", out.Transitions)
	}
	if len(out.Incidents) != 1 {
		t.Fatalf("%d incidents, want 1", len(out.Incidents))
	}
	in := out.Incidents[0]
	if in.ID != "20261201T031000Z" || in.Start != "2026-12-01T03:10:00Z" || in.End == nil || *in.End != "2026-12-01T03:25:00Z" || in.Seconds != 900 ||
		in.Peak != "heavy" || in.StartedBefore || in.Ongoing || in.Interrupted {
		t.Errorf("incident %+v", in)
	}
	if in.SecondsToHeavy == nil || *in.SecondsToHeavy != 300 {
		t.Errorf("seconds_to_heavy %v, want 300", in.SecondsToHeavy)
	}
	if in.Requests == nil || *in.Requests != 891000 || *in.Backend != 176500 || *in.WithoutShift != 445500 || *in.Saved != 269000 {
		t.Errorf("requests %v, backend %v, without %v, saved %v", in.Requests, in.Backend, in.WithoutShift, in.Saved)
	}
	if in.PeakSignals["load_per_cpu"] != 2.5 {
		t.Errorf("peak_signals %v", in.PeakSignals)
	}
	if out.Totals["incidents"] != 1.0 || out.Totals["requests"] != 1020000.0 || out.Totals["backend_saved"] != 269000.0 {
		t.Errorf("totals %v", out.Totals)
	}
}

// TestWriteJSONNoTraffic: without request rates the counts are null, not 0.
func TestWriteJSONNoTraffic(t *testing.T) {
	samples := surgeSamples(t)
	for i := range samples {
		delete(samples[i].Reading.Values, state.ClientRPS)
		delete(samples[i].Reading.Values, sensor.BackendRPS)
	}
	r, err := New(samples, testSet)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := r.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var out struct {
		Incidents []map[string]any
		Totals    map[string]any
	}
	if err := json.Unmarshal(b.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	if v, ok := out.Incidents[0]["requests"]; !ok || v != nil {
		t.Errorf("incident requests %v (present %v), want null", v, ok)
	}
	if v, ok := out.Totals["requests"]; !ok || v != nil {
		t.Errorf("total requests %v (present %v), want null", v, ok)
	}
}

func TestParseTime(t *testing.T) {
	loc := time.FixedZone("CET", 3600)
	tests := []struct {
		in   string
		want time.Time
		ok   bool
	}{
		{"2026-12-01T03:00:00Z", t0, true},
		{"2026-12-01T04:00:00+01:00", t0, true},
		{"2026-12-01 04:00", t0, true},
		{"2026-12-01 04:00:30", t0.Add(30 * time.Second), true},
		{"2026-12-01", t0.Add(-4 * time.Hour), true},
		{"yesterday", time.Time{}, false},
		{"01/12/2026", time.Time{}, false},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseTime(tc.in, loc)
			if (err == nil) != tc.ok || tc.ok && !got.Equal(tc.want) {
				t.Errorf("ParseTime(%q) = %s, %v; want %s (ok %v)", tc.in, got, err, tc.want, tc.ok)
			}
		})
	}
}

func TestRun(t *testing.T) {
	dir := t.TempDir()
	writeHistory(t, dir, t0, surge, surgeEnd)
	now := t0.Add(time.Hour)
	tests := []struct {
		name    string
		opts    Options
		usage   bool
		errText string
		out     string
	}{
		{name: "since", opts: Options{Since: 90 * time.Minute}, out: "211 records"},
		{name: "default day", opts: Options{}, out: "211 records"},
		{name: "from to", opts: Options{From: "2026-12-01 03:20", To: "2026-12-01T03:30:00Z"}, out: "60 records"},
		{name: "since and from", opts: Options{Since: time.Hour, From: "2026-12-01 03:20"}, usage: true, errText: "exclude each other"},
		{name: "bad from", opts: Options{From: "noon"}, usage: true, errText: `--from "noon" is neither RFC 3339`},
		{name: "to before from", opts: Options{From: "2026-12-01 04:00", To: "2026-12-01 03:00"}, usage: true, errText: "is not after"},
		{name: "svg and png", opts: Options{SVG: "a.svg", PNG: "a.png"}, usage: true, errText: "exclude each other"},
		{name: "empty period", opts: Options{From: "2026-12-01 05:00"}, errText: "no records in " + dir + " from 2026-12-01 05:00:00 UTC on"},
		{name: "no history", opts: Options{Dir: filepath.Join(dir, "none")}, errText: "no history in " + filepath.Join(dir, "none")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.opts
			if o.Dir == "" {
				o.Dir = dir
			}
			o.Set, o.Now, o.Location = testSet, now, time.UTC
			var out, errb bytes.Buffer
			err := Run(o, &out, &errb)
			var ue *UsageError
			if errors.As(err, &ue) != tc.usage {
				t.Errorf("error %v: a usage error %v, want %v", err, !tc.usage, tc.usage)
			}
			if tc.errText != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errText) {
					t.Fatalf("error %v, want it to say %q", err, tc.errText)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out.String(), tc.out) {
				t.Errorf("output lacks %q:\n%s", tc.out, out.String())
			}
		})
	}

	t.Run("svg file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "chart.svg")
		var out, errb bytes.Buffer
		if err := Run(Options{Dir: dir, Set: testSet, Now: now, JSON: true, SVG: path}, &out, &errb); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil || !bytes.HasPrefix(b, []byte("<svg")) {
			t.Errorf("chart file: %v, %.40q", err, b)
		}
		if !json.Valid(out.Bytes()) {
			t.Errorf("stdout is not JSON: %s", out.String())
		}
	})
}
