package replay

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/config"
)

// TestTuneSites: tune on a history with sites tells each site's time above
// light and transitions, recorded and under the current thresholds, in
// the text and the JSON.
func TestTuneSites(t *testing.T) {
	o := TuneOptions{Dir: sitesFixture, Config: config.Default(), ConfigName: "embedded defaults",
		Now: time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC), Within: DefaultWithin, Bounds: DefaultBounds}
	var text, stderr bytes.Buffer
	if err := Tune(o, &text, &stderr); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Sites (3), each through the daemon's allocator", "  blog  15m, 3 transitions", "  shop  5m, 2 transitions"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the text lacks %q:\n%s", want, text.String())
		}
	}
	o.JSON = true
	var js bytes.Buffer
	if err := Tune(o, &js, &stderr); err != nil {
		t.Fatal(err)
	}
	var out struct {
		Sites []struct {
			Site     string   `json:"site"`
			Recorded sideJSON `json:"recorded"`
			Current  sideJSON `json:"current"`
		} `json:"sites"`
	}
	if err := json.Unmarshal(js.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Sites) != 3 || out.Sites[1].Site != "blog" || out.Sites[1].Recorded.Transitions != 3 || out.Sites[1].Current.Transitions == 0 ||
		out.Sites[0].Recorded.SecondsIn["heavy"] != 0 || out.Sites[1].Recorded.SecondsIn["heavy"] != 600 {
		t.Errorf("sites %+v", out.Sites)
	}
}
