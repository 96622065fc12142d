package sensor

import (
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"testing"

	"github.com/gearshift/gearshift/controller/state"
)

// TestGearRows: a source that adds default rules adds an enter and a
// stay rule to every gear above the lightest (a gear added to state.All
// between two others compiles with an empty band).
func TestGearRows(t *testing.T) {
	for _, src := range Sources {
		if !slices.ContainsFunc(src.Rules[:], func(b state.Band) bool { return len(b.Enter) > 0 }) {
			continue // no default rules
		}
		for _, g := range state.All[1:] {
			if b := src.Rules[g]; len(b.Enter) == 0 || len(b.Stay) == 0 {
				t.Errorf("%s: gear %s has no enter or stay rule in %s's Rules", declaredIn(src), g, src.Key)
			}
		}
	}
}

// declaredIn names the file that declares src: its reader's.
func declaredIn(src *Source) string {
	file, _ := runtime.FuncForPC(reflect.ValueOf(src.Open).Pointer()).FileLine(0)
	return filepath.Base(file)
}
