package profiles

import (
	"github.com/gearshift/gearshift/controller/state"
)

// The values of profiles.soft_purge besides a gear's name: in every gear,
// or in none.
const (
	SoftPurgeAlways = "always"
	SoftPurgeNever  = "never"
)

// DefaultSoftPurge is profiles.soft_purge's default: the heaviest gear
// alone, where a removed page would send every visitor of a surge to one
// fetch from a saturated backend.
var DefaultSoftPurge = state.Heaviest.String()

// SoftPurges tells whether gear g marks the anonymous copies of a purged
// URL stale (served while one fetch refreshes them) instead of removing
// them.
func (p *Options) SoftPurges(g state.Gear) bool {
	switch p.SoftPurge {
	case SoftPurgeAlways:
		return true
	case SoftPurgeNever:
		return false
	}
	return p.SoftPurge == g.String()
}

func (p *Options) checkSoftPurge(problem func(key, format string, args ...any)) {
	switch p.SoftPurge {
	case DefaultSoftPurge, SoftPurgeAlways, SoftPurgeNever:
	default:
		problem("profiles.soft_purge", "must be %s, %s or %s, got %q", DefaultSoftPurge, SoftPurgeAlways, SoftPurgeNever, p.SoftPurge)
	}
}
