package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// tune on a history with sites tells what each site did and would do.
func TestTuneSites(t *testing.T) {
	base := []string{"tune", "--config", "testdata/simulate/defaults.yaml", "--dir", sitesHistory, "--since", "36500d"}
	code, stdout, stderr := runMain(t, base...)
	if code != exitOK || !strings.Contains(stdout, "  blog  15m, 3 transitions    17m40s, 4 transitions") {
		t.Fatalf("exit %d, stderr %q, stdout:\n%s", code, stderr, stdout)
	}
	code, stdout, stderr = runMain(t, append(base, "--json")...)
	var out struct {
		Sites []struct {
			Site    string `json:"site"`
			Current struct {
				SecondsIn map[string]float64 `json:"seconds_in"`
			} `json:"current"`
		} `json:"sites"`
	}
	if err := json.Unmarshal([]byte(stdout), &out); code != exitOK || err != nil {
		t.Fatalf("exit %d, %v, stderr %q", code, err, stderr)
	}
	if len(out.Sites) != 3 || out.Sites[0].Site != "default" || out.Sites[0].Current.SecondsIn["light"] == 0 {
		t.Errorf("sites %+v", out.Sites)
	}

	dir := t.TempDir()
	writeSurgeHistory(t, dir)
	code, stdout, _ = runMain(t, "tune", "--config", "testdata/simulate/defaults.yaml", "--dir", dir, "--since", "36500d", "--json")
	if code != exitOK || strings.Contains(stdout, `"sites"`) {
		t.Errorf("a history without sites: exit %d, stdout:\n%s", code, stdout)
	}
}
