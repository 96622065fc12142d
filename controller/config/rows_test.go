package config

import (
	"testing"

	"github.com/gearshift/gearshift/controller/state"
)

// TestGearRows: every gear above the lightest has its field in States
// (rules.go) and default rules (config.go); a gear added to state.All
// between two others compiles with a nil band or an empty one.
func TestGearRows(t *testing.T) {
	bands := Default().States.Bands()
	for _, g := range state.All[1:] {
		if bands[g] == nil {
			t.Errorf("rules.go: gear %s has no field in States", g)
		}
		if b := defaultBands[g]; len(b.Enter) == 0 || len(b.Stay) == 0 {
			t.Errorf("config.go: gear %s has no default enter and stay rules", g)
		}
	}
}
