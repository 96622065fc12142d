package controller

import (
	"go.uber.org/zap"

	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/internal/numfmt"
)

// signalFields are the log fields of the available signals, in the order of
// set, each rounded to its precision.
func signalFields(set *state.Set, sig state.Signals) []zap.Field {
	var fs []zap.Field
	for _, s := range set.All() {
		if v, ok := sig.Get(s.Name); ok {
			fs = append(fs, zap.Float64(s.Name, numfmt.Round(v, s.Precision)))
		}
	}
	return fs
}
