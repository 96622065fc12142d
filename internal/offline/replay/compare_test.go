package replay

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/state"
)

// ttfbRules adds a heavy rule on the backend's time to first byte.
const ttfbRules = `states:
  heavy:
    enter: { load_per_cpu: 1.5, mem_available_pct: 10, backend_ttfb_ms: 800 }
    stay: { load_per_cpu: 1.0, mem_available_pct: 15, backend_ttfb_ms: 400 }
`

func compare(tb testing.TB, dir, candidate string, opts Options) *Comparison {
	tb.Helper()
	cfg := testConfig(tb, candidate)
	set := signals(tb, cfg)
	src := open(tb, dir, set)
	c, err := Compare(src, cfg.StateConfig(set), time.Duration(cfg.FastWindow), opts)
	if err != nil {
		tb.Fatal(err)
	}
	if w := src.Warnings(); len(w) > 0 {
		tb.Errorf("warnings reading the history: %v", w)
	}
	return c
}

// Replayed under the config that recorded it, the history comes out as
// recorded: every transition the same, the same time in each gear, the
// force and the gap as they were.
func TestCompareSameConfig(t *testing.T) {
	dir := record(t, testConfig(t, ""), lateHeavy)
	c := compare(t, dir, "", Options{})

	if n := c.Samples; n != lateHeavy.n-600 {
		t.Errorf("%d samples, want %d", n, lateHeavy.n-600)
	}
	if c.Unrecorded != 601*time.Second {
		t.Errorf("unrecorded %s, want 601s (the gap, from the last record before it)", c.Unrecorded)
	}
	if len(c.Recorded.Transitions) < 4 {
		t.Fatalf("recorded transitions %+v: want the climb, the force and the ways down", c.Recorded.Transitions)
	}
	for _, p := range c.Pairs {
		if p.Change != Same {
			t.Errorf("%s %+v %+v, want every transition the same", p.Change, p.Recorded, p.Candidate)
		}
	}
	if c.Recorded.TimeIn != c.Candidate.TimeIn {
		t.Errorf("time in gears: recorded %v, replayed %v", c.Recorded.TimeIn, c.Candidate.TimeIn)
	}
	var total time.Duration
	for _, d := range c.Recorded.TimeIn {
		total += d
	}
	if want := c.To.Sub(c.From) - c.Unrecorded; total != want {
		t.Errorf("time in gears adds up to %s, want %s", total, want)
	}
	if len(c.Forced) != 1 || !c.Forced[0].Start.Equal(at(3000)) || !c.Forced[0].End.Equal(at(3100)) || c.Forced[0].Gear != state.Heavy {
		t.Errorf("forced periods %+v, want heavy from +3000s to +3100s", c.Forced)
	}
}

// Under a heavy rule on the backend's time to first byte, the climb to
// heavy moves 100 s earlier, the second distress gets a climb of its own,
// and heavy lasts that much longer.
func TestCompareTTFBRule(t *testing.T) {
	dir := record(t, testConfig(t, ""), lateHeavy)
	c := compare(t, dir, ttfbRules, Options{})

	var moved, added *Pair
	for i, p := range c.Pairs {
		if p.Change == Moved && p.Recorded.From == state.Light && p.Recorded.To == state.Heavy {
			moved = &c.Pairs[i]
		}
		if p.Change == Added && p.Candidate.To == state.Heavy && added == nil {
			added = &c.Pairs[i]
		}
	}
	if moved == nil {
		t.Fatalf("no light → heavy moved: %+v", c.Pairs)
	}
	// Recorded: 3 samples of load from +700s; replayed: 3 of distress from +600s.
	if !moved.Recorded.Time.Equal(at(702)) || !moved.Candidate.Time.Equal(at(602)) || moved.Shift() != -100*time.Second {
		t.Errorf("moved %s → %s by %s, want +702s → +602s, -100s", moved.Recorded.Time, moved.Candidate.Time, moved.Shift())
	}
	if !strings.Contains(moved.Candidate.Reason, "backend_ttfb_ms") {
		t.Errorf("replayed reason %q, want the ttfb rule", moved.Candidate.Reason)
	}
	if added == nil || !added.Candidate.Time.Equal(at(2002)) || added.Candidate.From != state.Light {
		t.Errorf("added %+v, want light → heavy at +2002s", added)
	}
	if c.Count(Removed) != 0 {
		t.Errorf("%d removed, want none", c.Count(Removed))
	}
	// 100 s earlier in the first distress, and the second one's heavy
	// (from +2002s until down_window after +2119s).
	gain := c.Candidate.TimeIn[state.Heavy] - c.Recorded.TimeIn[state.Heavy]
	if want := 100*time.Second + (2119+120-2002)*time.Second; gain != want {
		t.Errorf("heavy for %s more, want %s", gain, want)
	}
}

