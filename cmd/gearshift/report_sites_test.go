package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// sitesHistory is the recorder's file of a surge on blog with its
// neighbour shop climbing after it (controller/report's TestSitesFixture).
var sitesHistory = filepath.Join("..", "..", "controller", "report", "testdata", "sites")

// report on a history with sites tells which site surged, and when.
func TestReportCommandSites(t *testing.T) {
	base := []string{"report", "--config", "testdata/simulate/defaults.yaml", "--dir", sitesHistory, "--from", "2026-12-01T03:00:00Z", "--to", "2026-12-01T04:00:00Z"}
	code, stdout, stderr := runMain(t, base...)
	if code != exitOK {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	for _, want := range []string{
		"    sites: blog left light at 03:10:00 (80% of backend requests), heavy at most, 15m above light; shop left light at 03:20:00 (25% of backend requests)",
		"  shop: heavy 5m; 2 transitions.",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the report lacks %q:\n%s", want, stdout)
		}
	}

	code, stdout, stderr = runMain(t, append(base, "--json")...)
	if code != exitOK {
		t.Fatalf("--json: exit %d, stderr %q", code, stderr)
	}
	var out struct {
		Incidents []struct {
			Sites []struct {
				Site string `json:"site"`
				Left string `json:"left_light"`
				Peak string `json:"peak"`
			} `json:"sites"`
		} `json:"incidents"`
		Sites []struct {
			Site string `json:"site"`
		} `json:"sites"`
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, stdout)
	}
	if len(out.Incidents) != 1 || len(out.Incidents[0].Sites) != 2 || out.Incidents[0].Sites[0].Site != "blog" ||
		out.Incidents[0].Sites[0].Left != "2026-12-01T03:10:00Z" || len(out.Sites) != 3 {
		t.Errorf("JSON %+v", out)
	}
}
