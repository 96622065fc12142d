package history

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/controller/trace"
)

// withSites is sample with the sites' part of a record.
func withSites(s trace.Sample, known bool, sites ...trace.Site) trace.Sample {
	rec := *s.Recorded
	rec.Sites, rec.SiteFetches = append([]trace.Site{}, sites...), known
	s.Recorded = &rec
	return s
}

// TestSitesColumns: a config without sites writes 0.4's columns; a reload
// that adds the first site starts a part with the site columns, and one
// that removes the last another with 0.4's; a reload that adds a site to
// others keeps the part. Each site's gear, pin and backend requests read
// back as written.
func TestSitesColumns(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "h")
	r := NewRecorder(Options{Dir: dir, Keep: 14 * 24 * time.Hour, Signals: testSet})
	t0 := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Second) }
	writes := []trace.Sample{
		sample(at(0), state.Light, 100, 10),
		withSites(sample(at(1), state.Moderate, 100, 10), true,
			trace.Site{Name: "default", Gear: state.Light, Fetches: 12},
			trace.Site{Name: "blog", Gear: state.Moderate, Fetches: 840}),
		// A reload that adds shop to the sites: the same part.
		withSites(sample(at(2), state.Heavy, 100, 10), false,
			trace.Site{Name: "default", Gear: state.Light},
			trace.Site{Name: "blog", Gear: state.Heavy},
			trace.Site{Name: "shop", Gear: state.Light, Forced: true}),
		sample(at(3), state.Light, 100, 10),
	}
	for _, s := range writes {
		if err := r.Write(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	files, err := List(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 3 {
		t.Fatalf("files %+v, want three parts: without sites, with, without", files)
	}
	for i, want := range []bool{false, true, false} {
		b, err := os.ReadFile(files[i].Path)
		if err != nil {
			t.Fatal(err)
		}
		header, _, _ := strings.Cut(string(b), "\n")
		if got := strings.HasSuffix(header, ",guest_pages,site_gears,site_fetches"); got != want {
			t.Errorf("part %d header %q: site columns %v, want %v", i+1, header, got, want)
		}
		if !want && !strings.HasSuffix(header, ",guest_pages") {
			t.Errorf("part %d header %q: want 0.4's columns, guest_pages last", i+1, header)
		}
		if i == 1 && !strings.Contains(string(b), ",blog=moderate,default=12 blog=840\n") ||
			i == 1 && !strings.Contains(string(b), ",blog=heavy shop=light:forced,\n") {
			t.Errorf("part 2:\n%s", b)
		}
	}

	src, err := Open(dir, testSet, t0, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := Collect(src)
	if err != nil || len(got) != 4 || len(src.Warnings()) > 0 {
		t.Fatalf("read %d records, %v; warnings %v", len(got), err, src.Warnings())
	}
	if got[0].Recorded.Sites != nil || got[3].Recorded.Sites != nil {
		t.Errorf("records without sites read sites %v, %v", got[0].Recorded.Sites, got[3].Recorded.Sites)
	}
	one, two := got[1].Recorded, got[2].Recorded
	if !one.SiteFetches || one.SiteGear("blog") != state.Moderate || one.SiteGear("default") != state.Light ||
		len(one.Sites) != 2 || one.Sites[0].Name != "default" || one.Sites[0].Fetches != 12 || one.Sites[1].Fetches != 840 {
		t.Errorf("second record's sites %+v, fetches known %v", one.Sites, one.SiteFetches)
	}
	if two.SiteFetches || two.SiteGear("blog") != state.Heavy || len(two.Sites) != 2 || !two.Sites[1].Forced || two.Sites[1].Name != "shop" {
		t.Errorf("third record's sites %+v, fetches known %v", two.Sites, two.SiteFetches)
	}
}
