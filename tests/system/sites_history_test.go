package system

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/gearshift/gearshift/controller/history"
)

// The daemon with sites records each site's gear: a pin of shop is in the
// history, and `gearshift report --json` gives shop its time pinned in
// heavy; a reload that removes every site goes on in a new part of the
// day with 0.4's columns, and report reads both parts.
func TestSitesHistory(t *testing.T) {
	d := launchDaemon(t, sitesConfig, "NOTIFY_SOCKET=")
	dir := d.cfg.History.Dir
	if dir == "" {
		t.Fatal("the test config records no history")
	}
	d.eventually("the router active, every site in sync", 90*time.Second, func() error {
		s, err := d.status()
		switch {
		case err != nil:
			return err
		case len(s.Targets) != 1 || !s.Targets[0].InSync || !strings.HasPrefix(s.Targets[0].ActiveVCL, "gearshift-router-"):
			return fmt.Errorf("targets %+v", s.Targets)
		}
		return nil
	})
	if _, stderr, code := d.gs("force", "heavy", "--site", "shop"); code != 0 {
		t.Fatalf("force heavy --site shop: exit %d: %s", code, stderr)
	}
	time.Sleep(2 * time.Second) // records at 10 a second
	if _, stderr, code := d.gs("auto", "--site", "shop"); code != 0 {
		t.Fatalf("auto --site shop: exit %d: %s", code, stderr)
	}
	// A few records of shop back in light before the reload, which
	// holds the loop while it compiles (an operator's request is no
	// record: the next sample is).
	time.Sleep(time.Second)

	cfg := *d.cfg
	cfg.Sites = nil
	b, err := yaml.Marshal(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(d.configPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := d.gs("reload"); code != 0 {
		t.Fatalf("reload: exit %d: %s", code, stderr)
	}
	d.eventually("a part of the day without the sites' columns", 30*time.Second, func() error {
		files, err := history.List(dir)
		if err != nil || len(files) < 2 {
			return fmt.Errorf("history files %+v, %v", files, err)
		}
		for i, f := range files[len(files)-2:] {
			b, err := os.ReadFile(f.Path)
			if err != nil {
				return err
			}
			header, rest, _ := strings.Cut(string(b), "\n")
			if sites := strings.HasSuffix(header, ",site_gears,site_fetches"); sites != (i == 0) {
				return fmt.Errorf("%s header %q: site columns %v", f.Path, header, sites)
			}
			if strings.Count(rest, "\n") < 2 {
				return fmt.Errorf("%s has %d records so far", f.Path, strings.Count(rest, "\n"))
			}
		}
		return nil
	})

	out, stderr, code := d.gs("report", "--json", "--since", "1h")
	if code != 0 {
		t.Fatalf("report --json: exit %d: %s", code, stderr)
	}
	var rep struct {
		Samples int `json:"samples"`
		Sites   []struct {
			Site          string             `json:"site"`
			SecondsIn     map[string]float64 `json:"seconds_in"`
			SecondsForced float64            `json:"seconds_forced"`
			Transitions   int                `json:"transitions"`
		} `json:"sites"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("report --json: %v\n%s", err, out)
	}
	found := false
	for _, s := range rep.Sites {
		switch s.Site {
		case "shop":
			found = true
			if s.SecondsIn["heavy"] < 1 || s.SecondsIn["heavy"] > 4 || s.SecondsForced < 1 || s.Transitions != 2 {
				t.Errorf("shop in the report: %+v, want about 2 s pinned in heavy, 2 transitions", s)
			}
		case "wiki", "default":
			if s.SecondsIn["heavy"] != 0 || s.Transitions != 0 {
				t.Errorf("%s in the report: %+v, want light throughout", s.Site, s)
			}
		}
	}
	if !found || rep.Samples < 20 {
		t.Errorf("report of %d records, sites %+v: want shop's", rep.Samples, rep.Sites)
	}
	if t.Failed() {
		files, _ := history.List(dir)
		for _, f := range files {
			b, _ := os.ReadFile(f.Path)
			t.Logf("%s:\n%s", f.Path, b)
		}
	}
}
