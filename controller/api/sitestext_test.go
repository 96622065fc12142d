package api

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/internal/testsupport/golden"
)

// sitesStatus is a server with three sites: the shop surging in heavy,
// the wiki pinned, the default site quiet.
func sitesStatus(now time.Time) Status {
	until := now.Add(29*time.Minute + 30*time.Second)
	return Status{
		Version: "0.5.0", State: "heavy", Mode: "auto", Since: now.Add(-5 * time.Minute), Transitions: 7,
		Reason: "site shop: 71 % of backend requests; load_per_cpu 2.10 >= 1.50 for 3 samples",
		Sample: &SampleStatus{
			Time: now.Add(-time.Second), Load1: 4.2, Load5: 2.5, Load15: 1.1, Runnable: 5, CPUs: 2,
			Signals: map[string]*float64{"load_per_cpu": pf64(2.1), "mem_available_pct": pf64(38), "psi_cpu": pf64(30.5), "psi_mem": pf64(0)},
		},
		Targets: []TargetStatus{{
			Admin: "127.0.0.1:6082", Reachable: true, ActiveVCL: "gearshift-router-9f8e7d6c", InSync: true, LastSwitchMS: 0.52,
		}},
		Sites: []SiteStatus{
			{Name: "default", Hosts: []string{}, Gear: "light", Mode: "auto", Since: now.Add(-2 * time.Hour),
				Reason: "starting in light", BackendRPS: pf64(3.1), BackendShare: pf64(0.125), MaxConnections: 30},
			{Name: "shop", Hosts: []string{"shop.example.com", "www.shop.example.com"}, Gear: "heavy", Mode: "auto", Since: now.Add(-5 * time.Minute),
				Reason: "site shop: 71 % of backend requests; load_per_cpu 2.10 >= 1.50 for 3 samples", BackendRPS: pf64(17.6), BackendShare: pf64(0.71), MaxConnections: 20},
			{Name: "wiki", Hosts: []string{"wiki.example.org"}, Gear: "moderate", Mode: "forced", ForcedUntil: &until, Since: now.Add(-30 * time.Second),
				Reason: "forced by operator until 16:20", BackendRPS: pf64(4.1), BackendShare: pf64(0.165), MaxConnections: 30},
		},
		UptimeSeconds: 7200,
	}
}

func TestStatusGoldenSites(t *testing.T) {
	now := time.Date(2026, 11, 30, 15, 51, 2, 0, time.UTC)
	signals, err := config.Default().Signals()
	if err != nil {
		t.Fatal(err)
	}
	sc := config.Default().StateConfig(signals)
	s := sitesStatus(now)
	var buf bytes.Buffer
	s.WriteText(&buf, signals, &sc, now)
	golden.Check(t, filepath.Join("status", "sites.txt"), buf.Bytes())

	// The default site alone (no sites key) adds no block.
	s.Sites = s.Sites[:1]
	buf.Reset()
	s.WriteText(&buf, signals, &sc, now)
	if strings.Contains(buf.String(), "sites") {
		t.Errorf("the default site alone shows a sites block:\n%s", buf.String())
	}
}

func TestSitesGolden(t *testing.T) {
	now := time.Date(2026, 11, 30, 15, 51, 2, 0, time.UTC)
	s := sitesStatus(now)
	s.Sites[0].Since = now.Add(-26 * time.Hour) // yesterday: the date is shown
	var buf bytes.Buffer
	WriteSites(&buf, s.Sites, now)
	golden.Check(t, filepath.Join("sites", "table.txt"), buf.Bytes())

	// While Varnish's counters cannot be read, the share is "-".
	for i := range s.Sites {
		s.Sites[i].BackendRPS, s.Sites[i].BackendShare = nil, nil
	}
	buf.Reset()
	WriteSites(&buf, s.Sites, now)
	golden.Check(t, filepath.Join("sites", "table-no-counters.txt"), buf.Bytes())
}

// The example of docs/sites.md#commands is what gearshift sites prints.
func TestSitesDocExample(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "sites.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, example, ok := strings.Cut(string(doc), "\n$ gearshift sites\n")
	example, _, ok2 := strings.Cut(example, "\n$ ")
	if !ok || !ok2 {
		t.Fatal("docs/sites.md has no example of gearshift sites")
	}
	want, err := os.ReadFile(filepath.Join("testdata", "sites", "table.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if example+"\n" != string(want) {
		t.Errorf("docs/sites.md's gearshift sites differs from testdata/sites/table.txt:\n%s", example)
	}
}

func TestSiteTextGolden(t *testing.T) {
	now := time.Date(2026, 11, 30, 15, 51, 2, 0, time.UTC)
	sites := sitesStatus(now).Sites
	pinned := sites[2]
	pinned.ForcedUntil = nil
	unread := sites[0]
	unread.BackendRPS, unread.BackendShare = nil, nil
	for _, tc := range []struct {
		name string
		site SiteStatus
	}{
		{"default", sites[0]},
		{"auto", sites[1]},
		{"forced-until", sites[2]},
		{"forced", pinned},
		{"no-counters", unread},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			tc.site.WriteText(&buf, now)
			golden.Check(t, filepath.Join("sites", "site-"+tc.name+".txt"), buf.Bytes())
		})
	}
}

// After a force or auto of one site, the site's gear is printed, then
// each target's.
func TestWriteSiteApplied(t *testing.T) {
	now := time.Date(2026, 11, 30, 15, 51, 2, 0, time.UTC)
	s := sitesStatus(now)
	s.Sites[2].ForcedUntil = nil
	for _, tc := range []struct{ site, want string }{
		{"shop", "site shop: gear heavy, auto: site shop: 71 % of backend requests"},
		{"wiki", "site wiki: gear moderate, forced until `gearshift auto --site wiki`"},
	} {
		var buf bytes.Buffer
		if bad := s.WriteSiteApplied(&buf, tc.site); len(bad) != 0 {
			t.Errorf("%s: not in sync %v", tc.site, bad)
		}
		if got := buf.String(); !strings.HasPrefix(got, tc.want) || !strings.Contains(got, "127.0.0.1:6082: gearshift-router-9f8e7d6c (0.52 ms)") {
			t.Errorf("%s: printed %q, want %q and the target", tc.site, got, tc.want)
		}
	}
}
