package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// simulate --history on a history with sites replays each site through
// the daemon's allocator: blog, with the most backend requests, first.
func TestSimulateHistorySites(t *testing.T) {
	base := []string{"simulate", "--history", "--config", "testdata/simulate/defaults.yaml", "--dir", sitesHistory, "--since", "36500d"}
	code, stdout, stderr := runMain(t, base...)
	if code != exitOK {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	for _, want := range []string{
		"Sites (3), replayed by the daemon's allocator on the recorded backend requests:",
		"  blog  15m                   3            17m40s                4",
		"light → moderate  site blog: 80 % of backend requests; ",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the text lacks %q:\n%s", want, stdout)
		}
	}

	code, stdout, stderr = runMain(t, append(base, "--json")...)
	if code != exitOK {
		t.Fatalf("--json: exit %d, stderr %q", code, stderr)
	}
	var out struct {
		Sites struct {
			Sites []struct {
				Site      string `json:"site"`
				Recorded  struct{ Transitions int }
				Candidate struct{ Transitions int }
			} `json:"sites"`
			Shifts []struct {
				Site string `json:"site"`
				From string `json:"from"`
			} `json:"shifts"`
		} `json:"sites"`
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, stdout)
	}
	if len(out.Sites.Sites) != 3 || out.Sites.Sites[2].Site != "shop" || out.Sites.Sites[2].Recorded.Transitions != 2 ||
		len(out.Sites.Shifts) == 0 || out.Sites.Shifts[0].Site != "blog" {
		t.Errorf("JSON sites %+v", out.Sites)
	}
}

// A history without sites replays as before: no sites in the text or the
// JSON.
func TestSimulateHistoryWithoutSites(t *testing.T) {
	dir := t.TempDir()
	writeSurgeHistory(t, dir)
	code, stdout, stderr := runMain(t, "simulate", "--history", "--config", "testdata/simulate/defaults.yaml", "--dir", dir, "--since", "36500d", "--json")
	if code != exitOK || strings.Contains(stdout, `"sites"`) {
		t.Errorf("exit %d, stderr %q, stdout:\n%s", code, stderr, stdout)
	}
}
