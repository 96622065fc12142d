package profiles

import (
	"testing"

	"github.com/gearshift/gearshift/controller/state"
)

// TestGearRows: every gear has its summary in render.go and its field in
// Options (options.go), whose Sources a gear added to state.All between
// two others would leave nil.
func TestGearRows(t *testing.T) {
	opts := DefaultOptions()
	sources := opts.Sources()
	for _, g := range state.All {
		if summaries[g] == "" {
			t.Errorf("render.go: gear %s has no summary", g)
		}
		if sources[g] == nil {
			t.Errorf("options.go: gear %s has no field in Options", g)
		}
	}
}