func TestMatch(t *testing.T) {
	tr := func(sec int, from, to state.Gear) Transition { return Transition{Time: at(sec), From: from, To: to} }
	L, M, H := state.Light, state.Moderate, state.Heavy
	tests := []struct {
		name     string
		rec, rep []Transition
		want     []Change
	}{
		{"same", []Transition{tr(10, L, H)}, []Transition{tr(10, L, H)}, []Change{Same}},
		{"moved within tolerance", []Transition{tr(10, L, H)}, []Transition{tr(250, L, H)}, []Change{Moved}},
		{"too far", []Transition{tr(10, L, H)}, []Transition{tr(400, L, H)}, []Change{Removed, Added}},
		{"other gears", []Transition{tr(10, L, H)}, []Transition{tr(10, L, M)}, []Change{Removed, Added}},
		{"closest first", []Transition{tr(100, L, H), tr(130, L, H)}, []Transition{tr(125, L, H)}, []Change{Removed, Moved}},
		{"added later", nil, []Transition{tr(5, H, M)}, []Change{Added}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []Change
			for _, p := range Match(tc.rec, tc.rep, Tolerance) {
				got = append(got, p.Change)
			}
			if !equal(got, tc.want) {
				t.Errorf("changes %v, want %v", got, tc.want)
			}
		})
	}
}

func equal[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// The chart keeps a bounded number of records, the heaviest of their
// stretch: the climbs show.
func TestCompareChart(t *testing.T) {
	dir := record(t, testConfig(t, ""), lateHeavy)
	c := compare(t, dir, ttfbRules, Options{Chart: 100})
	if len(c.Chart) == 0 || len(c.Chart) > 100 || len(c.ChartCandidate) != len(c.Chart) {
		t.Fatalf("%d chart records, %d candidate gears: want 1 to 100 of each", len(c.Chart), len(c.ChartCandidate))
	}
	var heavy, candHeavy int
	for i, s := range c.Chart {
		if i > 0 && !s.Time.After(c.Chart[i-1].Time) {
			t.Fatalf("chart records out of order at %d", i)
		}
		if s.Recorded.Gear == state.Heavy {
			heavy++
		}
		if c.ChartCandidate[i] == state.Heavy {
			candHeavy++
		}
	}
	if heavy == 0 || candHeavy <= heavy {
		t.Errorf("chart: %d records heavy, %d replayed heavy; want heavy in both, more replayed", heavy, candHeavy)
	}
}

// spaces are the runs of spaces a table aligns its columns with.
var spaces = regexp.MustCompile(` +`)

func TestComparisonOutput(t *testing.T) {
	dir := record(t, testConfig(t, ""), lateHeavy)
	c := compare(t, dir, ttfbRules, Options{})
	h := Heading{History: dir, Config: "candidate.yaml"}

	var text bytes.Buffer
	if err := c.WriteText(&text, h); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"History " + dir + ", 2026-11-30 22:00:00 to 2026-11-30 23:29:59 UTC",
		"Replayed under candidate.yaml",
		"moved 2026-11-30 22:11:42 2026-11-30 22:10:02 light → heavy -1m40s backend_ttfb_ms 2000 >= 800",
		"added - 2026-11-30 22:33:22 light → heavy backend_ttfb_ms",
		"10m1s not recorded",
		"2026-11-30 22:50:00 to 2026-11-30 22:51:40 (1m40s): heavy",
	} {
		if !strings.Contains(spaces.ReplaceAllString(text.String(), " "), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}

	var js bytes.Buffer
	if err := c.WriteJSON(&js, h); err != nil {
		t.Fatal(err)
	}
	var out struct {
		Changes     map[string]int `json:"changes"`
		Transitions []struct {
			Change      string   `json:"change"`
			From        string   `json:"from"`
			To          string   `json:"to"`
			RecordedAt  *string  `json:"recorded_at"`
			CandidateAt *string  `json:"candidate_at"`
			ShiftS      *float64 `json:"shift_s"`
		} `json:"transitions"`
		Recorded, Candidate struct {
			SecondsIn map[string]float64 `json:"seconds_in"`
		}
		Forced []struct {
			Gear    string  `json:"gear"`
			Seconds float64 `json:"seconds"`
		} `json:"forced"`
	}
	if err := json.Unmarshal(js.Bytes(), &out); err != nil {
		t.Fatalf("%v:\n%s", err, js.String())
	}
	if out.Changes["moved"] != 1 || out.Changes["removed"] != 0 || out.Changes["added"] != c.Count(Added) {
		t.Errorf("changes %v", out.Changes)
	}
	var moved bool
	for _, p := range out.Transitions {
		if p.Change == "moved" {
			moved = p.ShiftS != nil && *p.ShiftS == -100 && p.RecordedAt != nil && *p.RecordedAt == "2026-11-30T22:11:42Z"
		}
	}
	if !moved {
		t.Errorf("no moved transition by -100 s in %s", js.String())
	}
	if d := out.Candidate.SecondsIn["heavy"] - out.Recorded.SecondsIn["heavy"]; d != 337 {
		t.Errorf("seconds in heavy, replayed minus recorded: %g, want 337", d)
	}
	if len(out.Forced) != 1 || out.Forced[0].Gear != "heavy" || out.Forced[0].Seconds != 100 {
		t.Errorf("forced %+v", out.Forced)
	}
}
