package replay

import (
	"strings"
	"testing"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/state"
)

// TestGearRows: every gear above the lightest has its share of the time
// outside distress in compact.go (a gear added to state.All between two
// others compiles with 0, which would make its time outside free).
func TestGearRows(t *testing.T) {
	for _, g := range state.All[1:] {
		if outsideShare[g] == 0 {
			t.Errorf("compact.go: gear %s has no share in outsideShare", g)
		}
	}
}

// TestDistressFromSignals: the signals that mark distress are the rows of
// the signal table with a Bound, and tune's help names each of them.
func TestDistressFromSignals(t *testing.T) {
	set, err := config.Default().Signals()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range DefaultBounds.limits(set) {
		got = append(got, l.name)
		if !strings.Contains(TuneHelp, l.name) {
			t.Errorf("tune's help does not name %s, which marks distress", l.name)
		}
	}
	want := []string{"load_per_cpu", "dropped_rps", "backend_busy", "apache_busy_ratio", "backend_ttfb_ms", "phpfpm_queue", "phpfpm_busy_ratio"}
	if !equal(got, want) {
		t.Errorf("distress signals %v, want %v", got, want)
	}
	if !DefaultBounds.positive() {
		t.Errorf("DefaultBounds %v: a bound a flag sets is not positive", DefaultBounds)
	}
}
