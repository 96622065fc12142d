package report

import (
	"bytes"
	"encoding/json"
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

// sitesPhase is a stretch of the synthetic history with sites: the
// machine's gear and load, and each site's gear and backend requests of
// the last minute (default, blog, shop).
type sitesPhase struct {
	from    time.Duration
	gear    state.Gear
	load1   float64
	gears   [3]state.Gear
	fetches [3]float64
	reason  string
}

var sitesNames = [3]string{"default", "blog", "shop"}

// sitesSurge: blog surges at 03:10 and takes moderate, then heavy at
// 03:15; the distress holds and shop, next by share, takes heavy at 03:20;
// every site is back in light at 03:25. 2 CPUs, a record every 10 s.
var sitesSurge = []sitesPhase{
	{0, state.Light, 0.4, [3]state.Gear{}, [3]float64{600, 300, 300}, "load_per_cpu 0.20 < 0.70"},
	{10 * time.Minute, state.Moderate, 2.4, [3]state.Gear{state.Light, state.Moderate, state.Light}, [3]float64{300, 1500, 75}, "load_per_cpu 1.20 >= 0.70 for 3 samples"},
	{15 * time.Minute, state.Heavy, 5, [3]state.Gear{state.Light, state.Heavy, state.Light}, [3]float64{300, 1500, 600}, "load_per_cpu 2.50 >= 1.50 for 3 samples"},
	{20 * time.Minute, state.Heavy, 5, [3]state.Gear{state.Light, state.Heavy, state.Heavy}, [3]float64{300, 1500, 600}, "load_per_cpu 2.50 >= 1.50 for 3 samples"},
	{25 * time.Minute, state.Light, 0.5, [3]state.Gear{}, [3]float64{600, 300, 0}, "load_per_cpu 0.25 < 0.40 for 2m"},
}

// writeSitesHistory records sitesSurge into dir with the flight recorder.
func writeSitesHistory(tb testing.TB, dir string) {
	tb.Helper()
	r := history.NewRecorder(history.Options{Dir: dir, Keep: 14 * 24 * time.Hour, Signals: testSet})
	defer r.Close()
	for off, i := time.Duration(0), 0; off <= 35*time.Minute; off += 10 * time.Second {
		for i+1 < len(sitesSurge) && off >= sitesSurge[i+1].from {
			i++
		}
		p := sitesSurge[i]
		t := t0.Add(off)
		rec := &trace.Recorded{Gear: p.gear, Reason: p.reason, SiteFetches: true, Sites: []trace.Site{}}
		for j, name := range sitesNames {
			rec.Sites = append(rec.Sites, trace.Site{Name: name, Gear: p.gears[j], Fetches: p.fetches[j]})
		}
		err := r.Write(trace.Sample{Time: t, Reading: state.Reading{Time: t, Load1: p.load1, RunQueue: p.load1, CPUs: 2,
			Values: map[string]float64{sensor.MemAvailablePct: 50}}, Recorded: rec})
		if err != nil {
			tb.Fatal(err)
		}
	}
}

// TestSitesFixture: testdata/sites/2026-12-01.csv, which the commands'
// tests read too, is what the flight recorder writes for sitesSurge.
func TestSitesFixture(t *testing.T) {
	dir := t.TempDir()
	writeSitesHistory(t, dir)
	b, err := os.ReadFile(filepath.Join(dir, "2026-12-01.csv"))
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "sites/2026-12-01.csv", b)
}

