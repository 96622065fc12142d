package replay

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/history"
	"github.com/gearshift/gearshift/controller/sensor"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/controller/trace"
)

var t0 = time.Date(2026, 11, 30, 22, 0, 0, 0, time.UTC)

// at is the time of the record i seconds into the history.
func at(i int) time.Time { return t0.Add(time.Duration(i) * time.Second) }

// figures are one record's vitals: load per CPU (2 CPUs), the backend's
// time to first byte (ms), and a forced gear (-1: auto).
type figures struct {
	lpc, ttfb float64
	force     state.Gear
}

// scenario is a history of n seconds, one record a second, skipping the
// seconds in gaps: quiet figures, overridden by the stretches.
type scenario struct {
	n       int
	stretch []stretch
	gaps    [][2]int // [from, to): no records
}

type stretch struct {
	from, to int
	f        figures
}

func (sc scenario) figures(i int) (figures, bool) {
	for _, g := range sc.gaps {
		if i >= g[0] && i < g[1] {
			return figures{}, false
		}
	}
	f := figures{lpc: 0.2, ttfb: 100, force: -1}
	for _, s := range sc.stretch {
		if i >= s.from && i < s.to {
			f.lpc, f.ttfb = max(f.lpc, s.f.lpc), max(f.ttfb, s.f.ttfb)
			if s.f.force >= 0 {
				f.force = s.f.force
			}
		}
	}
	return f, true
}

// lateHeavy is a history where the backend is in distress (its time to
// first byte at 2 s) from +600s to +900s, and the load comes up only at
// +700s: under the defaults, heavy comes 100 s late. At +2000s a second
// distress lasts two minutes without any load. The operator forces heavy
// from +3000s to +3100s, and the daemon is stopped from +4000s to +4600s.
var lateHeavy = scenario{
	n: 5400,
	stretch: []stretch{
		{600, 900, figures{ttfb: 2000, force: -1}},
		{700, 900, figures{lpc: 2, force: -1}},
		{2000, 2120, figures{ttfb: 2000, force: -1}},
		{3000, 3100, figures{force: state.Heavy}},
	},
	gaps: [][2]int{{4000, 4600}},
}

// testConfig is the defaults, with the probe on (backend_ttfb_ms) and
// extra YAML over them.
func testConfig(tb testing.TB, extra string) *config.Config {
	tb.Helper()
	cfg, err := config.ParseSettings([]byte("sensor: { probe: { url: 'http://127.0.0.1:8080/' } }\n" + extra))
	if err != nil {
		tb.Fatal(err)
	}
	return cfg
}

func signals(tb testing.TB, cfg *config.Config) *state.Set {
	tb.Helper()
	set, err := cfg.Signals()
	if err != nil {
		tb.Fatal(err)
	}
	return set
}

// record writes the history of sc, decided by a machine with cfg as the
// daemon decides (forced by the operator where sc says so, resumed in its
// gear after a gap), into a new directory, and returns the directory.
func record(tb testing.TB, cfg *config.Config, sc scenario) string {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), "history")
	set := signals(tb, cfg)
	rec := history.NewRecorder(history.Options{Dir: dir, Keep: 30 * 24 * time.Hour, Signals: set})
	newMachine := func() *state.Machine { return state.New(cfg.StateConfig(set), time.Duration(cfg.FastWindow)) }
	m := newMachine()
	forced, gapped := false, false
	for i := range sc.n {
		f, ok := sc.figures(i)
		if !ok {
			gapped = true
			continue
		}
		t := at(i)
		if gapped {
			cur := m.Current().Gear
			m = newMachine()
			m.Resume(t, cur, "resumed")
			gapped, forced = false, false
		}
		switch {
		case f.force >= 0 && !forced:
			m.Force(t, f.force, time.Time{})
			forced = true
		case f.force < 0 && forced:
			m.Auto(t)
			forced = false
		}
		r := state.Reading{Time: t, Load1: 2 * f.lpc, RunQueue: 2 * f.lpc, CPUs: 2, Values: map[string]float64{
			"mem_available_pct": 50, sensor.BackendTTFBMs: f.ttfb,
		}}
		d := m.Step(t, r)
		err := rec.Write(trace.Sample{Time: t, Reading: r, Recorded: &trace.Recorded{Gear: d.Gear, Forced: d.Forced, Reason: d.Reason}})
		if err != nil {
			tb.Fatal(err)
		}
	}
	if err := rec.Close(); err != nil {
		tb.Fatal(err)
	}
	return dir
}

// open opens the whole history in dir.
func open(tb testing.TB, dir string, set *state.Set) *history.Source {
	tb.Helper()
	src, err := history.Open(dir, set, t0.Add(-time.Hour), time.Time{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { src.Close() })
	return src
}
