package config

import (
	"testing"

	"github.com/gearshift/gearshift/controller/state"
)

// TestGearRows: every gear above the lightest has its field in States and
// default rules in config.go (a gear added to state.All between two
// others compiles with a nil band or an empty one).
func TestGearRows(t *testing.T) {
	bands := Default().States.Bands()
	for _, g := range state.All[1:] {
		if b := bands[g]; b == nil || len(b.Enter) == 0 || len(b.Stay) == 0 {
			t.Errorf("config.go: gear %s has no default enter and stay rules (band %v)", g, b)
		}
	}
}
