package replay

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/state"
)

// slowTTFB has a heavy rule on the backend's time to first byte set too
// high to ever hold: the backend suffers and the gear stays light.
const slowTTFB = `states:
  heavy:
    enter: { load_per_cpu: 1.5, mem_available_pct: 10, backend_ttfb_ms: 3000 }
    stay: { load_per_cpu: 1.0, mem_available_pct: 15, backend_ttfb_ms: 1500 }
`

// tuneHistory is lateHeavy, plus a slow but healthy backend (900 ms, below
// the distress bound) for five minutes from +4700s: thresholds that low
// cost heavy time outside distress.
var tuneHistory = scenario{
	n:       lateHeavy.n,
	stretch: append(append([]stretch{}, lateHeavy.stretch...), stretch{4700, 5000, figures{ttfb: 900, force: -1}}),
	gaps:    lateHeavy.gaps,
}

func load(tb testing.TB, cfg *config.Config, dir string) *History {
	tb.Helper()
	set := signals(tb, cfg)
	h, err := Load(open(tb, dir, set), cfg, set, DefaultBounds)
	if err != nil {
		tb.Fatal(err)
	}
	return h
}

func TestDistressPeriods(t *testing.T) {
	cfg := testConfig(t, slowTTFB)
	h := load(t, cfg, record(t, cfg, tuneHistory))
	want := []Distress{
		{Start: at(600), End: at(899), Signals: []string{"backend_ttfb_ms"}},
		{Start: at(2000), End: at(2119), Signals: []string{"backend_ttfb_ms"}},
	}
	if len(h.Periods) != len(want) {
		t.Fatalf("periods %+v, want %+v", h.Periods, want)
	}
	for i, p := range h.Periods {
		if !p.Start.Equal(want[i].Start) || !p.End.Equal(want[i].End) || !equal(p.Signals, want[i].Signals) {
			t.Errorf("period %d: %+v, want %+v", i, p, want[i])
		}
	}
	if !equal(h.Seen, []string{"load_per_cpu", "backend_ttfb_ms"}) {
		t.Errorf("seen %v, want backend_ttfb_ms and load_per_cpu (no apache, no varnish recorded)", h.Seen)
	}
}

// flicker has the backend's time to first byte over heavy's threshold two
// seconds out of three: never the three in a row heavy needs.
func flicker() scenario {
	sc := scenario{n: 1200}
	for k := range 40 {
		sc.stretch = append(sc.stretch, stretch{300 + 3*k, 302 + 3*k, figures{ttfb: 2000, force: -1}})
	}
	return sc
}

// The compact replay, which passes quiet records without a step, decides
// as the full replay of Compare does.
func TestReplayMatchesCompare(t *testing.T) {
	recorded := testConfig(t, slowTTFB)
	for _, sc := range []scenario{tuneHistory, flicker()} {
		dir := record(t, recorded, sc)
		for _, extra := range []string{slowTTFB, ttfbRules, "", "hysteresis: { up_confirm: 1, down_window: 10s, min_dwell: 5s }\n" + ttfbRules} {
			cfg := testConfig(t, extra)
			h := load(t, cfg, dir)
			set := signals(t, cfg)
			out := h.Replay(cfg.StateConfig(set), DefaultWithin)
			c := compare(t, dir, extra, Options{})
			if out.TimeIn != c.Candidate.TimeIn || out.Transitions != len(c.Candidate.Transitions) {
				t.Errorf("%d records, config %q: compact replay %v, %d transitions; full replay %v, %d", sc.n, extra,
					out.TimeIn, out.Transitions, c.Candidate.TimeIn, len(c.Candidate.Transitions))
			}
		}
	}
}

