package report

import (
	"testing"

	"github.com/gearshift/gearshift/controller/state"
)

// TestGearRows: every gear has its colour in the chart's band (a gear
// added to state.All between two others compiles with a nil one).
func TestGearRows(t *testing.T) {
	for _, g := range state.All {
		if gearColors[g] == nil {
			t.Errorf("chart.go: gear %s has no colour in gearColors", g)
		}
	}
}