// TestReportSites: the report of a history with sites tells which site
// surged in the incident and when, its peak and its share of the backend
// when it left light, and each site's time in each gear.
func TestReportSites(t *testing.T) {
	r, err := New(read(t, filepath.Join("testdata", "sites")), testSet)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Incidents) != 1 {
		t.Fatalf("%d incidents, want 1", len(r.Incidents))
	}
	surges := r.Incidents[0].Sites
	if len(surges) != 2 {
		t.Fatalf("sites of the incident %+v, want blog then shop", surges)
	}
	blog, shop := surges[0], surges[1]
	if blog.Site != "blog" || !blog.Left.Equal(t0.Add(10*time.Minute)) || blog.Peak != state.Heavy || blog.Above != 15*time.Minute ||
		blog.Share == nil || *blog.Share != 0.8 {
		t.Errorf("blog's surge %+v, want left at 03:10 with 80%% of backend requests, heavy, 15m above", blog)
	}
	if shop.Site != "shop" || !shop.Left.Equal(t0.Add(20*time.Minute)) || shop.Peak != state.Heavy || shop.Above != 5*time.Minute ||
		shop.Share == nil || *shop.Share != 0.25 {
		t.Errorf("shop's surge %+v, want left at 03:20 with 25%% of backend requests, heavy, 5m above", shop)
	}
	want := map[string][len(state.All)]time.Duration{
		"default": {state.Light: 35 * time.Minute},
		"blog":    {state.Light: 20 * time.Minute, state.Moderate: 5 * time.Minute, state.Heavy: 10 * time.Minute},
		"shop":    {state.Light: 30 * time.Minute, state.Heavy: 5 * time.Minute},
	}
	transitions := map[string]int{"default": 0, "blog": 3, "shop": 2}
	if len(r.Sites) != 3 {
		t.Fatalf("sites %+v, want 3", r.Sites)
	}
	for _, st := range r.Sites {
		if st.TimeIn != want[st.Site] || st.Transitions != transitions[st.Site] {
			t.Errorf("site %s: time in gears %v, %d transitions; want %v, %d", st.Site, st.TimeIn, st.Transitions, want[st.Site], transitions[st.Site])
		}
	}

	var text bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"    sites: blog left light at 03:10:00 (80% of backend requests), heavy at most, 15m above light; shop left light at 03:20:00 (25% of backend requests), heavy at most, 5m above light.\n",
		"Sites (3):\n  blog: moderate 5m, heavy 10m; 3 transitions.\n  shop: heavy 5m; 2 transitions.\n  always in light: default.\n",
	} {
		if !strings.Contains(text.String(), line) {
			t.Errorf("the text lacks %q:\n%s", line, text.String())
		}
	}

	var js bytes.Buffer
	if err := r.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var out struct {
		Incidents []struct {
			ID    string `json:"id"`
			Sites []struct {
				Site         string   `json:"site"`
				Left         string   `json:"left_light"`
				Peak         string   `json:"peak"`
				SecondsAbove float64  `json:"seconds_above_light"`
				BackendShare *float64 `json:"backend_share"`
			} `json:"sites"`
		} `json:"incidents"`
		Sites []struct {
			Site        string             `json:"site"`
			SecondsIn   map[string]float64 `json:"seconds_in"`
			Transitions int                `json:"transitions"`
		} `json:"sites"`
	}
	if err := json.Unmarshal(js.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Incidents) != 1 || len(out.Incidents[0].Sites) != 2 {
		t.Fatalf("JSON incidents %+v", out.Incidents)
	}
	s := out.Incidents[0].Sites[1]
	if s.Site != "shop" || s.Left != "2026-12-01T03:20:00Z" || s.Peak != state.Heavy.String() || s.SecondsAbove != 300 || s.BackendShare == nil || *s.BackendShare != 0.25 {
		t.Errorf("JSON shop surge %+v", s)
	}
	if len(out.Sites) != 3 || out.Sites[1].Site != "blog" || out.Sites[1].SecondsIn[state.Heavy.String()] != 600 || out.Sites[1].Transitions != 3 {
		t.Errorf("JSON sites %+v", out.Sites)
	}
}

// TestReportWithoutSitesUnchanged: a history without sites has no sites
// in its report, and no "sites" key in the JSON.
func TestReportWithoutSitesUnchanged(t *testing.T) {
	r, err := New(surgeSamples(t), testSet)
	if err != nil {
		t.Fatal(err)
	}
	var js bytes.Buffer
	if err := r.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	if r.Sites != nil || r.Incidents[0].Sites != nil || strings.Contains(js.String(), `"sites"`) {
		t.Errorf("sites in a report without them: %v, %v\n%s", r.Sites, r.Incidents[0].Sites, js.String())
	}
}

// TestSVGSites: the chart of a history with sites has a band row for each
// site that left light, none for the one that did not.
func TestSVGSites(t *testing.T) {
	var b bytes.Buffer
	if err := SVG(&b, read(t, filepath.Join("testdata", "sites")), testSet, ChartOptions{}); err != nil {
		t.Fatal(err)
	}
	texts, _ := svgTexts(t, b.String())
	all := "|" + strings.Join(texts, "|") + "|"
	if !strings.Contains(all, "|site blog|") || !strings.Contains(all, "|site shop|") || strings.Contains(all, "|site default|") {
		t.Errorf("the band's rows: %v", texts)
	}
	band := gearBand(read(t, filepath.Join("testdata", "sites")), make([]bool, 211), nil)
	if len(band.rows) != 3 || band.rows[0].label != "site blog" || len(band.rows[0].runs) != 4 {
		t.Errorf("band rows %+v, want blog's (light, moderate, heavy, light), shop's and the gear", band.rows)
	}
}