func TestSearch(t *testing.T) {
	cfg := testConfig(t, slowTTFB)
	h := load(t, cfg, record(t, cfg, tuneHistory))
	s, err := h.Search(cfg, DefaultWithin)
	if err != nil {
		t.Fatal(err)
	}
	cur := s.Current
	if cur.OnTime != 0 || cur.Late != 1 || cur.Missed != 1 {
		t.Errorf("current: %d on time, %d late, %d missed; want 0, 1 (the load came 100 s later), 1", cur.OnTime, cur.Late, cur.Missed)
	}
	if cur.Delays[0] != 102*time.Second {
		t.Errorf("current delay in the first period %s, want 102s", cur.Delays[0])
	}
	if s.States == nil || s.Best == nil {
		t.Fatalf("no suggestion; searched %v in %d replays", s.Searched, s.Replays)
	}
	best := *s.Best
	if best.OnTime != 2 || best.Missed != 0 || best.Late != 0 {
		t.Errorf("suggested: %d on time, %d late, %d missed; want both on time", best.OnTime, best.Late, best.Missed)
	}
	if best.Outside[state.Heaviest] > cur.Outside[state.Heaviest] || best.TransitionsOutside > cur.TransitionsOutside {
		t.Errorf("suggested: heavy outside %s, %d transitions outside; current %s, %d: worse",
			best.Outside[state.Heaviest], best.TransitionsOutside, cur.Outside[state.Heaviest], cur.TransitionsOutside)
	}
	ttfb := s.States.Heavy.Enter["backend_ttfb_ms"]
	if ttfb <= 900 || ttfb > 2000 {
		t.Errorf("heavy.enter.backend_ttfb_ms %g, want above the healthy 900 and at most the distress's 2000", ttfb)
	}
	if stay := s.States.Heavy.Stay["backend_ttfb_ms"]; stay != ttfb/2 {
		t.Errorf("heavy.stay.backend_ttfb_ms %g, want half the enter threshold as before", stay)
	}
	if s.Replays > MaxReplays || s.Replays < 2 {
		t.Errorf("%d replays, want 2 to %d", s.Replays, MaxReplays)
	}

	// The block pastes into a config that loads, and does as promised.
	block, err := s.YAML()
	if err != nil {
		t.Fatal(err)
	}
	pasted := testConfig(t, block)
	if pasted.States.Heavy.Enter["backend_ttfb_ms"] != ttfb {
		t.Errorf("pasted block reads %v", pasted.States.Heavy.Enter)
	}
	if got := h.Replay(pasted.StateConfig(signals(t, pasted)), DefaultWithin); got.OnTime != 2 {
		t.Errorf("the pasted block catches %d of 2 on time", got.OnTime)
	}

	var text bytes.Buffer
	if err := s.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "\n\nstates:\n  moderate:\n    enter:\n") {
		t.Errorf("text lacks the states: block:\n%s", text.String())
	}
	for _, want := range []string{
		"Distress: load_per_cpu > 2, dropped_rps > 0, backend_busy > 0, apache_busy_ratio > 0.9, backend_ttfb_ms > 1000, phpfpm_queue > 0, phpfpm_busy_ratio > 0.9; recorded: load_per_cpu, backend_ttfb_ms.",
		"heavy within 30s 0 of 2 2 of 2",
		"heavy missed 1 0",
		"2026-11-30 22:10:00 4m59s backend_ttfb_ms +1m42s (late) +2s",
		"2026-11-30 22:33:20 1m59s backend_ttfb_ms missed +2s",
	} {
		if !strings.Contains(spaces.ReplaceAllString(text.String(), " "), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
}

// Without distress, nothing is suggested, and the search replays once.
func TestSearchNoDistress(t *testing.T) {
	cfg := testConfig(t, slowTTFB)
	quiet := scenario{n: 1200, stretch: []stretch{{300, 600, figures{lpc: 1.8, ttfb: 500, force: -1}}}}
	h := load(t, cfg, record(t, cfg, quiet))
	if len(h.Periods) != 0 {
		t.Fatalf("periods %+v in a history without distress", h.Periods)
	}
	s, err := h.Search(cfg, DefaultWithin)
	if err != nil {
		t.Fatal(err)
	}
	if s.States != nil || s.Replays != 1 || s.Current.TimeIn[state.Heavy] == 0 {
		t.Errorf("suggestion %v after %d replays, heavy %s; want none, 1 replay, some heavy", s.States, s.Replays, s.Current.TimeIn[state.Heavy])
	}
	var text bytes.Buffer
	if err := s.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "No distress in this history") || strings.Contains(text.String(), "states:") {
		t.Errorf("text:\n%s", text.String())
	}
}

// A distress shorter than MinDistress is no period; two less than
// MergeGap apart are one.
func TestDistressShape(t *testing.T) {
	cfg := testConfig(t, slowTTFB)
	sc := scenario{n: 1200, stretch: []stretch{
		{100, 105, figures{ttfb: 2000, force: -1}},
		{300, 330, figures{ttfb: 2000, force: -1}},
		{370, 400, figures{ttfb: 2000, force: -1}},
	}}
	h := load(t, cfg, record(t, cfg, sc))
	if len(h.Periods) != 1 || !h.Periods[0].Start.Equal(at(300)) || !h.Periods[0].End.Equal(at(399)) {
		t.Errorf("periods %+v, want one from +300s to +399s", h.Periods)
	}
}

func TestCandidate(t *testing.T) {
	cfg := testConfig(t, slowTTFB)
	set := signals(t, cfg)
	lookup := func(name string) state.Signal { s, _ := set.Lookup(name); return s }
	coords := []coord{{state.Heavy, lookup("load_per_cpu")}, {state.Heavy, lookup("mem_available_pct")}, {state.Moderate, lookup("load_per_cpu")}}
	idx := func(f float64) int {
		for i, x := range factors {
			if x == f {
				return i
			}
		}
		t.Fatalf("no factor %g", f)
		return 0
	}
	st, ok := candidate(cfg, coords, []int{idx(0.8), idx(0.8), idx(1)})
	if !ok {
		t.Fatal("refused")
	}
	// load_per_cpu rises: 1.5 × 0.8; mem_available_pct falls: 10 / 0.8,
	// rounded to two digits (12.5, to even); the stay thresholds follow.
	if st.Heavy.Enter["load_per_cpu"] != 1.2 || st.Heavy.Stay["load_per_cpu"] != 0.8 ||
		st.Heavy.Enter["mem_available_pct"] != 12 || st.Heavy.Stay["mem_available_pct"] != 18 {
		t.Errorf("heavy %+v", st.Heavy)
	}
	if cfg.States.Heavy.Enter["load_per_cpu"] != 1.5 {
		t.Error("the current config was changed")
	}
	// Heavy entered on a lower load than moderate (0.7) is refused.
	if _, ok := candidate(cfg, coords, []int{idx(0.5), idx(1), idx(1.5)}); ok {
		t.Error("heavy.enter.load_per_cpu 0.75 below moderate's 1.05 was accepted")
	}
}
