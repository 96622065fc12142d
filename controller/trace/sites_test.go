package trace

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gearshift/gearshift/controller/state"
)

// TestSiteColumns: what AppendSites writes reads back; a cell that is not
// SITE=GEAR or SITE=REQUESTS is an error at its line and column.
func TestSiteColumns(t *testing.T) {
	sites := []Site{
		{Name: "default", Gear: state.Lightest, Fetches: 3},
		{Name: "blog", Gear: state.Heaviest, Fetches: 812},
		{Name: "shop", Gear: state.Lightest, Forced: true},
		{Name: "wiki", Gear: state.Lightest},
	}
	row := string(AppendSites([]byte("0,1,"+state.Lightest.String()), sites, true))
	tr, err := Parse(strings.NewReader("time,load1,gear,site_gears,site_fetches\n"+row+"\n"), signals, 2, "")
	if err != nil {
		t.Fatalf("%s: %v", row, err)
	}
	rec := tr.Samples[0].Recorded
	if !rec.SiteFetches || len(rec.Sites) != 3 || rec.SiteGear("blog") != state.Heaviest || rec.SiteGear("wiki") != state.Lightest ||
		rec.Sites[0] != sites[0] || rec.Sites[1] != sites[1] || rec.Sites[2] != sites[2] {
		t.Errorf("%s read as %+v (fetches known %v)", row, rec.Sites, rec.SiteFetches)
	}
	if len(tr.Warnings) > 0 {
		t.Errorf("warnings %v", tr.Warnings)
	}

	for _, tc := range []struct{ name, cells, want string }{
		{"gear", "blog=fast,", "line 2, column 4 (site_gears)"},
		{"no gear", "blog,", "line 2, column 4 (site_gears)"},
		{"requests", ",blog=-1", "line 2, column 5 (site_fetches)"},
		{"no name", ",=3", "line 2, column 5 (site_fetches)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader("time,load1,gear,site_gears,site_fetches\n0,1,"+state.Lightest.String()+","+tc.cells+"\n"), signals, 2, "")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%q: %v, want an error at %s", tc.cells, err, tc.want)
			}
		})
	}
}

// TestSiteFetchesBounded: past MaxSiteFetches sites with backend requests
// a record lists those with the most, and the sum over every site.
func TestSiteFetchesBounded(t *testing.T) {
	var sites []Site
	total := 0.0
	for i := range MaxSiteFetches + 8 {
		n := float64(i + 1)
		sites = append(sites, Site{Name: fmt.Sprintf("s%d", i), Gear: state.Lightest, Fetches: n})
		total += n
	}
	row := string(AppendSites([]byte("0,1,"+state.Lightest.String()), sites, true))
	tr, err := Parse(strings.NewReader("time,load1,gear,site_gears,site_fetches\n"+row+"\n"), signals, 2, "")
	if err != nil {
		t.Fatal(err)
	}
	rec := tr.Samples[0].Recorded
	if len(rec.Sites) != MaxSiteFetches || rec.Sites[0].Name != "s8" || rec.Sites[0].Fetches != 9 || rec.SiteFetchTotal() != total {
		t.Errorf("%d sites from %s, total %v; want %d from s8, total %v\n%s", len(rec.Sites), rec.Sites[0].Name, rec.SiteFetchTotal(), MaxSiteFetches, total, row)
	}
}
